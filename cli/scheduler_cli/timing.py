"""When a schedule fires, computed here without AWS by the scheduler's own schedule code
(scheduler_core.domain.schedule: the same rules for time zones, daylight saving time,
windows and jitter the poller follows), and what it says in words (cron-descriptor).
`jobs next`, `workflows next` and `schedule explain` print these.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from cron_descriptor import ExpressionDescriptor, Options
from pydantic import ValidationError

from scheduler_core.domain import wallclock
from scheduler_core.domain.schedule import ScheduleSpec, jittered, next_fire_after

_RATE = re.compile(r"^\s*\d+\s+(minute|minutes|hour|hours|day|days)\s*$")


class NotASchedule(ValueError):
    """The expression is refused as the API would refuse it; the message says why."""


@dataclass(frozen=True)
class Firing:
    fire_at: datetime  # UTC
    starts_at: datetime  # UTC: fire_at plus the firing's jitter
    local: datetime  # fire_at in the schedule's time zone

    def as_dict(self) -> dict[str, str]:
        return {
            "fire_at": _iso(self.fire_at),
            "starts_at": _iso(self.starts_at),
            "local": self.local.isoformat(timespec="seconds"),
        }


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_spec(schedule: dict[str, Any]) -> ScheduleSpec:
    """A schedule as the API validates it (NotASchedule with the first refusal)."""
    try:
        return ScheduleSpec.model_validate({k: v for k, v in schedule.items() if v is not None})
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first.get("loc", ()))
        message = str(first.get("msg", error)).removeprefix("Value error, ")
        raise NotASchedule(f"{where}: {message}" if where else message) from error


def spec_of_expression(expression: str, timezone: str) -> ScheduleSpec:
    """`0 9 * * MON-FRI` (cron), `5 minutes` (rate) or an ISO-8601 time (at)."""
    text = expression.strip()
    if _RATE.match(text):
        kind = "rate"
    elif len(text.split()) == 5:
        kind = "cron"
    else:
        try:
            datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise NotASchedule(
                f"{expression!r} is neither a 5-field cron expression, a rate such as '5 minutes' "
                "nor an ISO-8601 time"
            ) from None
        kind = "at"
    return parse_spec({kind: text, "timezone": timezone})


def next_firings(
    spec: ScheduleSpec, *, anchor: datetime, after: datetime, count: int, job_id: str | None = None
) -> list[Firing]:
    """The schedule's next `count` firings strictly after `after` (fewer when it ends).
    `anchor`: where a rate counts from (the job's creation). With a `job_id`, each firing's
    start with its jitter, as the poller computes it."""
    zone = wallclock.zone(spec.timezone)
    times: list[datetime] = []
    cursor = after
    try:
        while len(times) < count + 1:  # one more: the jitter of the last stops before the next
            found = next_fire_after(spec, anchor, cursor)
            if found is None:
                break
            times.append(found)
            cursor = found
    except wallclock.NeverFires:
        pass
    firings = []
    for index, fire_at in enumerate(times[:count]):
        following = times[index + 1] if index + 1 < len(times) else None
        starts = jittered(spec, job_id, fire_at, following) if job_id else fire_at
        firings.append(Firing(fire_at, starts, fire_at.astimezone(zone)))
    return firings


def describe(spec: ScheduleSpec) -> str:
    """The schedule in words: cron-descriptor's reading of a cron, a rate's interval, an
    `at`'s time; then its time zone, window and jitter."""
    if spec.cron is not None:
        options = Options()
        options.use_24hour_time_format = True
        try:
            words = ExpressionDescriptor(spec.cron, options).get_description()
        except Exception:  # cron-descriptor's own errors; croniter accepted the expression
            words = f"cron {spec.cron}"
    elif spec.rate is not None:
        words = f"Every {spec.rate.strip()}, counted from when it is created (or from start_at)"
    else:
        assert spec.at is not None
        words = f"Once, at {_iso(spec.at)}"
    parts = [words]
    if spec.recurring:
        parts.append(f"in {spec.timezone}" if spec.cron is not None else "")
    if spec.start_at is not None:
        parts.append(f"from {_iso(spec.start_at)}")
    if spec.end_at is not None:
        parts.append(f"until {_iso(spec.end_at)}")
    if spec.jitter_seconds:
        parts.append(f"each start up to {spec.jitter_seconds} s late (jitter)")
    return ", ".join(part for part in parts if part)


def firings_body(spec: ScheduleSpec, firings: list[Firing], **about: Any) -> dict[str, Any]:
    """What `--output json` prints for firings: who they are of, the reading, each firing."""
    return about | {
        "description": describe(spec),
        "timezone": spec.timezone,
        "firings": [firing.as_dict() for firing in firings],
    }


def next_firings_body(
    owner: str, owner_id: str, schedule: dict[str, Any], created_at: str, count: int, now: datetime
) -> dict[str, Any]:
    """The next firings of a job's or workflow's schedule as the API returned it."""
    spec = parse_spec(schedule)
    anchor = datetime.fromisoformat(created_at.replace("Z", "+00:00"))
    firings = next_firings(spec, anchor=anchor, after=now, count=count, job_id=owner_id)
    return firings_body(spec, firings, **{owner: owner_id})
