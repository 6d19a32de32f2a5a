"""Alarms on the signals that mean runs are late or lost, and the topic they publish to.

Every alarm notifies the topic when it fires and when it clears; who hears of it (an email,
a chat hook, an on-call tool) is the deployer's choice: a subscription to the topic, whose
ARN the stack outputs (docs/operations/alarms.md).
"""

from __future__ import annotations

from aws_cdk import ArnFormat, Duration, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cloudwatch_actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from constructs import Construct

from infra.compliance import skip_checkov_check
from infra.config import PRIORITIES
from infra.keys import StackKeys
from infra.queues import SchedulerQueues

PERIOD = Duration.minutes(5)
# Messages are sent up to 900 s early with DelaySeconds; five minutes past that, the
# workers are not keeping up.
MAX_QUEUE_AGE_SECONDS = 900 + 300
# checkov: "Ensure all data stored in the SNS topic is encrypted".
TOPIC_ENCRYPTION_CHECK = "CKV_AWS_26"
UNENCRYPTED_TOPIC_REASON = (
    "Context customer_managed_keys is false and CloudWatch alarms cannot publish to a topic under "
    "SNS's AWS managed key; the topic carries alarm names and states only, no job data."
)


class Alarms(Construct):
    """Dead-lettered runs, failing functions, backed-up queues; `topic` hears of them all.

    Each alarm is named `<stack name>-<construct id>` (`ServerlessScheduler-DeadLetters`): the
    name a notification's subject and the runbook (docs/operations/alarms.md) give.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        queues: SchedulerQueues,
        functions: dict[str, lambda_.IFunction],
        keys: StackKeys,
    ) -> None:
        super().__init__(scope, construct_id)
        self.topic = self._topic(keys)
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
                    alarm_name=self._name(f"{priority.title()}QueueBacklog"),
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
        # Fired and cleared alike: a chat channel sees an incident end as well as begin.
        action = cloudwatch_actions.SnsAction(self.topic)
        for alarm in self.alarms:
            alarm.add_alarm_action(action)
            alarm.add_ok_action(action)

    @property
    def alarm_arns(self) -> list[str]:
        """The alarms' ARNs, made from their names: no reference to the alarms, which moto's
        CloudFormation does not create (the local cloud deploys this very template)."""
        stack = Stack.of(self)
        return [
            stack.format_arn(
                service="cloudwatch",
                resource="alarm",
                resource_name=self._name(alarm.node.id),
                arn_format=ArnFormat.COLON_RESOURCE_NAME,
            )
            for alarm in self.alarms
        ]

    def _name(self, construct_id: str) -> str:
        return f"{Stack.of(self).stack_name}-{construct_id}"

    def _topic(self, keys: StackKeys) -> sns.Topic:
        """TLS-only, under the stack's logs key if it has one (whose policy lets CloudWatch
        alarms use it); only this account's alarms may publish to it."""
        topic = sns.Topic(
            self,
            "Topic",
            display_name="serverless-scheduler alarms",
            master_key=keys.logs,
            enforce_ssl=True,
        )
        stack = Stack.of(self)
        topic.add_to_resource_policy(
            iam.PolicyStatement(
                sid="AllowThisAccountsAlarmsToPublish",
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                actions=["sns:Publish"],
                resources=[topic.topic_arn],
                conditions={
                    "ArnLike": {
                        "aws:SourceArn": stack.format_arn(
                            service="cloudwatch",
                            resource="alarm",
                            resource_name="*",
                            arn_format=ArnFormat.COLON_RESOURCE_NAME,
                        )
                    },
                    "StringEquals": {"aws:SourceAccount": stack.account},
                },
            )
        )
        if keys.logs is None:
            # (cdk-nag's AwsSolutions has no topic encryption rule; SNS3, TLS only, holds either way.)
            skip_checkov_check(topic, TOPIC_ENCRYPTION_CHECK, UNENCRYPTED_TOPIC_REASON)
        return topic

    def _at_least_one(
        self, construct_id: str, metric: cloudwatch.IMetric, description: str
    ) -> cloudwatch.Alarm:
        return cloudwatch.Alarm(
            self,
            construct_id,
            alarm_name=self._name(construct_id),
            alarm_description=description,
            metric=metric,
            threshold=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            evaluation_periods=1,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
