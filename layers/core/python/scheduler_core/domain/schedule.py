"""A job's schedule (`ScheduleSpec`, validated as the API receives it) and when it fires:
next, latest, first, and jittered. Pure: the wall-clock math is `wallclock`'s.

All instants are aware UTC datetimes. `next_fire_after(..., after)` is strictly after
`after`, so claiming a firing and asking for the next one never yields the same instant.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta

from pydantic import Field, ValidationInfo, field_validator, model_validator

from scheduler_core.domain import wallclock
from scheduler_core.domain.strict import StrictModel
from scheduler_core.domain.vocabulary import MAX_JITTER_SECONDS
from scheduler_core.domain.wallclock import (
    NoFiringInWindow,
    latest_cron_at_or_before,
    next_cron_after,
    next_rate_after,
    parse_rate,
    zone,
)

_MS = timedelta(milliseconds=1)


def _as_utc(value: datetime, timezone: str = "UTC") -> datetime:
    """An aware time, in UTC. A time without an offset is a wall time of `timezone`; one
    that DST skips or repeats is read as `wallclock.localize` says."""
    if value.tzinfo is not None:
        return value.astimezone(UTC)
    try:
        zone = wallclock.zone(timezone)
    except ValueError:
        zone = UTC  # the unknown time zone is refused by its own validator
    return wallclock.localize(value, zone)


class ScheduleSpec(StrictModel):
    """Exactly one of `at` (one-off), `cron` (5 fields) or `rate` ("5 minutes"); with an
    optional `timezone`, window (`start_at`, `end_at`) and `jitter_seconds`."""

    at: datetime | None = Field(
        None, description="ISO-8601 time of a one-off job; in `timezone` when it has no offset."
    )
    cron: str | None = Field(
        None,
        # Parsed on every load and claim: an 80 KB list of minutes takes 0.2 s each time.
        max_length=128,
        description="5-field cron expression, evaluated in `timezone` (UTC by default); at most 128 "
        "characters.",
        examples=["*/5 * * * *"],
    )
    rate: str | None = Field(
        None, description="Fixed interval: '<n> minute(s)|hour(s)|day(s)'.", examples=["5 minutes"]
    )
    timezone: str = Field(
        "UTC",
        max_length=64,
        description="IANA time zone of `cron`, and of `at`, `start_at` and `end_at` written without "
        "an offset. A `rate` counts elapsed time, so for a rate it only places `start_at`/`end_at`.",
        examples=["Europe/Berlin"],
    )
    start_at: datetime | None = Field(
        None,
        description="cron and rate only: no firing before this ISO-8601 time (in `timezone` when it "
        "has no offset). A rate fires at `start_at` and every interval after it.",
    )
    end_at: datetime | None = Field(
        None,
        description="cron and rate only: no firing after this ISO-8601 time (in `timezone` when it has "
        "no offset); the job completes after its last run.",
    )
    jitter_seconds: int = Field(
        0,
        ge=0,
        le=MAX_JITTER_SECONDS,
        description="Start each firing up to this many seconds late, by a fixed amount per firing "
        "(a hash of the job and its time), never reaching the next firing. At most the time between "
        "two firings.",
    )

    @field_validator("at", "start_at", "end_at", mode="before")
    @classmethod
    def _time_is_text(cls, value: object) -> object:
        if value is not None and not isinstance(value, str | datetime):
            raise ValueError("must be an ISO-8601 date-time string, e.g. 2026-12-01T09:00:00Z")
        return value

    @field_validator("at")
    @classmethod
    def _at_is_utc(cls, value: datetime | None) -> datetime | None:
        # Without an offset it waits for `timezone` (validated later): see `_at_in_timezone`.
        return value if value is None or value.tzinfo is None else _as_utc(value)

    @field_validator("cron")
    @classmethod
    def _cron_parses(cls, value: str | None) -> str | None:
        if value is not None:
            wallclock.validate_cron(value)
        return value

    @field_validator("rate")
    @classmethod
    def _rate_parses(cls, value: str | None) -> str | None:
        if value is not None:
            wallclock.parse_rate(value)
        return value

    @field_validator("timezone")
    @classmethod
    def _timezone_is_known(cls, value: str) -> str:
        wallclock.zone(value)
        return value

    @field_validator("start_at", "end_at")
    @classmethod
    def _window_in_timezone(cls, value: datetime | None, info: ValidationInfo) -> datetime | None:
        if value is None:
            return None
        if info.data.get("at") is not None:
            raise ValueError("applies to cron and rate schedules only; an 'at' fires once, at its time")
        value = _as_utc(value, info.data.get("timezone", "UTC"))
        start = info.data.get("start_at")
        if info.field_name == "end_at" and start is not None and value < start:
            raise ValueError("must not be before start_at")
        return value

    @field_validator("jitter_seconds")
    @classmethod
    def _jitter_within_interval(cls, value: int, info: ValidationInfo) -> int:
        """Jitter longer than the time between two firings would push each one to the next."""
        if value == 0:
            return value
        interval = None
        if info.data.get("rate") is not None:
            interval = wallclock.parse_rate(info.data["rate"])
        elif info.data.get("cron") is not None:
            try:
                interval = wallclock.smallest_cron_gap(info.data["cron"])
            except wallclock.NeverFires:
                return value  # refused (422) when the job's first firing is computed
        if interval is not None and value > interval.total_seconds():
            raise ValueError(
                f"must be at most the time between two firings ({int(interval.total_seconds())} s), "
                "so a firing is never pushed to the next one"
            )
        return value

    @model_validator(mode="after")
    def _exactly_one_kind(self) -> ScheduleSpec:
        kinds = [name for name in ("at", "cron", "rate") if getattr(self, name) is not None]
        if len(kinds) != 1:
            found = " and ".join(kinds) if kinds else "none"
            raise ValueError(f"give exactly one of 'at', 'cron' or 'rate' (found {found})")
        return self

    @model_validator(mode="after")
    def _at_in_timezone(self) -> ScheduleSpec:
        if self.at is not None and self.at.tzinfo is None:
            self.at = _as_utc(self.at, self.timezone)
        return self

    @property
    def recurring(self) -> bool:
        return self.at is None


def _rate_anchor(spec: ScheduleSpec, interval: timedelta, created: datetime) -> datetime:
    """Where a rate counts from: one interval before `start_at` (so it fires at `start_at`),
    else the job's creation (its first firing is one interval after it)."""
    return spec.start_at - interval if spec.start_at is not None else created


