"""The poller: every minute, one invocation per shard reads the due index and claims runs."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from constructs import Construct

from infra.compliance import skip_checkov_check
from infra.config import SchedulerConfig
from infra.function import DEAD_LETTER_QUEUE_CHECK, SchedulerFunction, shared_environment
from infra.job_store import DUE_INDEX, JobStore
from infra.keys import StackKeys
from infra.layers import SharedLayers
from infra.queues import SchedulerQueues

# EventBridge accepts at most five targets per rule.
TARGETS_PER_RULE = 5


class Poller(Construct):
    """The poller function and ceil(shards / 5) `rate(1 minute)` rules, one target per shard.

    Its reserved concurrency (context `poller_reserved_concurrency`, at least `shards`) keeps
    a flood of API calls or worker batches from taking the concurrency the polls need.
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
            "Poller",
            name="poller",
            description="Claims the due runs of one shard and enqueues them",
            layers=layers.all,
            log_level=config.log_level,
            # A poll must end before the next minute's poll of the same shard starts.
            timeout=Duration.seconds(60),
            keys=keys,
            reserved_concurrency=config.poller_reserved_concurrency,
            environment={
                **shared_environment(config, store, queues),
                "CLAIM_PARALLELISM": str(config.claim_parallelism),
                "ONE_OFFS_CLAIMED_AT_START": str(config.one_offs_claimed_at_start).lower(),
            },
        )
        # A claim is one TransactWriteItems (job update + run put, both conditional), which
        # IAM authorizes as its item actions; watermarks are read and updated on the table.
        # The watchdog reads a run's job and moves the run with conditional updates. A due
        # listing none of whose jobs waits through it any more is deleted.
        self.function.allow(
            actions=[
                "dynamodb:GetItem",
                "dynamodb:BatchGetItem",
                "dynamodb:PutItem",
                "dynamodb:UpdateItem",
                "dynamodb:DeleteItem",
            ],
            resources=[store.jobs_table.table_arn],
        )
        self.function.allow(actions=["dynamodb:Query"], resources=[store.jobs_index_arn(DUE_INDEX)])
        # Claimed runs and the watchdog's re-sends and retries go to the priority queues;
        # the watchdog records a run whose lost attempt was its last on the DLQ.
        self.function.allow(
            actions=["sqs:SendMessage"],
            resources=[
                *(queue.queue_arn for queue in queues.priority_queues),
                queues.dead_letter_queue.queue_arn,
            ],
        )

        skip_checkov_check(
            self.function.function,
            DEAD_LETTER_QUEUE_CHECK,
            "A failed poll leaves its runs in the due index for the next minute's poll of the shard; "
            "a dead-lettered {shard} event would hold nothing to redrive (PollerErrors alarms on it).",
        )

        shards = list(range(config.shards))
        self.rules: list[events.Rule] = []
        for first in range(0, len(shards), TARGETS_PER_RULE):
            batch = shards[first : first + TARGETS_PER_RULE]
            rule = events.Rule(
                self,
                # Numbered, not named after its shards: a new shard count keeps existing rules.
                f"EveryMinute{first // TARGETS_PER_RULE}",
                description=f"Polls shards {batch[0]}-{batch[-1]} of the due index every minute",
                schedule=events.Schedule.rate(Duration.minutes(1)),
            )
            for shard in batch:
                rule.add_target(
                    targets.LambdaFunction(
                        self.function.function,
                        event=events.RuleTargetInput.from_object({"shard": shard}),
                    )
                )
            self.rules.append(rule)
