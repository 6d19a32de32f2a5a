"""Request and response shapes of the public API (DESIGN §7)."""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from pydantic import ValidationError

from scheduler_core.domain.api_shapes import JobCreate
from scheduler_core.domain.entities import Job, Run, iso_or_none
from scheduler_core.domain.messages import RunMessage
from scheduler_core.domain.policies import RetryPolicy
from scheduler_core.domain.schedule import ScheduleSpec
from scheduler_core.domain.target_spec import TARGET_TYPES, HttpTarget, SqsTarget
from scheduler_core.domain.vocabulary import JobStatus, Priority, RunStatus, Trigger


def job_body(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": "nightly-report",
        "schedule": {"cron": "0 2 * * *"},
        "target": {"type": "HTTP", "url": "https://example.com/hooks/report"},
    }
    body.update(overrides)
    return body


def error_locs(exc: pytest.ExceptionInfo[ValidationError]) -> list[tuple[int | str, ...]]:
    return [tuple(error["loc"]) for error in exc.value.errors()]


def rejects(body: dict[str, Any]) -> list[tuple[int | str, ...]]:
    with pytest.raises(ValidationError) as exc:
        JobCreate.model_validate(body)
    return error_locs(exc)


# --- ScheduleSpec: exactly one kind ---------------------------------------------------


@pytest.mark.parametrize(
    "schedule",
    [
        {},
        {"at": "2030-01-01T00:00:00Z", "cron": "* * * * *"},
        {"cron": "* * * * *", "rate": "5 minutes"},
        {"at": "2030-01-01T00:00:00Z", "rate": "5 minutes"},
        {"at": "2030-01-01T00:00:00Z", "cron": "* * * * *", "rate": "5 minutes"},
    ],
    ids=["none", "at+cron", "cron+rate", "at+rate", "all-three"],
)
def test_schedule_needs_exactly_one_of_at_cron_or_rate(schedule: dict[str, str]) -> None:
    with pytest.raises(ValidationError, match="exactly one of 'at', 'cron' or 'rate'"):
        ScheduleSpec.model_validate(schedule)


def test_a_schedule_with_two_kinds_is_reported_at_the_schedule() -> None:
    assert rejects(job_body(schedule={"cron": "* * * * *", "rate": "5 minutes"})) == [("schedule",)]


@pytest.mark.parametrize(
    "schedule", [{"at": "2030-01-01T00:00:00Z"}, {"cron": "*/5 * * * *"}, {"rate": "5 minutes"}]
)
def test_schedule_with_one_kind_is_accepted(schedule: dict[str, str]) -> None:
    ScheduleSpec.model_validate(schedule)


def test_a_malformed_cron_is_reported_at_schedule_cron() -> None:
    assert rejects(job_body(schedule={"cron": "* * * *"})) == [("schedule", "cron")]


def test_a_malformed_rate_is_reported_at_schedule_rate() -> None:
    assert rejects(job_body(schedule={"rate": "5 seconds"})) == [("schedule", "rate")]


def test_a_malformed_at_is_reported_at_schedule_at() -> None:
    assert rejects(job_body(schedule={"at": "next tuesday"})) == [("schedule", "at")]


def test_a_well_formed_cron_that_never_fires_passes_validation_and_is_left_to_the_service() -> None:
    # NeverFires surfaces when the next firing is computed (422), not as a 400 here.
    assert ScheduleSpec(cron="0 0 30 2 *").cron == "0 0 30 2 *"


# --- JobCreate: unknown fields are errors, at every level -------------------------------


def test_a_minimal_job_gets_the_documented_defaults() -> None:
    job = JobCreate.model_validate(job_body())

    assert job.priority is Priority.NORMAL
    assert job.retry == RetryPolicy(max_attempts=3, backoff_seconds=10, max_backoff_seconds=3_600)
    assert job.payload is None
    assert isinstance(job.target, HttpTarget)
    assert job.target.method == "POST"
    assert job.target.headers == {}
    assert job.target.timeout_seconds == 10


def test_payload_may_be_any_json() -> None:
    payload = {"report": "daily", "ids": [1, 2, 3], "nested": {"ok": True, "none": None}}

    assert JobCreate.model_validate(job_body(payload=payload)).payload == payload


