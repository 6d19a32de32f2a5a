"""The three priority queues and their shared dead-letter queue (DESIGN §4)."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.config import PRIORITIES

# SQS's maximum: a backlog that outlives a long outage is still delivered, not expired.
RETENTION = Duration.days(14)


class SchedulerQueues(Construct):
    """`by_priority["HIGH" | "NORMAL" | "LOW"]` and `dead_letter_queue`, all SSE and TLS-only."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        visibility_timeout_seconds: int,
        max_receive_count: int,
    ) -> None:
        super().__init__(scope, construct_id)
        self.dead_letter_queue = sqs.Queue(
            self,
            "DeadLetter",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=RETENTION,
        )
        self.by_priority: dict[str, sqs.Queue] = {
            priority: sqs.Queue(
                self,
                priority.title(),
                encryption=sqs.QueueEncryption.SQS_MANAGED,
                enforce_ssl=True,
                retention_period=RETENTION,
                visibility_timeout=Duration.seconds(visibility_timeout_seconds),
                # Messages that keep crashing the worker end up here instead of looping.
                dead_letter_queue=sqs.DeadLetterQueue(
                    queue=self.dead_letter_queue, max_receive_count=max_receive_count
                ),
            )
            for priority in PRIORITIES
        }

    @property
    def priority_queues(self) -> list[sqs.Queue]:
        """HIGH, NORMAL, LOW."""
        return [self.by_priority[priority] for priority in PRIORITIES]

    def url_environment(self) -> dict[str, str]:
        """QUEUE_URL_HIGH / _NORMAL / _LOW, as the functions' Settings read them."""
        return {f"QUEUE_URL_{priority}": queue.queue_url for priority, queue in self.by_priority.items()}
