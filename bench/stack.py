"""The stack deployed into a moto server of the benchmark's own, with no functions running:
its table and queues, and the settings its functions are deployed with."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import boto3

from infra.config import REPO_ROOT
from infra.local.cloud import LOCAL_CONTEXT, STACK_NAME
from infra.local.deployment import (
    FAKE_CREDENTIALS,
    REGION,
    LocalAws,
    MotoServer,
    deploy,
    free_port,
    synthesize,
)
from scheduler_core.adapters.aws import RETRY_CONFIG
from scheduler_core.domain.vocabulary import Priority
from scheduler_core.settings import Settings

TENANT = "arn:aws:iam::123456789012:user/bench"  # the caller the jobs on this stack are created for


@contextlib.contextmanager
def environment(**values: str) -> Iterator[None]:
    """Set environment variables for the duration of the block, then restore them."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def moto_session() -> boto3.session.Session:
    """A session with fake credentials; `AWS_ENDPOINT_URL` (set by `BenchStack`) aims it at moto."""
    return boto3.session.Session(
        aws_access_key_id=FAKE_CREDENTIALS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=FAKE_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        region_name=REGION,
    )


@dataclass(frozen=True)
class DeployedFunction:
    """What the cost of a function depends on, as the synthesized stack deploys it."""

    name: str  # `api`, `poller`, `worker`: the function's name without the stack's prefix
    memory_mb: int
    architecture: str
    log_level: str
    service_name: str  # Powertools' service, on every log line and metric
    metrics_namespace: str


class BenchStack:
    """Within `with`, every boto3 client this process creates talks to this moto server."""

    def __init__(self, context: dict[str, Any] | None = None) -> None:
        """`context`: over the local cloud's (LOCAL_CONTEXT)."""
        self._context = LOCAL_CONTEXT | (context or {})
        self._moto: MotoServer | None = None
        self._environment: contextlib.ExitStack | None = None
        self.settings = Settings()
        self.functions: dict[str, DeployedFunction] = {}
        self.environments: dict[str, dict[str, str]] = {}  # each function's, as deployed
        self.event_source_mappings = 0  # one per priority queue, each long-polled even when idle
        self.worker_batch_size = 10  # the mappings' BatchSize (the largest, if they differ)
        self.endpoint_url = ""

    def __enter__(self) -> BenchStack:
        # Queues are purged between trials, faster than SQS's one purge a minute allows.
        with environment(MOTO_SQS_ENFORCE_STRICT_QUEUE_PURGE_BEHAVIOUR="false"):
            self._moto = MotoServer("127.0.0.1", free_port())
        try:
            self.endpoint_url = self._moto.url
            aws = LocalAws(self.endpoint_url)
            assembly = REPO_ROOT / "cdk.out"
            # As the local cloud deploys it: its targets are receivers on loopback, over http.
            synthesize(assembly, STACK_NAME, self._context)
            deployment = deploy(aws, assembly, STACK_NAME)
            lambda_client = aws.client("lambda")
            variables: dict[str, str] = {}
            for logical_id, resource in deployment.resources_of("AWS::Lambda::Function").items():
                configuration = lambda_client.get_function_configuration(
                    FunctionName=deployment.physical_ids[logical_id]
                )
                environment_variables = configuration.get("Environment", {}).get("Variables", {})
                for name, value in environment_variables.items():
                    if variables.setdefault(name, value) != value and name.startswith(("JOBS_", "QUEUE_")):
                        raise RuntimeError(f"the functions disagree on {name}")
                short_name = configuration["FunctionName"].removeprefix(f"{STACK_NAME}-")
                self.environments[short_name] = dict(environment_variables)
                self.functions[short_name] = DeployedFunction(
                    name=short_name,
                    memory_mb=int(configuration["MemorySize"]),
                    # From the template: moto's CloudFormation leaves `Architectures` out.
                    architecture=(resource["Properties"].get("Architectures") or ["x86_64"])[0],
                    log_level=environment_variables.get("POWERTOOLS_LOG_LEVEL", "INFO"),
                    service_name=environment_variables.get("POWERTOOLS_SERVICE_NAME", "service_undefined"),
                    metrics_namespace=environment_variables.get("POWERTOOLS_METRICS_NAMESPACE", ""),
                )
            self.settings = Settings.from_env(variables)
            # moto delivers to a queue's event source mappings itself, on every send (through
            # Docker, which fails, so each send re-receives the visible messages until the
            # redrive policy moves them to the DLQ). Nothing here runs the functions: off.
            mappings = lambda_client.list_event_source_mappings()["EventSourceMappings"]
            self.event_source_mappings = len(mappings)
            self.worker_batch_size = max((int(m.get("BatchSize", 10)) for m in mappings), default=10)
            for mapping in mappings:
                lambda_client.update_event_source_mapping(UUID=mapping["UUID"], Enabled=False)
            self._environment = contextlib.ExitStack()
            self._environment.enter_context(
                environment(
                    AWS_ENDPOINT_URL=self.endpoint_url,
                    AWS_DEFAULT_REGION=REGION,
                    AWS_REGION=REGION,
                    **FAKE_CREDENTIALS,
                )
            )
        except BaseException:
            self._moto.stop()
            raise
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._environment is not None:
            self._environment.close()
        if self._moto is not None:
            self._moto.stop()

    def client(self, service: str) -> Any:
        """A client outside any measurement (set-up, checks, clean-up)."""
        return moto_session().client(service, config=RETRY_CONFIG)  # type: ignore[call-overload]

    def clear(self) -> None:
        """Empty the jobs table and the priority queues, so each trial starts alike."""
        dynamodb = self.client("dynamodb")
        table = self.settings.jobs_table_name
        keys = [
            {"pk": item["pk"], "sk": item["sk"]}
            for page in dynamodb.get_paginator("scan").paginate(
                TableName=table, ProjectionExpression="pk, sk"
            )
            for item in page["Items"]
        ]
        for start in range(0, len(keys), 25):
            requests = {table: [{"DeleteRequest": {"Key": key}} for key in keys[start : start + 25]]}
            while requests:
                requests = dynamodb.batch_write_item(RequestItems=requests).get("UnprocessedItems")
        sqs = self.client("sqs")
        for priority in Priority:
            sqs.purge_queue(QueueUrl=self.settings.queue_url(priority))
