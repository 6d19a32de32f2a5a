"""The operator's CloudWatch dashboard: runs, lateness, queues, the poller, the worker, the API.

The scheduler's own numbers are the metrics its functions publish with Powertools (embedded
metric format): namespace `METRICS_NAMESPACE`, one dimension, `service`, the function's
POWERTOOLS_SERVICE_NAME (`scheduler-<name>`, set by `infra.function`). The rest are AWS's:
Lambda, SQS and API Gateway. docs/operations/alarms.md says what each widget shows.
"""

from __future__ import annotations

from aws_cdk import Aws, Duration, Stack
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from infra.config import PRIORITIES
from infra.function import METRICS_NAMESPACE
from infra.observability import MAX_QUEUE_AGE_SECONDS
from infra.queues import SchedulerQueues

# One point a minute: the poll's rhythm, and what "per minute" means on the graphs (longer
# time ranges make CloudWatch widen it).
GRAPH_PERIOD = Duration.minutes(1)
# A run's outcome (label) → the metric the code counts it with. The worker counts most of them,
# the poller's watchdog some too (a lost lease retried, failed or dead-lettered): each line
# sums the metric over every function that publishes it.
RUN_OUTCOMES = {
    "succeeded": "RunsSucceeded",
    "retried": "RunsRetried",
    "failed": "RunsFailed",
    "dead-lettered": "DeadLetters",
    "skipped (overlap)": "RunsSkipped",
}
# The worker's, when a run's first attempt calls its target: milliseconds past the run's time.
FIRE_LATENESS = "FireLateness"
# The poller's, once per poll (one shard): how many runs it claimed.
RUNS_CLAIMED = "RunsClaimed"
RUNS_SENT_UNCLAIMED = "RunsSentUnclaimed"  # one-offs claimed at their start


def service_name(function: str) -> str:
    """The `service` dimension of `function`'s metrics (its POWERTOOLS_SERVICE_NAME)."""
    return f"scheduler-{function}"


def scheduler_metric(function: str, metric_name: str, statistic: str, label: str) -> cloudwatch.Metric:
    """A metric the scheduler's `function` publishes."""
    return cloudwatch.Metric(
        namespace=METRICS_NAMESPACE,
        metric_name=metric_name,
        dimensions_map={"service": service_name(function)},
        statistic=statistic,
        period=GRAPH_PERIOD,
        label=label,
    )


def summed_over_services(metric_name: str, label: str) -> cloudwatch.MathExpression:
    """`metric_name`'s Sum over every function that publishes it."""
    search = f'{{{METRICS_NAMESPACE},service}} MetricName="{metric_name}"'
    return cloudwatch.MathExpression(
        expression=f"SUM(SEARCH('{search}', 'Sum', {int(GRAPH_PERIOD.to_seconds())}))",
        using_metrics={},
        label=label,
        period=GRAPH_PERIOD,
    )


