"""The public API (DESIGN §7): a REST API with IAM auth in front of the api function."""

from __future__ import annotations

import json
from collections.abc import Mapping

from aws_cdk import Acknowledgment, ArnFormat, Aws, Duration, Stack, Validations
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.compliance import skip_checkov_check
from infra.config import SchedulerConfig
from infra.function import (
    DEAD_LETTER_QUEUE_CHECK,
    LOG_GROUP_CMK_CHECK,
    LOG_RETENTION,
    RESERVED_CONCURRENCY_CHECK,
    SchedulerFunction,
    shared_environment,
)
from infra.job_store import TENANT_INDEX, JobStore
from infra.keys import StackKeys
from infra.layers import SharedLayers
from infra.queues import SchedulerQueues
from infra.targets import target_check_environment, target_reach_environment

STAGE_NAME = "prod"
# checkov: "Ensure API Gateway caching is enabled".
CACHING_CHECK = "CKV_AWS_120"


AUDIT_LOG_RETENTION = logs.RetentionDays.ONE_YEAR


class Api(Construct):
    """`/v1/...` routes, each method SigV4-signed (AWS_IAM), all proxied to one function.

    The function validates bodies itself so errors keep the API's own format; API Gateway
    only checks that required path parameters are present. The stage throttles requests as
    context `api_throttle_rate` and `api_throttle_burst` say.
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
        worker_role_arn: str,
    ) -> None:
        """`worker_role_arn`: the worker's role, which a tenant's execution role must trust."""
        super().__init__(scope, construct_id)
        # One line per mutating call (tenant, action, id, request id), apart from the
        # function's own logs: kept a year, readable without the rest (docs/security.md).
        self.audit_logs = logs.LogGroup(
            self, "AuditLogs", retention=AUDIT_LOG_RETENTION, encryption_key=keys.logs
        )
        keys.skip_if_aws_keys(self.audit_logs, LOG_GROUP_CMK_CHECK)
        self.function = SchedulerFunction(
            self,
            "Api",
            name="api",
            description="Serves the scheduler's REST API",
            layers=layers.all,
            log_level=config.log_level,
            # Below API Gateway's 29 s integration timeout, so our own error reaches the caller.
            timeout=Duration.seconds(25),
            keys=keys,
            # A job's target is checked at create as the worker's IAM grants and deny allow.
            environment={
                **shared_environment(config, store, queues),
                **target_check_environment(self, config, worker_role_arn),
                **target_reach_environment(config),
                "SECRETS_KEY_ID": keys.secrets.key_arn,
                "AUDIT_LOG_GROUP": self.audit_logs.log_group_name,
                # Per-tenant quotas, checked as jobs and workflows are made and changed.
                "TENANT_MAX_JOBS": str(config.tenant_max_jobs),
                "TENANT_MAX_FIRINGS_PER_MINUTE": str(config.tenant_max_firings_per_minute),
                "MIN_INTERVAL_SECONDS": str(config.min_interval_seconds),
                # Roles whose sessions are tenants each (scheduler_core.domain.tenancy).
                "PER_SESSION_TENANT_ROLES": json.dumps(list(config.per_session_tenant_roles)),
                # A create sent again with the same Idempotency-Key returns the first one's job.
                "IDEMPOTENCY_TABLE_NAME": store.idempotency_table.table_name,
            },
        )
        # Creating a job that fires within the lookahead claims it at once: the same
        # conditional TransactWriteItems as the poller, authorized as its item actions.
        # Runs are listed from the table; jobs from the tenant index. Retrying a failed run
        # is one conditional update and a send to its priority queue (never the DLQ).
        self.function.allow(
            actions=[
                "dynamodb:GetItem",
                "dynamodb:BatchGetItem",
                "dynamodb:PutItem",
                "dynamodb:UpdateItem",
                "dynamodb:Query",
            ],
            resources=[store.jobs_table.table_arn],
        )
        self.function.allow(actions=["dynamodb:Query"], resources=[store.jobs_index_arn(TENANT_INDEX)])
        # Powertools idempotency around a create with an Idempotency-Key: reads the key's
        # record, puts it (conditionally) before the create, updates it with the job, deletes
        # it when the create fails.
        self.function.allow(
            actions=["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"],
            resources=[store.idempotency_table.table_arn],
        )
        self.function.allow(
            actions=["sqs:SendMessage"],
            resources=[queue.queue_arn for queue in queues.priority_queues],
        )
        # Seals secret headers and tenants' signing secrets; never opens one (docs/security.md).
        # It opens a tenant's signing secrets to rotate them (the previous one signs on).
        self.function.allow(actions=["kms:Encrypt", "kms:Decrypt"], resources=[keys.secrets.key_arn])
        # Reads the trust policy of a target's execution role in this account (GetRole), to
        # refuse at create a role that does not let the worker in for the tenant.
        stack = Stack.of(self)
        roles = stack.format_arn(
            service="iam",
            region="",
            resource="role",
            resource_name="*",
            arn_format=ArnFormat.SLASH_RESOURCE_NAME,
        )
        self.function.allow(actions=["iam:GetRole"], resources=[roles])
        Validations.of(self.function.role).acknowledge(
            Acknowledgment(
                id="AwsSolutions::AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:iam::<AWS::AccountId>:role/*]",
                reason="A job's execution role is any role of the account a tenant names; GetRole reads "
                'its trust policy only (docs/security.md, "Execution roles").',
            )
        )
        # Its audit lines: a stream per instance, written to, never read or removed.
        self.function.allow(
            actions=["logs:CreateLogStream", "logs:PutLogEvents"], resources=[self.audit_logs.log_group_arn]
        )

        self.access_logs = logs.LogGroup(
            self, "AccessLogs", retention=LOG_RETENTION, encryption_key=keys.logs
        )
        self.rest_api = apigw.RestApi(
            self,
            "RestApi",
            # API Gateway's metrics are keyed by the API's name: the stack's own, so that two
            # stacks of an account and region do not share the dashboard's 4xx/5xx series.
            rest_api_name=Stack.of(self).stack_name,
            description="serverless-scheduler public API (v1)",
            endpoint_types=[apigw.EndpointType.REGIONAL],
            # Stage logging needs the account-level API Gateway logging role; creating it here
            # lets the stack deploy into a fresh account.
            cloud_watch_role=True,
            deploy_options=apigw.StageOptions(
                stage_name=STAGE_NAME,
                access_log_destination=apigw.LogGroupLogDestination(self.access_logs),
                access_log_format=apigw.AccessLogFormat.json_with_standard_fields(
                    caller=True,
                    http_method=True,
                    ip=True,
                    protocol=True,
                    request_time=True,
                    resource_path=True,
                    response_length=True,
                    status=True,
                    user=True,
                ),
                logging_level=apigw.MethodLoggingLevel.ERROR,
                # Request and response bodies carry job payloads: never log them.
                data_trace_enabled=False,
                metrics_enabled=True,
                tracing_enabled=True,
                # Every method of the stage (API Gateway's `/*/*` method settings).
                throttling_rate_limit=config.api_throttle_rate,
                throttling_burst_limit=config.api_throttle_burst,
            ),
        )
        # API Gateway creates the execution log group on first use without retention;
        # declaring it first keeps those logs for the same month as the others.
        self.execution_logs = logs.LogGroup(
            self,
            "ExecutionLogs",
            log_group_name=f"API-Gateway-Execution-Logs_{self.rest_api.rest_api_id}/{STAGE_NAME}",
            retention=LOG_RETENTION,
            encryption_key=keys.logs,
        )
        self.rest_api.deployment_stage.node.add_dependency(self.execution_logs)
        # The stack's ApiUrl output replaces RestApi's own, which refers to the Stage (see `url`).
        self.rest_api.node.try_remove_child("Endpoint")

        self._validator = self.rest_api.add_request_validator(
            "RequiredParameters",
            validate_request_parameters=True,
            validate_request_body=False,
        )
        self._integration = apigw.LambdaIntegration(
            self.function.function,
            # One invoke permission per method for the deployed stage, none for console tests.
            allow_test_invoke=False,
        )
        self._add_routes()
        self._acknowledge_findings()
        self._answer_checkov(keys)

    @property
    def url(self) -> str:
        """The stage's base URL, built without a reference to the Stage resource.

        moto's CloudFormation has no AWS::ApiGateway::Stage, so a Ref to it would render
        as "None" there; the stage name is a constant anyway.
        """
        return f"https://{self.rest_api.rest_api_id}.execute-api.{Aws.REGION}.{Aws.URL_SUFFIX}/{STAGE_NAME}/"

    def _add_routes(self) -> None:
        v1 = self.rest_api.root.add_resource("v1")
        # Below an item, its actions (pause, resume, trigger, backfill, runs and below): routed
        # in the function (its own 404 for a sub-path it does not know).
        jobs = self._add_collection(v1, "jobs", "job_id")
        # Beside `{job_id}`: API Gateway matches a literal path part before a variable one.
        self._add_method(jobs.add_resource("batch"), "POST", {"method.request.header.Idempotency-Key": False})
        self._add_collection(v1, "workflows", "workflow_id")
        signing_secrets = v1.add_resource("signing-secrets")
        for verb in ("GET", "POST"):
            self._add_method(signing_secrets, verb, {})
        self._add_method(v1.add_resource("tenant"), "GET", {})
        self._add_method(v1.add_resource("openapi.json"), "GET", {})
        self._add_method(v1.add_resource("docs"), "GET", {})

    def _add_collection(self, v1: apigw.Resource, name: str, id_name: str) -> apigw.Resource:
        """`/v1/{name}` (list, create), `/v1/{name}/{id}` (read, change, cancel) and
        everything below an item, for jobs and workflows alike; the collection's resource."""
        collection = v1.add_resource(name)
        item = collection.add_resource("{" + id_name + "}")
        item_id = {f"method.request.path.{id_name}": True}
        listing = ("status", "name_prefix", "limit", "cursor")
        self._add_method(
            collection, "GET", {f"method.request.querystring.{query}": False for query in listing}
        )
        self._add_method(collection, "POST", {"method.request.header.Idempotency-Key": False})
        for verb in ("GET", "PATCH", "DELETE"):
            self._add_method(item, verb, item_id)
        self._add_method(item.add_resource("{proxy+}"), "ANY", {**item_id, "method.request.path.proxy": True})
        return collection

    def _add_method(self, resource: apigw.Resource, verb: str, parameters: Mapping[str, bool]) -> None:
        resource.add_method(
            verb,
            self._integration,
            authorization_type=apigw.AuthorizationType.IAM,
            request_validator=self._validator,
            request_parameters=dict(parameters) or None,
        )

    def _answer_checkov(self, keys: StackKeys) -> None:
        for log_group in (self.access_logs, self.execution_logs):
            keys.skip_if_aws_keys(log_group, LOG_GROUP_CMK_CHECK)
        function = self.function.function
        skip_checkov_check(
            function,
            DEAD_LETTER_QUEUE_CHECK,
            "Invoked synchronously by API Gateway: a failure is the caller's error response, and a "
            "Lambda DLQ only ever receives failed asynchronous invocations.",
        )
        skip_checkov_check(
            function,
            RESERVED_CONCURRENCY_CHECK,
            "Bounded by the stage's throttling (context api_throttle_rate and api_throttle_burst); the "
            "poller's reserved concurrency keeps an API flood from starving the polls.",
        )
        skip_checkov_check(
            self.rest_api.deployment_stage,
            CACHING_CHECK,
            "Jobs and runs change with every call and callers read their own writes: a cache would "
            "serve stale jobs and run states.",
        )

    def _acknowledge_findings(self) -> None:
        Validations.of(self.rest_api).acknowledge(
            Acknowledgment(
                id="AwsSolutions::AwsSolutions-COG4",
                reason=(
                    "The API is for machine clients in the deployer's AWS account: every method "
                    "requires SigV4-signed requests (AWS_IAM), authorized by the callers' IAM "
                    "policies, so there is no Cognito user pool."
                ),
            ),
            Acknowledgment(
                id="AwsSolutions::AwsSolutions-APIG2",
                reason=(
                    "A request validator checks every method's required parameters. Bodies are "
                    "validated by the api function against the same pydantic models that define the "
                    "API, so a bad body gets the API's own 400 error format naming the field, which "
                    "an API Gateway model validation error cannot produce."
                ),
            ),
        )
        Validations.of(self.rest_api.deployment_stage).acknowledge(
            Acknowledgment(
                id="AwsSolutions::AwsSolutions-APIG3",
                reason=(
                    "Every method requires IAM auth, so unsigned traffic is rejected before it reaches "
                    "the function, and the stage throttles requests as context api_throttle_rate and "
                    "api_throttle_burst say. A WAF web "
                    "ACL (billed per ACL and request) is left for deployers to associate to the stage."
                ),
            ),
        )
        Validations.of(self.rest_api.node.find_child("CloudWatchRole")).acknowledge(
            Acknowledgment(
                id=(
                    "AwsSolutions::AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:"
                    "policy/service-role/AmazonAPIGatewayPushToCloudWatchLogs]"
                ),
                reason=(
                    "The account-level role API Gateway uses to write stage logs; AWS documents this "
                    "managed policy for it. It only allows CloudWatch Logs writes and is assumable by "
                    "apigateway.amazonaws.com only; it is not attached to any function."
                ),
            )
        )
