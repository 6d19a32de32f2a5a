"""The contract of the jobs table's ports, part four: a run keeps every attempt it made, each
with how it ended (`Run.past_attempts`, `Run.attempts`), on a run of its own and on one kept
with its job, through retries, a lost lease, a re-drive and the end, on the DynamoDB adapter
and the fake alike."""

from __future__ import annotations

from datetime import datetime, timedelta

from scheduler_core.domain.entities import Run
from scheduler_core.domain.overlap import slots_as_read
from scheduler_core.domain.vocabulary import MAX_PAST_ATTEMPT_ERROR, MAX_PAST_ATTEMPTS, RunStatus
from scheduler_core.ports import JobStore
from tests.support.store_contract import AT, LEASE, MINUTE, one_off_claimed, started

SECOND = timedelta(seconds=1)


def one_off_started(store: JobStore) -> Run:
    """A one-off's run (kept with its job by the DynamoDB adapter), its first attempt started."""
    job, run = one_off_claimed(store)
    running = store.start_run_in_slot(run, slots_as_read(job, run.scheduled_for_ms), AT, AT + LEASE, "w1")
    assert running is not None
    return running


def read_back(store: JobStore, run: Run) -> Run:
    read = store.get_run(run.job_id, run.scheduled_for_ms)
    assert read is not None
    return read


def start(store: JobStore, run: Run, when: datetime, owner: str) -> Run:
    running = store.start_run_if_waiting(read_back(store, run), when, when + LEASE, owner)
    assert running is not None
    return running


def shown(run: Run) -> list[tuple[object, ...]]:
    return [
        (a.attempt, a.status, a.started_at, a.finished_at, a.error, a.response_code) for a in run.attempts
    ]


def every_attempt_is_kept(store: JobStore, first: Run) -> None:
    """Attempt 1 fails with a 500 and is retried; attempt 2 loses its lease to the watchdog;
    attempt 3 fails for good with no answer; a re-drive's attempt 4 succeeds."""
    at2, at3, at4 = AT + MINUTE, AT + 2 * MINUTE + LEASE, AT + 3 * MINUTE + LEASE
    retried = store.retry_run_if_held(
        first, "w1", first.ended_attempt(AT + SECOND, "HTTP 500", 500), at2, at2
    )
    assert retried is not None
    assert [a.attempt for a in retried.attempts] == [1]
    assert shown(read_back(store, first)) == [(1, RunStatus.FAILED, AT, AT + SECOND, "HTTP 500", 500)]

    second = start(store, first, at2, "w2")
    assert shown(second)[-1] == (2, RunStatus.RUNNING, at2, None, None, None)  # not attempt 1's error
    lost = at2 + LEASE
    assert store.take_over_expired_lease(second, lost, RunStatus.RETRYING, "lease lost", at3, at3) is not None

    third = start(store, first, at3, "w3")
    assert store.finish_run_if_held(third, "w3", RunStatus.FAILED, at3 + SECOND, "timed out")
    failed = read_back(store, first)
    assert failed.response_code is None  # attempt 1's code is not this attempt's
    assert shown(failed) == [
        (1, RunStatus.FAILED, AT, AT + SECOND, "HTTP 500", 500),
        (2, RunStatus.FAILED, at2, lost, "lease lost", None),
        (3, RunStatus.FAILED, at3, at3 + SECOND, "timed out", None),
    ]

    redriven = store.redrive_run_if_failed(failed, at4, at4)
    assert redriven is not None
    assert [a.attempt for a in read_back(store, first).attempts] == [1, 2, 3]  # attempt 4 waits
    fourth = start(store, first, at4, "w4")
    assert store.finish_run_if_held(fourth, "w4", RunStatus.SUCCEEDED, at4 + SECOND, response_code=204)
    done = read_back(store, first)
    assert shown(done)[2:] == [
        (3, RunStatus.FAILED, at3, at3 + SECOND, "timed out", None),
        (4, RunStatus.SUCCEEDED, at4, at4 + SECOND, None, 204),
    ]
    assert done.error == "timed out"  # the run's `error`: its last failed attempt's


def test_a_run_of_its_own_keeps_every_attempt_with_its_error(store: JobStore) -> None:
    _, run = started(store)
    every_attempt_is_kept(store, run)


