"""Retry decisions: exponential backoff with full jitter, deterministic per run and attempt."""

from __future__ import annotations

from datetime import timedelta

from hypothesis import given
from hypothesis import strategies as st

from scheduler_core.domain.policies import RetryPolicy
from scheduler_core.domain.retry import (
    ATTEMPT_BOUND,
    MIN_BACKOFF,
    attempts_left,
    backoff,
    backoff_ceiling,
    longest_round,
)

POLICY = RetryPolicy(max_attempts=3, backoff_seconds=10, max_backoff_seconds=3600)


def test_the_ceiling_doubles_with_each_failed_attempt_up_to_the_cap() -> None:
    ceilings = [backoff_ceiling(POLICY, attempt).total_seconds() for attempt in range(1, 12)]
    assert ceilings[:4] == [10, 20, 40, 80]
    assert ceilings[-1] == 3600
    assert backoff_ceiling(POLICY, 10_000) == timedelta(hours=1)  # no overflow far out


def test_the_wait_is_the_same_for_the_same_run_and_attempt() -> None:
    assert backoff(POLICY, "job:1", 2) == backoff(POLICY, "job:1", 2)


def test_waits_spread_across_runs_full_jitter() -> None:
    waits = [backoff(POLICY, f"job-{n}:0", 3).total_seconds() for n in range(400)]
    assert min(waits) < 8  # spread over [1 s, 40 s), not clustered
    assert max(waits) > 32
    assert len(set(waits)) > 350  # (the few draws under one second become one second)


@given(
    base=st.floats(min_value=0.01, max_value=86_400),
    cap=st.floats(min_value=0.01, max_value=7 * 86_400),
    attempt=st.integers(min_value=1, max_value=50),
    run_id=st.text(min_size=1, max_size=40),
)
def test_the_wait_lies_between_one_second_and_the_ceiling(
    base: float, cap: float, attempt: int, run_id: str
) -> None:
    policy = RetryPolicy(max_attempts=5, backoff_seconds=base, max_backoff_seconds=cap)
    wait = backoff(policy, run_id, attempt)
    assert MIN_BACKOFF <= wait <= max(MIN_BACKOFF, backoff_ceiling(policy, attempt))


def test_attempts_are_counted_from_the_start_of_the_current_round() -> None:
    assert attempts_left(POLICY, 1)
    assert attempts_left(POLICY, 2)
    assert not attempts_left(POLICY, 3)
    # A manual re-drive after attempt 3 starts a new round at attempt 4.
    assert attempts_left(POLICY, 4, first_attempt=4)
    assert attempts_left(POLICY, 5, first_attempt=4)
    assert not attempts_left(POLICY, 6, first_attempt=4)


def test_one_attempt_means_no_retry() -> None:
    assert not attempts_left(RetryPolicy(max_attempts=1), 1)


def test_a_round_s_longest_is_every_backoff_at_its_ceiling_and_every_attempt_at_its_bound() -> None:
    assert longest_round(RetryPolicy()) == timedelta(seconds=10 + 20) + 3 * ATTEMPT_BOUND
    assert longest_round(RetryPolicy(max_attempts=1)) == ATTEMPT_BOUND
    capped = RetryPolicy(max_attempts=4, backoff_seconds=100, max_backoff_seconds=250)
    assert longest_round(capped) == timedelta(seconds=100 + 200 + 250) + 4 * ATTEMPT_BOUND
