"""Wall-clock math: cron and rate expressions stepped through time zones. Pure: croniter,
zoneinfo and datetimes, no AWS; all instants are aware UTC datetimes. Which instant a wall
time of `schedule.timezone` fires at when daylight saving time skips or repeats it (and why
a cron whose hour field is `*` keeps to real time instead) is written once, in
docs/concepts/schedules.md ("Schedules").

Why it is computed here: croniter's own time zone support does not follow those rules (it
fires a daily 02:30 twice on the fall-back night), so croniter only walks naive wall times,
and each is mapped to its instants below (`_resolve`, `_instants`).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, tzinfo
from functools import lru_cache
from itertools import pairwise
from zoneinfo import ZoneInfo, available_timezones

from croniter import CroniterBadDateError, croniter

_RATE = re.compile(r"^\s*([0-9]+)\s+(minute|minutes|hour|hours|day|days)\s*$")
_UNIT_SECONDS = {"minute": 60, "hour": 3600, "day": 86400}
MAX_RATE = timedelta(days=366)
# croniter's own extensions that are not cron: R (random) re-rolls on every evaluation, so
# a daily job would fire at a different time each time it is computed; H (hash) likewise.
_NON_STANDARD = re.compile(r"\b[RH]\b")
# Names in the time zone database that are not places: the host's own zone, a placeholder.
_NOT_ZONES = frozenset({"localtime", "Factory", "posixrules"})
# Cron candidates examined for one answer before giving up (a DST night needs about 120).
_MAX_STEPS = 5_000
_MS = timedelta(milliseconds=1)
# Where the gaps between a cron's firings are measured from (see `smallest_cron_gap`): a
# fixed wall time, so a stored job validates the same way whenever it is read.
_GAP_REFERENCE = datetime(2000, 1, 1)
_GAP_FIRINGS = 16


class NeverFires(ValueError):
    """The schedule is well formed but has no firing left (e.g. `0 0 30 2 *`)."""


class NoFiringInWindow(NeverFires):
    """The schedule fires, but not between now (or `start_at`) and `end_at`."""


# --- time zones -------------------------------------------------------------------


@lru_cache(maxsize=1)
def _zone_names() -> frozenset[str]:
    return frozenset(available_timezones()) - _NOT_ZONES


@lru_cache(maxsize=512)
def zone(name: str) -> tzinfo:
    """The time zone called `name` (IANA, e.g. "Europe/Berlin"); ValueError if unknown."""
    if name == "UTC":
        return UTC  # the default needs no time zone database
    if name not in _zone_names():
        raise ValueError(f"unknown time zone {name!r}; give an IANA name such as 'Europe/Berlin'")
    return ZoneInfo(name)


def _resolve(wall: datetime, tz: tzinfo) -> tuple[datetime, datetime | None, bool]:
    """The instants of a naive wall time in `tz`: (first, second, skipped).

    `second` is the fall-back repeat of a repeated wall time (else None); `skipped` says the
    wall time does not exist, and then `first` is the first valid instant after it (the
    moment of the jump)."""
    if tz is UTC:
        return wall.replace(tzinfo=UTC), None, False
    early = wall.replace(tzinfo=tz, fold=0)
    late = wall.replace(tzinfo=tz, fold=1)
    first = early.astimezone(UTC)
    if early.utcoffset() == late.utcoffset():
        return first, None, False
    second = late.astimezone(UTC)
    if second > first:  # repeated: fold=0 is the first pass, fold=1 the second
        return first, second, False
    # Skipped (PEP 495): fold=0 reads it with the offset before the jump, fold=1 after.
    return _jump_between(second, first, tz), None, True


def _jump_between(before: datetime, after: datetime, tz: tzinfo) -> datetime:
    """The instant in (before, after] where the UTC offset of `tz` changes (to the second)."""
    low, high = int(before.timestamp()), int(after.timestamp())
    target = after.astimezone(tz).utcoffset()
    while high - low > 1:
        middle = (low + high) // 2
        if datetime.fromtimestamp(middle, tz).utcoffset() == target:
            high = middle
        else:
            low = middle
    return datetime.fromtimestamp(high, UTC)


def localize(wall: datetime, tz: tzinfo) -> datetime:
    """The UTC instant of a wall time without offset in `tz`: a time skipped by DST means
    the first valid instant after it, a repeated one its first occurrence."""
    return _resolve(wall.replace(tzinfo=None), tz)[0]


def _repeat_span(wall: datetime, tz: tzinfo) -> timedelta:
    """How long the fall-back repeat containing `wall` lasts (zero when `wall` is not repeated)."""
    first, second, _ = _resolve(wall, tz)
    return second - first if second is not None else timedelta(0)


# --- cron ---------------------------------------------------------------------------


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


def every_hour(expression: str) -> bool:
    """Whether a cron runs every hour (its hour field is `*`): it then keeps to real time
    across DST instead of to the wall clock (see docs/concepts/schedules.md)."""
    return expression.split()[1] == "*"


def _instants(wall: datetime, tz: tzinfo, hourly: bool) -> tuple[datetime, ...]:
    first, second, skipped = _resolve(wall, tz)
    if not hourly:
        return (first,)
    if skipped:
        return ()
    return (first,) if second is None else (first, second)


def next_cron_after(expression: str, after: datetime, tz: tzinfo = UTC) -> datetime:
    """The first firing of the cron strictly after `after`, in `tz`. NeverFires if none.

    croniter walks wall times; each maps to its instants (`_instants`). The lowest instant
    of a wall time never decreases as wall time goes on, so the walk stops as soon as it
    passes the best answer found."""
    hourly = every_hour(expression)
    wall = after.astimezone(tz).replace(tzinfo=None)
    # Inside a repeated hour, the second pass of earlier wall times is still ahead.
    walker = croniter(expression, wall - _repeat_span(wall, tz))
    best: datetime | None = None
    for _ in range(_MAX_STEPS):
        try:
            candidate = walker.get_next(datetime)
        except CroniterBadDateError as exc:
            if best is not None:
                return best
            raise NeverFires(f"cron '{expression}' never fires") from exc
        lowest = _resolve(candidate, tz)[0]
        if best is not None and lowest >= best:
            return best
        for instant in _instants(candidate, tz, hourly):
            if instant > after and (best is None or instant < best):
                best = instant
    if best is None:
        raise NeverFires(f"cron '{expression}' never fires")
    return best


def latest_cron_at_or_before(expression: str, when: datetime, tz: tzinfo = UTC) -> datetime | None:
    """The newest firing of the cron at or before `when`, in `tz`; None if there is none."""
    hourly = every_hour(expression)
    wall = when.astimezone(tz).replace(tzinfo=None)
    # Inside a repeated hour, the first pass of later wall times is already behind.
    walker = croniter(expression, wall + _repeat_span(wall, tz) + timedelta(minutes=1))
    best: datetime | None = None
    for _ in range(_MAX_STEPS):
        try:
            candidate = walker.get_prev(datetime)
        except CroniterBadDateError:
            return best
        first, second, _ = _resolve(candidate, tz)
        if best is not None and (second or first) <= best:
            return best
        for instant in _instants(candidate, tz, hourly):
            if instant <= when and (best is None or instant > best):
                best = instant
    return best


@lru_cache(maxsize=1024)
def smallest_cron_gap(expression: str) -> timedelta:
    """The shortest wall-clock time between consecutive firings of the cron, measured over
    its first firings after a fixed reference (cheap, and the same whenever it is asked).
    NeverFires for a cron that never fires."""
    walker = croniter(expression, _GAP_REFERENCE)
    try:
        marks = [walker.get_next(datetime) for _ in range(_GAP_FIRINGS)]
    except CroniterBadDateError as exc:
        raise NeverFires(f"cron '{expression}' never fires") from exc
    return min(later - earlier for earlier, later in pairwise(marks))


# --- rate -----------------------------------------------------------------------------


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


def next_rate_after(interval: timedelta, anchor: datetime, after: datetime) -> datetime:
    """The first `anchor + k·interval` (k ≥ 1) strictly after `after`."""
    if after < anchor:
        return anchor + interval
    periods = (after - anchor) // interval + 1
    return anchor + periods * interval
