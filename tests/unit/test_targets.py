"""Delivering a run to its target (DESIGN §7): what each HTTP outcome and AWS error means for
the run, what every delivery carries, and that delivery answers instead of raising."""

from __future__ import annotations

import hashlib
import json
import socket
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any, cast

import boto3
import pytest
from botocore.exceptions import ClientError, EndpointConnectionError, ParamValidationError

from scheduler_core.adapters.aws import AwsClients
from scheduler_core.adapters.aws_errors import (
    FINAL_AWS_CODES,
    RETRYABLE_AWS_CODES,
    aws_error_retryable,
    aws_failure,
)
from scheduler_core.adapters.http_client import GuardedHttp
from scheduler_core.adapters.targets import TargetDelivery, message_json, run_event
from scheduler_core.domain.addresses import LOCAL_CLOUD_NETWORKS, AddressPolicy
from scheduler_core.domain.entities import Job, Run
from scheduler_core.domain.messages import fifo_id
from scheduler_core.domain.policies import RetryPolicy
from scheduler_core.domain.schedule import ScheduleSpec
from scheduler_core.domain.target_spec import EventBridgeTarget, HttpTarget, SnsTarget, SqsTarget, Target
from scheduler_core.domain.vocabulary import JobStatus, Priority, RunStatus, Trigger
from scheduler_core.ports import Delivery
from tests.support.receiver import WebhookReceiver

SCHEDULED_FOR = datetime(2030, 1, 1, 9, 30, 0, 250_000, tzinfo=UTC)
RUN = Run(
    run_id="job-1:1893490200250",
    job_id="job-1",
    status=RunStatus.RUNNING,
    trigger=Trigger.SCHEDULE,
    scheduled_for=SCHEDULED_FOR,
    attempt=2,
    priority=Priority.NORMAL,
)


def http_job(url: str, **target: Any) -> Job:
    return make_job(HttpTarget.model_validate({"type": "HTTP", "url": url, **target}))


def make_job(target: Target, payload: Any = None) -> Job:
    return Job(
        job_id="job-1",
        tenant="tenant-a",
        name="report",
        status=JobStatus.SCHEDULED,
        schedule=ScheduleSpec(cron="* * * * *"),
        target=target,
        payload={"report": "daily"} if payload is None else payload,
        priority=Priority.NORMAL,
        retry=RetryPolicy(),
        next_fire_at=None,
        created_at=SCHEDULED_FOR,
        updated_at=SCHEDULED_FOR,
    )


def unvalidated_job(url: str, headers: dict[str, str] | None = None) -> Job:
    """A job validation would refuse (stored by an older version, or let through by a bug)."""
    target = HttpTarget.model_construct(
        type="HTTP", url=url, method="POST", headers=headers or {}, timeout_seconds=2
    )
    return make_job(HttpTarget(type="HTTP", url="http://x/")).model_copy(update={"target": target})


@pytest.fixture(scope="module")
def server() -> Iterator[WebhookReceiver]:
    with WebhookReceiver() as running:
        yield running


@pytest.fixture
def receiver(server: WebhookReceiver) -> WebhookReceiver:
    """The module's receiver, with no requests recorded yet (stopping one takes 0.5 s)."""
    server.requests.clear()
    return server


@pytest.fixture
def targets() -> TargetDelivery:
    # The receiver listens on loopback, which a deployment must allow (the local cloud does).
    http = GuardedHttp(AddressPolicy(LOCAL_CLOUD_NETWORKS))
    return TargetDelivery(AwsClients(boto3.session.Session(region_name="us-east-1")), http)


# --- HTTP outcomes ------------------------------------------------------------------------


@pytest.mark.parametrize("status", [200, 201, 202, 204])
def test_a_2xx_answer_is_a_success(targets: TargetDelivery, receiver: WebhookReceiver, status: int) -> None:
    receiver.respond_with(status)

    delivery = targets.deliver(http_job(receiver.url), RUN)

    assert (delivery.ok, delivery.status_code, delivery.error) == (True, status, None)


@pytest.mark.parametrize("status", [400, 401, 403, 404, 410, 422])
def test_a_4xx_answer_fails_for_good(targets: TargetDelivery, receiver: WebhookReceiver, status: int) -> None:
    receiver.respond_with(status)

    delivery = targets.deliver(http_job(receiver.url), RUN)

    assert (delivery.ok, delivery.status_code, delivery.retryable) == (False, status, False)
    assert f"HTTP {status}" in (delivery.error or "")


