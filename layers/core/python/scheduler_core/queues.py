"""The priority queues on SQS. A message is a pointer to a run (`RunMessage`), delayed so it
becomes visible shortly before the run's time; the worker waits out the rest."""

from __future__ import annotations

import math
from collections import defaultdict
from datetime import datetime
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from scheduler_core.aws import AwsClients
from scheduler_core.clock import Clock, to_ms
from scheduler_core.model import DeadLetter, Priority, Run, RunMessage
from scheduler_core.observability import logger

MAX_DELAY_SECONDS = 900  # SQS's ceiling for DelaySeconds
BATCH_SIZE = 10  # SQS's ceiling for SendMessageBatch


def delay_seconds(fire_at: datetime, now: datetime, lead_seconds: int = 0) -> int:
    """Whole seconds until `lead_seconds` before `fire_at`, floored and clamped to what SQS
    accepts (0..900). The lead makes the message visible early: queue pollers notice delayed
    messages only about once a second, and the worker waits out the rest itself."""
    seconds = math.floor((fire_at - now).total_seconds()) - lead_seconds
    return max(0, min(MAX_DELAY_SECONDS, seconds))


def run_message(run: Run) -> RunMessage:
    return RunMessage(
        job_id=run.job_id,
        run_id=run.run_id,
        scheduled_for_ms=run.scheduled_for_ms,
        attempt=run.attempt,
        not_before_ms=to_ms(run.next_attempt_at) if run.next_attempt_at else None,
    )


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
                "MessageBody": run_message(run).model_dump_json(),
                "DelaySeconds": delay_seconds(run.starts_at, now, self._lead),
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
