"""Retry decisions (DESIGN §3, "Work"): how long a failed attempt waits (`backoff`) and
whether another is left (`attempts_left`). Pure: no clock, no AWS. The backoff itself
(exponential, full jitter, at least a second) is written once, in docs/concepts/retries.md.

Why the draw is a hash of the run and attempt, not a random generator: two workers deciding
the same retry agree, and tests can predict it. Why the one-second floor: a failing target
is never called in a tight loop.
"""

from __future__ import annotations

import hashlib
from datetime import timedelta

from scheduler_core.domain.policies import RetryPolicy

MIN_BACKOFF = timedelta(seconds=1)


def backoff_ceiling(policy: RetryPolicy, failed_attempt: int) -> timedelta:
    """The upper bound of the wait after `failed_attempt` (1-based) failed."""
    exponent = min(failed_attempt - 1, 62)  # beyond this the cap has long taken over
    seconds = min(policy.max_backoff_seconds, policy.backoff_seconds * 2.0**exponent)
    return timedelta(seconds=seconds)


def backoff(policy: RetryPolicy, run_id: str, failed_attempt: int) -> timedelta:
    """The wait before the attempt after `failed_attempt`: full jitter, at least one second."""
    digest = hashlib.sha256(f"{run_id}#{failed_attempt}".encode()).digest()
    fraction = int.from_bytes(digest[:8], "big") / 2.0**64  # uniform in [0, 1)
    return max(MIN_BACKOFF, backoff_ceiling(policy, failed_attempt) * fraction)


def attempts_left(policy: RetryPolicy, attempt: int, first_attempt: int = 1) -> bool:
    """Whether a run that just spent `attempt` may try again. `first_attempt` is where the
    current round of attempts began: 1, or the attempt a manual re-drive started."""
    return attempt - first_attempt + 1 < policy.max_attempts


# Longer than any attempt lasts: its lease, which the worker's timeout (at most Lambda's 15
# minutes) bounds, and the wait for its message.
ATTEMPT_BOUND = timedelta(hours=1)


def longest_round(policy: RetryPolicy) -> timedelta:
    """The most a round of `max_attempts` attempts can take, from its first attempt's start
    to its last one's end: every backoff at its ceiling, every attempt ATTEMPT_BOUND long. An
    ended job whose run starts a new round (a re-drive) is kept that long before its
    retention counts (docs/concepts/guarantees.md, "Run history")."""
    waits = sum((backoff_ceiling(policy, failed) for failed in range(1, policy.max_attempts)), timedelta())
    return waits + ATTEMPT_BOUND * policy.max_attempts