@pytest.mark.parametrize("status", [408, 429, 500, 502, 503, 504])
def test_408_429_and_5xx_answers_are_worth_retrying(
    targets: TargetDelivery, receiver: WebhookReceiver, status: int
) -> None:
    receiver.respond_with(status)

    delivery = targets.deliver(http_job(receiver.url), RUN)

    assert (delivery.ok, delivery.status_code, delivery.retryable) == (False, status, True)


def test_a_target_slower_than_the_timeout_is_worth_retrying(targets: TargetDelivery) -> None:
    with WebhookReceiver() as slow:  # its own: the held request finishes after the test
        slow.hold_seconds = 1.0

        delivery = targets.deliver(http_job(slow.url, timeout_seconds=0.2), RUN)

    assert (delivery.ok, delivery.retryable) == (False, True)
    assert "did not answer within 0.2s" in (delivery.error or "")


def test_a_refused_connection_is_worth_retrying(targets: TargetDelivery) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]

    delivery = targets.deliver(http_job(f"http://127.0.0.1:{port}/hook", timeout_seconds=2), RUN)

    assert (delivery.ok, delivery.status_code, delivery.retryable) == (False, None, True)
    assert "cannot reach" in (delivery.error or "")


# --- what is sent -------------------------------------------------------------------------


def test_the_payload_is_posted_as_json_with_the_scheduler_headers(
    targets: TargetDelivery, receiver: WebhookReceiver
) -> None:
    targets.deliver(http_job(receiver.url, headers={"Authorization": "Bearer t0ken"}), RUN)

    [request] = receiver.requests
    assert (request.method, request.path, request.body) == ("POST", "/hook", {"report": "daily"})
    assert request.headers["content-type"] == "application/json"
    assert request.headers["authorization"] == "Bearer t0ken"
    assert request.headers["idempotency-key"] == RUN.run_id
    assert request.headers["x-scheduler-job-id"] == "job-1"
    assert request.headers["x-scheduler-run-id"] == RUN.run_id
    assert request.headers["x-scheduler-scheduled-for"] == "2030-01-01T09:30:00.250Z"
    assert request.headers["x-scheduler-attempt"] == "2"


def test_a_job_cannot_override_the_scheduler_headers(
    targets: TargetDelivery, receiver: WebhookReceiver
) -> None:
    forged = {
        "idempotency-key": "forged",
        "X-SCHEDULER-RUN-ID": "forged",
        "X-Scheduler-Attempt": "99",
        "x-scheduler-extra": "forged",
        "X-Custom": "kept",
    }

    delivery = targets.deliver(unvalidated_job(receiver.url, headers=forged), RUN)

    assert delivery.ok, delivery.error
    [request] = receiver.requests
    assert request.headers["idempotency-key"] == RUN.run_id
    assert request.headers["x-scheduler-run-id"] == RUN.run_id
    assert request.headers["x-scheduler-attempt"] == "2"
    assert "x-scheduler-extra" not in request.headers
    assert request.headers["x-custom"] == "kept"


def test_a_get_sends_no_body(targets: TargetDelivery, receiver: WebhookReceiver) -> None:
    delivery = targets.deliver(http_job(receiver.url, method="GET"), RUN)

    assert delivery.ok
    [request] = receiver.requests
    assert (request.method, request.body) == ("GET", None)
    assert request.headers.get("content-length", "0") == "0"
    assert request.headers["idempotency-key"] == RUN.run_id


@pytest.mark.parametrize("method", ["PUT", "PATCH", "DELETE"])
def test_other_methods_send_the_payload(
    targets: TargetDelivery, receiver: WebhookReceiver, method: str
) -> None:
    targets.deliver(http_job(receiver.url, method=method), RUN)

    [request] = receiver.requests
    assert (request.method, request.body) == (method, {"report": "daily"})


# --- delivery never raises ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "headers"),
    [
        pytest.param("http://127.0.0.1:9/a b", {}, id="space in the path"),
        pytest.param("http://127.0.0.1:9/ä", {}, id="non-ASCII path"),
        pytest.param("http://127.0.0.1:abc/", {}, id="non-numeric port"),
        pytest.param("http://" + "a" * 64 + ".example/", {}, id="DNS label too long"),
        pytest.param("http://127.0.0.1:9/", {"X-Note": "a\r\nInjected: 1"}, id="CR LF in a header value"),
        pytest.param("http://127.0.0.1:9/", {"X-Price": "5 €"}, id="non-Latin-1 header value"),
        pytest.param("http://127.0.0.1:9/", {"X:Y": "1"}, id="colon in a header name"),
    ],
)
def test_a_target_that_makes_the_http_client_raise_is_a_final_failure(
    targets: TargetDelivery, url: str, headers: dict[str, str]
) -> None:
    delivery = targets.deliver(unvalidated_job(url, headers), RUN)

    assert (delivery.ok, delivery.retryable) == (False, False)
    assert delivery.error
    assert ": " in delivery.error  # "<exception type>: <message>"


