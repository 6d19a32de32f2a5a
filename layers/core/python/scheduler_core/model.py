"""Jobs, runs and the request shapes of the public API (DESIGN §7). Pure: no AWS here.

The pydantic models double as the API's validation: a request that does not fit gets a
400 naming the field, before any service code runs.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Annotated, Any, Literal, get_args
from urllib.parse import quote, unquote, urlsplit

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    ValidationInfo,
    field_validator,
    model_validator,
)

from scheduler_core import schedule as schedule_math
from scheduler_core.clock import to_ms
from scheduler_core.misfire import (
    DEFAULT_CATCH_UP_WINDOW_SECONDS,
    MAX_CATCH_UP_WINDOW_SECONDS,
    MIN_CATCH_UP_WINDOW_SECONDS,
    MisfirePolicy,
)


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


class Overlap(StrEnum):
    """What a run due to start does when `max_running` runs of its job are running."""

    SKIP = "SKIP"  # it ends SKIPPED, its target not called
    BUFFER_ONE = "BUFFER_ONE"  # it waits for a slot, if no other run waits already (else SKIPPED)
    ALLOW = "ALLOW"  # it starts: no limit


class _Strict(BaseModel):
    """Request models reject unknown fields, so a typo is a 400, not a silent default."""

    model_config = ConfigDict(extra="forbid")


# A firing is spread over at most a day (and never over more than the schedule's interval).
MAX_JITTER_SECONDS = 86_400


def _as_utc(value: datetime, timezone: str = "UTC") -> datetime:
    """An aware time, in UTC. A time without an offset is a wall time of `timezone`; one
    that DST skips or repeats is read as `schedule.localize` says."""
    if value.tzinfo is not None:
        return value.astimezone(UTC)
    try:
        zone = schedule_math.zone(timezone)
    except ValueError:
        zone = UTC  # the unknown time zone is refused by its own validator
    return schedule_math.localize(value, zone)


class ScheduleSpec(_Strict):
    """Exactly one of `at` (one-off), `cron` (5 fields) or `rate` ("5 minutes"); with an
    optional `timezone`, window (`start_at`, `end_at`) and `jitter_seconds`."""

    at: datetime | None = Field(
        None, description="ISO-8601 time of a one-off job; in `timezone` when it has no offset."
    )
    cron: str | None = Field(
        None,
        description="5-field cron expression, evaluated in `timezone` (UTC by default).",
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
            schedule_math.validate_cron(value)
        return value

    @field_validator("rate")
    @classmethod
    def _rate_parses(cls, value: str | None) -> str | None:
        if value is not None:
            schedule_math.parse_rate(value)
        return value

    @field_validator("timezone")
    @classmethod
    def _timezone_is_known(cls, value: str) -> str:
        schedule_math.zone(value)
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
            interval = schedule_math.parse_rate(info.data["rate"])
        elif info.data.get("cron") is not None:
            try:
                interval = schedule_math.smallest_cron_gap(info.data["cron"])
            except schedule_math.NeverFires:
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


_FIFO_IDS = "FIFO (name ending in .fifo): MessageGroupId = the job id, MessageDeduplicationId = the run id."


class SqsTarget(_Strict):
    type: Literal["SQS"]
    queue_url: str = Field(
        max_length=MAX_URL_LENGTH,
        description=f"URL of the SQS queue that receives the payload as the message body. {_FIFO_IDS}",
    )

    @field_validator("queue_url")
    @classmethod
    def _url_is_http(cls, value: str) -> str:
        return _http_url(value)

    @property
    def fifo(self) -> bool:
        # As the target check reads the queue's name: from the percent-decoded path.
        return unquote(urlsplit(self.queue_url).path).rstrip("/").endswith(".fifo")


# ARNs (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference-arns.html): partitions such
# as aws, aws-cn, aws-us-gov; regions such as eu-west-1, us-gov-east-1, eusc-de-east-1;
# 12-digit accounts.
_PARTITION = re.compile(r"aws(?:-[a-z]+)*")
_REGION = re.compile(r"[a-z]{2,4}(?:-[a-z]+)+-\d{1,2}")
_ACCOUNT = re.compile(r"\d{12}")
_TOPIC_NAME = re.compile(r"[A-Za-z0-9_-]{1,256}|[A-Za-z0-9_-]{1,251}\.fifo")
_FUNCTION = re.compile(r"function:[A-Za-z0-9_-]{1,64}(?::(?:\$LATEST|[A-Za-z0-9_-]{1,128}))?")
_EVENT_BUS_NAME = re.compile(r"[/.\-_A-Za-z0-9]{1,256}")


def _arn(value: str, service: str, example: str) -> tuple[str, str]:
    """Check `arn:<partition>:<service>:<region>:<account>:<resource>` part by part, so a
    refusal says which part is wrong; returns (region, resource)."""
    parts = value.split(":", 5)
    if len(parts) != 6 or parts[0] != "arn":
        raise ValueError(f"must be an ARN such as {example}")
    _, partition, named, region, account, resource = parts
    if not _PARTITION.fullmatch(partition):
        raise ValueError(f"partition {partition!r} is not an AWS partition (aws, aws-cn, aws-us-gov, ...)")
    if named != service:
        raise ValueError(f"must be an ARN of {service}, not of {named!r}, such as {example}")
    if not _REGION.fullmatch(region):
        raise ValueError(f"region {region!r} is not an AWS region such as eu-west-1")
    if not _ACCOUNT.fullmatch(account):
        raise ValueError(f"account {account!r} is not a 12-digit AWS account id")
    return region, resource


def _arn_region(arn: str) -> str:
    return arn.split(":", 5)[3]


class SnsTarget(_Strict):
    type: Literal["SNS"]
    topic_arn: str = Field(
        description=f"ARN of the SNS topic that receives the payload as the message. {_FIFO_IDS}",
        examples=["arn:aws:sns:eu-west-1:123456789012:reports"],
    )

    @field_validator("topic_arn")
    @classmethod
    def _is_a_topic_arn(cls, value: str) -> str:
        _, name = _arn(value, "sns", "arn:aws:sns:eu-west-1:123456789012:my-topic")
        if not _TOPIC_NAME.fullmatch(name):
            raise ValueError(
                f"topic name {name!r} must be 1-256 letters, digits, '-' or '_' "
                "(a FIFO topic's ends in .fifo, within the 256)"
            )
        return value

    @property
    def fifo(self) -> bool:
        return self.topic_arn.endswith(".fifo")

    @property
    def region(self) -> str:
        return _arn_region(self.topic_arn)


class EventBridgeTarget(_Strict):
    type: Literal["EVENTBRIDGE"]
    event_bus_name: str = Field(
        description="Name (this account and region, e.g. 'default') or ARN of the event bus.",
        examples=["default", "arn:aws:events:eu-west-1:123456789012:event-bus/orders"],
    )
    source: str = Field(
        min_length=1,
        max_length=256,
        description="The events' `source`; names starting with 'aws.' belong to AWS services.",
        examples=["com.example.billing"],
    )
    detail_type: str = Field(
        min_length=1, max_length=128, description="The events' `detail-type`.", examples=["InvoiceDue"]
    )

    @field_validator("event_bus_name")
    @classmethod
    def _is_a_bus_name_or_arn(cls, value: str) -> str:
        name = value
        if value.startswith("arn:"):
            _, resource = _arn(value, "events", "arn:aws:events:eu-west-1:123456789012:event-bus/my-bus")
            if not resource.startswith("event-bus/"):
                raise ValueError(f"resource {resource!r} is not an event bus (event-bus/<name>)")
            name = resource.removeprefix("event-bus/")
        if not _EVENT_BUS_NAME.fullmatch(name):
            raise ValueError(
                f"event bus name {name!r} must be 1-256 letters, digits or the characters / . - _"
            )
        return value

    @field_validator("source", "detail_type")
    @classmethod
    def _no_control_characters(cls, value: str) -> str:
        if any(_is_control(char) for char in value):
            raise ValueError("must not contain control characters")
        return value

    @field_validator("source")
    @classmethod
    def _not_an_aws_source(cls, value: str) -> str:
        if value.lower().startswith("aws."):
            raise ValueError("sources starting with 'aws.' are reserved for AWS services")
        return value

    @property
    def region(self) -> str | None:
        """The region of a bus given by ARN; None for a name (the scheduler's own region)."""
        return _arn_region(self.event_bus_name) if self.event_bus_name.startswith("arn:") else None


class LambdaTarget(_Strict):
    type: Literal["LAMBDA"]
    function_arn: str = Field(
        description="ARN of the Lambda function (optionally with a version or alias), invoked "
        "asynchronously (InvocationType Event).",
        examples=["arn:aws:lambda:eu-west-1:123456789012:function:send-report"],
    )

    @field_validator("function_arn")
    @classmethod
    def _is_a_function_arn(cls, value: str) -> str:
        _, resource = _arn(value, "lambda", "arn:aws:lambda:eu-west-1:123456789012:function:my-function")
        if not _FUNCTION.fullmatch(resource):
            raise ValueError(
                f"resource {resource!r} must be function:<name>[:<version or alias>], the name "
                "1-64 letters, digits, '-' or '_'"
            )
        return value

    @property
    def region(self) -> str:
        return _arn_region(self.function_arn)


# Where an EVENTBRIDGE event's `detail` or a LAMBDA event carries the run's ids (DESIGN §7).
RUN_METADATA_KEY = "scheduler"


Target = Annotated[
    HttpTarget | SqsTarget | SnsTarget | EventBridgeTarget | LambdaTarget, Field(discriminator="type")
]
# The `type` tags of the target models, e.g. ("HTTP", "SQS", ...).
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


MAX_RUNNING_LIMIT = 1_000


class ConcurrencyPolicy(_Strict):
    """How many runs of a job may be RUNNING at once, and what a run due to start while that
    many are does (`overlap`). Manual runs and retries count and obey it like any run."""

    overlap: Overlap = Field(
        Overlap.SKIP,
        description="SKIP (default): the run ends SKIPPED. BUFFER_ONE: it waits and starts when a "
        "running one ends; a run due while one waits is SKIPPED. ALLOW: it starts; no limit.",
    )
    max_running: int | None = Field(
        None,
        ge=1,
        le=MAX_RUNNING_LIMIT,
        description="Runs of the job RUNNING at once (default 1); SKIP and BUFFER_ONE only (null "
        "with ALLOW, which has no limit).",
    )

    @field_validator("max_running")
    @classmethod
    def _only_with_a_limit(cls, value: int | None, info: ValidationInfo) -> int | None:
        if value is not None and info.data.get("overlap") is Overlap.ALLOW:
            raise ValueError("overlap ALLOW starts every run without a limit; leave max_running out")
        return value

    @model_validator(mode="after")
    def _default_limit(self) -> ConcurrencyPolicy:
        if self.max_running is None and self.overlap is not Overlap.ALLOW:
            self.max_running = 1
        return self


def catch_up_window_of(policy: MisfirePolicy | None, seconds: int | None) -> int | None:
    """A job's `catch_up_window_seconds` as given with `policy`: the default when a CATCH_UP
    job gives none; refused with another policy (a careful user who gives one meant CATCH_UP)."""
    if policy is MisfirePolicy.CATCH_UP:
        return DEFAULT_CATCH_UP_WINDOW_SECONDS if seconds is None else seconds
    if seconds is not None and policy is not None:
        raise ValueError(f"applies to misfire CATCH_UP only, not {policy}; leave it out")
    return seconds


class JobCreate(_Strict):
    """Body of `POST /v1/jobs`."""

    name: str = Field(min_length=1, max_length=200)
    schedule: ScheduleSpec
    target: Target
    payload: Payload = None
    priority: Priority = Priority.NORMAL
    retry: RetryPolicy = Field(default_factory=RetryPolicy)
    concurrency: ConcurrencyPolicy = Field(default_factory=ConcurrencyPolicy)
    misfire: MisfirePolicy = Field(
        MisfirePolicy.FIRE_ONCE,
        description="What runs for firings missed while the scheduler was down or the job paused "
        "(more than 60 s late): FIRE_ONCE (default): one run for all of them; SKIP: none, the job "
        "carries on with its next firing; CATCH_UP: each one of the last `catch_up_window_seconds` "
        "as its own run, oldest first (at most 100).",
    )
    catch_up_window_seconds: int | None = Field(
        None,
        ge=MIN_CATCH_UP_WINDOW_SECONDS,
        le=MAX_CATCH_UP_WINDOW_SECONDS,
        validate_default=True,
        description="misfire CATCH_UP only (default 3600, from 60 to 604800): how far back, in "
        "seconds, missed firings are caught up; older ones are skipped.",
    )

    @field_validator("catch_up_window_seconds")
    @classmethod
    def _window_for_catch_up_only(cls, value: int | None, info: ValidationInfo) -> int | None:
        return catch_up_window_of(info.data.get("misfire"), value)

    @field_validator("payload")
    @classmethod
    def _payload_leaves_the_run_key_free(cls, value: JsonValue, info: ValidationInfo) -> JsonValue:
        # `target` is validated before `payload`, so it is here when it was valid.
        target = info.data.get("target")
        envelope = isinstance(target, EventBridgeTarget | LambdaTarget)
        if envelope and isinstance(value, dict) and RUN_METADATA_KEY in value:
            raise ValueError(f"key {RUN_METADATA_KEY!r} is where the target gets the run's ids; rename it")
        return value


class JobPatch(_Strict):
    """Body of `PATCH /v1/jobs/{job_id}`: any of the fields of `JobCreate`. Each one given
    replaces the job's value as a whole (`schedule`, `target` and `retry` too, they are not
    merged); the job as patched is then validated as a `JobCreate`, so the same rules hold."""

    name: str | None = Field(None, min_length=1, max_length=200)
    schedule: ScheduleSpec | None = None
    target: Target | None = None
    payload: Payload = None
    priority: Priority | None = None
    retry: RetryPolicy | None = None
    concurrency: ConcurrencyPolicy | None = None
    misfire: MisfirePolicy | None = None
    # null: back to the default window (of a CATCH_UP job).
    catch_up_window_seconds: int | None = Field(
        None, ge=MIN_CATCH_UP_WINDOW_SECONDS, le=MAX_CATCH_UP_WINDOW_SECONDS
    )

    @field_validator("name", "schedule", "target", "priority", "retry", "concurrency", "misfire")
    @classmethod
    def _not_null(cls, value: object) -> object:
        if value is None:
            raise ValueError("must not be null; leave the field out to keep the job's value")
        return value

    def changes(self) -> dict[str, Any]:
        """The fields the request gave, by name (a `payload` of null included)."""
        return {name: getattr(self, name) for name in self.model_fields_set}


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
    concurrency: ConcurrencyPolicy = Field(default_factory=ConcurrencyPolicy)
    misfire: MisfirePolicy = MisfirePolicy.FIRE_ONCE
    catch_up_window_seconds: int | None = None  # CATCH_UP only
    next_fire_at: datetime | None
    created_at: datetime
    updated_at: datetime
    version: int = 1
    # When a PAUSED job was paused. Its `next_fire_at` is kept (out of the due index): the
    # first firing not yet claimed, where a resume carries on from; the API shows none.
    paused_at: datetime | None = None
    # Bookkeeping, not shown by the API (see `overlap`): the runs holding one of the job's
    # `concurrency.max_running` slots, the run waiting for one (BUFFER_ONE), and the missed
    # firings caught up (misfire CATCH_UP) still waiting their turn for one, oldest first;
    # runs by time.
    running_count: int = 0
    buffered_run_ms: int | None = None
    catch_up_queue_ms: list[int] = Field(default_factory=list)

    @property
    def catch_up_window(self) -> timedelta:
        """How far back a CATCH_UP job catches up missed firings."""
        return timedelta(seconds=self.catch_up_window_seconds or DEFAULT_CATCH_UP_WINDOW_SECONDS)

    def to_api(self) -> dict[str, Any]:
        body = self.model_dump(
            mode="json", exclude={"tenant", "running_count", "buffered_run_ms", "catch_up_queue_ms"}
        )
        paused = self.status is JobStatus.PAUSED
        body["next_fire_at"] = None if paused else iso_or_none(self.next_fire_at)
        body["paused_at"] = iso_or_none(self.paused_at) if paused else None
        body["created_at"] = iso_or_none(self.created_at)
        body["updated_at"] = iso_or_none(self.updated_at)
        for name in ("at", "start_at", "end_at"):
            body["schedule"][name] = iso_or_none(getattr(self.schedule, name))
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
    # When the current attempt may start: the scheduled time, or later for a retry or a
    # jittered first attempt (`schedule.jitter_seconds`).
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
    # Whether the running attempt holds one of its job's running slots (see `overlap`).
    holds_slot: bool = False
    # A missed firing caught up (misfire CATCH_UP, limited concurrency): it waits for a slot,
    # never SKIPPED, for its retries too (see `overlap`).
    caught_up: bool = False
    # An attempt's target call that succeeded after its worker had lost the lease: the
    # run's next attempt finishes with this answer instead of calling again (see `execution`).
    delivered_at: datetime | None = None
    delivered_code: int | None = None

    @property
    def scheduled_for_ms(self) -> int:
        return to_ms(self.scheduled_for)

    @property
    def starts_at(self) -> datetime:
        """When the current attempt is due: its retry (or jittered) time, or the scheduled time."""
        return self.next_attempt_at or self.scheduled_for

    def to_api(self) -> dict[str, Any]:
        body = self.model_dump(
            mode="json",
            exclude={
                "first_attempt",
                "due_at",
                "lease_until",
                "holds_slot",
                "caught_up",
                "delivered_at",
                "delivered_code",
            },
        )
        for name in ("scheduled_for", "started_at", "finished_at", "next_attempt_at"):
            body[name] = iso_or_none(getattr(self, name))
        return body


class RunMessage(_Strict):
    """What a priority queue carries: a pointer to a run, never the job itself."""

    job_id: str = Field(min_length=1)
    run_id: str = Field(min_length=1)
    scheduled_for_ms: int = Field(ge=0)
    attempt: int = Field(ge=1)
    # A retry's own time (epoch ms), or a jittered first attempt's, later than the scheduled
    # time; absent for an attempt due at the scheduled time.
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