@pytest.mark.parametrize("number", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize("where", ["top", "list", "object"])
def test_payload_numbers_must_be_finite(number: float, where: str) -> None:
    payload = {"top": number, "list": [1, [2.5, number]], "object": {"a": {"b": number}}}[where]

    with pytest.raises(ValidationError, match="NaN and Infinity are not JSON") as exc:
        JobCreate.model_validate(job_body(payload=payload))
    assert error_locs(exc) == [("payload",)]


def test_an_unknown_top_level_field_is_rejected() -> None:
    assert rejects(job_body(colour="blue")) == [("colour",)]


def test_an_unknown_schedule_field_is_rejected() -> None:
    assert rejects(job_body(schedule={"cron": "* * * * *", "timezone_name": "UTC"})) == [
        ("schedule", "timezone_name")
    ]


def test_an_unknown_target_field_is_rejected() -> None:
    target = {"type": "HTTP", "url": "https://example.com", "verb": "POST"}

    assert rejects(job_body(target=target)) == [("target", "HTTP", "verb")]


def test_an_unknown_retry_field_is_rejected() -> None:
    assert rejects(job_body(retry={"tries": 5})) == [("retry", "tries")]


@pytest.mark.parametrize("missing", ["name", "schedule", "target"])
def test_name_schedule_and_target_are_required(missing: str) -> None:
    body = job_body()
    del body[missing]

    assert rejects(body) == [(missing,)]


def test_an_empty_name_is_rejected() -> None:
    assert rejects(job_body(name="")) == [("name",)]


# --- targets: discriminated by type ---------------------------------------------------


def test_target_type_selects_the_target_model() -> None:
    queue_url = "https://sqs.eu-west-1.amazonaws.com/123456789012/work"
    job = JobCreate.model_validate(job_body(target={"type": "SQS", "queue_url": queue_url}))

    assert job.target == SqsTarget(type="SQS", queue_url=queue_url)


def test_an_unknown_target_type_is_reported_at_the_target() -> None:
    with pytest.raises(ValidationError) as exc:
        JobCreate.model_validate(job_body(target={"type": "FTP", "url": "ftp://example.com"}))

    [error] = exc.value.errors()
    assert error["loc"] == ("target",)
    assert error["type"] == "union_tag_invalid"


def test_a_target_without_a_type_is_reported_at_the_target() -> None:
    with pytest.raises(ValidationError) as exc:
        JobCreate.model_validate(job_body(target={"url": "https://example.com"}))

    [error] = exc.value.errors()
    assert error["loc"] == ("target",)
    assert error["type"] == "union_tag_not_found"


@pytest.mark.parametrize(
    "url",
    ["ftp://example.com/file", "not a url", "http://", "https://", "/relative/path", "example.com/hook"],
)
def test_http_target_url_must_be_an_absolute_http_or_https_url(url: str) -> None:
    assert rejects(job_body(target={"type": "HTTP", "url": url})) == [("target", "HTTP", "url")]


@pytest.mark.parametrize(
    "url", ["http://localhost:8080/hook", "https://example.com/a/b?c=1", "HTTPS://EXAMPLE.COM"]
)
def test_http_target_accepts_http_and_https_urls(url: str) -> None:
    job = JobCreate.model_validate(job_body(target={"type": "HTTP", "url": url}))

    assert isinstance(job.target, HttpTarget)
    assert job.target.url == url


def test_sqs_target_queue_url_must_be_an_http_url() -> None:
    assert rejects(job_body(target={"type": "SQS", "queue_url": "work-queue"})) == [
        ("target", "SQS", "queue_url")
    ]


@pytest.mark.parametrize("timeout", [0, -1, 61])
def test_http_target_timeout_is_within_zero_and_sixty_seconds(timeout: float) -> None:
    target = {"type": "HTTP", "url": "https://example.com", "timeout_seconds": timeout}

    assert rejects(job_body(target=target)) == [("target", "HTTP", "timeout_seconds")]


def test_http_target_method_is_an_http_verb() -> None:
    target = {"type": "HTTP", "url": "https://example.com", "method": "FETCH"}

    assert rejects(job_body(target=target)) == [("target", "HTTP", "method")]


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        pytest.param("http://h/a b", "whitespace", id="space"),
        pytest.param("http://h/a\tb", "whitespace", id="tab"),
        pytest.param("http://h/a\x00b", "control characters", id="NUL"),
        pytest.param("http://h/\x7f", "control characters", id="DEL"),
        pytest.param("http://h/ä", "percent-encode other characters (ä is %C3%A4)", id="non-ASCII path"),
        pytest.param("http://bücher.example/", "must be ASCII", id="non-ASCII host"),
        pytest.param("http://h:abc/", "port", id="non-numeric port"),
        pytest.param("http://h:99999/", "port", id="port too large"),
        pytest.param("http://h:0/", "port", id="port zero"),
        pytest.param("http://h:-1/", "port", id="negative port"),
        pytest.param("http://:8080/", "host", id="no host"),
        pytest.param("http://user:secret@h/", "credentials in a header", id="credentials"),
        pytest.param("http://h%00x/", "not a valid DNS name", id="percent in host"),
        pytest.param("http://" + "a" * 64 + ".example/", "not a valid DNS name", id="label over 63"),
        pytest.param("http://a..b/", "not a valid DNS name", id="empty label"),
        pytest.param("http://[not-ipv6]/", "not a valid URL", id="bad IPv6 literal"),
    ],
)
def test_http_target_url_must_be_deliverable_as_it_is(url: str, reason: str) -> None:
    with pytest.raises(ValidationError, match=re.escape(reason)) as exc:
        JobCreate.model_validate(job_body(target={"type": "HTTP", "url": url}))
    assert error_locs(exc) == [("target", "HTTP", "url")]


