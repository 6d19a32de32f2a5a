"""The one clock, and epoch milliseconds."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduler_core.domain.clock import ManualClock, SystemClock, from_ms, to_ms

START = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)
MIN_MS = to_ms(datetime(1, 1, 2, tzinfo=UTC))
MAX_MS = to_ms(datetime(9999, 12, 30, tzinfo=UTC))


def test_manual_clock_refuses_a_naive_start() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        ManualClock(datetime(2025, 1, 1, 12, 0))


def test_manual_clock_reports_its_start_in_utc() -> None:
    clock = ManualClock(datetime(2025, 1, 1, 14, 0, tzinfo=timezone(timedelta(hours=2))))

    assert clock.now() == START
    assert clock.now().tzinfo is UTC


def test_manual_clock_stands_still_until_told() -> None:
    clock = ManualClock(START)

    assert clock.now() == clock.now() == START


def test_sleep_until_jumps_a_manual_clock_to_that_time_at_once() -> None:
    clock = ManualClock(START)

    clock.sleep_until(START + timedelta(seconds=90.5))

    assert clock.now() == START + timedelta(seconds=90.5)


def test_sleep_until_a_time_with_an_offset_leaves_the_clock_in_utc() -> None:
    clock = ManualClock(START)

    clock.sleep_until(datetime(2025, 1, 1, 15, 0, tzinfo=timezone(timedelta(hours=2))))

    assert clock.now() == START + timedelta(hours=1)
    assert clock.now().tzinfo is UTC


@pytest.mark.parametrize("earlier", [timedelta(0), timedelta(seconds=5)])
def test_sleep_until_now_or_the_past_does_not_move_the_clock(earlier: timedelta) -> None:
    clock = ManualClock(START)

    clock.sleep_until(START - earlier)

    assert clock.now() == START


def test_system_clock_does_not_wait_for_a_time_already_past() -> None:
    clock = SystemClock()
    before = clock.now()

    clock.sleep_until(before - timedelta(hours=1))

    assert clock.now() - before < timedelta(seconds=1)


def test_advance_and_set_move_a_manual_clock() -> None:
    clock = ManualClock(START)

    clock.advance(60)
    assert clock.now() == START + timedelta(minutes=1)

    clock.set(datetime(2030, 1, 1, 1, 0, tzinfo=timezone(timedelta(hours=1))))
    assert clock.now() == datetime(2030, 1, 1, tzinfo=UTC)
    assert clock.now().tzinfo is UTC


def test_system_clock_reads_aware_utc_wall_time() -> None:
    before = datetime.now(UTC)
    now = SystemClock().now()

    assert now.tzinfo is UTC
    assert before <= now <= datetime.now(UTC)


def test_to_ms_counts_milliseconds_since_the_epoch() -> None:
    assert to_ms(datetime(1970, 1, 1, tzinfo=UTC)) == 0
    assert to_ms(datetime(2025, 1, 1, tzinfo=UTC)) == 1_735_689_600_000
    assert to_ms(datetime(2025, 1, 1, 2, 0, tzinfo=timezone(timedelta(hours=2)))) == 1_735_689_600_000


def test_to_ms_floors_sub_millisecond_times() -> None:
    assert to_ms(datetime(1970, 1, 1, 0, 0, 0, 999, tzinfo=UTC)) == 0
    assert to_ms(datetime(1970, 1, 1, 0, 0, 0, 1_999, tzinfo=UTC)) == 1
    assert to_ms(datetime(1969, 12, 31, 23, 59, 59, 999_500, tzinfo=UTC)) == -1


def test_from_ms_is_aware_utc() -> None:
    when = from_ms(1_735_689_600_123)

    assert when == datetime(2025, 1, 1, 0, 0, 0, 123_000, tzinfo=UTC)
    assert when.tzinfo is UTC


@given(st.integers(min_value=MIN_MS, max_value=MAX_MS))
def test_milliseconds_round_trip_exactly(ms: int) -> None:
    assert to_ms(from_ms(ms)) == ms


@given(st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.just(UTC)))
def test_a_time_with_millisecond_precision_round_trips_exactly(when: datetime) -> None:
    when = when.replace(microsecond=when.microsecond // 1000 * 1000)

    assert from_ms(to_ms(when)) == when
