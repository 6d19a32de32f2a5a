"""How the chaos soak tells a re-delivery after a crash (at least once, one effect by the
key) from a duplicated effect (the soak fails)."""

from __future__ import annotations

from bench.chaos import classify_repeats
from bench.receiver import Arrival

JOB_OF = {"run-a": "job-a", "run-b": "job-b"}


def ok(run_id: str, attempt: int, at_ms: float, key: str | None = None, job_id: str = "") -> Arrival:
    return Arrival(
        run_id, "2026-11-25T00:00:00.000Z", str(attempt), at_ms, 200, key or run_id, job_id or JOB_OF[run_id]
    )


def test_one_2xx_per_key_repeats_nothing() -> None:
    arrivals = [ok("run-a", 1, 10), ok("run-b", 2, 20), Arrival("run-b", "", "1", 5, 500, "run-b")]

    assert classify_repeats(arrivals, JOB_OF, {("run-a", "1")}) == {"duplicated": {}, "after_crash": {}}


def test_a_repeat_after_an_attempt_that_never_logged_its_end_is_a_re_delivery() -> None:
    arrivals = [ok("run-a", 3, 30), ok("run-a", 2, 10)]  # attempt 2 got a 2xx, then died

    repeats = classify_repeats(arrivals, JOB_OF, {("run-a", "3")})

    assert repeats["duplicated"] == {}
    assert list(repeats["after_crash"]) == ["run-a"]
    assert "attempt 2 got a 2xx" in repeats["after_crash"]["run-a"]


def test_a_repeat_after_an_attempt_that_logged_its_end_is_a_duplicated_effect() -> None:
    arrivals = [ok("run-a", 1, 10), ok("run-a", 2, 30)]

    repeats = classify_repeats(arrivals, JOB_OF, {("run-a", "1"), ("run-a", "2")})

    assert list(repeats["duplicated"]) == ["run-a"]
    assert repeats["after_crash"] == {}


def test_a_repeat_after_any_attempt_that_logged_its_end_is_a_duplicated_effect() -> None:
    # Attempt 1 got a 2xx and died; attempt 2 got one and recorded it; attempt 3 called again.
    arrivals = [ok("run-a", 1, 10), ok("run-a", 2, 20), ok("run-a", 3, 30)]

    repeats = classify_repeats(arrivals, JOB_OF, {("run-a", "2"), ("run-a", "3")})

    assert list(repeats["duplicated"]) == ["run-a"]
    assert "attempt 2 got a 2xx and logged its end" in repeats["duplicated"]["run-a"]


def test_a_second_run_of_one_job_is_a_duplicated_effect() -> None:
    """Two runs for one firing: the second has a run id (and key) the soak never expected."""
    arrivals = [ok("run-a", 1, 10), ok("run-a-again", 1, 20, job_id="job-a")]

    repeats = classify_repeats(arrivals, JOB_OF, {("run-a", "1"), ("run-a-again", "1")})

    assert "job-a" in repeats["duplicated"]
    assert "under 2 Idempotency-Keys" in repeats["duplicated"]["job-a"]


def test_calls_for_jobs_outside_the_soak_are_not_its_effects() -> None:
    arrivals = [ok("run-a", 1, 10), ok("other-run", 1, 20, job_id="other-job")]

    assert classify_repeats(arrivals, JOB_OF, {("run-a", "1")}) == {"duplicated": {}, "after_crash": {}}
