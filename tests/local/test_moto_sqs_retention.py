"""The local cloud's moto checks a received message's retention period from the queue's own
setting (`infra.local.moto_process.retention_checked_alone`): the same messages are handed
out as by stock moto, without computing every attribute of the queue per message."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.backends import get_backend
from moto.sqs.models import Queue

from infra.local.moto_process import retention_checked_alone

RETENTION_SECONDS = 60  # SQS's least


@pytest.fixture(params=["stock", "patched"])
def sqs(request: pytest.FixtureRequest) -> Iterator[tuple[Any, str]]:
    undo = retention_checked_alone() if request.param == "patched" else (lambda: None)
    try:
        with mock_aws():
            client = boto3.client("sqs", region_name="us-east-1")
            url = client.create_queue(
                QueueName="runs", Attributes={"MessageRetentionPeriod": str(RETENTION_SECONDS)}
            )["QueueUrl"]
            yield client, url
    finally:
        undo()


def sent_seconds_ago(seconds: float) -> None:
    """Date every message in the queue as sent `seconds` ago."""
    queue = get_backend("sqs")["123456789012"]["us-east-1"].queues["runs"]
    for message in queue._messages:
        sent: int = message.sent_timestamp  # type: ignore[assignment]  # set once sent
        message.sent_timestamp = sent - int(seconds * 1000)  # type: ignore[assignment]


def bodies(client: Any, url: str) -> list[str]:
    answer = client.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0)
    return sorted(message["Body"] for message in answer.get("Messages", []))


def test_a_message_within_its_queues_retention_is_handed_out(sqs: tuple[Any, str]) -> None:
    client, url = sqs
    client.send_message(QueueUrl=url, MessageBody="kept")
    sent_seconds_ago(RETENTION_SECONDS - 5)
    assert bodies(client, url) == ["kept"]


def test_a_message_past_its_queues_retention_is_not(sqs: tuple[Any, str]) -> None:
    client, url = sqs
    client.send_message(QueueUrl=url, MessageBody="expired")
    sent_seconds_ago(RETENTION_SECONDS + 5)
    assert bodies(client, url) == []


def test_a_receive_computes_no_attribute_of_the_queue(monkeypatch: pytest.MonkeyPatch) -> None:
    """Stock moto computes them all (each approximate count a pass over every message) for
    each message it hands out; the patched check reads the retention period alone."""
    undo = retention_checked_alone()
    try:
        with mock_aws():
            client = boto3.client("sqs", region_name="us-east-1")
            url = client.create_queue(QueueName="runs")["QueueUrl"]
            for n in range(3):
                client.send_message(QueueUrl=url, MessageBody=str(n))

            def computed(_queue: Queue) -> dict[str, Any]:
                raise AssertionError("a receive computed the queue's attributes")

            monkeypatch.setattr(Queue, "attributes", property(computed))
            assert bodies(client, url) == ["0", "1", "2"]
    finally:
        undo()
