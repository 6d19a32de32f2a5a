"""Delivering a run to its target (DESIGN §7): what each HTTP outcome means for the run, the
headers every delivery carries, and that delivery answers instead of raising."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any, cast

import boto3
import pytest

from scheduler_core.aws import AwsClients
from scheduler_core.model import (
    HttpTarget,
    Job,
    JobStatus,
    Priority,
    RetryPolicy,
    Run,
    RunStatus,
    ScheduleSpec,
    SqsTarget,
    Trigger,
)
from scheduler_core.ports import Delivery
from scheduler_core.targets import TargetDispatcher
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


def make_job(target: HttpTarget | SqsTarget, payload: Any = None) -> Job:
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
def targets() -> TargetDispatcher:
    return TargetDispatcher(AwsClients(boto3.session.Session(region_name="us-east-1")))


# --- HTTP outcomes ------------------------------------------------------------------------


@pytest.mark.parametrize("status", [200, 201, 202, 204])
def test_a_2xx_answer_is_a_success(targets: TargetDispatcher, receiver: WebhookReceiver, status: int) -> None:
    receiver.respond_with(status)

    delivery = targets.deliver(http_job(receiver.url), RUN)

    assert (delivery.ok, delivery.status_code, delivery.error) == (True, status, None)


@pytest.mark.parametrize("status", [400, 401, 403, 404, 410, 422])
def test_a_4xx_answer_fails_for_good(
    targets: TargetDispatcher, receiver: WebhookReceiver, status: int
) -> None:
    receiver.respond_with(status)

    delivery = targets.deliver(http_job(receiver.url), RUN)

    assert (delivery.ok, delivery.status_code, delivery.retryable) == (False, status, False)
    assert f"HTTP {status}" in (delivery.error or "")


@pytest.mark.parametrize("status", [408, 429, 500, 502, 503, 504])
def test_408_429_and_5xx_answers_are_worth_retrying(
    targets: TargetDispatcher, receiver: WebhookReceiver, status: int
) -> None:
    receiver.respond_with(status)

    delivery = targets.deliver(http_job(receiver.url), RUN)

    assert (delivery.ok, delivery.status_code, delivery.retryable) == (False, status, True)


def test_a_target_slower_than_the_timeout_is_worth_retrying(targets: TargetDispatcher) -> None:
    with WebhookReceiver() as slow:  # its own: the held request finishes after the test
        slow.hold_seconds = 1.0

        delivery = targets.deliver(http_job(slow.url, timeout_seconds=0.2), RUN)

    assert (delivery.ok, delivery.retryable) == (False, True)
    assert "timed out" in (delivery.error or "")


def test_a_refused_connection_is_worth_retrying(targets: TargetDispatcher) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]

    delivery = targets.deliver(http_job(f"http://127.0.0.1:{port}/hook", timeout_seconds=2), RUN)

    assert (delivery.ok, delivery.status_code, delivery.retryable) == (False, None, True)
    assert "cannot reach" in (delivery.error or "")


# --- what is sent -------------------------------------------------------------------------


def test_the_payload_is_posted_as_json_with_the_scheduler_headers(
    targets: TargetDispatcher, receiver: WebhookReceiver
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
    targets: TargetDispatcher, receiver: WebhookReceiver
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


def test_a_get_sends_no_body(targets: TargetDispatcher, receiver: WebhookReceiver) -> None:
    delivery = targets.deliver(http_job(receiver.url, method="GET"), RUN)

    assert delivery.ok
    [request] = receiver.requests
    assert (request.method, request.body) == ("GET", None)
    assert request.headers.get("content-length", "0") == "0"
    assert request.headers["idempotency-key"] == RUN.run_id


@pytest.mark.parametrize("method", ["PUT", "PATCH", "DELETE"])
def test_other_methods_send_the_payload(
    targets: TargetDispatcher, receiver: WebhookReceiver, method: str
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
    targets: TargetDispatcher, url: str, headers: dict[str, str]
) -> None:
    delivery = targets.deliver(unvalidated_job(url, headers), RUN)

    assert (delivery.ok, delivery.retryable) == (False, False)
    assert delivery.error
    assert ": " in delivery.error  # "<exception type>: <message>"


def test_an_sqs_client_that_raises_is_a_final_failure() -> None:
    class BrokenClients:
        def sqs(self) -> Any:
            raise RuntimeError("no SQS client today")

    targets = TargetDispatcher(cast(AwsClients, BrokenClients()))
    job = make_job(SqsTarget(type="SQS", queue_url="https://sqs.us-east-1.amazonaws.com/123456789012/work"))

    delivery = targets.deliver(job, RUN)

    assert delivery == Delivery(ok=False, error="RuntimeError: no SQS client today", retryable=False)
