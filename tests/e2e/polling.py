"""Bounded waits: the e2e suite polls for what it expects and never sleeps blindly."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TypeVar

T = TypeVar("T")

POLL_INTERVAL_SECONDS = 0.05  # cheap predicates: what the receiver got, /proc
API_POLL_INTERVAL_SECONDS = 0.25  # each poll of the API is a function invocation


def wait_for(
    predicate: Callable[[], T | None], timeout: float, what: str, interval: float = POLL_INTERVAL_SECONDS
) -> T:
    """The first truthy value of `predicate` within `timeout` seconds, polled every
    `interval`; AssertionError naming `what` otherwise."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:.1f}s waiting for {what}")
        time.sleep(interval)


def seconds_until(when: datetime) -> float:
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def wait_until(when: datetime) -> None:
    """Return once the wall clock has passed `when` (for checks that something did *not*
    happen by then: there is nothing to poll for)."""
    while (left := seconds_until(when)) > 0:
        time.sleep(min(left, 0.5))


def now_ms() -> datetime:
    """The wall clock, truncated to the millisecond the API speaks in."""
    now = datetime.now(UTC)
    return now - timedelta(microseconds=now.microsecond % 1000)