# --- a job's schedule -------------------------------------------------------------------


def next_fire_after(spec: ScheduleSpec, anchor: datetime, after: datetime) -> datetime | None:
    """The job's next firing strictly after `after`; None when it has no more (an `at`
    that passed, a window that ended).

    `anchor` is where a rate counts from (the job's creation time) unless it has a `start_at`.
    """
    if spec.at is not None:
        return spec.at if spec.at > after else None
    if spec.cron is not None:
        if spec.start_at is not None and after < spec.start_at:
            after = spec.start_at - timedelta(microseconds=1)
        nxt = next_cron_after(spec.cron, after, zone(spec.timezone))
    else:
        assert spec.rate is not None
        interval = parse_rate(spec.rate)
        nxt = next_rate_after(interval, _rate_anchor(spec, interval, anchor), after)
    return None if spec.end_at is not None and nxt > spec.end_at else nxt


def firings_between(
    spec: ScheduleSpec, anchor: datetime, start: datetime, end: datetime, limit: int
) -> list[datetime]:
    """The schedule's firings in [`start`, `end`] (within its own window), oldest first, at
    most `limit`: what a backfill runs. A rate's firings count from its anchor both ways (a
    backfill may reach before the job was created); a cron's and an `at`'s are its own."""
    found: list[datetime] = []
    if spec.rate is not None:
        interval = parse_rate(spec.rate)
        base = _rate_anchor(spec, interval, anchor)
        when = base - ((base - start) // interval) * interval  # the first anchor + k·interval >= start
        while when <= end and len(found) < limit:
            if (spec.start_at is None or when >= spec.start_at) and (
                spec.end_at is None or when <= spec.end_at
            ):
                found.append(when)
            when += interval
        return found
    after = start - timedelta(microseconds=1)
    while len(found) < limit:
        when_next = next_fire_after(spec, anchor, after)
        if when_next is None or when_next > end:
            break
        found.append(when_next)
        after = when_next
    return found


def latest_fire_at_or_before(spec: ScheduleSpec, anchor: datetime, when: datetime) -> datetime | None:
    """The job's newest firing at or before `when` (and within its window); None if it had none."""
    if spec.at is not None:
        return spec.at if spec.at <= when else None
    if spec.end_at is not None:
        when = min(when, spec.end_at)
    latest: datetime | None
    if spec.cron is not None:
        latest = latest_cron_at_or_before(spec.cron, when, zone(spec.timezone))
    else:
        assert spec.rate is not None
        interval = parse_rate(spec.rate)
        start = _rate_anchor(spec, interval, anchor)
        periods = (when - start) // interval
        latest = start + periods * interval if periods >= 1 else None
    if latest is None or (spec.start_at is not None and latest < spec.start_at):
        return None
    return latest


def first_fire_at(spec: ScheduleSpec, anchor: datetime, now: datetime) -> datetime:
    """The first firing of a new job created at `anchor`, seen at `now`.

    A one-off `at` keeps its time even when it is (slightly) past: it fires at once and its
    lateness shows. Cron and rate fire at their first instant after `now` (and not before
    `start_at`). NeverFires when there is none; NoFiringInWindow when `end_at` comes first.
    """
    if spec.at is not None:
        return spec.at
    first = next_fire_after(spec, anchor, now)
    if first is None:
        raise NoFiringInWindow(
            "the schedule has no firing between "
            f"{'start_at' if spec.start_at is not None and spec.start_at > now else 'now'} and end_at"
        )
    return first


def jittered(spec: ScheduleSpec, job_id: str, fire_at: datetime, following: datetime | None) -> datetime:
    """When the firing `fire_at` really starts: `fire_at` plus a deterministic offset in
    [0, jitter_seconds) (a hash of the job and the firing, so every poller computes the same
    one), kept before the `following` firing, and no later than `end_at`."""
    if spec.jitter_seconds <= 0:
        return fire_at
    fire_ms = (fire_at - datetime(1970, 1, 1, tzinfo=UTC)) // _MS
    digest = hashlib.sha256(f"{job_id}:{fire_ms}".encode()).digest()
    moved = fire_at + _MS * (int.from_bytes(digest[:8], "big") % (spec.jitter_seconds * 1000))
    limit = following - _MS if following is not None else spec.end_at
    if limit is not None:
        moved = min(moved, max(fire_at, limit))
    return moved
