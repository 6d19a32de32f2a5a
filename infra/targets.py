"""What job targets the worker may reach: one list of ARN patterns per kind, used for the
worker's IAM grants (`workers`) and handed to the api function, which refuses a target
outside them at create and change (`scheduler_core.domain.target_access`)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from aws_cdk import ArnFormat, Stack
from constructs import Construct

from infra.config import SchedulerConfig
from infra.function import function_name_prefix


@dataclass(frozen=True)
class TargetGrant:
    """One kind of target: the CDK context key that narrows it, the api's environment
    variable that carries it, the one action its delivery calls and the default resource
    (any of the kind in the stack's account and region)."""

    context_key: str
    variable: str
    action: str
    service: str
    default_resource: str

    def configured(self, config: SchedulerConfig) -> tuple[str, ...] | None:
        """The context's patterns; None when unset (the default)."""
        patterns: tuple[str, ...] | None = getattr(config, self.context_key)
        return patterns

    def patterns(self, scope: Construct, config: SchedulerConfig) -> list[str]:
        """The ARN patterns granted: the context's, or the stack's account and region."""
        configured = self.configured(config)
        if configured is not None:
            return list(configured)
        return [
            Stack.of(scope).format_arn(
                service=self.service, resource=self.default_resource, arn_format=ArnFormat.NO_RESOURCE_NAME
            )
        ]


TARGET_GRANTS = (
    TargetGrant("target_queue_arns", "TARGET_QUEUE_ARNS", "sqs:SendMessage", "sqs", "*"),
    TargetGrant("target_topic_arns", "TARGET_TOPIC_ARNS", "sns:Publish", "sns", "*"),
    TargetGrant(
        "target_event_bus_arns", "TARGET_EVENT_BUS_ARNS", "events:PutEvents", "events", "event-bus/*"
    ),
    TargetGrant(
        "target_function_arns", "TARGET_FUNCTION_ARNS", "lambda:InvokeFunction", "lambda", "function:*"
    ),
)


def target_check_environment(scope: Construct, config: SchedulerConfig) -> dict[str, str]:
    """What the api function's target check reads: where the stack runs, the prefix of its
    functions' names and the patterns of each kind (JSON lists), exactly as granted."""
    stack = Stack.of(scope)
    return {
        "STACK_PARTITION": stack.partition,
        "STACK_REGION": stack.region,
        "STACK_ACCOUNT_ID": stack.account,
        "FUNCTION_NAME_PREFIX": function_name_prefix(scope),
        **{grant.variable: stack.to_json_string(grant.patterns(scope, config)) for grant in TARGET_GRANTS},
    }


def target_reach_environment(config: SchedulerConfig) -> dict[str, str]:
    """What the api's target check and the worker's HTTP client read of what HTTP targets
    may reach (docs/security.md)."""
    return {
        "TARGET_PRIVATE_CIDRS": json.dumps(list(config.target_private_cidrs)),
        "ALLOW_HTTP_TARGETS": "true" if config.allow_http_targets else "false",
    }
