"""The local cloud: the synthesized stack deployed into moto, its functions run in local
processes, driven the way AWS would drive them (DESIGN §6)."""

from __future__ import annotations

import sys
import threading
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, TextIO

from infra.config import REPO_ROOT
from infra.local.api_gateway import CALLER_HEADER, ApiGateway, deployed_routes
from infra.local.console import Console, short_name
from infra.local.deployment import (
    Deployment,
    LocalAws,
    MotoServer,
    deploy,
    free_port,
    function_specs,
    runtime_environment,
    synthesize,
)
from infra.local.event_sources import SqsEventSource, event_sources
from infra.local.functions import FunctionHost
from infra.local.identity import IamIds
from infra.local.schedules import ScheduleDriver, scheduled_targets
from scheduler_cli.console.server import local_cloud_console
from scheduler_core.domain.addresses import LOCAL_CLOUD_NETWORKS

STACK_NAME = "ServerlessScheduler"
DEFAULT_CALLER = "arn:aws:iam::123456789012:user/local"
# What the local cloud's stack differs in from a deployment's (docs/security.md): its webhook
# receivers listen on loopback, over plain HTTP. Never link-local: the guard refuses that.
LOCAL_CONTEXT: dict[str, Any] = {
    "target_private_cidrs": list(LOCAL_CLOUD_NETWORKS),
    "allow_http_targets": True,
}


@dataclass
class LocalCloudOptions:
    host: str = "127.0.0.1"
    api_port: int = 8080  # 0: any free port
    moto_port: int = 0  # 0: any free port
    caller: str = DEFAULT_CALLER
    assembly_dir: Path = field(default_factory=lambda: REPO_ROOT / "cdk.out")
    stack_name: str = STACK_NAME
    # CDK context on top of cdk.json's (as `cdk -c key=value`), e.g. a shorter worker
    # timeout and with it a shorter run lease. Give such a stack an `assembly_dir` of its own.
    context: dict[str, Any] = field(default_factory=dict)
    verbose: bool = False
    out: TextIO = field(default_factory=lambda: sys.stdout)


