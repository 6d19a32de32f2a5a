"""Schedules in a time zone (`schedule.timezone`) across daylight saving time.

The rules (schedule.py): a wall time skipped by spring-forward fires once, at the first
valid instant after it; a wall time repeated by fall-back fires once, at its first
occurrence; a cron whose hour field is `*` keeps to real time instead (both passes of a
repeated hour fire, a skipped hour's firings do not happen).

The transitions used, all at night, all on Sundays:
Europe/Berlin    2026-03-29, 2026-10-25, 2027-03-28, 2027-10-31 (01:00 UTC; 02:00↔03:00 local)
America/New_York 2026-03-08, 2026-11-01, 2027-03-14, 2027-11-07 (spring 07:00 UTC, 02:00→03:00;
                 fall 06:00 UTC, 02:00→01:00 local)
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from scheduler_core.domain.schedule import ScheduleSpec, first_fire_at, next_fire_after
from scheduler_core.domain.wallclock import (
    every_hour,
    latest_cron_at_or_before,
    localize,
    next_cron_after,
    zone,
)
from tests.unit.test_schedule import cron_expressions

H = timedelta(hours=1)


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=UTC)


def marks(expression: str, timezone: str, after: datetime, count: int) -> list[datetime]:
    found: list[datetime] = []
    for _ in range(count):
        after = next_cron_after(expression, after, zone(timezone))
        found.append(after)
    return found


def wall(instants: list[datetime], timezone: str) -> list[str]:
    """The local wall times of instants, e.g. '03-29 03:00'."""
    return [instant.astimezone(zone(timezone)).strftime("%m-%d %H:%M") for instant in instants]


@dataclass(frozen=True)
class Transition:
    timezone: str
    night: date  # the local date of the transition
    at: datetime  # the instant of the transition (UTC)
    before: timedelta  # the UTC offset before it
    after: timedelta  # ... and after it

    def instant(self, day: date, local: time, offset: timedelta) -> datetime:
        """The instant of wall time `local` on `day` in a period of UTC offset `offset`."""
        return datetime.combine(day, local, tzinfo=UTC) - offset

    def __str__(self) -> str:
        return f"{self.timezone} {self.night}"


BERLIN, NEW_YORK = "Europe/Berlin", "America/New_York"
CET, CEST, EST, EDT = H, 2 * H, -5 * H, -4 * H
SPRING = [
    Transition(BERLIN, date(2026, 3, 29), utc(2026, 3, 29, 1), CET, CEST),
    Transition(BERLIN, date(2027, 3, 28), utc(2027, 3, 28, 1), CET, CEST),
    Transition(NEW_YORK, date(2026, 3, 8), utc(2026, 3, 8, 7), EST, EDT),
    Transition(NEW_YORK, date(2027, 3, 14), utc(2027, 3, 14, 7), EST, EDT),
]
FALL = [
    Transition(BERLIN, date(2026, 10, 25), utc(2026, 10, 25, 1), CEST, CET),
    Transition(BERLIN, date(2027, 10, 31), utc(2027, 10, 31, 1), CEST, CET),
    Transition(NEW_YORK, date(2026, 11, 1), utc(2026, 11, 1, 6), EDT, EST),
    Transition(NEW_YORK, date(2027, 11, 7), utc(2027, 11, 7, 6), EDT, EST),
]
# A wall time inside each fall-back's repeated hour.
REPEATED = {BERLIN: time(2, 30), NEW_YORK: time(1, 30)}
DAY = timedelta(days=1)


def test_the_transitions_listed_are_the_time_zone_databases() -> None:
    for transition in SPRING + FALL:
        tz = zone(transition.timezone)
        assert (transition.at - timedelta(seconds=1)).astimezone(tz).utcoffset() == transition.before
        assert transition.at.astimezone(tz).utcoffset() == transition.after
        assert transition.at.astimezone(tz).date() == transition.night


# --- time zone names -----------------------------------------------------------------


@pytest.mark.parametrize("name", ["UTC", "Europe/Berlin", "America/New_York", "Asia/Kolkata", "Etc/GMT+5"])
def test_iana_names_are_time_zones(name: str) -> None:
    assert zone(name).utcoffset(datetime(2026, 1, 1)) is not None


@pytest.mark.parametrize(
    "name", ["Mars/Olympus_Mons", "europe/berlin", "CEST", "localtime", "Factory", "", "../../etc/passwd"]
)
def test_anything_else_is_an_unknown_time_zone(name: str) -> None:
    with pytest.raises(ValueError, match="unknown time zone"):
        zone(name)


def test_utc_needs_no_time_zone_database() -> None:
    assert zone("UTC") is UTC


# --- one wall time → one instant -----------------------------------------------------------


@pytest.mark.parametrize("transition", SPRING, ids=str)
def test_a_wall_time_skipped_by_spring_forward_is_the_first_instant_after_it(transition: Transition) -> None:
    skipped = datetime.combine(transition.night, time(2, 30))

    assert localize(skipped, zone(transition.timezone)) == transition.at
    assert wall([transition.at], transition.timezone) == [transition.night.strftime("%m-%d 03:00")]


@pytest.mark.parametrize("transition", FALL, ids=str)
def test_a_wall_time_repeated_by_fall_back_is_its_first_occurrence(transition: Transition) -> None:
    repeated = REPEATED[transition.timezone]

    first = localize(datetime.combine(transition.night, repeated), zone(transition.timezone))

    assert first == transition.instant(transition.night, repeated, transition.before)
    assert first < transition.at


def test_a_wall_time_dst_leaves_alone_is_read_with_its_offset() -> None:
    assert localize(datetime(2026, 7, 1, 9, 0), zone(BERLIN)) == utc(2026, 7, 1, 7, 0)
    assert localize(datetime(2026, 1, 1, 9, 0), zone(NEW_YORK)) == utc(2026, 1, 1, 14, 0)


# --- daily crons at a time DST moves ----------------------------------------------------------


@pytest.mark.parametrize("transition", SPRING, ids=str)
def test_a_daily_time_skipped_by_spring_forward_fires_once_at_the_jump(transition: Transition) -> None:
    night = transition.night
    after = transition.instant(night - DAY, time(12), transition.before)

    found = marks("30 2 * * *", transition.timezone, after - DAY, 3)

    assert found == [
        transition.instant(night - DAY, time(2, 30), transition.before),
        transition.at,  # 03:00 local, the first valid instant after 02:30
        transition.instant(night + DAY, time(2, 30), transition.after),
    ]
    assert wall(found, transition.timezone)[1].endswith("03:00")


@pytest.mark.parametrize("transition", SPRING, ids=str)
def test_every_time_of_a_skipped_hour_collapses_into_one_firing(transition: Transition) -> None:
    found = marks("*/15 2 * * *", transition.timezone, transition.at - 3 * H, 2)

    assert found[0] == transition.at
    assert found[1] == transition.instant(transition.night + DAY, time(2, 0), transition.after)


@pytest.mark.parametrize("transition", FALL, ids=str)
def test_a_daily_time_repeated_by_fall_back_fires_once_at_its_first_occurrence(
    transition: Transition,
) -> None:
    night, repeated = transition.night, REPEATED[transition.timezone]
    cron = f"{repeated.minute} {repeated.hour} * * *"

    found = marks(cron, transition.timezone, transition.at - 2 * DAY, 3)

    assert found == [
        transition.instant(night - DAY, repeated, transition.before),
        transition.instant(night, repeated, transition.before),  # the first pass only
        transition.instant(night + DAY, repeated, transition.after),
    ]


@pytest.mark.parametrize("transition", FALL, ids=str)
def test_asked_during_the_second_pass_a_repeated_time_is_not_fired_again(transition: Transition) -> None:
    repeated = REPEATED[transition.timezone]
    cron = f"{repeated.minute + 10} {repeated.hour} * * *"  # 10 minutes after the wall time
    second_pass = transition.instant(transition.night, repeated, transition.after)

    nxt = next_cron_after(cron, second_pass, zone(transition.timezone))

    assert nxt == transition.instant(transition.night + DAY, repeated, transition.after) + timedelta(
        minutes=10
    )


@pytest.mark.parametrize("transition", SPRING + FALL, ids=str)
def test_a_daily_time_away_from_the_transition_keeps_its_wall_time(transition: Transition) -> None:
    found = marks("0 9 * * *", transition.timezone, transition.at - DAY, 4)

    assert wall(found, transition.timezone) == [
        (transition.night + k * DAY).strftime("%m-%d 09:00") for k in (-1, 0, 1, 2)
    ]
    # The day of the transition is 23 or 25 hours long; the others 24.
    assert found[1] - found[0] == DAY - (transition.after - transition.before)
    assert found[2] - found[1] == found[3] - found[2] == DAY


# --- hourly crons keep to real time ------------------------------------------------------------


@pytest.mark.parametrize("transition", SPRING, ids=str)
def test_an_hourly_cron_stays_hourly_across_spring_forward(transition: Transition) -> None:
    found = marks("0 * * * *", transition.timezone, transition.at - 2 * H - timedelta(minutes=1), 4)

    assert found == [transition.at + k * H for k in (-2, -1, 0, 1)]
    assert [w[-5:] for w in wall(found, transition.timezone)] == ["00:00", "01:00", "03:00", "04:00"]


@pytest.mark.parametrize("transition", SPRING, ids=str)
def test_an_hourly_cron_does_not_move_the_skipped_hours_firings(transition: Transition) -> None:
    found = marks("30 * * * *", transition.timezone, transition.at - H, 2)

    assert found == [transition.at - H / 2, transition.at + H / 2]  # 01:30, then 03:30 local


@pytest.mark.parametrize("transition", FALL, ids=str)
def test_an_hourly_cron_fires_in_both_passes_of_the_repeated_hour(transition: Transition) -> None:
    found = marks("0 * * * *", transition.timezone, transition.at - 2 * H - timedelta(minutes=1), 5)

    assert found == [transition.at + k * H for k in (-2, -1, 0, 1, 2)]
    repeated_hour = f"{REPEATED[transition.timezone].hour:02d}:00"
    local = [w[-5:] for w in wall(found, transition.timezone)]
    assert local.count(repeated_hour) == 2


@pytest.mark.parametrize("transition", FALL, ids=str)
def test_every_twenty_minutes_runs_through_the_repeated_hour_on_real_time(transition: Transition) -> None:
    found = marks("*/20 * * * *", transition.timezone, transition.at - 61 * timedelta(minutes=1), 7)

    assert found == [transition.at - H + k * timedelta(minutes=20) for k in range(7)]


def test_only_a_cron_whose_hour_field_is_a_star_keeps_to_real_time() -> None:
    assert every_hour("0 * * * *")
    assert every_hour("*/5 * * * *")
    assert every_hour("0 * 25 10 *")
    assert not every_hour("0 */2 * * *")
    assert not every_hour("*/10 2 * * *")
    assert not every_hour("30 2 * * *")


# --- weekdays across a transition ----------------------------------------------------------------


@pytest.mark.parametrize("transition", SPRING + FALL, ids=str)
def test_weekdays_at_nine_across_a_week_with_a_transition(transition: Transition) -> None:
    sunday_before = transition.night - 7 * DAY
    assert transition.night.isoweekday() == sunday_before.isoweekday() == 7

    noon = datetime.combine(sunday_before, time(12), tzinfo=UTC)
    found = marks("0 9 * * MON-FRI", transition.timezone, noon, 10)

    before = [transition.instant(sunday_before + k * DAY, time(9), transition.before) for k in range(1, 6)]
    after = [transition.instant(transition.night + k * DAY, time(9), transition.after) for k in range(1, 6)]
    assert found == before + after
    assert all(w.endswith("09:00") for w in wall(found, transition.timezone))
    assert {instant.astimezone(zone(transition.timezone)).isoweekday() for instant in found} == {
        1,
        2,
        3,
        4,
        5,
    }


# --- the newest firing at or before a time agrees with the next one ------------------------------------

zone_names = st.sampled_from([BERLIN, NEW_YORK, "Australia/Lord_Howe", "Asia/Kolkata", "UTC"])
near_transitions = st.builds(
    lambda transition, seconds: transition.at + timedelta(seconds=seconds),
    st.sampled_from(SPRING + FALL),
    st.integers(-3 * 86_400, 3 * 86_400),
)


@settings(max_examples=300, deadline=None)
@given(expression=cron_expressions, timezone=zone_names, after=near_transitions)
def test_next_and_latest_agree_near_transitions(expression: str, timezone: str, after: datetime) -> None:
    tz = zone(timezone)
    nxt = next_cron_after(expression, after, tz)

    assert nxt > after
    assert latest_cron_at_or_before(expression, nxt, tz) == nxt
    before_next = latest_cron_at_or_before(expression, nxt - timedelta(microseconds=1), tz)
    assert before_next is None or before_next <= after


@settings(max_examples=200, deadline=None)
@given(expression=cron_expressions, timezone=zone_names, after=near_transitions)
def test_a_time_of_day_cron_never_fires_one_wall_time_twice(
    expression: str, timezone: str, after: datetime
) -> None:
    if every_hour(expression):
        return
    found = marks(expression, timezone, after, 6)

    local = [instant.astimezone(zone(timezone)).replace(tzinfo=None) for instant in found]
    assert local == sorted(set(local))


# --- a schedule in a time zone -------------------------------------------------------------------


def test_a_cron_schedule_is_evaluated_in_its_time_zone() -> None:
    spec = ScheduleSpec(cron="0 9 * * *", timezone=BERLIN)

    assert next_fire_after(spec, anchor=utc(2026, 7, 1), after=utc(2026, 7, 1)) == utc(2026, 7, 1, 7, 0)
    assert first_fire_at(spec, anchor=utc(2026, 1, 1), now=utc(2026, 1, 1)) == utc(2026, 1, 1, 8, 0)


def test_an_at_without_an_offset_is_a_wall_time_of_its_time_zone() -> None:
    spec = ScheduleSpec.model_validate({"at": "2026-12-01T09:00:00", "timezone": NEW_YORK})

    assert spec.at == utc(2026, 12, 1, 14, 0)


def test_an_at_with_an_offset_keeps_it_whatever_the_time_zone() -> None:
    spec = ScheduleSpec.model_validate({"at": "2026-12-01T09:00:00+01:00", "timezone": NEW_YORK})

    assert spec.at == utc(2026, 12, 1, 8, 0)


def test_an_at_skipped_by_spring_forward_fires_at_the_jump() -> None:
    spec = ScheduleSpec.model_validate({"at": "2026-03-29T02:30:00", "timezone": BERLIN})

    assert spec.at == utc(2026, 3, 29, 1, 0)


def test_an_at_without_an_offset_and_no_time_zone_is_still_utc() -> None:
    assert ScheduleSpec.model_validate({"at": "2026-12-01T09:00:00"}).at == utc(2026, 12, 1, 9, 0)


def test_an_unknown_time_zone_is_refused_naming_the_field() -> None:
    with pytest.raises(ValidationError) as caught:
        ScheduleSpec.model_validate({"cron": "0 9 * * *", "timezone": "Europe/Atlantis"})

    [error] = caught.value.errors()
    assert error["loc"] == ("timezone",)
    assert "unknown time zone 'Europe/Atlantis'" in error["msg"]


def test_a_time_zone_with_a_rate_is_allowed_and_places_the_window() -> None:
    spec = ScheduleSpec.model_validate({"rate": "1 day", "timezone": BERLIN, "start_at": "2026-12-01T09:00"})

    assert spec.start_at == utc(2026, 12, 1, 8, 0)
    # A rate is elapsed time: it fires every 24 h, whatever the wall clock does.
    assert next_fire_after(spec, anchor=utc(2026, 11, 1), after=utc(2026, 11, 1)) == utc(2026, 12, 1, 8, 0)
