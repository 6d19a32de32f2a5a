"""A schedule in words and its next firings, for the console's job page and create form.

The API says when a job fires next (`next_fire_at`) but not the firings after it, nor what a
cron means. The console server answers both with the command line's `scheduler_cli.timing`
(the scheduler's own schedule code: the same cron dialect, time zones, DST rules, rate
anchor, window and jitter, and cron-descriptor's words), so the page never shows a firing
the scheduler would not make, as a second cron implementation in JavaScript could. It is
computation on what the page sends: no AWS call, no private route of the API. Unlike
`scheduler schedule explain`, a refusal names every field it is about, as the API's
`details` do, so the form shows each beside its field while the schedule is typed.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from scheduler_cli import timing
from scheduler_core.domain import wallclock
from scheduler_core.domain.schedule import ScheduleSpec

MAX_FIRINGS = 20


class PreviewRefused(ValueError):
    """What the page sent is not a schedule; `details` name the fields, as the API's do."""

    def __init__(self, message: str, details: list[dict[str, str]]) -> None:
        super().__init__(message)
        self.details = details


def preview(request: Any, now: datetime | None = None) -> dict[str, Any]:
    """`request`: `{"schedule": {...}, "created_at"?: ISO, "job_id"?: str, "count"?: int}` →
    `{"words", "timezone", "firings": [{"fire_at", "starts_at", "local"}]}`: the next `count`
    (5) firings after now (a one-off's time even when it passed), each with its start after
    jitter (the jitter is a hash of the job id: `starts_at` is null with jitter and no
    `job_id`). A rate counts from `created_at` (now, for a job not made yet)."""
    if not isinstance(request, dict) or not isinstance(request.get("schedule"), dict):
        raise PreviewRefused("give a schedule", [{"field": "schedule", "message": "an object is required"}])
    count = request.get("count", 5)
    if not isinstance(count, int) or isinstance(count, bool) or not 1 <= count <= MAX_FIRINGS:
        detail = {"field": "count", "message": f"a whole number from 1 to {MAX_FIRINGS}"}
        raise PreviewRefused("count", [detail])
    try:
        spec = ScheduleSpec.model_validate({k: v for k, v in request["schedule"].items() if v is not None})
    except ValidationError as error:
        details = [
            {
                "field": ".".join(["schedule", *(str(part) for part in e["loc"])]),
                "message": str(e["msg"]).removeprefix("Value error, "),
            }
            for e in error.errors()
        ]
        raise PreviewRefused("not a valid schedule", details) from None
    now = now or datetime.now(UTC)
    anchor = _instant(request.get("created_at")) or now
    job_id = request.get("job_id") if isinstance(request.get("job_id"), str) else None
    if spec.at is not None:  # a one-off: its time, passed or not
        firings = [timing.Firing(spec.at, spec.at, spec.at.astimezone(wallclock.zone(spec.timezone)))]
    else:
        firings = timing.next_firings(spec, anchor=anchor, after=now, count=count, job_id=job_id)
    body = timing.firings_body(spec, firings)
    if spec.jitter_seconds and not job_id:
        for firing in body["firings"]:
            firing["starts_at"] = None
    return {"words": body["description"], "timezone": body["timezone"], "firings": body["firings"]}


def _instant(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed.astimezone(UTC) if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)
