"""Alarms on the signals that mean runs are late or lost.

They have no actions: where to page (SNS, chat, an on-call tool) is the deployer's choice,
so each alarm is there to subscribe to.
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from infra.config import PRIORITIES
from infra.queues import SchedulerQueues

PERIOD = Duration.minutes(5)
# Messages are sent up to 900 s early with DelaySeconds; five minutes past that, the
# workers are not keeping up.
MAX_QUEUE_AGE_SECONDS = 900 + 300


class Alarms(Construct):
    """Dead-lettered runs, failing functions, backed-up queues."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        queues: SchedulerQueues,
        functions: dict[str, lambda_.IFunction],
    ) -> None:
        super().__init__(scope, construct_id)
        self.alarms: list[cloudwatch.Alarm] = [
            self._at_least_one(
                "DeadLetters",
                queues.dead_letter_queue.metric_approximate_number_of_messages_visible(
                    period=PERIOD, statistic=cloudwatch.Stats.MAXIMUM
                ),
                "Runs reached the dead-letter queue: their attempts are spent or they crash the worker.",
            )
        ]
        for name, function in functions.items():
            self.alarms.append(
                self._at_least_one(
                    f"{name.title()}Errors",
                    function.metric_errors(period=PERIOD, statistic=cloudwatch.Stats.SUM),
                    f"The {name} function failed (crashed or timed out).",
                )
            )
        for priority in PRIORITIES:
            queue = queues.by_priority[priority]
            self.alarms.append(
                cloudwatch.Alarm(
                    self,
                    f"{priority.title()}QueueBacklog",
                    alarm_description=f"{priority} runs wait over {MAX_QUEUE_AGE_SECONDS} s for a worker.",
                    metric=queue.metric_approximate_age_of_oldest_message(
                        period=PERIOD, statistic=cloudwatch.Stats.MAXIMUM
                    ),
                    threshold=MAX_QUEUE_AGE_SECONDS,
                    comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
                    evaluation_periods=1,
                    treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
                )
            )

    def _at_least_one(
        self, construct_id: str, metric: cloudwatch.IMetric, description: str
    ) -> cloudwatch.Alarm:
        return cloudwatch.Alarm(
            self,
            construct_id,
            alarm_description=description,
            metric=metric,
            threshold=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            evaluation_periods=1,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
