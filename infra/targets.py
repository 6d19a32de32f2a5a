"""What job targets the worker may reach with its own role: the targets an operator offers
every tenant, one list of ARN patterns per kind (CDK context `target_*_arns`, empty by
default), used for the worker's IAM grants (`workers`) and handed to the api function, which
refuses a target without an execution role outside them (`scheduler_core.domain.target_access`).
Any other target is reached through the tenant's own role (docs/security.md)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from aws_cdk import Stack
from constructs import Construct

from infra.config import SchedulerConfig
from infra.function import function_name_prefix


@dataclass(frozen=True)
class TargetGrant:
    """One kind of target: the CDK context key that lists it, the api's environment variable
    that carries it and the one action its delivery calls."""

    context_key: str
    variable: str
    action: str

    def patterns(self, config: SchedulerConfig) -> tuple[str, ...]:
        """The context's patterns (empty: no shared target of the kind)."""
        patterns: tuple[str, ...] = getattr(config, self.context_key)
        return patterns


TARGET_GRANTS = (
    TargetGrant("target_queue_arns", "TARGET_QUEUE_ARNS", "sqs:SendMessage"),
    TargetGrant("target_topic_arns", "TARGET_TOPIC_ARNS", "sns:Publish"),
    TargetGrant("target_event_bus_arns", "TARGET_EVENT_BUS_ARNS", "events:PutEvents"),
    TargetGrant("target_function_arns", "TARGET_FUNCTION_ARNS", "lambda:InvokeFunction"),
)


def target_check_environment(
    scope: Construct, config: SchedulerConfig, worker_role_arn: str
) -> dict[str, str]:
    """What the api function's target check reads: where the stack runs, the prefix of its
    functions' names, the patterns of each kind (JSON lists), exactly as granted, and the
    worker's role, which a tenant's execution role must trust."""
    stack = Stack.of(scope)
    return {
        "STACK_PARTITION": stack.partition,
        "STACK_REGION": stack.region,
        "STACK_ACCOUNT_ID": stack.account,
        "FUNCTION_NAME_PREFIX": function_name_prefix(scope),
        "WORKER_ROLE_ARN": worker_role_arn,
        **{grant.variable: json.dumps(list(grant.patterns(config))) for grant in TARGET_GRANTS},
    }


def target_reach_environment(config: SchedulerConfig) -> dict[str, str]:
    """What the api's target check and the worker's HTTP client read of what HTTP targets
    may reach (docs/security.md)."""
    return {
        "TARGET_PRIVATE_CIDRS": json.dumps(list(config.target_private_cidrs)),
        "ALLOW_HTTP_TARGETS": "true" if config.allow_http_targets else "false",
    }
