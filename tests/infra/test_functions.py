"""The three Lambda functions: runtime, layers, logs, tracing and environment."""

from __future__ import annotations

import pytest
from aws_cdk import App, Duration, Stack
from aws_cdk import aws_lambda as lambda_

from infra.config import LAMBDA_ARCHITECTURE, LAMBDA_PYTHON_VERSION, PRIORITIES, ConfigError, output_variable
from infra.function import SchedulerFunction
from infra.keys import StackKeys
from scheduler_core.domain.vocabulary import Priority
from scheduler_core.settings import Settings
from tests.infra.conftest import Synthesis

POWERTOOLS = {"POWERTOOLS_SERVICE_NAME", "POWERTOOLS_METRICS_NAMESPACE", "POWERTOOLS_LOG_LEVEL"}
QUEUE_URLS = {"QUEUE_URL_HIGH", "QUEUE_URL_NORMAL", "QUEUE_URL_LOW"}
# What every function reads: each one moves runs and sends their messages.
SHARED_ENVIRONMENT = {
    "JOBS_TABLE_NAME",
    *QUEUE_URLS,
    "DLQ_URL",
    "SHARD_COUNT",
    "LOOKAHEAD_SECONDS",
    "DELIVERY_LEAD_SECONDS",
    "RESEND_AFTER_SECONDS",
    "RUN_RETENTION_DAYS",
}
# What the api's target check reads (infra/targets.py).
TARGET_CHECK_ENVIRONMENT = {
    "STACK_PARTITION",
    "STACK_REGION",
    "STACK_ACCOUNT_ID",
    "FUNCTION_NAME_PREFIX",
    "TARGET_QUEUE_ARNS",
    "TARGET_TOPIC_ARNS",
    "TARGET_EVENT_BUS_ARNS",
    "TARGET_FUNCTION_ARNS",
    "WORKER_ROLE_ARN",
}
# What HTTP targets may reach (the api checks, the worker connects) and the secrets key.
TARGET_REACH_ENVIRONMENT = {"TARGET_PRIVATE_CIDRS", "ALLOW_HTTP_TARGETS", "SECRETS_KEY_ID"}
QUOTA_ENVIRONMENT = {"TENANT_MAX_JOBS", "TENANT_MAX_FIRINGS_PER_MINUTE", "MIN_INTERVAL_SECONDS"}
EXPECTED_ENVIRONMENT = {
    "api": SHARED_ENVIRONMENT
    | TARGET_CHECK_ENVIRONMENT
    | TARGET_REACH_ENVIRONMENT
    | QUOTA_ENVIRONMENT
    | {"IDEMPOTENCY_TABLE_NAME", "AUDIT_LOG_GROUP", "PER_SESSION_TENANT_ROLES"},
    "poller": SHARED_ENVIRONMENT | {"CLAIM_PARALLELISM", "ONE_OFFS_CLAIMED_AT_START"},
    "worker": SHARED_ENVIRONMENT
    | TARGET_REACH_ENVIRONMENT
    | {"RUN_LEASE_SECONDS", "WORKER_ROLE_ARN", "WORKER_BATCH_SIZE"},
}


def _newest_python_runtime() -> str:
    def version(runtime: lambda_.Runtime) -> tuple[int, ...]:
        return tuple(int(part) for part in runtime.name.removeprefix("python").split("."))

    python = [runtime for runtime in lambda_.Runtime.ALL if runtime.family == lambda_.RuntimeFamily.PYTHON]
    return max(python, key=version).name


def test_functions_run_on_the_newest_python_runtime_cdk_offers(synthesis: Synthesis) -> None:
    newest = _newest_python_runtime()
    assert newest == f"python{LAMBDA_PYTHON_VERSION}"
    for name in EXPECTED_ENVIRONMENT:
        properties = synthesis.function(name)["Properties"]
        assert properties["Runtime"] == newest, name
        assert properties["Architectures"] == [LAMBDA_ARCHITECTURE] == ["arm64"], name
    for layer in synthesis.resources("AWS::Lambda::LayerVersion").values():
        assert layer["Properties"]["CompatibleRuntimes"] == [newest]
        assert layer["Properties"]["CompatibleArchitectures"] == [LAMBDA_ARCHITECTURE]