def test_an_sqs_client_that_raises_is_a_final_failure() -> None:
    class BrokenClients:
        def sqs(self) -> Any:
            raise RuntimeError("no SQS client today")

    targets = TargetDelivery(cast(AwsClients, BrokenClients()))
    job = make_job(SqsTarget(type="SQS", queue_url="https://sqs.us-east-1.amazonaws.com/123456789012/work"))

    delivery = targets.deliver(job, RUN)

    assert delivery == Delivery(ok=False, error="RuntimeError: no SQS client today", retryable=False)


# --- AWS targets: the one retry classification -----------------------------------------------


def client_error(code: str, status: int | None = 400, operation: str = "Publish") -> ClientError:
    response: dict[str, Any] = {"Error": {"Code": code, "Message": "the reason"}}
    if status is not None:
        response["ResponseMetadata"] = {"HTTPStatusCode": status}
    return ClientError(response, operation)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("code", "status"),
    [
        pytest.param("RequestThrottled", 400, id="SQS throttling"),
        pytest.param("KmsThrottled", 400, id="SQS KMS throttling"),
        pytest.param("Throttling", 400, id="SNS throttling"),
        pytest.param("KMSThrottling", 400, id="SNS KMS throttling"),
        pytest.param("ThrottlingException", 400, id="EventBridge throttling"),
        pytest.param("ThrottlingException", None, id="EventBridge entry throttled"),
        pytest.param("InternalFailure", None, id="EventBridge entry internal failure"),
        pytest.param("TooManyRequestsException", 429, id="Lambda throttling"),
        pytest.param("EC2ThrottledException", 502, id="Lambda EC2 throttling"),
        pytest.param("ResourceNotReadyException", 502, id="Lambda function not ready"),
        pytest.param("ResourceConflictException", 409, id="Lambda function being updated"),
        pytest.param("ServiceUnavailable", 503, id="service unavailable"),
        pytest.param("InternalError", 500, id="SNS internal error"),
        pytest.param("ServiceException", 500, id="Lambda service exception"),
        pytest.param("SomethingNew", 503, id="unknown code with a 5xx"),
        pytest.param("SomethingNew", 429, id="unknown code with 429"),
    ],
)
def test_throttling_and_service_faults_of_aws_targets_are_worth_retrying(
    code: str, status: int | None
) -> None:
    assert aws_error_retryable(code, status)


@pytest.mark.parametrize(
    ("code", "status"),
    [
        pytest.param("QueueDoesNotExist", 400, id="SQS queue missing (JSON protocol)"),
        pytest.param("AWS.SimpleQueueService.NonExistentQueue", 400, id="SQS queue missing (query protocol)"),
        pytest.param("NotFound", 404, id="SNS topic missing"),
        pytest.param("ResourceNotFoundException", 400, id="event bus missing"),
        pytest.param("ResourceNotFoundException", 404, id="Lambda function missing"),
        pytest.param("AccessDenied", 403, id="SQS access denied"),
        pytest.param("AuthorizationError", 403, id="SNS access denied"),
        pytest.param("AccessDeniedException", 400, id="EventBridge access denied"),
        pytest.param("AccessDeniedException", None, id="EventBridge entry access denied"),
        pytest.param("NotAuthorizedForSourceException", None, id="EventBridge entry source not allowed"),
        pytest.param("KMSAccessDeniedException", 502, id="Lambda KMS access denied, a 502"),
        pytest.param("InvalidSubnetIDException", 502, id="Lambda VPC misconfigured, a 502"),
        pytest.param("InvalidParameter", 400, id="SNS invalid parameter"),
        pytest.param("MalformedDetail", None, id="EventBridge entry malformed"),
        pytest.param("RequestTooLargeException", 413, id="Lambda event too large"),
        pytest.param("SomethingNew", 400, id="unknown code with a 4xx"),
        pytest.param("SomethingNew", None, id="unknown code without a status"),
    ],
)
def test_a_missing_forbidden_or_refused_aws_target_fails_at_once(code: str, status: int | None) -> None:
    assert not aws_error_retryable(code, status)


