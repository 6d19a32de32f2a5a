"""SQS event source mappings: long-poll the queue, hand batches to the function, at most
`MaximumConcurrency` batches at once. Without a `MaximumBatchingWindowInSeconds` a batch is
what one receive returns; with one, receives of up to 10 messages gather a batch until it
holds `BatchSize` records (which may then exceed 10), the window has passed since its first
record or its bodies reach 6 MB. With `ReportBatchItemFailures`, delete what the
function did not report failed; a function error leaves the whole batch to the queue's
visibility timeout (and from there to its redrive policy)."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from infra.local.functions import FunctionError, FunctionHost
from scheduler_core.adapters.queues import delete_received
from scheduler_core.domain.messages import BATCH_SIZE  # the most one SQS receive returns

LONG_POLL_SECONDS = 2  # short enough to stop promptly; moto wakes at once on new messages
PAYLOAD_LIMIT = 6 * 1024 * 1024  # Lambda's synchronous invocation payload


def sqs_record(message: dict[str, Any], queue_arn: str, region: str) -> dict[str, Any]:
    """A received message as Lambda puts it in an SQS event."""
    return {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message["Body"],
        "attributes": message.get("Attributes", {}),
        "messageAttributes": {
            name: {
                "stringValue": value.get("StringValue"),
                "binaryValue": value.get("BinaryValue"),
                "stringListValues": [],
                "binaryListValues": [],
                "dataType": value["DataType"],
            }
            for name, value in message.get("MessageAttributes", {}).items()
        },
        "md5OfBody": message.get("MD5OfBody", ""),
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn,
        "awsRegion": region,
    }


class SqsEventSource:
    def __init__(
        self,
        aws: Any,
        mapping: dict[str, Any],
        host: FunctionHost,
        on_error: Callable[[str, str], None],
    ) -> None:
        self._sqs = aws.client("sqs")
        self.queue_arn: str = mapping["EventSourceArn"]
        _, _, _, self._region, account, name = self.queue_arn.split(":")
        self.queue_url: str = self._sqs.get_queue_url(QueueName=name, QueueOwnerAWSAccountId=account)[
            "QueueUrl"
        ]
        self.batch_size = int(mapping.get("BatchSize") or 10)
        self.batching_window = int(mapping.get("MaximumBatchingWindowInSeconds") or 0)
        self.max_concurrency = int(
            (mapping.get("ScalingConfig") or {}).get("MaximumConcurrency") or host.spec.concurrency
        )
        self.reports_item_failures = "ReportBatchItemFailures" in (mapping.get("FunctionResponseTypes") or [])
        self._host = host
        self._on_error = on_error
        self._slots = threading.Semaphore(self.max_concurrency)
        self._pool = ThreadPoolExecutor(max_workers=self.max_concurrency, thread_name_prefix=f"esm-{name}")
        self._stop = threading.Event()
        # Called with (queue ARN, records) before each batch is handed to the function.
        self.observers: list[Callable[[str, list[dict[str, Any]]], None]] = []

    def start(self) -> None:
        threading.Thread(target=self._poll, daemon=True).start()

    def _poll(self) -> None:
        while not self._stop.is_set():
            self._slots.acquire()
            messages, error = self._gather()
            if error is not None and not self._stop.is_set():
                self._on_error(self.queue_arn, f"receive failed: {error}")
            if not messages:
                self._slots.release()
                if error is not None:
                    self._stop.wait(1)
                continue
            try:
                self._pool.submit(self._deliver, messages)
            except RuntimeError:  # stopped while receiving: they come back after their visibility timeout
                self._slots.release()
                return

    def _gather(self) -> tuple[list[dict[str, Any]], Exception | None]:
        """One batch (empty if nothing came), and the receive error that cut it short, if any."""
        messages: list[dict[str, Any]] = []
        size = 0
        deadline: float | None = None  # set by the first message
        while True:
            wait = LONG_POLL_SECONDS if deadline is None else math.ceil(deadline - time.monotonic())
            try:
                received = self._sqs.receive_message(
                    QueueUrl=self.queue_url,
                    MaxNumberOfMessages=min(BATCH_SIZE, self.batch_size - len(messages)),
                    WaitTimeSeconds=max(1, min(LONG_POLL_SECONDS, wait)),
                    AttributeNames=["All"],
                    MessageAttributeNames=["All"],
                ).get("Messages", [])
            except (BotoCoreError, ClientError) as error:
                return messages, error
            messages += received
            size += sum(len(m["Body"].encode()) for m in received)
            if deadline is None and messages:
                deadline = time.monotonic() + self.batching_window
            if (
                deadline is None
                or len(messages) >= self.batch_size
                or time.monotonic() >= deadline
                or size >= PAYLOAD_LIMIT
                or self._stop.is_set()
            ):
                return messages, None

    def _deliver(self, messages: list[dict[str, Any]]) -> None:
        try:
            event = {"Records": [sqs_record(m, self.queue_arn, self._region) for m in messages]}
            for observe in self.observers:
                observe(self.queue_arn, event["Records"])
            try:
                result = self._host.invoke(event)
            except FunctionError as error:
                self._on_error(self.queue_arn, f"function error, batch left on the queue: {error}")
                return
            failed: set[str] = set()
            if self.reports_item_failures and isinstance(result, dict):
                failed = {item["itemIdentifier"] for item in result.get("batchItemFailures") or []}
            done = [m for m in messages if m["MessageId"] not in failed]
            delete_received(self._sqs, self.queue_url, [m["ReceiptHandle"] for m in done])
        except (BotoCoreError, ClientError) as error:
            if not self._stop.is_set():
                self._on_error(self.queue_arn, f"delete failed: {error}")
        finally:
            self._slots.release()

    def stop(self) -> None:
        self._stop.set()
        self._pool.shutdown(wait=False, cancel_futures=True)


def event_sources(
    aws: Any, hosts: dict[str, FunctionHost], on_error: Callable[[str, str], None]
) -> list[SqsEventSource]:
    """Every enabled SQS event source mapping of the deployed functions."""
    mappings = aws.client("lambda").list_event_source_mappings()["EventSourceMappings"]
    return [
        SqsEventSource(aws, mapping, hosts[mapping["FunctionArn"]], on_error)
        for mapping in mappings
        if mapping["FunctionArn"] in hosts
        and mapping.get("EventSourceArn", "").startswith("arn:aws:sqs:")
        and mapping.get("State", "Enabled") in ("Enabled", "Enabling", "Creating")
    ]
