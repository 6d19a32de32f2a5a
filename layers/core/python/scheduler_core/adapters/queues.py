"""The priority queues on SQS. A message is a pointer to a run (`RunMessage`), delayed so it
becomes visible shortly before the run's time; the worker waits out the rest."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any, TypeVar

from botocore.exceptions import BotoCoreError, ClientError

from scheduler_core.adapters.aws import AwsClients
from scheduler_core.domain.clock import Clock
from scheduler_core.domain.entities import Run
from scheduler_core.domain.messages import BATCH_SIZE, DeadLetter, delay_seconds, fifo_id, run_message
from scheduler_core.domain.vocabulary import Priority
from scheduler_core.observability import logger
from scheduler_core.ports import DeadLetterMessage

T = TypeVar("T")


class SqsRunQueue:
    """`RunQueue` on the three priority queues."""

    def __init__(
        self,
        clients: AwsClients,
        queue_urls: dict[Priority, str],
        clock: Clock,
        lead_seconds: int = 1,
        dead_letter_url: str = "",
    ) -> None:
        self._clients = clients
        self._urls = queue_urls
        self._clock = clock
        self._lead = lead_seconds
        self._dead_letter_url = dead_letter_url

    def send_dead_letter(self, record: DeadLetter) -> bool:
        try:
            self._clients.sqs().send_message(
                QueueUrl=self._dead_letter_url,
                MessageBody=record.model_dump_json(),
                MessageAttributes={"kind": {"DataType": "String", "StringValue": record.kind}},
            )
        except (BotoCoreError, ClientError) as error:
            logger.error("dead letter not recorded", extra={"run_id": record.run_id, "error": str(error)})
            return False
        return True

    def send_runs(self, runs: list[Run]) -> list[Run]:
        by_priority: dict[Priority, list[Run]] = defaultdict(list)
        for run in runs:
            by_priority[run.priority].append(run)
        unsent: list[Run] = []
        for priority, group in by_priority.items():
            for start in range(0, len(group), BATCH_SIZE):
                unsent += self._send_batch(self._urls[priority], group[start : start + BATCH_SIZE])
        return unsent

    def _send_batch(self, queue_url: str, batch: list[Run]) -> list[Run]:
        # The delay counts from the moment of sending, not from when the poll began.
        now = self._clock.now()
        entries: list[Any] = [
            {
                "Id": str(position),
                # Fields at their defaults are left out: a message reads the same to a worker
                # of an earlier version (which knows no `with_job`) for a run of its own item.
                "MessageBody": run_message(run).model_dump_json(exclude_defaults=True),
                "DelaySeconds": delay_seconds(run.starts_at, now, self._lead),
                # SQS fair queues: one message group per tenant (domain/fairness.py).
                **({"MessageGroupId": fifo_id(run.tenant)} if run.tenant else {}),
            }
            for position, run in enumerate(batch)
        ]
        try:
            reply = self._clients.sqs().send_message_batch(QueueUrl=queue_url, Entries=entries)
        except (BotoCoreError, ClientError) as error:
            logger.warning("batch not enqueued", extra={"queue_url": queue_url, "error": str(error)})
            return batch
        failed = reply.get("Failed", [])
        for failure in failed:
            logger.warning(
                "run not enqueued",
                extra={"run_id": batch[int(failure["Id"])].run_id, "code": failure.get("Code")},
            )
        return [batch[int(failure["Id"])] for failure in failed]


class SqsMessageLease:
    """`MessageLease` of one received SQS message."""

    MAX_VISIBILITY_SECONDS = 43_200  # SQS's ceiling: 12 hours

    def __init__(self, clients: AwsClients, queue_url: str, receipt_handle: str) -> None:
        self._clients = clients
        self._queue_url = queue_url
        self._receipt_handle = receipt_handle

    def hide_for(self, seconds: int) -> None:
        try:
            self._clients.sqs().change_message_visibility(
                QueueUrl=self._queue_url,
                ReceiptHandle=self._receipt_handle,
                VisibilityTimeout=max(0, min(self.MAX_VISIBILITY_SECONDS, seconds)),
            )
        except (BotoCoreError, ClientError) as error:
            # The message comes back at its old time; the run's own lease still fences it.
            logger.warning("message visibility not changed", extra={"error": str(error)})


def queue_url_for_arn(queue_arn: str, known_urls: list[str]) -> str | None:
    """The URL of one of `known_urls` whose queue `queue_arn` names (same queue name)."""
    name = queue_arn.rsplit(":", 1)[-1]
    return next((url for url in known_urls if url.rstrip("/").rsplit("/", 1)[-1] == name), None)


class SqsDeadLetterQueue:
    """`DeadLetterQueue` on the stack's SQS DLQ.

    `hold_seconds`: how long a received message stays hidden (a pass releases the ones it
    keeps when it ends; if it dies, they come back after this). `wait_seconds`: long polling,
    so an empty receive means an empty queue, not an unlucky sample of SQS's servers.
    """

    def __init__(
        self, clients: AwsClients, queue_url: str, hold_seconds: int = 900, wait_seconds: int = 1
    ) -> None:
        self._clients = clients
        self._url = queue_url
        self._hold = hold_seconds
        self._wait = wait_seconds

    def receive(self, max_messages: int) -> list[DeadLetterMessage]:
        reply = self._clients.sqs().receive_message(
            QueueUrl=self._url,
            MaxNumberOfMessages=max(1, min(BATCH_SIZE, max_messages)),
            VisibilityTimeout=self._hold,
            WaitTimeSeconds=self._wait,
        )
        return [
            DeadLetterMessage(message["MessageId"], message["ReceiptHandle"], message.get("Body", ""))
            for message in reply.get("Messages", [])
        ]

    def delete(self, messages: Sequence[DeadLetterMessage]) -> int:
        deleted = 0
        for chunk in _chunks(messages):
            try:
                reply = self._clients.sqs().delete_message_batch(
                    QueueUrl=self._url,
                    Entries=[{"Id": str(i), "ReceiptHandle": m.receipt_handle} for i, m in enumerate(chunk)],
                )
            except (BotoCoreError, ClientError) as error:
                logger.error("dead letters not deleted", extra={"count": len(chunk), "error": str(error)})
                continue
            deleted += len(reply.get("Successful", []))
            for failure in reply.get("Failed", []):
                logger.error(
                    "dead letter not deleted",
                    extra={"message_id": chunk[int(failure["Id"])].message_id, "code": failure.get("Code")},
                )
        return deleted

    def release(self, messages: Sequence[DeadLetterMessage]) -> None:
        for chunk in _chunks(messages):
            try:
                self._clients.sqs().change_message_visibility_batch(
                    QueueUrl=self._url,
                    Entries=[
                        {"Id": str(i), "ReceiptHandle": m.receipt_handle, "VisibilityTimeout": 0}
                        for i, m in enumerate(chunk)
                    ],
                )
            except (BotoCoreError, ClientError) as error:
                # They come back on their own once `hold_seconds` have passed.
                logger.warning("kept dead letters not released", extra={"error": str(error)})


def _chunks(items: Sequence[T]) -> list[Sequence[T]]:
    """`items` BATCH_SIZE at a time (what one SQS batch call takes)."""
    return [items[start : start + BATCH_SIZE] for start in range(0, len(items), BATCH_SIZE)]


def delete_received(sqs: Any, queue_url: str, receipt_handles: Sequence[str]) -> None:
    """Delete received messages, BATCH_SIZE a `DeleteMessageBatch` call: what an event source
    mapping does with the records its function did not fail (the local cloud's, the bench's)."""
    for chunk in _chunks(receipt_handles):
        sqs.delete_message_batch(
            QueueUrl=queue_url,
            Entries=[{"Id": str(i), "ReceiptHandle": handle} for i, handle in enumerate(chunk)],
        )