def test_every_function_gets_the_core_and_deps_layers(synthesis: Synthesis) -> None:
    shared = synthesis.stack.layers
    layers = [{"Ref": synthesis.logical_id(shared.core)}, {"Ref": synthesis.logical_id(shared.deps)}]
    for name in EXPECTED_ENVIRONMENT:
        properties = synthesis.function(name)["Properties"]
        assert properties["Handler"] == "handler.handler", name
        assert properties["Layers"] == layers, name


def test_every_function_is_traced_and_logs_to_its_own_log_group_with_retention(synthesis: Synthesis) -> None:
    log_groups = synthesis.resources("AWS::Logs::LogGroup")
    used = []
    for name in EXPECTED_ENVIRONMENT:
        properties = synthesis.function(name)["Properties"]
        assert properties["TracingConfig"] == {"Mode": "Active"}, name
        log_group_id = properties["LoggingConfig"]["LogGroup"]["Ref"]
        assert log_groups[log_group_id]["Properties"]["RetentionInDays"] == 30, name
        used.append(log_group_id)
    assert len(set(used)) == 3


def test_every_function_has_exactly_the_environment_it_reads(synthesis: Synthesis) -> None:
    for name, expected in EXPECTED_ENVIRONMENT.items():
        variables = synthesis.function(name)["Properties"]["Environment"]["Variables"]
        assert set(variables) == expected | POWERTOOLS, name
        assert variables["POWERTOOLS_SERVICE_NAME"] == f"scheduler-{name}"
        assert variables["POWERTOOLS_METRICS_NAMESPACE"] == "ServerlessScheduler"
        assert variables["POWERTOOLS_LOG_LEVEL"] == "INFO"


def test_environment_names_are_the_settings_models_aliases(synthesis: Synthesis) -> None:
    aliases = {field.alias for field in Settings.model_fields.values()}
    for name in EXPECTED_ENVIRONMENT:
        variables = set(synthesis.function(name)["Properties"]["Environment"]["Variables"])
        assert variables - POWERTOOLS <= aliases, name


def test_environment_points_at_this_stacks_tables_and_queues(synthesis: Synthesis) -> None:
    stack = synthesis.stack
    refs = {
        "JOBS_TABLE_NAME": stack.store.jobs_table,
        "IDEMPOTENCY_TABLE_NAME": stack.store.idempotency_table,
        "DLQ_URL": stack.queues.dead_letter_queue,
        **{f"QUEUE_URL_{priority}": queue for priority, queue in stack.queues.by_priority.items()},
    }
    for name in EXPECTED_ENVIRONMENT:
        variables = synthesis.function(name)["Properties"]["Environment"]["Variables"]
        for variable, construct in refs.items():
            if variable in variables:
                assert variables[variable] == {"Ref": synthesis.logical_id(construct)}, (name, variable)


def test_numbers_in_the_environment_come_from_the_context(synthesis: Synthesis) -> None:
    config = synthesis.config
    api, poller, worker = (
        synthesis.function(name)["Properties"]["Environment"]["Variables"]
        for name in ("api", "poller", "worker")
    )
    for variables in (api, poller, worker):
        assert variables["SHARD_COUNT"] == str(config.shards) == "4"
        assert variables["LOOKAHEAD_SECONDS"] == str(config.lookahead_seconds) == "120"
        assert variables["DELIVERY_LEAD_SECONDS"] == str(config.delivery_lead_seconds) == "2"
        assert variables["RESEND_AFTER_SECONDS"] == str(config.resend_after_seconds) == "60"
        assert variables["RUN_RETENTION_DAYS"] == str(config.run_retention_days) == "30"


def test_the_resend_timer_comes_from_the_context(narrowed: Synthesis) -> None:
    assert narrowed.config.resend_after_seconds == 300
    for name in EXPECTED_ENVIRONMENT:
        variables = narrowed.function(name)["Properties"]["Environment"]["Variables"]
        assert variables["RESEND_AFTER_SECONDS"] == "300", name


