"""The one clock. Everything that reads the time or waits takes a `Clock`, so tests
and simulations can move time themselves."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime:
        """The current time, timezone-aware UTC."""
        ...

    def sleep_until(self, when: datetime) -> None:
        """Return once this clock reads `when` or later (at once if it already does)."""
        ...


class SystemClock:
    """Wall-clock time."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def sleep_until(self, when: datetime) -> None:
        remaining = (when - self.now()).total_seconds()
        if remaining > 0:
            time.sleep(remaining)


class ManualClock:
    """A clock that only moves when told to; `sleep_until` jumps to the time instantly."""

    def __init__(self, start: datetime) -> None:
        if start.tzinfo is None:
            raise ValueError("ManualClock needs a timezone-aware start time")
        self._now = start.astimezone(UTC)

    def now(self) -> datetime:
        return self._now

    def sleep_until(self, when: datetime) -> None:
        if when > self._now:
            self._now = when.astimezone(UTC)

    def advance(self, seconds: float) -> None:
        self._now += timedelta(seconds=seconds)

    def set(self, when: datetime) -> None:
        self._now = when.astimezone(UTC)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def to_ms(when: datetime) -> int:
    """Epoch milliseconds of an aware datetime (exact integer arithmetic, floored)."""
    return (when - _EPOCH) // timedelta(milliseconds=1)


def from_ms(ms: int) -> datetime:
    return _EPOCH + timedelta(milliseconds=ms)
