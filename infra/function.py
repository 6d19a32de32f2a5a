"""One Lambda function of the scheduler, with its own role and log group."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from aws_cdk import Acknowledgment, Duration, Stack, Validations
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.compliance import skip_checkov_check
from infra.config import FUNCTIONS_DIR, ConfigError, SchedulerConfig
from infra.job_store import JobStore
from infra.keys import StackKeys
from infra.layers import PYTHON_ASSET_EXCLUDES, lambda_architecture, lambda_runtime
from infra.queues import SchedulerQueues

METRICS_NAMESPACE = "ServerlessScheduler"
LOG_RETENTION = logs.RetentionDays.ONE_MONTH
# Lambda's limit on a function name.
MAX_FUNCTION_NAME = 64
# checkov's checks of a function and its log group that the stack answers here.
LOG_GROUP_CMK_CHECK = "CKV_AWS_158"
ENVIRONMENT_CMK_CHECK = "CKV_AWS_173"
IN_VPC_CHECK = "CKV_AWS_117"
DEAD_LETTER_QUEUE_CHECK = "CKV_AWS_116"
RESERVED_CONCURRENCY_CHECK = "CKV_AWS_115"
NOT_IN_A_VPC = (
    "It calls only AWS APIs (IAM-authorized over TLS) and public HTTP targets, with no private "
    "resource to reach; a VPC would add NAT gateways and endpoints and protect nothing more."
)


def function_name_prefix(scope: Construct) -> str:
    """Every function of the stack is named with it: ours explicitly (`<stack name>-api`), any
    other by CloudFormation (`<stack name>-<logical id>-<suffix>`). The worker's IAM deny and
    the API's target check both rely on it."""
    return f"{Stack.of(scope).stack_name}-"


def shared_environment(config: SchedulerConfig, store: JobStore, queues: SchedulerQueues) -> dict[str, str]:
    """What every function reads, because each one moves runs and sends their messages: the
    API (claims at create, re-drives), the poller (claims, the watchdog) and the worker
    (retries, dead letters). They must agree on shards, timers and retention. The stack
    also outputs it, so tools such as `make redrive` run with the very same settings."""
    return {
        "JOBS_TABLE_NAME": store.jobs_table.table_name,
        **queues.url_environment(),
        # Run records go here; the API also refuses it (like the priority queues) as a target.
        "DLQ_URL": queues.dead_letter_queue.queue_url,
        "SHARD_COUNT": str(config.shards),
        "LOOKAHEAD_SECONDS": str(config.lookahead_seconds),
        "DELIVERY_LEAD_SECONDS": str(config.delivery_lead_seconds),
        "RESEND_AFTER_SECONDS": str(config.resend_after_seconds),
        "RUN_RETENTION_DAYS": str(config.run_retention_days),
    }


class SchedulerFunction(Construct):
    """A function built from functions/<name> (`handler.handler`), traced, with the shared layers.

    Its role starts with nothing but writing to its own log group; each concern adds the
    statements its function needs. No managed policy, no role shared between functions.
    With customer managed keys its log group and environment are encrypted under them, and
    it may use the data key as DynamoDB and SQS do for it: every function of the stack reads
    and writes the jobs table and sends run messages (`shared_environment`).
    `reserved_concurrency`: set aside for it alone (and its most at once); None: the account's
    unreserved pool.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        name: str,
        description: str,
        layers: Sequence[lambda_.ILayerVersion],
        environment: Mapping[str, str],
        log_level: str,
        timeout: Duration,
        keys: StackKeys,
        memory_size: int = 512,
        reserved_concurrency: int | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        function_name = f"{function_name_prefix(self)}{name}"
        if len(function_name) > MAX_FUNCTION_NAME:
            raise ConfigError(
                f"function name {function_name!r} is over Lambda's {MAX_FUNCTION_NAME} characters: "
                "give the stack a shorter name"
            )
        # An explicit log group sets retention without CDK's log-retention custom resource.
        self.log_group = logs.LogGroup(self, "Logs", retention=LOG_RETENTION, encryption_key=keys.logs)
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"The {name} function of serverless-scheduler",
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                resources=[self.log_group.log_group_arn],
            )
        )
        self.function = lambda_.Function(
            self,
            "Function",
            # A name of ours, not CloudFormation's: the worker's IAM deny on invoking the stack's
            # functions and the API's refusal of them as targets rely on its prefix.
            function_name=function_name,
            description=description,
            runtime=lambda_runtime(),
            architecture=lambda_architecture(),
            code=lambda_.Code.from_asset(str(FUNCTIONS_DIR / name), exclude=PYTHON_ASSET_EXCLUDES),
            handler="handler.handler",
            layers=list(layers),
            role=self.role,
            log_group=self.log_group,
            timeout=timeout,
            memory_size=memory_size,
            reserved_concurrent_executions=reserved_concurrency,
            tracing=lambda_.Tracing.ACTIVE,
            # Names, URLs and numbers only, never a secret; under the data key all the same.
            environment_encryption=keys.data,
            environment={
                **environment,
                "POWERTOOLS_SERVICE_NAME": f"scheduler-{name}",
                "POWERTOOLS_METRICS_NAMESPACE": METRICS_NAMESPACE,
                "POWERTOOLS_LOG_LEVEL": log_level,
            },
        )
        Validations.of(self.role).acknowledge(
            Acknowledgment(
                id="AwsSolutions::AwsSolutions-IAM5[Resource::*]",
                reason=(
                    "Active tracing needs xray:PutTraceSegments and xray:PutTelemetryRecords, "
                    "which support no resource-level permissions: X-Ray only accepts Resource '*'."
                ),
            )
        )
        if keys.data is not None:
            # Decrypt: DynamoDB reading the tables' key, SQS receiving; GenerateDataKey: SQS
            # sending. (Lambda decrypts the environment through a grant of its own.)
            self.allow(["kms:Decrypt", "kms:GenerateDataKey"], [keys.data.key_arn])
        keys.skip_if_aws_keys(self.log_group, LOG_GROUP_CMK_CHECK)
        keys.skip_if_aws_keys(self.function, ENVIRONMENT_CMK_CHECK)
        skip_checkov_check(self.function, IN_VPC_CHECK, NOT_IN_A_VPC)

    def allow(self, actions: Sequence[str], resources: Sequence[str]) -> None:
        """Add one statement to this function's role."""
        self.role.add_to_policy(iam.PolicyStatement(actions=list(actions), resources=list(resources)))
