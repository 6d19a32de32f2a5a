"""Synthesizes the CDK app once per session (about 10 s); every infra test reads that result."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App, CfnElement
from aws_cdk.assertions import Template
from constructs import IConstruct

from infra.app import build_app
from infra.config import HIGH_VOLUME_CONTEXT, SchedulerConfig
from infra.stack import SchedulerStack


@dataclass(frozen=True)
class Synthesis:
    """One synthesized app: its construct tree, template and cdk-nag validation report."""

    app: App
    stack: SchedulerStack
    template_path: Path
    template: Template
    validation_report: Mapping[str, Any]

    @property
    def config(self) -> SchedulerConfig:
        return self.stack.config

    def resources(self, resource_type: str) -> Mapping[str, Any]:
        """Logical id → resource, for every resource of `resource_type`."""
        return self.template.find_resources(resource_type)

    def logical_id(self, construct: IConstruct) -> str:
        """The logical id of an L2 construct's CloudFormation resource."""
        element = construct.node.default_child
        assert isinstance(element, CfnElement), construct.node.path
        return self.stack.resolve(self.stack.get_logical_id(element))  # type: ignore[no-any-return]

    @property
    def function_ids(self) -> dict[str, str]:
        """`api` / `poller` / `worker` → the logical id of that Lambda function."""
        return {
            "api": self.logical_id(self.stack.api.function.function),
            "poller": self.logical_id(self.stack.poller.function.function),
            "worker": self.logical_id(self.stack.workers.function.function),
        }

    def function(self, name: str) -> Mapping[str, Any]:
        """The AWS::Lambda::Function resource of `api`, `poller` or `worker`."""
        return self.resources("AWS::Lambda::Function")[self.function_ids[name]]  # type: ignore[no-any-return]


def synthesize(outdir: Path, context: Mapping[str, Any] | None = None) -> Synthesis:
    """Build and synthesize the app into `outdir` (cdk-nag runs here and fails on findings)."""
    app, stack = build_app(outdir=str(outdir), context=context)
    assembly = app.synth()
    template_path = Path(assembly.directory) / stack.template_file
    return Synthesis(
        app=app,
        stack=stack,
        template_path=template_path,
        template=Template.from_json(json.loads(template_path.read_text())),
        validation_report=json.loads((Path(assembly.directory) / "validation-report.json").read_text()),
    )


@pytest.fixture(scope="session")
def synthesis(tmp_path_factory: pytest.TempPathFactory) -> Synthesis:
    """The app with cdk.json's default context."""
    return synthesize(tmp_path_factory.mktemp("cdk.out"))


# Target grants narrowed: no queues and no event buses (those grants are left out), one topic,
# and a deployer's wildcard pattern of functions; a non-default timer, to see context
# settings reach the functions; the tables on provisioned capacity, pre-warmed; AWS's own
# keys instead of the stack's; other poller concurrency and API throttling.
NARROWED_TOPIC = "arn:aws:sns:eu-west-1:111122223333:alerts"
NARROWED_FUNCTIONS = "arn:aws:lambda:eu-west-1:111122223333:function:jobs-*"
NARROWED_OPERATORS = "arn:aws:iam::111122223333:role/aws-reserved/sso.amazonaws.com/*AdministratorAccess*"
NARROWED_CONTEXT: dict[str, Any] = {
    "target_queue_arns": [],
    "target_topic_arns": [NARROWED_TOPIC],
    "target_event_bus_arns": [],
    "target_function_arns": [NARROWED_FUNCTIONS],
    "resend_after_seconds": 300,
    "claim_parallelism": 24,
    "one_offs_claimed_at_start": True,
    "table_capacity": {
        "mode": "PROVISIONED",
        "read": {"min": 5, "max": 500},
        "write": {"min": 10, "max": 40000},
        "target_utilization_percent": 70,
        "warm": {"read": 15_000, "write": 20_000},
    },
    "customer_managed_keys": False,
    "poller_reserved_concurrency": 4,
    "api_throttle_rate": 50,
    "api_throttle_burst": 80,
    "queue_sender_arns": [NARROWED_OPERATORS],
    # Deploy's batches for 100,000 runs a minute: 100 records, a 1 s batching window, and the
    # delivery lead that window needs.
    "queue_capacity": HIGH_VOLUME_CONTEXT["queue_capacity"],
    "delivery_lead_seconds": HIGH_VOLUME_CONTEXT["delivery_lead_seconds"],
}


@pytest.fixture(scope="session")
def narrowed(tmp_path_factory: pytest.TempPathFactory) -> Synthesis:
    """A second synthesis, with `NARROWED_CONTEXT` on top of cdk.json's."""
    return synthesize(tmp_path_factory.mktemp("cdk.out-narrowed"), context=NARROWED_CONTEXT)