def test_http_target_url_is_at_most_2048_characters() -> None:
    base = "https://example.com/"
    longest = base + "a" * (2048 - len(base))

    assert JobCreate.model_validate(job_body(target={"type": "HTTP", "url": longest}))
    assert rejects(job_body(target={"type": "HTTP", "url": longest + "a"})) == [("target", "HTTP", "url")]


@pytest.mark.parametrize(
    "url",
    [
        "http://h:1/",
        "http://h:65535/",
        "http://h:/",
        "http://127.0.0.1:8080/hook",
        "http://[::1]:8080/hook",
        "https://api.example.com./v1/hook?x=%20y&z=%C3%A4#frag",
        "http://my_host/",
    ],
)
def test_http_target_accepts_ports_ip_literals_and_percent_encoding(url: str) -> None:
    assert JobCreate.model_validate(job_body(target={"type": "HTTP", "url": url}))


def http_headers(headers: dict[str, str]) -> list[tuple[int | str, ...]]:
    return rejects(job_body(target={"type": "HTTP", "url": "https://example.com", "headers": headers}))


def test_http_target_accepts_ordinary_headers() -> None:
    headers = {"Authorization": "Bearer abc.def", "X-Trace": "a\tb", "Accept-Language": "fr-CH, de;q=0.9 é"}
    target = {"type": "HTTP", "url": "https://example.com", "headers": headers}

    job = JobCreate.model_validate(job_body(target=target))

    assert isinstance(job.target, HttpTarget)
    assert job.target.headers == headers


@pytest.mark.parametrize("name", ["X Custom", "X:Custom", "", "X-Ümlaut", "X-Custom\r\n", "(comment)", "X/Y"])
def test_a_header_name_must_be_an_http_token(name: str) -> None:
    with pytest.raises(ValidationError, match="HTTP token"):
        JobCreate.model_validate(
            job_body(target={"type": "HTTP", "url": "https://x.example", "headers": {name: "1"}})
        )
    assert http_headers({name: "1"}) == [("target", "HTTP", "headers", name, "[key]")]


@pytest.mark.parametrize(
    ("name", "owner"),
    [
        ("Content-Length", "HTTP client"),
        ("content-length", "HTTP client"),
        ("Host", "HTTP client"),
        ("Transfer-Encoding", "HTTP client"),
        ("CONNECTION", "HTTP client"),
        ("Idempotency-Key", "scheduler"),
        ("X-Scheduler-Run-Id", "scheduler"),
        ("x-scheduler-anything", "scheduler"),
    ],
)
def test_headers_the_scheduler_or_http_sets_are_refused_with_the_reason(name: str, owner: str) -> None:
    with pytest.raises(ValidationError, match=f"is set by the {owner}") as exc:
        JobCreate.model_validate(
            job_body(target={"type": "HTTP", "url": "https://x.example", "headers": {name: "1"}})
        )
    assert error_locs(exc) == [("target", "HTTP", "headers", name, "[key]")]


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("a\r\nInjected: 1", "CR, LF, NUL"),
        ("a\nb", "CR, LF, NUL"),
        ("a\x00b", "CR, LF, NUL"),
        ("5 €", "Latin-1"),
        ("x" * 4097, "at most 4096 characters"),
    ],
)
def test_a_header_value_must_be_sendable(value: str, reason: str) -> None:
    with pytest.raises(ValidationError, match=re.escape(reason)):
        JobCreate.model_validate(
            job_body(target={"type": "HTTP", "url": "https://x.example", "headers": {"X-Note": value}})
        )
    assert http_headers({"X-Note": value}) == [("target", "HTTP", "headers", "X-Note")]


