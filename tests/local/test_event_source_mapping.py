"""SQS event source mappings as Lambda runs them: partial batch failures delete only what
succeeded; a function error leaves the whole batch on the queue."""

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
    def client(self, service: str) -> Any:
        return boto3.client(service, region_name="us-east-1")  # type: ignore[call-overload]


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


def run_mapping(
    sqs: Any, host: FunctionHost, bodies: list[str], reports_failures: bool = True
) -> tuple[SqsEventSource, str, list[str]]:
    url = sqs.create_queue(QueueName="work", Attributes={"VisibilityTimeout": "60"})["QueueUrl"]
    for body in bodies:
        sqs.send_message(QueueUrl=url, MessageBody=body)
    errors: list[str] = []
    mapping = {
        "EventSourceArn": "arn:aws:sqs:us-east-1:123456789012:work",
        "BatchSize": 10,
        "FunctionResponseTypes": ["ReportBatchItemFailures"] if reports_failures else [],
        "ScalingConfig": {"MaximumConcurrency": 2},
    }
    source = SqsEventSource(MotoClients(), mapping, host, lambda where, message: errors.append(message))
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