def test_no_code_is_both_retryable_and_final() -> None:
    assert not RETRYABLE_AWS_CODES & FINAL_AWS_CODES


def test_an_aws_error_becomes_a_failed_delivery_naming_the_service_and_code() -> None:
    throttled = aws_failure("SNS", client_error("Throttling"))
    missing = aws_failure("Lambda", client_error("ResourceNotFoundException", 404, "Invoke"))

    assert (throttled.ok, throttled.retryable) == (False, True)
    assert (throttled.error or "").startswith("SNS Throttling: ")
    assert (missing.ok, missing.retryable) == (False, False)
    assert (missing.error or "").startswith("Lambda ResourceNotFoundException: ")


def test_an_unreachable_aws_endpoint_is_worth_retrying_a_request_botocore_refuses_is_not() -> None:
    unreachable = aws_failure("SQS", EndpointConnectionError(endpoint_url="https://sqs.example"))
    refused = aws_failure("SNS", ParamValidationError(report="Invalid length for parameter MessageGroupId"))

    assert (unreachable.retryable, refused.retryable) == (True, False)
    assert "unreachable" in (unreachable.error or "")
    assert "request refused" in (refused.error or "")


# --- what AWS targets are sent ---------------------------------------------------------------

METADATA = {
    "job_id": "job-1",
    "run_id": RUN.run_id,
    "scheduled_for": "2030-01-01T09:30:00.250Z",
    "attempt": 2,
}
BUS = EventBridgeTarget(type="EVENTBRIDGE", event_bus_name="default", source="com.example", detail_type="T")


@pytest.mark.parametrize(
    ("payload", "event"),
    [
        pytest.param(
            {"report": "daily"}, {"report": "daily", "scheduler": METADATA}, id="object: its fields"
        ),
        pytest.param([1, 2], {"payload": [1, 2], "scheduler": METADATA}, id="list: under payload"),
        pytest.param("hello", {"payload": "hello", "scheduler": METADATA}, id="string: under payload"),
        pytest.param(0, {"payload": 0, "scheduler": METADATA}, id="zero: under payload"),
        pytest.param(False, {"payload": False, "scheduler": METADATA}, id="false: under payload"),
        pytest.param({}, {"scheduler": METADATA}, id="empty object"),
    ],
)
def test_the_event_of_eventbridge_and_lambda_targets_is_always_an_object(payload: Any, event: Any) -> None:
    assert run_event(make_job(BUS, payload=payload), RUN) == event


def test_the_event_without_a_payload_holds_the_run_ids_only() -> None:
    job = make_job(BUS).model_copy(update={"payload": None})

    assert run_event(job, RUN) == {"scheduler": METADATA}


def test_the_schedulers_ids_win_over_a_payload_key_validation_would_refuse() -> None:
    job = make_job(BUS, payload={"scheduler": "forged", "x": 1})

    assert run_event(job, RUN) == {"scheduler": METADATA, "x": 1}


@pytest.mark.parametrize(
    "value", ["job-1", "a1b2c3:1893490200250", "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", "x" * 128]
)
def test_an_id_sqs_and_sns_accept_is_used_as_it_is(value: str) -> None:
    assert fifo_id(value) == value


@pytest.mark.parametrize("value", ["x" * 129, "with space", "ünïcode", "tab\there", ""])
def test_any_other_id_becomes_its_sha256(value: str) -> None:
    assert fifo_id(value) == hashlib.sha256(value.encode()).hexdigest()
    assert fifo_id(value) != fifo_id(value + "!")


def test_messages_are_compact_json_keeping_non_ascii_text() -> None:
    assert message_json({"text": "中文 é", "n": [1, 2]}) == '{"text":"中文 é","n":[1,2]}'


def test_characters_sqs_refuses_in_a_message_stay_escaped() -> None:
    text = message_json({"s": "a\ud800b\uffffc\x01"})

    assert text == '{"s":"a\\ud800b\\uffffc\\u0001"}'
    assert json.loads(text) == {"s": "a\ud800b\uffffc\x01"}


def test_a_client_that_raises_for_any_aws_target_is_a_final_failure() -> None:
    class BrokenClients:
        def sns(self, region: str | None = None) -> Any:
            raise RuntimeError("no SNS client today")

    targets = TargetDelivery(cast(AwsClients, BrokenClients()))
    job = make_job(SnsTarget(type="SNS", topic_arn="arn:aws:sns:us-east-1:123456789012:t"))

    assert targets.deliver(job, RUN) == Delivery(ok=False, error="RuntimeError: no SNS client today")
