"""Small helpers the tests share."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Protocol


class HasUrl(Protocol):
    @property
    def url(self) -> str: ...


def iso(when: datetime) -> str:
    """`when` as the API writes times: ISO-8601 UTC with milliseconds and `Z`."""
    return when.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def http_job(receiver: HasUrl, *, name: str = "ping", payload: Any = None, **schedule: Any) -> dict[str, Any]:
    """The body of a job posting `payload` to `receiver` on `schedule` (at=, cron=, rate=, ...)."""
    body: dict[str, Any] = {
        "name": name,
        "schedule": schedule,
        "target": {"type": "HTTP", "url": receiver.url},
    }
    return body | ({"payload": payload} if payload is not None else {})