class LocalCloud:
    def __init__(self, options: LocalCloudOptions | None = None) -> None:
        self.options = options or LocalCloudOptions()
        self.console = Console(self.options.out, self.options.verbose)
        self.hosts: dict[str, FunctionHost] = {}
        self.event_sources: list[SqsEventSource] = []
        self._moto: MotoServer | None = None
        self._api: ApiGateway | None = None
        self._schedules: ScheduleDriver | None = None
        self.deployment: Deployment | None = None
        self.aws: LocalAws | None = None

    @property
    def api_url(self) -> str:
        assert self._api is not None, "start() first"
        return self._api.url

    @property
    def moto_url(self) -> str:
        assert self._moto is not None, "start() first"
        return self._moto.url

    def start(self) -> LocalCloud:
        options = self.options
        try:
            synthesize(options.assembly_dir, options.stack_name, LOCAL_CONTEXT | options.context)
            self._moto = MotoServer(options.host, options.moto_port or free_port(options.host))
            self.aws = LocalAws(self._moto.url)
            self.deployment = deploy(self.aws, options.assembly_dir, options.stack_name)
            self._run_functions()
            self._drive()
        except BaseException:
            self.stop()
            raise
        return self

    def _run_functions(self) -> None:
        assert self.aws is not None
        assert self.deployment is not None
        # A function's concurrency: its reserved concurrency, else what its queue mappings allow.
        concurrency: dict[str, int] = defaultdict(int)
        for mapping in self.aws.client("lambda").list_event_source_mappings()["EventSourceMappings"]:
            concurrency[mapping["FunctionArn"]] += int(
                (mapping.get("ScalingConfig") or {}).get("MaximumConcurrency", 10)
            )
        base_env = runtime_environment(self.aws.endpoint_url)
        for spec in function_specs(self.aws, self.deployment, concurrency):
            self.hosts[spec.arn] = FunctionHost(spec, base_env, self.console.function_log)
        warmers = [threading.Thread(target=host.warm) for host in self.hosts.values()]
        for warmer in warmers:
            warmer.start()
        for warmer in warmers:
            warmer.join()

    def _drive(self) -> None:
        assert self.aws is not None
        assert self.deployment is not None
        options = self.options
        stages = [
            r["Properties"].get("StageName")
            for r in self.deployment.resources_of("AWS::ApiGateway::Stage").values()
        ]
        account = self.aws.client("sts").get_caller_identity()["Account"]
        self._api = ApiGateway(
            deployed_routes(self.aws),
            self.hosts,
            options.host,
            options.api_port,
            stage=next((s for s in stages if s), "prod"),
            default_caller=options.caller,
            account=account,
            on_error=self.console.error,
            principal_ids=IamIds(self.aws.client("iam")),
        )
        self._api.mount(
            "/console/", local_cloud_console(self._api.url, self.aws.endpoint_url, options.stack_name).handle
        )
        self._api.start()
        self.event_sources = event_sources(self.aws, self.hosts, self.console.error)
        # moto tries to run the mappings itself (through Docker, which fails): each failed try
        # returns the batch with its receive count raised, until the redrive policy moves it
        # to the DLQ. The local cloud runs them, so moto's own attempts are switched off.
        lambda_client = self.aws.client("lambda")
        for mapping in lambda_client.list_event_source_mappings()["EventSourceMappings"]:
            lambda_client.update_event_source_mapping(UUID=mapping["UUID"], Enabled=False)
        for source in self.event_sources:
            source.start()
        targets = scheduled_targets(self.aws, self.hosts)
        self._schedules = ScheduleDriver(targets, lambda t, message: self.console.error(t.rule, message))
        self._schedules.start()

    def observe_batches(self, observer: Callable[[str, list[dict[str, Any]]], None]) -> None:
        """Call `observer(queue_arn, records)` for every batch a queue mapping hands over."""
        for source in self.event_sources:
            source.observers.append(observer)

    def describe(self) -> None:
        """The start-up screen."""
        assert self.deployment is not None
        c = self.console
        api = self.api_url
        c.print("serverless-scheduler — local cloud (the CDK stack on moto, offline)")
        c.print()
        c.print(f"  API    {api}/v1   as {self.options.caller}")
        c.print(f"         (header '{CALLER_HEADER}: <name or ARN>' acts as another tenant)")
        c.print(f"  moto   {self.moto_url}   e.g. aws --endpoint-url {self.moto_url} dynamodb list-tables")
        c.print(f"  docs   {api}/v1/docs   OpenAPI: {api}/v1/openapi.json")
        c.print(f"  cli    export SCHEDULER_ENDPOINT={api} SCHEDULER_AWS_ENDPOINT_URL={self.moto_url}")
        c.print("         then: scheduler jobs list · scheduler dlq list · scheduler --help (docs/cli.md)")
        c.print(f"  console {api}/console/   jobs, runs, workflows, the DLQ, live (docs/console.md)")
        for host in self.hosts.values():
            spec = host.spec
            name = short_name(spec.name)
            c.print(f"  λ      {name:<24} concurrency {spec.concurrency:<3} timeout {spec.timeout_seconds}s")
            for layer in spec.skipped_layers:
                c.print(
                    f"         layer {layer.parent.name[:18]}… is built for the Lambda runtime's Python; "
                    "this interpreter's packages stand in"
                )
        for source in self.event_sources:
            c.print(
                f"  sqs    {source.queue_arn.rsplit(':', 1)[-1]:<48} batch {source.batch_size}, "
                f"max concurrency {source.max_concurrency}"
            )
        c.print()
        c.print("Try it (a job that fires in 10 seconds and posts to a URL of yours):")
        c.print(f"  curl -s -X POST {api}/v1/jobs -H 'content-type: application/json' -d \\")
        c.print(
            '    \'{"name": "hello", "schedule": {"at": "\'$(date -u -d \'+10 sec\' +%FT%TZ)\'"}, '
            '"target": {"type": "HTTP", "url": "http://127.0.0.1:9999/hook"}}\''
        )
        c.print(f"  curl -s {api}/v1/jobs")
        c.print()
        c.print("Ctrl-C stops everything. Runs appear below as they finish.")
        c.print()

    def stop(self) -> None:
        if self._schedules is not None:
            self._schedules.stop()
        for source in self.event_sources:
            source.stop()
        if self._api is not None:
            self._api.stop()
        for host in self.hosts.values():
            host.stop()
        if self._moto is not None:
            self._moto.stop()

    def __enter__(self) -> LocalCloud:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
