"""Jobs, runs and the request shapes of the public API (DESIGN §7). Pure: no AWS here.

The pydantic models double as the API's validation: a request that does not fit gets a
400 naming the field, before any service code runs.
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, JsonValue, field_validator, model_validator

from scheduler_core import schedule as schedule_math


class Priority(StrEnum):
    HIGH = "HIGH"
    NORMAL = "NORMAL"
    LOW = "LOW"


class JobStatus(StrEnum):
    SCHEDULED = "SCHEDULED"
    PAUSED = "PAUSED"
    COMPLETED = "COMPLETED"
    CANCELLED = "CANCELLED"


class RunStatus(StrEnum):
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    RETRYING = "RETRYING"
    FAILED = "FAILED"
    SKIPPED = "SKIPPED"
    CANCELLED = "CANCELLED"


class Trigger(StrEnum):
    SCHEDULE = "SCHEDULE"
    MANUAL = "MANUAL"
    RETRY = "RETRY"


class _Strict(BaseModel):
    """Request models reject unknown fields, so a typo is a 400, not a silent default."""

    model_config = ConfigDict(extra="forbid")


def _as_utc(value: datetime) -> datetime:
    # Times without an offset are UTC (time zones arrive with schedule.timezone later).
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class ScheduleSpec(_Strict):
    """Exactly one of `at` (one-off), `cron` (5 fields, UTC) or `rate` ("5 minutes")."""

    at: datetime | None = Field(
        None, description="ISO-8601 time of a one-off job; UTC when it has no offset."
    )
    cron: str | None = Field(
        None, description="5-field cron expression, evaluated in UTC.", examples=["*/5 * * * *"]
    )
    rate: str | None = Field(
        None, description="Fixed interval: '<n> minute(s)|hour(s)|day(s)'.", examples=["5 minutes"]
    )

    @field_validator("at", mode="before")
    @classmethod
    def _at_is_text(cls, value: object) -> object:
        if value is not None and not isinstance(value, str | datetime):
            raise ValueError("must be an ISO-8601 date-time string, e.g. 2026-12-01T09:00:00Z")
        return value

    @field_validator("at")
    @classmethod
    def _at_is_utc(cls, value: datetime | None) -> datetime | None:
        return None if value is None else _as_utc(value)

    @field_validator("cron")
    @classmethod
    def _cron_parses(cls, value: str | None) -> str | None:
        if value is not None:
            schedule_math.validate_cron(value)
        return value

    @field_validator("rate")
    @classmethod
    def _rate_parses(cls, value: str | None) -> str | None:
        if value is not None:
            schedule_math.parse_rate(value)
        return value

    @model_validator(mode="after")
    def _exactly_one_kind(self) -> ScheduleSpec:
        kinds = [name for name in ("at", "cron", "rate") if getattr(self, name) is not None]
        if len(kinds) != 1:
            found = " and ".join(kinds) if kinds else "none"
            raise ValueError(f"give exactly one of 'at', 'cron' or 'rate' (found {found})")
        return self

    @property
    def recurring(self) -> bool:
        return self.at is None


def _http_url(value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError("must be an absolute http:// or https:// URL")
    return value


class HttpTarget(_Strict):
    type: Literal["HTTP"]
    url: str = Field(description="http(s) URL that receives the payload.")
    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE"] = "POST"
    headers: dict[str, str] = Field(default_factory=dict, description="Extra request headers.")
    timeout_seconds: float = Field(10, gt=0, le=60)

    @field_validator("url")
    @classmethod
    def _url_is_http(cls, value: str) -> str:
        return _http_url(value)


class SqsTarget(_Strict):
    type: Literal["SQS"]
    queue_url: str = Field(description="URL of the SQS queue that receives the payload.")

    @field_validator("queue_url")
    @classmethod
    def _url_is_http(cls, value: str) -> str:
        return _http_url(value)


Target = Annotated[HttpTarget | SqsTarget, Field(discriminator="type")]


class RetryPolicy(_Strict):
    max_attempts: int = Field(3, ge=1, le=20)
    backoff_seconds: float = Field(10, gt=0, le=86_400)
    max_backoff_seconds: float = Field(3_600, gt=0, le=7 * 86_400)


class JobCreate(_Strict):
    """Body of `POST /v1/jobs`."""

    name: str = Field(min_length=1, max_length=200)
    schedule: ScheduleSpec
    target: Target
    payload: JsonValue = None
    priority: Priority = Priority.NORMAL
    retry: RetryPolicy = Field(default_factory=RetryPolicy)


class Job(BaseModel):
    """A job as stored and as returned (the API omits `tenant`)."""

    job_id: str
    tenant: str
    name: str
    status: JobStatus
    schedule: ScheduleSpec
    target: Target
    payload: JsonValue = None
    priority: Priority
    retry: RetryPolicy
    next_fire_at: datetime | None
    created_at: datetime
    updated_at: datetime
    version: int = 1

    def to_api(self) -> dict[str, Any]:
        body = self.model_dump(mode="json", exclude={"tenant"})
        body["next_fire_at"] = iso_or_none(self.next_fire_at)
        body["created_at"] = iso_or_none(self.created_at)
        body["updated_at"] = iso_or_none(self.updated_at)
        if self.schedule.at is not None:
            body["schedule"]["at"] = iso_or_none(self.schedule.at)
        return body


class Run(BaseModel):
    """One firing of a job. `run_id = {job_id}:{scheduled_for_ms}` is deterministic."""

    run_id: str
    job_id: str
    status: RunStatus
    trigger: Trigger
    scheduled_for: datetime
    attempt: int = 1
    priority: Priority
    started_at: datetime | None = None
    finished_at: datetime | None = None
    lateness_ms: int | None = None
    error: str | None = None
    response_code: int | None = None

    def to_api(self) -> dict[str, Any]:
        body = self.model_dump(mode="json")
        for name in ("scheduled_for", "started_at", "finished_at"):
            body[name] = iso_or_none(getattr(self, name))
        return body


class RunMessage(_Strict):
    """What a priority queue carries: a pointer to a run, never the job itself."""

    job_id: str = Field(min_length=1)
    run_id: str = Field(min_length=1)
    scheduled_for_ms: int = Field(ge=0)
    attempt: int = Field(ge=1)


def iso_or_none(when: datetime | None) -> str | None:
    """ISO-8601 UTC with milliseconds and `Z`: the API's one time format."""
    if when is None:
        return None
    return when.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
