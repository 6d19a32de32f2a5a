"""Schedule math (DESIGN §3, §7): when a job fires next. All times are aware UTC."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from scheduler_core.domain.schedule import (
    ScheduleSpec,
    first_fire_at,
    latest_fire_at_or_before,
    next_fire_after,
)
from scheduler_core.domain.wallclock import (
    NeverFires,
    next_cron_after,
    next_rate_after,
    parse_rate,
    validate_cron,
)

NOON = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)  # a Wednesday


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC)


def cron_marks(expression: str, after: datetime, count: int) -> list[datetime]:
    marks: list[datetime] = []
    for _ in range(count):
        after = next_cron_after(expression, after)
        marks.append(after)
    return marks


# --- at: one-off jobs -------------------------------------------------------------


def test_at_without_an_offset_is_read_as_utc() -> None:
    spec = ScheduleSpec(at=datetime(2030, 1, 1, 12, 0))

    assert spec.at == utc(2030, 1, 1, 12, 0)
    assert spec.at is not None
    assert spec.at.utcoffset() == timedelta(0)


def test_at_with_an_offset_is_converted_to_utc() -> None:
    spec = ScheduleSpec.model_validate({"at": "2030-01-01T14:00:00+02:00"})

    assert spec.at == utc(2030, 1, 1, 12, 0)
    assert spec.at is not None
    assert spec.at.tzinfo is UTC


def test_at_with_a_z_suffix_is_utc() -> None:
    spec = ScheduleSpec.model_validate({"at": "2030-01-01T12:00:00.250Z"})

    assert spec.at == datetime(2030, 1, 1, 12, 0, 0, 250_000, tzinfo=UTC)


def test_an_at_schedule_is_not_recurring_and_cron_and_rate_are() -> None:
    assert not ScheduleSpec(at=NOON).recurring
    assert ScheduleSpec(cron="* * * * *").recurring
    assert ScheduleSpec(rate="5 minutes").recurring


def test_at_fires_at_its_time_while_that_time_is_still_ahead() -> None:
    spec = ScheduleSpec(at=NOON)

    assert next_fire_after(spec, anchor=NOON - timedelta(days=1), after=NOON - timedelta(seconds=1)) == NOON


def test_at_has_no_next_firing_once_asked_at_exactly_its_time() -> None:
    spec = ScheduleSpec(at=NOON)

    assert next_fire_after(spec, anchor=NOON - timedelta(days=1), after=NOON) is None


def test_at_has_no_next_firing_after_its_time_has_passed() -> None:
    spec = ScheduleSpec(at=NOON)

    assert next_fire_after(spec, anchor=NOON - timedelta(days=1), after=NOON + timedelta(hours=1)) is None


def test_first_firing_of_a_future_at_is_that_time() -> None:
    now = NOON - timedelta(minutes=10)

    assert first_fire_at(ScheduleSpec(at=NOON), anchor=now, now=now) == NOON


def test_an_at_already_in_the_past_keeps_its_time_so_its_lateness_shows() -> None:
    now = NOON + timedelta(seconds=3)

    assert first_fire_at(ScheduleSpec(at=NOON), anchor=now, now=now) == NOON


# --- cron: 5 fields, UTC, strictly after --------------------------------------------


def test_every_five_minutes_fires_on_the_next_five_minute_mark() -> None:
    assert next_cron_after("*/5 * * * *", utc(2025, 1, 1, 12, 3, 10)) == utc(2025, 1, 1, 12, 5)


def test_every_five_minutes_iterates_over_consecutive_marks() -> None:
    marks = cron_marks("*/5 * * * *", NOON, 4)

    assert marks == [NOON + timedelta(minutes=5 * k) for k in range(1, 5)]


def test_cron_asked_at_exactly_a_mark_yields_the_next_mark() -> None:
    assert next_cron_after("*/5 * * * *", utc(2025, 1, 1, 12, 5)) == utc(2025, 1, 1, 12, 10)


def test_cron_asked_a_microsecond_before_a_mark_yields_that_mark() -> None:
    after = utc(2025, 1, 1, 12, 5) - timedelta(microseconds=1)

    assert next_cron_after("*/5 * * * *", after) == utc(2025, 1, 1, 12, 5)


def test_cron_asked_a_microsecond_after_a_mark_yields_the_next_mark() -> None:
    after = utc(2025, 1, 1, 12, 5) + timedelta(microseconds=1)

    assert next_cron_after("*/5 * * * *", after) == utc(2025, 1, 1, 12, 10)


def test_cron_is_evaluated_in_utc_whatever_the_offset_of_after() -> None:
    eleven_utc = datetime(2025, 1, 1, 13, 0, tzinfo=timezone(timedelta(hours=2)))

    nxt = next_cron_after("0 12 * * *", eleven_utc)

    assert nxt == utc(2025, 1, 1, 12, 0)
    assert nxt.tzinfo is UTC


def test_cron_on_the_31st_skips_months_that_have_no_31st() -> None:
    marks = cron_marks("0 0 31 * *", utc(2025, 1, 1), 7)

    assert [m.month for m in marks] == [1, 3, 5, 7, 8, 10, 12]
    assert all(m.day == 31 for m in marks)


def test_cron_on_february_29th_waits_for_the_next_leap_year() -> None:
    assert next_cron_after("0 0 29 2 *", utc(2025, 3, 1)) == utc(2028, 2, 29)


def test_cron_on_february_29th_skips_2100_which_is_not_a_leap_year() -> None:
    assert next_cron_after("0 0 29 2 *", utc(2096, 3, 1)) == utc(2104, 2, 29)


@pytest.mark.parametrize("expression", ["0 0 30 2 *", "0 0 31 2 *", "0 0 31 4,6,9,11 *"])
def test_cron_on_a_day_no_month_has_never_fires(expression: str) -> None:
    with pytest.raises(NeverFires):
        next_cron_after(expression, utc(2025, 1, 1))


def test_never_fires_is_a_value_error() -> None:
    assert issubclass(NeverFires, ValueError)


def test_next_fire_after_of_a_cron_that_never_fires_raises_never_fires() -> None:
    spec = ScheduleSpec(cron="0 0 30 2 *")

    with pytest.raises(NeverFires):
        next_fire_after(spec, anchor=NOON, after=NOON)
    with pytest.raises(NeverFires):
        first_fire_at(spec, anchor=NOON, now=NOON)


def test_cron_crosses_a_year_boundary() -> None:
    assert next_cron_after("*/15 * * * *", utc(2025, 12, 31, 23, 50)) == utc(2026, 1, 1, 0, 0)
    assert next_cron_after("0 0 1 1 *", utc(2025, 12, 31, 23, 59, 59)) == utc(2026, 1, 1)
    assert next_cron_after("59 23 31 12 *", utc(2025, 12, 31, 23, 59)) == utc(2026, 12, 31, 23, 59)


def test_weekday_cron_skips_the_weekend() -> None:
    friday_nine = utc(2025, 1, 3, 9, 0)

    assert next_cron_after("0 9 * * 1-5", friday_nine) == utc(2025, 1, 6, 9, 0)  # Monday


def test_weekday_cron_fires_monday_to_friday_only() -> None:
    sunday = utc(2025, 1, 5)

    marks = cron_marks("0 9 * * 1-5", sunday, 6)

    assert [m.isoweekday() for m in marks] == [1, 2, 3, 4, 5, 1]
    assert all((m.hour, m.minute) == (9, 0) for m in marks)


def test_cron_with_hour_and_minute_lists_fires_at_every_combination() -> None:
    marks = cron_marks("0,30 8,17 * * *", utc(2025, 1, 1), 5)

    assert marks == [
        utc(2025, 1, 1, 8, 0),
        utc(2025, 1, 1, 8, 30),
        utc(2025, 1, 1, 17, 0),
        utc(2025, 1, 1, 17, 30),
        utc(2025, 1, 2, 8, 0),
    ]


def test_first_firing_of_a_cron_job_is_its_first_mark_after_now() -> None:
    now = utc(2025, 1, 1, 12, 7, 30)

    assert first_fire_at(ScheduleSpec(cron="*/5 * * * *"), anchor=now, now=now) == utc(2025, 1, 1, 12, 10)


@pytest.mark.parametrize("expression", ["*/5 * * * *", "0 9 * * 1-5", "0,30 8,17 * * *", "0 0 1 1 *"])
def test_validate_cron_accepts_five_field_expressions(expression: str) -> None:
    validate_cron(expression)


@pytest.mark.parametrize(("expression", "count"), [("* * * *", 4), ("0 * * * * *", 6), ("", 0)])
def test_validate_cron_rejects_a_wrong_number_of_fields_naming_the_count(expression: str, count: int) -> None:
    with pytest.raises(ValueError, match=rf"5 fields .*got {count}$"):
        validate_cron(expression)


@pytest.mark.parametrize(
    "expression",
    [
        "a b c d e",
        "60 * * * *",
        "* 24 * * *",
        "* * 32 * *",
        "* * * 13 *",
        "* * * * 8",
        "*/0 * * * *",
    ],
)
def test_validate_cron_rejects_garbage_with_a_message(expression: str) -> None:
    with pytest.raises(ValueError, match="not a valid cron expression"):
        validate_cron(expression)


@pytest.mark.parametrize("expression", ["R * * * *", "0 R * * *", "H * * * *", "H(0-29) * * * *"])
def test_validate_cron_rejects_random_and_hashed_fields_because_firings_must_be_deterministic(
    expression: str,
) -> None:
    with pytest.raises(ValueError, match="cron"):
        validate_cron(expression)


# --- rate: a fixed interval anchored on creation -----------------------------------------


@pytest.mark.parametrize(
    ("expression", "interval"),
    [
        ("1 minute", timedelta(minutes=1)),
        ("5 minutes", timedelta(minutes=5)),
        ("2 hours", timedelta(hours=2)),
        ("1 day", timedelta(days=1)),
        ("  10 days ", timedelta(days=10)),
    ],
)
def test_rate_parses_count_and_unit(expression: str, interval: timedelta) -> None:
    assert parse_rate(expression) == interval


@pytest.mark.parametrize(
    "expression", ["0 minutes", "5 seconds", "five minutes", "", "5", "minutes", "-5 minutes", "5 Minutes"]
)
def test_rate_rejects_anything_but_a_positive_count_of_minutes_hours_or_days(expression: str) -> None:
    with pytest.raises(ValueError, match="rate must"):
        parse_rate(expression)


@pytest.mark.parametrize(
    "rate", ["367 days", "5000000 days", "1000000000 days", "99999999999999999999 minutes"]
)
def test_a_rate_over_366_days_is_a_validation_error_never_an_overflow(rate: str) -> None:
    with pytest.raises(ValidationError, match="at most 366 days"):
        ScheduleSpec(rate=rate)


def test_a_rate_of_exactly_366_days_is_accepted() -> None:
    assert parse_rate("366 days") == timedelta(days=366)


def test_rate_rejects_non_ascii_digits() -> None:
    with pytest.raises(ValueError, match="rate must"):
        parse_rate("٥ minutes")


def test_rate_at_its_anchor_fires_one_interval_later() -> None:
    assert next_rate_after(timedelta(minutes=5), anchor=NOON, after=NOON) == NOON + timedelta(minutes=5)


def test_rate_asked_at_exactly_a_firing_yields_the_next_firing() -> None:
    after = NOON + timedelta(minutes=5)

    assert next_rate_after(timedelta(minutes=5), anchor=NOON, after=after) == NOON + timedelta(minutes=10)


def test_rate_asked_between_firings_yields_the_next_one() -> None:
    after = NOON + timedelta(minutes=7, seconds=30)

    assert next_rate_after(timedelta(minutes=5), anchor=NOON, after=after) == NOON + timedelta(minutes=10)


@pytest.mark.parametrize("before", [timedelta(seconds=1), timedelta(minutes=5), timedelta(days=3)])
def test_rate_asked_before_its_anchor_yields_anchor_plus_one_interval(before: timedelta) -> None:
    assert next_rate_after(timedelta(minutes=5), anchor=NOON, after=NOON - before) == NOON + timedelta(
        minutes=5
    )


def test_rate_counts_from_the_creation_time_not_from_the_minute() -> None:
    created = utc(2025, 1, 1, 12, 0, 7)
    spec = ScheduleSpec(rate="1 minute")

    assert next_fire_after(spec, anchor=created, after=utc(2025, 1, 1, 12, 3)) == utc(2025, 1, 1, 12, 3, 7)


def test_first_firing_of_a_new_rate_job_is_one_interval_after_creation() -> None:
    created = utc(2025, 1, 1, 12, 0, 7)

    assert first_fire_at(ScheduleSpec(rate="2 hours"), anchor=created, now=created) == utc(
        2025, 1, 1, 14, 0, 7
    )


# --- properties -------------------------------------------------------------------


def _field(values: st.SearchStrategy[int]) -> st.SearchStrategy[str]:
    return st.one_of(
        st.just("*"),
        values.map(str),
        st.lists(values, min_size=2, max_size=3, unique=True).map(lambda xs: ",".join(map(str, sorted(xs)))),
    )


# Expressions that always fire eventually: a specific day of month only with every month.
_days_any_month = st.tuples(_field(st.integers(1, 28)), _field(st.integers(1, 12)))
_days_every_month = st.tuples(_field(st.integers(1, 31)), st.just("*"))
cron_expressions = st.builds(
    lambda minute, hour, day_month, dow: f"{minute} {hour} {day_month[0]} {day_month[1]} {dow}",
    st.one_of(_field(st.integers(0, 59)), st.integers(1, 30).map(lambda n: f"*/{n}")),
    st.one_of(_field(st.integers(0, 23)), st.just("9-17")),
    st.one_of(_days_any_month, _days_every_month),
    st.one_of(_field(st.integers(0, 6)), st.just("1-5")),
)
rate_expressions = st.builds(
    lambda n, unit: f"{n} {unit}",
    st.integers(1, 366),
    st.sampled_from(["minute", "minutes", "hour", "hours", "day", "days"]),
)
offsets = st.sampled_from([UTC, timezone(timedelta(hours=2)), timezone(timedelta(hours=-5, minutes=-30))])
instants = st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2090, 1, 1), timezones=offsets)
schedule_specs = st.one_of(
    cron_expressions.map(lambda c: ScheduleSpec(cron=c)),
    rate_expressions.map(lambda r: ScheduleSpec(rate=r)),
)


@settings(max_examples=150, deadline=None)
@given(spec=schedule_specs, anchor=instants, after=instants)
def test_next_firing_is_strictly_after_and_iterating_is_strictly_increasing(
    spec: ScheduleSpec, anchor: datetime, after: datetime
) -> None:
    previous = after
    for _ in range(5):
        nxt = next_fire_after(spec, anchor, previous)
        assert nxt is not None
        assert nxt > previous
        previous = nxt


@settings(max_examples=150, deadline=None)
@given(expression=cron_expressions, after=instants)
def test_cron_firings_are_whole_minutes_in_utc(expression: str, after: datetime) -> None:
    nxt = next_cron_after(expression, after)

    assert nxt.tzinfo is UTC
    assert (nxt.second, nxt.microsecond) == (0, 0)


@given(
    interval=st.timedeltas(min_value=timedelta(minutes=1), max_value=timedelta(days=30)),
    anchor=instants,
    after=instants,
)
def test_rate_yields_the_first_anchor_plus_k_intervals_strictly_after(
    interval: timedelta, anchor: datetime, after: datetime
) -> None:
    nxt = next_rate_after(interval, anchor, after)

    periods, remainder = divmod(nxt - anchor, interval)
    assert remainder == timedelta(0)
    assert periods >= 1
    assert nxt > after
    assert periods == 1 or nxt - interval <= after


@pytest.mark.parametrize("expression", ["0 9 * * THU", "0 0 1 MAR *", "0 9 * * MON-FRI", "0 0 * MAR-APR THU"])
def test_month_and_day_names_containing_r_or_h_are_still_valid(expression: str) -> None:
    validate_cron(expression)


# --- latest firing at or before a time (collapsing missed firings) ----------------------


def test_latest_cron_firing_includes_an_exact_mark() -> None:
    spec = ScheduleSpec(cron="*/5 * * * *")
    assert latest_fire_at_or_before(spec, NOON, utc(2025, 1, 1, 12, 10)) == utc(2025, 1, 1, 12, 10)
    assert latest_fire_at_or_before(spec, NOON, utc(2025, 1, 1, 12, 14, 59)) == utc(2025, 1, 1, 12, 10)


def test_latest_cron_firing_after_a_long_outage_is_one_step() -> None:
    spec = ScheduleSpec(cron="* * * * *")
    when = utc(2025, 3, 1, 7, 31, 20)
    assert latest_fire_at_or_before(spec, NOON, when) == utc(2025, 3, 1, 7, 31)


def test_latest_rate_firing_counts_from_the_anchor() -> None:
    spec = ScheduleSpec(rate="10 minutes")
    assert latest_fire_at_or_before(spec, NOON, NOON + timedelta(minutes=35)) == NOON + timedelta(minutes=30)
    assert latest_fire_at_or_before(spec, NOON, NOON + timedelta(minutes=9)) is None


def test_latest_at_firing_is_the_at_once_it_passed() -> None:
    spec = ScheduleSpec(at=NOON)
    assert latest_fire_at_or_before(spec, NOON, NOON) == NOON
    assert latest_fire_at_or_before(spec, NOON, NOON - timedelta(seconds=1)) is None


@settings(max_examples=150, deadline=None)
@given(spec=schedule_specs, offset=st.integers(60, 400 * 86_400))
def test_nothing_fires_between_the_latest_firing_and_the_time_asked(spec: ScheduleSpec, offset: int) -> None:
    anchor = NOON
    when = anchor + timedelta(seconds=offset)
    latest = latest_fire_at_or_before(spec, anchor, when)
    if latest is None:
        first = next_fire_after(spec, anchor, anchor - timedelta(seconds=1))
        assert first is not None
        assert first > when
    else:
        assert latest <= when
        following = next_fire_after(spec, anchor, latest)
        assert following is not None
        assert following > when


def test_a_cron_is_at_most_128_characters() -> None:
    """Parsed on every load and claim: a long list of minutes must not cost every poll."""
    fits = ",".join(str(minute) for minute in range(0, 60, 2)) + " * * * *"  # 88 characters
    too_long = ",".join(str(minute) for minute in range(60)) + " * * * *"  # 178 characters
    ScheduleSpec(cron=fits)
    with pytest.raises(ValidationError, match="at most 128 characters"):
        ScheduleSpec(cron=too_long)
