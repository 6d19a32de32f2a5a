"""Schedule math: when a job fires next. Pure: croniter and datetimes, no AWS.

All times are aware UTC datetimes. `next_fire_after(..., after)` is strictly after
`after`, so claiming a firing and asking for the next one never yields the same instant.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from croniter import CroniterBadDateError, croniter

if TYPE_CHECKING:
    from scheduler_core.model import ScheduleSpec

_RATE = re.compile(r"^\s*([0-9]+)\s+(minute|minutes|hour|hours|day|days)\s*$")
_UNIT_SECONDS = {"minute": 60, "hour": 3600, "day": 86400}
MAX_RATE = timedelta(days=366)
# croniter's own extensions that are not cron: R (random) re-rolls on every evaluation, so
# a daily job would fire at a different time each time it is computed; H (hash) likewise.
_NON_STANDARD = re.compile(r"\b[RH]\b")


class NeverFires(ValueError):
    """The schedule is well formed but has no firing left (e.g. `0 0 30 2 *`)."""


def validate_cron(expression: str) -> None:
    """Raise ValueError unless `expression` is a valid 5-field cron expression."""
    fields = expression.split()
    if len(fields) != 5:
        raise ValueError(
            f"cron must have 5 fields (minute hour day-of-month month day-of-week), got {len(fields)}"
        )
    if _NON_STANDARD.search(expression):
        raise ValueError("cron fields 'R' and 'H' are not supported; give explicit values")
    if not croniter.is_valid(expression):
        raise ValueError(f"'{expression}' is not a valid cron expression")


def parse_rate(expression: str) -> timedelta:
    """`"5 minutes"` → 5 minutes. Units: minute(s), hour(s), day(s); from 1 minute to 366 days."""
    match = _RATE.match(expression)
    if not match:
        raise ValueError("rate must look like '<n> minutes', '<n> hours' or '<n> days'")
    value, unit = int(match.group(1)), match.group(2).rstrip("s")
    if value < 1:
        raise ValueError("rate must be at least 1")
    seconds = value * _UNIT_SECONDS[unit]
    if seconds > MAX_RATE.total_seconds():
        raise ValueError("rate must be at most 366 days")
    return timedelta(seconds=seconds)


def next_cron_after(expression: str, after: datetime) -> datetime:
    """The first cron instant strictly after `after` (UTC). NeverFires if there is none."""
    try:
        nxt = croniter(expression, after.astimezone(UTC)).get_next(datetime)
    except CroniterBadDateError as exc:
        raise NeverFires(f"cron '{expression}' never fires") from exc
    return nxt.astimezone(UTC)


def next_rate_after(interval: timedelta, anchor: datetime, after: datetime) -> datetime:
    """The first `anchor + k·interval` (k ≥ 1) strictly after `after`."""
    if after < anchor:
        return anchor + interval
    periods = (after - anchor) // interval + 1
    return anchor + periods * interval


def next_fire_after(spec: ScheduleSpec, anchor: datetime, after: datetime) -> datetime | None:
    """The job's next firing strictly after `after`; None when it has no more.

    `anchor` is where a rate counts from (the job's creation time).
    """
    if spec.at is not None:
        return spec.at if spec.at > after else None
    if spec.cron is not None:
        return next_cron_after(spec.cron, after)
    assert spec.rate is not None
    return next_rate_after(parse_rate(spec.rate), anchor, after)


def latest_fire_at_or_before(spec: ScheduleSpec, anchor: datetime, when: datetime) -> datetime | None:
    """The job's newest firing at or before `when`; None if it had none yet."""
    if spec.at is not None:
        return spec.at if spec.at <= when else None
    if spec.cron is not None:
        previous: datetime = croniter(spec.cron, when.astimezone(UTC)).get_prev(datetime).astimezone(UTC)
        candidate = next_cron_after(spec.cron, previous)  # get_prev is strictly before `when`
        return candidate if candidate <= when else previous
    assert spec.rate is not None
    periods = (when - anchor) // parse_rate(spec.rate)
    return anchor + periods * parse_rate(spec.rate) if periods >= 1 else None


def first_fire_at(spec: ScheduleSpec, anchor: datetime, now: datetime) -> datetime:
    """The first firing of a new job created at `anchor`, seen at `now`.

    A one-off `at` keeps its time even when it is (slightly) past: it fires at once and its
    lateness shows. Cron and rate fire at their first instant after `now`.
    """
    if spec.at is not None:
        return spec.at
    first = next_fire_after(spec, anchor, now)
    assert first is not None  # cron/rate always have a next firing or raise NeverFires
    return first
