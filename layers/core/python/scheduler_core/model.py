"""Jobs, runs and the request shapes of the public API (DESIGN §7). Pure: no AWS here.

The pydantic models double as the API's validation: a request that does not fit gets a
400 naming the field, before any service code runs.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any, Literal, get_args
from urllib.parse import quote, urlsplit

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    field_validator,
    model_validator,
)

from scheduler_core import schedule as schedule_math
from scheduler_core.clock import to_ms


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


MAX_URL_LENGTH = 2048
MAX_HEADERS = 50
MAX_HEADER_VALUE_LENGTH = 4096

# A DNS name or IPv4 address: labels of 1-63 letters, digits, '-' or '_', and an optional
# final dot. Anything else (a '%' that urllib would unquote, an empty label) breaks delivery.
_HOST_NAME = re.compile(r"(?:[A-Za-z0-9_-]{1,63}\.)*[A-Za-z0-9_-]{1,63}\.?")
# RFC 9110 §5.6.2: a field name is a token.
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
# Headers the scheduler sets on every delivery, or that HTTP derives from the request itself.
_HEADER_OWNERS = {
    "content-length": "is set by the HTTP client from the body",
    "transfer-encoding": "is set by the HTTP client",
    "connection": "is set by the HTTP client",
    "host": "is set by the HTTP client from the URL",
    "idempotency-key": "is set by the scheduler (to the run id)",
}


def _is_control(char: str) -> bool:
    return ord(char) < 0x20 or char == "\x7f"


def _http_url(value: str) -> str:
    """An absolute http(s) URL that the worker can send to as it is: checked here, so a bad
    one is a 400 at create instead of a delivery that cannot even start."""
    bad = next((char for char in value if char.isspace() or _is_control(char)), None)
    if bad is not None:
        raise ValueError(
            "must not contain whitespace or control characters; "
            f"percent-encode them ({bad!r} is {quote(bad, safe='')})"
        )
    bad = next((char for char in value if not char.isascii()), None)
    if bad is not None:
        raise ValueError(f"must be ASCII; percent-encode other characters ({bad} is {quote(bad, safe='')})")
    try:
        parts = urlsplit(value)
    except ValueError as exc:  # e.g. a bracketed host that is no IPv6 address
        raise ValueError(f"is not a valid URL: {exc}") from exc
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError("must be an absolute http:// or https:// URL")
    if "@" in parts.netloc:
        raise ValueError("must not carry user:password@; send credentials in a header")
    host = parts.hostname or ""
    if not host:
        raise ValueError("must name a host")
    if not parts.netloc.startswith("[") and (len(host) > 253 or not _HOST_NAME.fullmatch(host)):
        raise ValueError(f"host {host!r} is not a valid DNS name or IP address")
    try:
        port = parts.port
    except ValueError:
        port = 0
    if port == 0:
        raise ValueError("port must be a number from 1 to 65535")
    return value


def reserved_header_reason(name: str) -> str | None:
    """Why a job may not set header `name` (any case), or None when it may."""
    lowered = name.lower()
    if lowered.startswith("x-scheduler-"):
        return "is set by the scheduler"
    return _HEADER_OWNERS.get(lowered)


def _header_name(name: str) -> str:
    if not _TOKEN.fullmatch(name):
        raise ValueError(
            "header name must be an HTTP token: letters, digits and !#$%&'*+-.^_`|~ (no spaces or colons)"
        )
    reason = reserved_header_reason(name)
    if reason is not None:
        raise ValueError(f"header {name} {reason}; remove it")
    return name


def _header_value(value: str) -> str:
    # RFC 9110 §5.5: visible characters, spaces and tabs, and obs-text (Latin-1), no CR/LF/NUL.
    if any(_is_control(char) and char != "\t" for char in value):
        raise ValueError("header value must not contain CR, LF, NUL or other control characters")
    try:
        value.encode("latin-1")
    except UnicodeEncodeError as exc:
        raise ValueError(
            f"header value must be Latin-1 text; {value[exc.start]!r} is not (percent-encode it)"
        ) from exc
    return value


HeaderName = Annotated[str, AfterValidator(_header_name)]
HeaderValue = Annotated[str, Field(max_length=MAX_HEADER_VALUE_LENGTH), AfterValidator(_header_value)]


class HttpTarget(_Strict):
    type: Literal["HTTP"]
    url: str = Field(
        max_length=MAX_URL_LENGTH,
        description="Absolute http(s) URL that receives the payload; ASCII only (percent-encode the rest).",
    )
    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE"] = "POST"
    headers: dict[HeaderName, HeaderValue] = Field(
        default_factory=dict,
        max_length=MAX_HEADERS,
        description="Extra request headers. Content-Length, Host, Transfer-Encoding, Connection, "
        "Idempotency-Key and X-Scheduler-* belong to the scheduler or HTTP and are refused.",
    )
    timeout_seconds: float = Field(10, gt=0, le=60)

    @field_validator("url")
    @classmethod
    def _url_is_http(cls, value: str) -> str:
        return _http_url(value)


class SqsTarget(_Strict):
    type: Literal["SQS"]
    queue_url: str = Field(
        max_length=MAX_URL_LENGTH,
        description="URL of the standard SQS queue that receives the payload (FIFO queues are not "
        "supported yet).",
    )

    @field_validator("queue_url")
    @classmethod
    def _url_is_standard_queue(cls, value: str) -> str:
        _http_url(value)
        if urlsplit(value).path.rstrip("/").lower().endswith(".fifo"):
            # A FIFO queue refuses messages without a MessageGroupId, which jobs cannot set yet.
            raise ValueError("FIFO queues are not supported yet as targets (they need a MessageGroupId)")
        return value


Target = Annotated[HttpTarget | SqsTarget, Field(discriminator="type")]
# The `type` tags of the target models, e.g. ("HTTP", "SQS").
TARGET_TYPES: tuple[str, ...] = tuple(
    tag
    for member in get_args(get_args(Target)[0])
    for tag in get_args(member.model_fields["type"].annotation)
)


def _finite_numbers(value: JsonValue) -> JsonValue:
    """NaN and ±Infinity are not JSON: a payload holding one could not be delivered as JSON."""
    pending: list[JsonValue] = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, float) and not math.isfinite(item):
            raise ValueError("numbers must be finite; NaN and Infinity are not JSON")
        if isinstance(item, dict):
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return value


Payload = Annotated[JsonValue, AfterValidator(_finite_numbers)]


class RetryPolicy(_Strict):
    max_attempts: int = Field(3, ge=1, le=20)
    backoff_seconds: float = Field(10, gt=0, le=86_400)
    max_backoff_seconds: float = Field(3_600, gt=0, le=7 * 86_400)


class JobCreate(_Strict):
    """Body of `POST /v1/jobs`."""

    name: str = Field(min_length=1, max_length=200)
    schedule: ScheduleSpec
    target: Target
    payload: Payload = None
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
    payload: Payload = None
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
    # Where the current round of attempts began: 1, or the attempt a manual re-drive started.
    first_attempt: int = 1
    priority: Priority
    # When the current attempt may start: the scheduled time, or later for a retry.
    next_attempt_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    lateness_ms: int | None = None
    error: str | None = None
    response_code: int | None = None
    # Bookkeeping, not shown by the API: when the poller must look at the run again (the
    # due index) and until when a started attempt belongs to its worker.
    due_at: datetime | None = None
    lease_until: datetime | None = None

    @property
    def scheduled_for_ms(self) -> int:
        return to_ms(self.scheduled_for)

    @property
    def starts_at(self) -> datetime:
        """When the current attempt is due: its retry time, or the scheduled time."""
        return self.next_attempt_at or self.scheduled_for

    def to_api(self) -> dict[str, Any]:
        body = self.model_dump(mode="json", exclude={"first_attempt", "due_at", "lease_until"})
        for name in ("scheduled_for", "started_at", "finished_at", "next_attempt_at"):
            body[name] = iso_or_none(getattr(self, name))
        return body


class RunMessage(_Strict):
    """What a priority queue carries: a pointer to a run, never the job itself."""

    job_id: str = Field(min_length=1)
    run_id: str = Field(min_length=1)
    scheduled_for_ms: int = Field(ge=0)
    attempt: int = Field(ge=1)
    # A retry's own time (epoch ms), later than the scheduled time; absent for attempt 1.
    not_before_ms: int | None = Field(None, ge=0)

    @property
    def due_ms(self) -> int:
        return max(self.scheduled_for_ms, self.not_before_ms or 0)


class DeadLetter(_Strict):
    """What the DLQ carries for a run whose attempts are spent (poison messages reach the
    DLQ as they are, through the queues' redrive policy)."""

    kind: Literal["RUN_FAILED"] = "RUN_FAILED"
    job_id: str
    run_id: str
    scheduled_for: str
    attempts: int
    last_error: str | None
    response_code: int | None = None
    failed_at: str
    message: RunMessage


def iso_or_none(when: datetime | None) -> str | None:
    """ISO-8601 UTC with milliseconds and `Z`: the API's one time format."""
    if when is None:
        return None
    return when.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