class OperatorDashboard(Construct):
    """One dashboard, `dashboard`, named `<stack name>-<region>`."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        queues: SchedulerQueues,
        poller: lambda_.Function,
        worker: lambda_.Function,
        rest_api: apigw.RestApi,
        alarm_arns: list[str],
    ) -> None:
        """`alarm_arns`: the alarms the dashboard shows the state of (`Alarms.alarm_arns`)."""
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        # Dashboard names are the account's, not a region's: the region keeps the same stack
        # deployed in two regions from claiming one name twice.
        self.dashboard = cloudwatch.Dashboard(
            self,
            "Dashboard",
            dashboard_name=f"{stack.stack_name}-{Aws.REGION}",
            default_interval=Duration.hours(3),
        )
        self.dashboard.add_widgets(
            cloudwatch.TextWidget(
                markdown=(
                    f"# serverless-scheduler: {stack.stack_name}\n"
                    "Runs, lateness, queues, the poller, the worker and the API. Every alarm below "
                    "notifies the topic of the stack output `AlarmTopicArn`; what each one means and "
                    "what to do: `docs/operations/alarms.md`."
                ),
                width=24,
                height=2,
            )
        )
        self.dashboard.add_widgets(
            cloudwatch.AlarmStatusWidget(
                title="Alarms",
                alarms=[
                    cloudwatch.Alarm.from_alarm_arn(self, f"Alarm{index}", arn)
                    for index, arn in enumerate(alarm_arns)
                ],
                width=24,
                height=3,
            )
        )
        self.dashboard.add_widgets(self._runs(), self._lateness())
        self.dashboard.add_widgets(*self._queues(queues))
        self.dashboard.add_widgets(
            self._claims(), self._duration("Poller", poller), self._duration("Worker", worker)
        )
        self.dashboard.add_widgets(self._errors_and_throttles(poller, worker), self._api(rest_api))

    def _runs(self) -> cloudwatch.GraphWidget:
        return cloudwatch.GraphWidget(
            title="Runs per minute by outcome",
            left=[summed_over_services(metric, label) for label, metric in RUN_OUTCOMES.items()],
            left_y_axis=cloudwatch.YAxisProps(label="runs", min=0, show_units=False),
            width=12,
        )

    def _lateness(self) -> cloudwatch.GraphWidget:
        return cloudwatch.GraphWidget(
            title="Fire lateness (first attempts)",
            left=[
                scheduler_metric("worker", FIRE_LATENESS, cloudwatch.Stats.p(percentile), f"p{percentile}")
                for percentile in (50, 99)
            ],
            left_y_axis=cloudwatch.YAxisProps(label="ms", min=0, show_units=False),
            width=12,
        )

    def _queues(self, queues: SchedulerQueues) -> list[cloudwatch.IWidget]:
        visible = [
            queues.by_priority[priority].metric_approximate_number_of_messages_visible(
                statistic=cloudwatch.Stats.MAXIMUM, period=GRAPH_PERIOD, label=priority
            )
            for priority in PRIORITIES
        ]
        oldest = [
            queues.by_priority[priority].metric_approximate_age_of_oldest_message(
                statistic=cloudwatch.Stats.MAXIMUM, period=GRAPH_PERIOD, label=priority
            )
            for priority in PRIORITIES
        ]
        dead_letters = queues.dead_letter_queue.metric_approximate_number_of_messages_visible(
            statistic=cloudwatch.Stats.MAXIMUM, period=GRAPH_PERIOD, label="DLQ"
        )
        return [
            cloudwatch.GraphWidget(
                title="Queue depth (visible messages)",
                left=visible,
                left_y_axis=cloudwatch.YAxisProps(label="messages", min=0, show_units=False),
                width=8,
            ),
            cloudwatch.GraphWidget(
                title="Age of the oldest message",
                left=oldest,
                left_annotations=[
                    cloudwatch.HorizontalAnnotation(value=MAX_QUEUE_AGE_SECONDS, label="QueueBacklog alarm")
                ],
                left_y_axis=cloudwatch.YAxisProps(label="seconds", min=0, show_units=False),
                width=8,
            ),
            cloudwatch.SingleValueWidget(
                title="Dead-letter queue depth", metrics=[dead_letters], sparkline=True, width=8
            ),
        ]

    def _claims(self) -> cloudwatch.GraphWidget:
        return cloudwatch.GraphWidget(
            title="Claims per poll",
            left=[
                scheduler_metric(
                    "poller", RUNS_CLAIMED, cloudwatch.Stats.AVERAGE, "claims per poll (average)"
                ),
                scheduler_metric("poller", RUNS_CLAIMED, cloudwatch.Stats.MAXIMUM, "claims per poll (most)"),
                scheduler_metric(
                    "poller",
                    RUNS_SENT_UNCLAIMED,
                    cloudwatch.Stats.AVERAGE,
                    "one-offs sent unclaimed per poll",
                ),
            ],
            right=[scheduler_metric("poller", RUNS_CLAIMED, cloudwatch.Stats.SAMPLE_COUNT, "polls")],
            left_y_axis=cloudwatch.YAxisProps(label="runs", min=0, show_units=False),
            right_y_axis=cloudwatch.YAxisProps(label="polls", min=0, show_units=False),
            width=8,
        )

    def _duration(self, name: str, function: lambda_.Function) -> cloudwatch.GraphWidget:
        statistics = {
            "p50": cloudwatch.Stats.p(50),
            "p99": cloudwatch.Stats.p(99),
            "max": cloudwatch.Stats.MAXIMUM,
        }
        annotations = []
        if function.timeout is not None:
            annotations.append(
                cloudwatch.HorizontalAnnotation(value=function.timeout.to_milliseconds(), label="timeout")
            )
        return cloudwatch.GraphWidget(
            title=f"{name} duration",
            left=[
                function.metric_duration(statistic=statistic, period=GRAPH_PERIOD, label=label)
                for label, statistic in statistics.items()
            ],
            left_annotations=annotations,
            left_y_axis=cloudwatch.YAxisProps(label="ms", min=0, show_units=False),
            width=8,
        )

    def _errors_and_throttles(
        self, poller: lambda_.Function, worker: lambda_.Function
    ) -> cloudwatch.GraphWidget:
        return cloudwatch.GraphWidget(
            title="Worker and poller errors and throttles",
            left=[
                metric
                for name, function in (("worker", worker), ("poller", poller))
                for metric in (
                    function.metric_errors(
                        statistic=cloudwatch.Stats.SUM, period=GRAPH_PERIOD, label=f"{name} errors"
                    ),
                    function.metric_throttles(
                        statistic=cloudwatch.Stats.SUM, period=GRAPH_PERIOD, label=f"{name} throttles"
                    ),
                )
            ],
            left_y_axis=cloudwatch.YAxisProps(label="invocations", min=0, show_units=False),
            width=12,
        )

    def _api(self, rest_api: apigw.RestApi) -> cloudwatch.GraphWidget:
        return cloudwatch.GraphWidget(
            title="API 4xx and 5xx",
            left=[
                rest_api.metric_client_error(
                    statistic=cloudwatch.Stats.SUM, period=GRAPH_PERIOD, label="4xx"
                ),
                rest_api.metric_server_error(
                    statistic=cloudwatch.Stats.SUM, period=GRAPH_PERIOD, label="5xx"
                ),
            ],
            right=[
                rest_api.metric_count(statistic=cloudwatch.Stats.SUM, period=GRAPH_PERIOD, label="requests")
            ],
            left_y_axis=cloudwatch.YAxisProps(label="responses", min=0, show_units=False),
            right_y_axis=cloudwatch.YAxisProps(label="requests", min=0, show_units=False),
            width=12,
        )
