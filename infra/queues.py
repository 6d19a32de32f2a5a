"""The three priority queues and their shared dead-letter queue (DESIGN §4)."""

from __future__ import annotations

from typing import Any

from aws_cdk import Duration
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.config import PRIORITIES
from infra.keys import StackKeys

# SQS's maximum: a backlog that outlives a long outage is still delivered, not expired.
RETENTION = Duration.days(14)
# checkov: "Ensure all data stored in the SQS queue is encrypted" (with a KMS key).
CMK_CHECK = "CKV_AWS_27"


class SchedulerQueues(Construct):
    """`by_priority["HIGH" | "NORMAL" | "LOW"]` and `dead_letter_queue`, all TLS-only and
    encrypted at rest: under the stack's data key if it has one, else SQS's own (SSE-SQS)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        visibility_timeout_seconds: int,
        max_receive_count: int,
        keys: StackKeys,
    ) -> None:
        super().__init__(scope, construct_id)
        encryption: dict[str, Any] = (
            {"encryption": sqs.QueueEncryption.KMS, "encryption_master_key": keys.data}
            if keys.data is not None
            else {"encryption": sqs.QueueEncryption.SQS_MANAGED}
        )
        self.dead_letter_queue = sqs.Queue(
            self,
            "DeadLetter",
            **encryption,
            enforce_ssl=True,
            retention_period=RETENTION,
        )
        self.by_priority: dict[str, sqs.Queue] = {
            priority: sqs.Queue(
                self,
                priority.title(),
                **encryption,
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
        for queue in (self.dead_letter_queue, *self.by_priority.values()):
            keys.skip_if_aws_keys(queue, CMK_CHECK)

    def take_sends_only_from(self, role_arns: list[str], operator_arns: tuple[str, ...]) -> None:
        """Every queue refuses `sqs:SendMessage` from any principal but the stack's functions'
        roles and the operators listed (CDK context `queue_sender_arns`, for `make redrive`):
        an identity policy elsewhere in the account that grants sends on them is overridden,
        so no one else can put a run message of their making on a queue (docs/security.md)."""
        for queue in (self.dead_letter_queue, *self.by_priority.values()):
            queue.add_to_resource_policy(
                iam.PolicyStatement(
                    sid="OnlyTheSchedulerSends",
                    effect=iam.Effect.DENY,
                    principals=[iam.AnyPrincipal()],
                    actions=["sqs:SendMessage"],
                    resources=[queue.queue_arn],
                    conditions={
                        "ArnNotLike": {"aws:PrincipalArn": [*role_arns, *operator_arns]},
                        # An AWS service acting for the stack carries no aws:PrincipalArn.
                        "Bool": {"aws:PrincipalIsAWSService": "false"},
                    },
                )
            )

    @property
    def priority_queues(self) -> list[sqs.Queue]:
        """HIGH, NORMAL, LOW."""
        return [self.by_priority[priority] for priority in PRIORITIES]

    def url_environment(self) -> dict[str, str]:
        """QUEUE_URL_HIGH / _NORMAL / _LOW, as the functions' Settings read them."""
        return {f"QUEUE_URL_{priority}": queue.queue_url for priority, queue in self.by_priority.items()}
