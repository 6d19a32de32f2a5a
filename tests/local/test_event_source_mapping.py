"""SQS event source mappings as Lambda runs them: partial batch failures delete only what
succeeded; a function error leaves the whole batch on the queue; a batching window gathers
one batch from several receives, beyond SQS's 10 messages a request."""

from __future__ import annotations

import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from infra.local.event_sources import SqsEventSource
from infra.local.functions import FunctionHost, FunctionSpec

# Fails the records whose body is "fail"; raises for a batch containing "crash".
HANDLER = """
def handler(event, context):
    bodies = [r["body"] for r in event["Records"]]
    if "crash" in bodies:
        raise RuntimeError("crash")
    return {"batchItemFailures": [
        {"itemIdentifier": r["messageId"]} for r in event["Records"] if r["body"] == "fail"
    ]}
"""


class MotoClients:
    def __init__(self) -> None:
        self.sqs_calls: list[tuple[str, dict[str, Any]]] = []  # (operation, parameters) as made

    def client(self, service: str) -> Any:
        client = boto3.client(service, region_name="us-east-1")  # type: ignore[call-overload]
        client.meta.events.register("provide-client-params.sqs.*", self._record)
        return client

    def _record(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        self.sqs_calls.append((model.name, dict(params)))

    def requests(self, operation: str) -> list[dict[str, Any]]:
        return [params for name, params in self.sqs_calls if name == operation]


@pytest.fixture
def sqs() -> Iterator[Any]:
    with mock_aws():
        yield boto3.client("sqs", region_name="us-east-1")


@pytest.fixture
def host(tmp_path: Path) -> Iterator[FunctionHost]:
    (tmp_path / "handler.py").write_text(textwrap.dedent(HANDLER))
    spec = FunctionSpec(
        name="consumer",
        arn="arn:aws:lambda:us-east-1:123456789012:function:consumer",
        handler="handler.handler",
        code_dir=tmp_path,
        layer_dirs=(),
        environment={},
        timeout_seconds=10,
        memory_mb=128,
        concurrency=2,
    )
    function = FunctionHost(spec, {"PATH": "/usr/bin:/bin"}, lambda *_: None)
    yield function
    function.stop()


def wait_for(condition: Callable[[], bool], timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def new_mapping(
    sqs: Any,
    host: FunctionHost,
    errors: list[str],
    clients: MotoClients | None = None,
    reports_failures: bool = True,
    **settings: Any,
) -> tuple[SqsEventSource, str]:
    """A queue and a mapping of it, not started; `settings` override the mapping's."""
    url = sqs.create_queue(QueueName="work", Attributes={"VisibilityTimeout": "60"})["QueueUrl"]
    mapping = {
        "EventSourceArn": "arn:aws:sqs:us-east-1:123456789012:work",
        "BatchSize": 10,
        "FunctionResponseTypes": ["ReportBatchItemFailures"] if reports_failures else [],
        "ScalingConfig": {"MaximumConcurrency": 2},
        **settings,
    }
    on_error = lambda where, message: errors.append(message)  # noqa: E731
    return SqsEventSource(clients or MotoClients(), mapping, host, on_error), url


def run_mapping(
    sqs: Any, host: FunctionHost, bodies: list[str], reports_failures: bool = True
) -> tuple[SqsEventSource, str, list[str]]:
    errors: list[str] = []
    source, url = new_mapping(sqs, host, errors, reports_failures=reports_failures)
    for body in bodies:
        sqs.send_message(QueueUrl=url, MessageBody=body)
    source.start()
    left = len(bodies) - expected_deleted(bodies, reports_failures)
    try:
        if "crash" in bodies:  # in flight from the start: wait for the function's answer instead
            wait_for(lambda: bool(errors))
        wait_for(lambda: counts(sqs, url) == (0, left))
    finally:
        source.stop()
    return source, url, errors


def counts(sqs: Any, url: str) -> tuple[int, int]:
    attributes = sqs.get_queue_attributes(
        QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"]), int(
        attributes["ApproximateNumberOfMessagesNotVisible"]
    )


def expected_deleted(bodies: list[str], reports_failures: bool) -> int:
    if "crash" in bodies:
        return 0
    return sum(body != "fail" for body in bodies) if reports_failures else len(bodies)


def test_only_the_records_reported_failed_stay_on_the_queue(sqs: Any, host: FunctionHost) -> None:
    _, url, errors = run_mapping(sqs, host, ["ok", "fail", "ok", "fail", "ok"])
    assert counts(sqs, url) == (0, 2)  # the two failures wait out their visibility timeout
    assert errors == []


def test_a_function_error_leaves_the_whole_batch(sqs: Any, host: FunctionHost) -> None:
    _, url, errors = run_mapping(sqs, host, ["ok", "crash", "ok"])
    assert counts(sqs, url) == (0, 3)
    assert "function error, batch left on the queue" in errors[0]


def test_without_report_batch_item_failures_a_returned_list_is_ignored(sqs: Any, host: FunctionHost) -> None:
    _, url, _ = run_mapping(sqs, host, ["ok", "fail"], reports_failures=False)
    assert counts(sqs, url) == (0, 0)


def test_the_mapping_reads_its_settings_from_the_deployed_mapping(sqs: Any, host: FunctionHost) -> None:
    source, _, _ = run_mapping(sqs, host, ["ok"])
    assert (source.batch_size, source.max_concurrency, source.reports_item_failures) == (10, 2, True)


def test_a_batching_window_gathers_a_batch_above_ten_in_one_invocation(sqs: Any, host: FunctionHost) -> None:
    errors: list[str] = []
    clients = MotoClients()
    source, url = new_mapping(sqs, host, errors, clients, BatchSize=25, MaximumBatchingWindowInSeconds=1)
    batches: list[list[str]] = []
    source.observers.append(lambda _, records: batches.append([r["body"] for r in records]))
    for i in range(25):
        sqs.send_message(QueueUrl=url, MessageBody=f"ok {i}")
    source.start()
    try:
        wait_for(lambda: counts(sqs, url) == (0, 0), timeout=30)  # all 25 deleted
    finally:
        source.stop()
    assert [sorted(batch) for batch in batches] == [sorted(f"ok {i}" for i in range(25))]
    assert errors == []
    assert max(params["MaxNumberOfMessages"] for params in clients.requests("ReceiveMessage")) <= 10
    deleted = [len(params["Entries"]) for params in clients.requests("DeleteMessageBatch")]
    assert sorted(deleted, reverse=True) == [10, 10, 5]


def test_a_batching_window_hands_over_what_came_once_it_has_passed(sqs: Any, host: FunctionHost) -> None:
    errors: list[str] = []
    clients = MotoClients()
    window = 5  # generous: in tests moto answers one request at a time, so a send waits out a long poll
    source, url = new_mapping(sqs, host, errors, clients, BatchSize=25, MaximumBatchingWindowInSeconds=window)
    batches: list[tuple[float, list[str]]] = []  # (when handed over, bodies)
    source.observers.append(
        lambda _, records: batches.append((time.monotonic(), [r["body"] for r in records]))
    )
    source.start()
    try:
        time.sleep(0.5)  # polling an empty queue: no window open, nothing handed over
        assert batches == []
        first_sent = time.monotonic()
        bodies = [f"ok {i}" for i in range(13)]  # more than one receive's 10, fewer than the batch's 25
        for chunk in (bodies[:10], bodies[10:]):
            sqs.send_message_batch(
                QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": body} for i, body in enumerate(chunk)]
            )
        wait_for(lambda: counts(sqs, url) == (0, 0), timeout=30)
    finally:
        source.stop()
    [(handed_over, handed)] = batches  # one invocation, not one a receive
    assert sorted(handed) == sorted(bodies)
    assert handed_over - first_sent >= window  # the window runs from the first message
    receives = clients.requests("ReceiveMessage")
    assert all(1 <= params["WaitTimeSeconds"] <= 2 for params in receives)  # short waits keep stop() prompt
    assert errors == []


def test_without_a_window_each_receive_is_a_batch(sqs: Any, host: FunctionHost) -> None:
    errors: list[str] = []
    clients = MotoClients()
    source, url = new_mapping(sqs, host, errors, clients)
    batches: list[int] = []
    source.observers.append(lambda _, records: batches.append(len(records)))
    for i in range(25):
        sqs.send_message(QueueUrl=url, MessageBody=f"ok {i}")
    source.start()
    try:
        wait_for(lambda: counts(sqs, url) == (0, 0), timeout=30)
    finally:
        source.stop()
    assert sum(batches) == 25
    assert max(batches) <= 10
    receives = clients.requests("ReceiveMessage")
    assert {(params["MaxNumberOfMessages"], params["WaitTimeSeconds"]) for params in receives} == {(10, 2)}
    assert errors == []