def test_a_run_kept_with_its_job_keeps_every_attempt_with_its_error(store: JobStore) -> None:
    every_attempt_is_kept(store, one_off_started(store))


def test_a_run_cancelled_before_its_next_attempt_shows_only_the_attempts_it_made(store: JobStore) -> None:
    _, run = started(store)
    retry_at = AT + MINUTE
    assert store.retry_run_if_held(
        run, "w1", run.ended_attempt(AT + SECOND, "HTTP 503", 503), retry_at, retry_at
    )
    assert store.cancel_run_if_not_started(read_back(store, run), retry_at)
    cancelled = read_back(store, run)
    assert cancelled.status is RunStatus.CANCELLED
    assert shown(cancelled) == [(1, RunStatus.FAILED, AT, AT + SECOND, "HTTP 503", 503)]


def test_an_earlier_attempt_keeps_a_short_error_and_a_re_driven_run_its_latest_attempts(
    store: JobStore,
) -> None:
    _, run = started(store)
    long_error = "x" * (MAX_PAST_ATTEMPT_ERROR * 3)
    retry_at = AT + MINUTE
    assert store.retry_run_if_held(run, "w1", run.ended_attempt(AT, long_error, 500), retry_at, retry_at)
    when = retry_at
    for n in range(2, MAX_PAST_ATTEMPTS + 4):
        running = start(store, run, when, f"w{n}")
        assert store.finish_run_if_held(running, f"w{n}", RunStatus.FAILED, when, f"failure {n}")
        assert store.redrive_run_if_failed(read_back(store, run), when, when) is not None
        when += SECOND
    kept = read_back(store, run).attempts
    assert len(kept) == MAX_PAST_ATTEMPTS
    assert kept[-1].error == f"failure {MAX_PAST_ATTEMPTS + 3}"
    assert kept[0].attempt == MAX_PAST_ATTEMPTS + 3 - MAX_PAST_ATTEMPTS + 1  # the oldest dropped


def test_the_first_attempts_long_error_is_cut_where_it_is_kept(store: JobStore) -> None:
    _, run = started(store)
    long_error = "y" * (MAX_PAST_ATTEMPT_ERROR * 3)
    retry_at = AT + MINUTE
    assert store.retry_run_if_held(run, "w1", run.ended_attempt(AT, long_error, 500), retry_at, retry_at)
    read = read_back(store, run)
    assert read.attempts[0].error == long_error[:MAX_PAST_ATTEMPT_ERROR]
    assert read.error is not None
    assert len(read.error) > MAX_PAST_ATTEMPT_ERROR  # the run's own `error` keeps more


def test_a_retried_attempt_that_got_no_answer_leaves_no_earlier_code(store: JobStore) -> None:
    _, run = started(store)
    at2, at3 = AT + MINUTE, AT + 2 * MINUTE
    assert store.retry_run_if_held(run, "w1", run.ended_attempt(AT + SECOND, "HTTP 503", 503), at2, at2)
    second = start(store, run, at2, "w2")
    retried = store.retry_run_if_held(second, "w2", second.ended_attempt(at2 + SECOND, "timed out"), at3, at3)
    assert retried is not None
    assert retried.response_code is None
    read = read_back(store, run)
    assert [a.response_code for a in read.attempts] == [503, None]
    assert read.response_code is None  # the latest attempt's: none, not attempt 1's 503


def test_the_round_after_a_re_drive_adds_its_attempts_to_the_forty_kept(store: JobStore) -> None:
    _, run = started(store)
    when = AT + MINUTE
    assert store.retry_run_if_held(run, "w1", run.ended_attempt(AT, "first", 500), when, when)
    for n in range(2, MAX_PAST_ATTEMPTS + 4):
        running = start(store, run, when, f"w{n}")
        assert store.finish_run_if_held(running, f"w{n}", RunStatus.FAILED, when, f"failure {n}")
        assert store.redrive_run_if_failed(read_back(store, run), when, when) is not None
        when += SECOND
    assert len(read_back(store, run).past_attempts) == MAX_PAST_ATTEMPTS
    running = start(store, run, when, "again")
    assert store.retry_run_if_held(running, "again", running.ended_attempt(when, "again", 500), when, when)
    kept = read_back(store, run).past_attempts
    assert len(kept) == MAX_PAST_ATTEMPTS + 1  # a retry only adds; the next re-drive trims
    assert kept[-1].error == "again"
