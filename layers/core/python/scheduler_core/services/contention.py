"""A write tried again while the store is contended (throttled, or caught in a transaction
conflict): the services' one loop for it, each with its own pauses. A lost race (a condition
that failed) is an answer, not contention: it is never tried again here."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import TypeVar

from scheduler_core.domain.clock import Clock
from scheduler_core.ports import StoreContention

T = TypeVar("T")


def through_contention(
    write: Callable[[], T],
    clock: Clock,
    pauses: Sequence[timedelta],
    *,
    until: datetime | None = None,
    on_retry: Callable[[], None] | None = None,
) -> T:
    """`write()`, tried again after each of `pauses` while it raises StoreContention
    (`on_retry` is told before each pause). The StoreContention of the last try is raised,
    and so is one whose pause would reach `until` (a deadline: the invocation's end)."""
    for pause in (*pauses, None):
        try:
            return write()
        except StoreContention:
            if not paused(clock, pause, until, on_retry):
                raise
    raise AssertionError("the last try returns or raises")


def paused(
    clock: Clock,
    pause: timedelta | None,
    until: datetime | None,
    on_retry: Callable[[], None] | None = None,
) -> bool:
    """Whether a contended write is tried again: after `pause`, slept here (`on_retry` told
    first); not if there is no pause left (None) or it would reach `until`. For a loop that
    decides again between its tries (`admission`); `through_contention` tries one write."""
    if pause is None or (until is not None and clock.now() + pause >= until):
        return False
    if on_retry is not None:
        on_retry()
    clock.sleep_until(clock.now() + pause)
    return True