def test_the_shared_settings_are_stack_outputs_named_after_them(synthesis: Synthesis) -> None:
    """`make redrive` reads these outputs and acts with exactly the functions' settings."""
    outputs = {
        output_variable(key): output["Value"]
        for key, output in synthesis.template.find_outputs("*").items()
        if key
        not in (
            "ApiUrl",
            "WorkerRoleArn",
            "SecretsKeyId",
            "PerSessionTenantRoles",
            "AlarmTopicArn",
            "DashboardName",
        )
    }
    assert set(outputs) == SHARED_ENVIRONMENT
    for name in EXPECTED_ENVIRONMENT:
        variables = synthesis.function(name)["Properties"]["Environment"]["Variables"]
        assert {variable: variables[variable] for variable in SHARED_ENVIRONMENT} == outputs, name


def test_the_run_lease_is_the_queues_visibility_timeout(synthesis: Synthesis) -> None:
    lease = synthesis.function("worker")["Properties"]["Environment"]["Variables"]["RUN_LEASE_SECONDS"]
    timeouts = {
        queue["Properties"]["VisibilityTimeout"]
        for queue in synthesis.resources("AWS::SQS::Queue").values()
        if "RedrivePolicy" in queue["Properties"]
    }
    assert timeouts == {int(lease)}
    worker_timeout = synthesis.function("worker")["Properties"]["Timeout"]
    assert worker_timeout == synthesis.config.worker_timeout_seconds == 90


def test_queue_priorities_are_the_domains_priorities() -> None:
    assert tuple(priority.value for priority in Priority) == PRIORITIES


def test_nothing_needs_a_custom_resource(synthesis: Synthesis) -> None:
    # moto's CloudFormation cannot run custom resources (log retention, auto-delete, ...).
    types = {resource["Type"] for resource in synthesis.template.to_json()["Resources"].values()}
    assert not {t for t in types if t.startswith("Custom::") or t == "AWS::CloudFormation::CustomResource"}
    assert len(synthesis.resources("AWS::Lambda::Function")) == 3


def test_a_stack_name_that_makes_a_function_name_too_long_is_refused() -> None:
    """Functions are named "<stack name>-<name>", within Lambda's 64 characters."""
    stack = Stack(App(), "S" * 58)

    with pytest.raises(ConfigError, match="over Lambda's 64 characters"):
        SchedulerFunction(
            stack,
            "Worker",
            name="worker",
            description="too long a name",
            layers=[],
            environment={},
            log_level="INFO",
            timeout=Duration.seconds(1),
            keys=StackKeys(stack, "Keys", customer_managed=False),
        )
    fits = Stack(App(), "S" * 57)
    SchedulerFunction(
        fits,
        "Worker",
        name="worker",
        description="just fits",
        layers=[],
        environment={},
        log_level="INFO",
        timeout=Duration.seconds(1),
        keys=StackKeys(fits, "Keys", customer_managed=False),
    )


def test_the_pollers_claims_come_from_the_context(synthesis: Synthesis, narrowed: Synthesis) -> None:
    for stack, parallelism, at_start in ((synthesis, "16", "false"), (narrowed, "24", "true")):
        variables = stack.function("poller")["Properties"]["Environment"]["Variables"]
        assert variables["CLAIM_PARALLELISM"] == parallelism
        assert variables["ONE_OFFS_CLAIMED_AT_START"] == at_start


def test_a_deployment_reaches_public_https_targets_only_by_default(synthesis: Synthesis) -> None:
    for name in ("api", "worker"):
        variables = synthesis.function(name)["Properties"]["Environment"]["Variables"]
        assert variables["TARGET_PRIVATE_CIDRS"] == "[]", name
        assert variables["ALLOW_HTTP_TARGETS"] == "false", name
        assert variables["SECRETS_KEY_ID"] == {
            "Fn::GetAtt": [synthesis.logical_id(synthesis.stack.keys.secrets), "Arn"]
        }, name