def test_a_target_has_at_most_50_headers() -> None:
    fifty = {f"X-H{i}": "v" for i in range(50)}
    target = {"type": "HTTP", "url": "https://x.example", "headers": fifty}

    assert JobCreate.model_validate(job_body(target=target))
    assert http_headers({**fifty, "X-H50": "v"}) == [("target", "HTTP", "headers")]


@pytest.mark.parametrize(
    "queue_url",
    [
        "https://sqs.us-east-1.amazonaws.com/123456789012/orders.fifo",
        "https://sqs.us-east-1.amazonaws.com/123456789012/orders.fifo/",
    ],
)
def test_a_fifo_queue_target_is_accepted_and_known_as_fifo(queue_url: str) -> None:
    job = JobCreate.model_validate(job_body(target={"type": "SQS", "queue_url": queue_url}))
    assert isinstance(job.target, SqsTarget)
    assert job.target.fifo


def test_target_types_are_the_tags_of_the_target_models() -> None:
    assert TARGET_TYPES == ("HTTP", "SQS", "SNS", "EVENTBRIDGE", "LAMBDA")


# --- priority and retry ------------------------------------------------------------------


@pytest.mark.parametrize("priority", ["HIGH", "NORMAL", "LOW"])
def test_priority_takes_the_three_upper_case_levels(priority: str) -> None:
    assert JobCreate.model_validate(job_body(priority=priority)).priority == Priority(priority)


@pytest.mark.parametrize("priority", ["URGENT", "high", ""])
def test_priority_rejects_anything_else(priority: str) -> None:
    assert rejects(job_body(priority=priority)) == [("priority",)]


def test_retry_defaults_to_three_attempts() -> None:
    assert RetryPolicy().max_attempts == 3


def test_a_partial_retry_policy_keeps_the_other_defaults() -> None:
    retry = JobCreate.model_validate(job_body(retry={"max_attempts": 5})).retry

    assert (retry.max_attempts, retry.backoff_seconds, retry.max_backoff_seconds) == (5, 10, 3_600)


@pytest.mark.parametrize(
    ("retry", "field"),
    [
        ({"max_attempts": 0}, "max_attempts"),
        ({"max_attempts": 21}, "max_attempts"),
        ({"backoff_seconds": 0}, "backoff_seconds"),
    ],
)
def test_retry_limits_are_enforced(retry: dict[str, int], field: str) -> None:
    assert rejects(job_body(retry=retry)) == [("retry", field)]


# --- Job and Run as the API returns them -----------------------------------------------------


def make_job(**overrides: Any) -> Job:
    fields: dict[str, Any] = {
        "job_id": "job-1",
        "tenant": "tenant-a",
        "name": "nightly-report",
        "status": JobStatus.SCHEDULED,
        "schedule": ScheduleSpec(cron="0 2 * * *"),
        "target": HttpTarget(type="HTTP", url="https://example.com/hook"),
        "payload": {"k": "v"},
        "priority": Priority.HIGH,
        "retry": RetryPolicy(),
        "next_fire_at": datetime(2030, 1, 2, 2, 0, tzinfo=UTC),
        "created_at": datetime(2030, 1, 1, 12, 0, 0, 123_456, tzinfo=UTC),
        "updated_at": datetime(2030, 1, 1, 14, 30, tzinfo=timezone(timedelta(hours=2))),
        "version": 4,
    }
    fields.update(overrides)
    return Job(**fields)


def test_job_in_the_api_omits_the_tenant() -> None:
    assert "tenant" not in make_job().to_api()


def test_job_in_the_api_has_the_documented_fields() -> None:
    body = make_job().to_api()

    assert {"job_id", "name", "status", "schedule", "target", "payload", "priority"} <= body.keys()
    assert {"next_fire_at", "created_at", "version"} <= body.keys()
    assert (body["status"], body["priority"], body["version"]) == ("SCHEDULED", "HIGH", 4)
    assert body["target"]["type"] == "HTTP"
    assert body["payload"] == {"k": "v"}


