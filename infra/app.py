"""The CDK app: `python -m infra.app` (cdk.json's "app"), or `build_app()` from Python."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aws_cdk import App, Validations
from cdk_nag import AwsSolutionsChecks

from infra.config import STACK_NAME, SchedulerConfig, cdk_json_context
from infra.stack import SchedulerStack


def build_app(
    outdir: str | None = None, context: Mapping[str, Any] | None = None
) -> tuple[App, SchedulerStack]:
    """The app and its one stack, with cdk-nag's AWS Solutions checks registered.

    `context` overrides cdk.json's defaults (as `cdk -c` does). Nothing is synthesized yet:
    `app.synth()` runs the checks and fails on any finding that is not acknowledged.
    """
    app = App(outdir=outdir, context={**cdk_json_context(), **(context or {})})
    stack = SchedulerStack(
        app,
        STACK_NAME,
        config=SchedulerConfig.from_context(app.node),
        description="serverless-scheduler: jobs on DynamoDB, SQS, Lambda, EventBridge and API Gateway",
    )
    # A validation plugin, not an Aspect: cdk-nag 3 reports through CDK's policy validation,
    # which fails synthesis on errors and warnings alike and writes validation-report.json.
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return app, stack


if __name__ == "__main__":
    build_app()[0].synth()
