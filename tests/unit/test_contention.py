"""The one loop that tries a write again while the store is contended."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from scheduler_core.domain.clock import ManualClock
from scheduler_core.ports import StoreContention
from scheduler_core.services.contention import through_contention

START = datetime(2030, 1, 1, tzinfo=UTC)
PAUSES = [timedelta(seconds=1), timedelta(seconds=2)]


def contended(times: int) -> tuple[list[datetime], Callable[[ManualClock], bool]]:
    tries: list[datetime] = []

    def write(clock: ManualClock) -> bool:
        tries.append(clock.now())
        if len(tries) <= times:
            raise StoreContention("ThrottlingError")
        return True

    return tries, write


def test_a_write_is_tried_again_after_each_pause_until_it_goes_through() -> None:
    clock = ManualClock(START)
    tries, write = contended(2)
    told: list[int] = []

    assert through_contention(lambda: write(clock), clock, PAUSES, on_retry=lambda: told.append(1)) is True
    assert tries == [START, START + timedelta(seconds=1), START + timedelta(seconds=3)]
    assert len(told) == 2


def test_the_last_tries_contention_is_raised() -> None:
    clock = ManualClock(START)
    tries, write = contended(3)

    with pytest.raises(StoreContention):
        through_contention(lambda: write(clock), clock, PAUSES)
    assert len(tries) == 3


def test_no_pause_reaches_past_the_deadline() -> None:
    clock = ManualClock(START)
    tries, write = contended(3)

    with pytest.raises(StoreContention):
        through_contention(lambda: write(clock), clock, PAUSES, until=START + timedelta(seconds=2))
    assert tries == [START, START + timedelta(seconds=1)]  # the 2 s pause would end at 3 s