def test_job_times_in_the_api_are_utc_iso_8601_with_milliseconds_and_z() -> None:
    body = make_job().to_api()

    assert body["next_fire_at"] == "2030-01-02T02:00:00.000Z"
    assert body["created_at"] == "2030-01-01T12:00:00.123Z"
    assert body["updated_at"] == "2030-01-01T12:30:00.000Z"


def test_job_without_a_next_firing_shows_null() -> None:
    assert make_job(next_fire_at=None).to_api()["next_fire_at"] is None


def test_the_at_of_a_one_off_job_uses_the_api_time_format() -> None:
    body = make_job(schedule=ScheduleSpec(at=datetime(2030, 6, 1, 8, 0))).to_api()

    assert body["schedule"]["at"] == "2030-06-01T08:00:00.000Z"


def test_run_in_the_api_uses_the_api_time_format() -> None:
    run = Run(
        run_id="job-1:1893456000000",
        job_id="job-1",
        status=RunStatus.SUCCEEDED,
        trigger=Trigger.SCHEDULE,
        scheduled_for=datetime(2030, 1, 1, tzinfo=UTC),
        priority=Priority.NORMAL,
        started_at=datetime(2030, 1, 1, 0, 0, 0, 42_999, tzinfo=UTC),
        finished_at=datetime(2030, 1, 1, 3, 0, 1, tzinfo=timezone(timedelta(hours=3))),
        lateness_ms=42,
    )

    body = run.to_api()

    assert body["scheduled_for"] == "2030-01-01T00:00:00.000Z"
    assert body["started_at"] == "2030-01-01T00:00:00.042Z"
    assert body["finished_at"] == "2030-01-01T00:00:01.000Z"
    assert (body["status"], body["trigger"], body["attempt"], body["error"]) == (
        "SUCCEEDED",
        "SCHEDULE",
        1,
        None,
    )


def test_a_run_not_started_shows_null_times() -> None:
    run = Run(
        run_id="job-1:0",
        job_id="job-1",
        status=RunStatus.PENDING,
        trigger=Trigger.MANUAL,
        scheduled_for=datetime(1970, 1, 1, tzinfo=UTC),
        priority=Priority.LOW,
    )

    body = run.to_api()

    assert body["scheduled_for"] == "1970-01-01T00:00:00.000Z"
    assert (body["started_at"], body["finished_at"]) == (None, None)


def test_iso_or_none_converts_offsets_to_z() -> None:
    when = datetime(2030, 1, 1, 1, 0, tzinfo=timezone(timedelta(hours=1)))

    assert iso_or_none(when) == "2030-01-01T00:00:00.000Z"
    assert iso_or_none(None) is None


# --- RunMessage: what the queues carry -----------------------------------------------


MESSAGE = {
    "job_id": "job-1",
    "run_id": "job-1:1893456000000",
    "scheduled_for_ms": 1_893_456_000_000,
    "attempt": 1,
}


def test_a_run_message_round_trips_through_json() -> None:
    message = RunMessage.model_validate(MESSAGE)

    assert RunMessage.model_validate_json(message.model_dump_json()) == message


@pytest.mark.parametrize("missing", sorted(MESSAGE))
def test_a_run_message_missing_a_field_is_rejected(missing: str) -> None:
    body = {k: v for k, v in MESSAGE.items() if k != missing}

    with pytest.raises(ValidationError) as exc:
        RunMessage.model_validate(body)
    assert error_locs(exc) == [(missing,)]


def test_a_run_message_with_an_extra_field_is_rejected() -> None:
    with pytest.raises(ValidationError) as exc:
        RunMessage.model_validate({**MESSAGE, "payload": {"big": "blob"}})
    assert error_locs(exc) == [("payload",)]


@pytest.mark.parametrize(
    ("field", "value"), [("attempt", 0), ("scheduled_for_ms", -1), ("job_id", ""), ("run_id", "")]
)
def test_a_run_message_with_an_out_of_range_field_is_rejected(field: str, value: object) -> None:
    with pytest.raises(ValidationError) as exc:
        RunMessage.model_validate({**MESSAGE, field: value})
    assert error_locs(exc) == [(field,)]
