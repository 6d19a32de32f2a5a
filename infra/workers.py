"""The worker: one function consuming the three priority queues, executing runs against targets."""

from __future__ import annotations

from aws_cdk import Acknowledgment, ArnFormat, Aws, Duration, Stack, Validations
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda_event_sources as event_sources
from constructs import Construct

from infra.compliance import skip_checkov_check
from infra.config import PRIORITIES, SchedulerConfig
from infra.function import (
    DEAD_LETTER_QUEUE_CHECK,
    RESERVED_CONCURRENCY_CHECK,
    SchedulerFunction,
    function_name_prefix,
    shared_environment,
)
from infra.job_store import JobStore
from infra.keys import StackKeys
from infra.layers import SharedLayers
from infra.queues import SchedulerQueues
from infra.targets import TARGET_GRANTS, TargetGrant, target_reach_environment

# Every role of every account, in the stack's partition: what a tenant may name.
ANY_ROLE = f"arn:{Aws.PARTITION}:iam::*:role/*"


class Workers(Construct):
    """The worker function, with one SQS event source mapping per priority.

    Capacity is weighted by each mapping's maximum concurrency (context `queue_capacity`):
    HIGH gets the most, LOW still gets some, so low-priority work is never starved.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: SchedulerConfig,
        layers: SharedLayers,
        store: JobStore,
        queues: SchedulerQueues,
        keys: StackKeys,
    ) -> None:
        super().__init__(scope, construct_id)
        self.function = SchedulerFunction(
            self,
            "Worker",
            name="worker",
            description="Executes runs from the priority queues against their targets",
            layers=layers.all,
            log_level=config.log_level,
            timeout=Duration.seconds(config.worker_timeout_seconds),
            memory_size=config.worker_memory_mb,
            keys=keys,
            environment={
                # Whatever the worker puts in the due index (lease timers, retries past SQS's
                # 900 s delay) must land in a shard some poller reads, with the same timers.
                **shared_environment(config, store, queues),
                # One thread (and AWS and HTTP connection) per record of its largest batch.
                "WORKER_BATCH_SIZE": str(max(c.batch_size for c in config.queue_capacity.values())),
                # A started run belongs to its worker as long as its message stays invisible.
                "RUN_LEASE_SECONDS": str(config.visibility_timeout_seconds),
                # What HTTP targets may reach; the key that opens secret headers and signing secrets.
                **target_reach_environment(config),
                "SECRETS_KEY_ID": keys.secrets.key_arn,
            },
        )
        # Named in a run's error when a tenant's execution role does not trust it.
        self.function.function.add_environment("WORKER_ROLE_ARN", self.function.role.role_arn)
        # Reads a job and its run together (BatchGetItem), moves runs with conditional updates
        # (start, heartbeat, finish, retry), completes jobs; puts a workflow task's run when
        # its upstream tasks release it (if absent). The run item is its own idempotency
        # record: no other table.
        self.function.allow(
            actions=["dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:UpdateItem", "dynamodb:PutItem"],
            resources=[store.jobs_table.table_arn],
        )
        # Opens a job's secret headers and its tenant's signing secrets, at call time.
        self.function.allow(actions=["kms:Decrypt"], resources=[keys.secrets.key_arn])
        # Retries go back to the priority queues; a run whose attempts are spent is recorded on
        # the DLQ. (Receiving, deleting and heartbeats come with the event source mappings.)
        self.function.allow(
            actions=["sqs:SendMessage"],
            resources=[
                *(queue.queue_arn for queue in queues.priority_queues),
                queues.dead_letter_queue.queue_arn,
            ],
        )

        for priority in PRIORITIES:
            capacity = config.queue_capacity[priority]
            # Also grants the mapping's receive, delete and change-visibility actions on the queue.
            self.function.function.add_event_source(
                event_sources.SqsEventSource(
                    queues.by_priority[priority],
                    batch_size=capacity.batch_size,
                    max_batching_window=Duration.seconds(capacity.batching_window_seconds),
                    max_concurrency=capacity.max_concurrency,
                    report_batch_item_failures=True,
                )
            )

        skip_checkov_check(
            self.function.function,
            DEAD_LETTER_QUEUE_CHECK,
            "Invoked by SQS event source mappings, not asynchronously: each priority queue redrives "
            "a message to the stack's DLQ after max_receive_count receives.",
        )
        skip_checkov_check(
            self.function.function,
            RESERVED_CONCURRENCY_CHECK,
            "Its concurrency is bounded by the maximum concurrency of its SQS event source mappings "
            "(context queue_capacity), the weights of the three priorities.",
        )

        # A target with an execution role is called as that role (docs/security.md): the worker
        # may assume any role, always with an external id (the tenant's, which the role's trust
        # policy must name). It holds no permission on targets of its own, but for the shared
        # ones the operator lists (CDK context `target_*_arns`, empty by default): one action
        # per kind, the one its delivery calls. The api checks targets against the same lists.
        self.function.role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["sts:AssumeRole"],
                resources=[ANY_ROLE],
                conditions={"Null": {"sts:ExternalId": "false"}},
            )
        )
        Validations.of(self.function.role).acknowledge(
            Acknowledgment(
                id="AwsSolutions::AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:iam::*:role/*]",
                reason="A job's execution role is any role a tenant names, of any account: its trust "
                "policy decides, and the worker assumes it only with the tenant's external id (the "
                "statement's condition requires one).",
            )
        )
        for grant in TARGET_GRANTS:
            self._allow_shared_targets(grant, config)
        # ... but never this stack's own functions, whatever the grant above allows: an event
        # shaped as an API Gateway request would act as any tenant the job's payload names, one
        # shaped as an SQS batch would feed the worker forged run messages. Every function of
        # the stack is named "<stack name>-...": ours by `SchedulerFunction`, any other by
        # CloudFormation. (The API refuses them, and the scheduler's own queues, as targets.)
        stack = Stack.of(self)
        self.function.role.add_to_principal_policy(
            iam.PolicyStatement(
                effect=iam.Effect.DENY,
                actions=["lambda:InvokeFunction"],
                resources=[
                    stack.format_arn(
                        service="lambda",
                        resource="function",
                        resource_name=f"{function_name_prefix(self)}*",
                        arn_format=ArnFormat.COLON_RESOURCE_NAME,
                    )
                ],
            )
        )

    def _allow_shared_targets(self, grant: TargetGrant, config: SchedulerConfig) -> None:
        resources = grant.patterns(config)
        if not resources:
            return
        self.function.allow(actions=[grant.action], resources=resources)
        why = f"The operator offers these targets to every tenant in the CDK context '{grant.context_key}'."
        for arn in (arn for arn in resources if "*" in arn):
            Validations.of(self.function.role).acknowledge(
                Acknowledgment(id=f"AwsSolutions::AwsSolutions-IAM5[Resource::{arn}]", reason=why)
            )
