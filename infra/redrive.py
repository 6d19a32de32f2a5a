"""`python -m infra.redrive` (`make redrive`): move a deployed stack's DLQ back.

Reads the stack's outputs (its tables, queues and the settings its functions share; see
infra/stack.py), then makes one pass of `scheduler_core.services.redrive` over the DLQ: FAILED runs
get a new attempt, poison run messages go back to their priority queue, records of runs
that moved on are dropped, anything unreadable stays. Prints what became of each message.

Against AWS it uses your usual credentials and region (AWS_PROFILE, AWS_REGION, ...);
against the local cloud, the moto endpoint `make run` prints at start-up:
`--endpoint-url http://127.0.0.1:PORT` (or AWS_ENDPOINT_URL), with fake credentials
and us-east-1 unless you have your own configured.

`scheduler dlq` (scheduler_cli.operator) is built from the same pieces: `make_session`,
`deployed_settings`, `redrive_pass` and `EXPLANATIONS`.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import boto3
from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, NoRegionError

from infra.config import STACK_NAME, output_variable
from scheduler_core.adapters.aws import AwsClients, error_code
from scheduler_core.composition import build_redriver
from scheduler_core.domain.clock import SystemClock
from scheduler_core.observability import logger, metrics
from scheduler_core.services.redrive import RedriveOutcome, RedriveReport
from scheduler_core.settings import Settings

if TYPE_CHECKING:
    from mypy_boto3_cloudformation import CloudFormationClient

LOCAL_REGION = "us-east-1"  # the local cloud's region (infra/local/deployment.py)
LOCAL_CREDENTIALS = ("local", "local")  # access key id, secret: moto accepts any
METRICS_NAMESPACE = "ServerlessScheduler"
# The stack outputs a pass needs (named after the functions' settings: DlqUrl → DLQ_URL).
# Shards, timers and retention decide where a re-driven run's timer lands and how long it lives.
REQUIRED_SETTINGS = (
    "JOBS_TABLE_NAME",
    "QUEUE_URL_HIGH",
    "QUEUE_URL_NORMAL",
    "QUEUE_URL_LOW",
    "DLQ_URL",
    "SHARD_COUNT",
    "RESEND_AFTER_SECONDS",
    "RUN_RETENTION_DAYS",
)
EXPLANATIONS = {
    RedriveOutcome.REDRIVEN: "failed runs given a new attempt (a fresh round of max_attempts)",
    RedriveOutcome.REQUEUED: "poison run messages sent back to their priority queue",
    RedriveOutcome.STALE: "dropped: the run had moved on (re-driven already, finished, another attempt)",
    RedriveOutcome.GONE: "dropped: the run or its job no longer exists",
    RedriveOutcome.CANCELLED: "dropped: the run's job is cancelled",
    RedriveOutcome.PAUSED: "left on the DLQ: the run's job is paused; resume it, then redrive again",
    RedriveOutcome.UNREADABLE: "left on the DLQ: neither a RUN_FAILED record nor a run message",
    RedriveOutcome.FAILED_AGAIN: "left on the DLQ: re-driven in this pass and failed again",
    RedriveOutcome.DEFERRED: "left on the DLQ: throttled or not sent; run make redrive again",
}


class StackNotReady(Exception):
    """The stack is missing, or was deployed by a version without the outputs we read."""


class _EndpointSession(boto3.session.Session):
    """A session whose clients all talk to one endpoint (the local cloud's moto)."""

    def __init__(self, endpoint_url: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._endpoint_url = endpoint_url

    def client(self, *args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("endpoint_url", self._endpoint_url)
        return super().client(*args, **kwargs)


def make_session(
    endpoint_url: str | None, region: str | None, profile: str | None = None
) -> boto3.session.Session:
    """Your usual AWS session (of `profile`, if given); with an endpoint URL (argument or
    AWS_ENDPOINT_URL), one that falls back to fake credentials and us-east-1, as the local
    cloud needs."""
    session = boto3.session.Session(profile_name=profile, region_name=region)
    if not (endpoint_url or os.environ.get("AWS_ENDPOINT_URL")):
        return session
    key, secret = (None, None) if session.get_credentials() is not None else LOCAL_CREDENTIALS
    region = region or session.region_name or LOCAL_REGION
    if endpoint_url:
        return _EndpointSession(
            endpoint_url,
            profile_name=profile,
            region_name=region,
            aws_access_key_id=key,
            aws_secret_access_key=secret,
        )
    return boto3.session.Session(
        profile_name=profile, region_name=region, aws_access_key_id=key, aws_secret_access_key=secret
    )


def with_endpoint(session: boto3.session.Session, endpoint_url: str) -> boto3.session.Session:
    """`session` (its credentials, profile and region), its clients all talking to `endpoint_url`."""
    return _EndpointSession(endpoint_url, botocore_session=session._session, region_name=session.region_name)


def deployed_settings(cloudformation: CloudFormationClient, stack_name: str) -> Settings:
    """The settings the stack's functions share, from its outputs."""
    try:
        (stack,) = cloudformation.describe_stacks(StackName=stack_name)["Stacks"]
    except ClientError as error:
        raise StackNotReady(f"stack {stack_name!r} not found: {error}") from error
    outputs = {output_variable(o["OutputKey"]): o.get("OutputValue", "") for o in stack.get("Outputs", [])}
    missing = [name for name in REQUIRED_SETTINGS if not outputs.get(name)]
    if missing:
        raise StackNotReady(
            f"stack {stack_name!r} has no outputs for {', '.join(missing)}: deploy this version "
            "of the stack first (make deploy)"
        )
    return Settings.from_env(outputs)


def refusal(error: BotoCoreError | ClientError) -> str:
    """What AWS said, and what to do when it refused a send to the stack's queues."""
    said = f"AWS refused or failed: {error}"
    if (
        isinstance(error, ClientError)
        and "AccessDenied" in error_code(error)
        and error.operation_name.startswith("SendMessage")
    ):
        said += (
            ". The queues take messages only from the stack's functions and the principals listed "
            "in CDK context queue_sender_arns: add the ARN of the role you run this with there and "
            "deploy (docs/operations/deploy.md)"
        )
    return said


def render(report: RedriveReport, stack_name: str, settings: Settings) -> str:
    lines = [f"DLQ of stack {stack_name}: {settings.dlq_url}"]
    width = max(len(str(outcome)) for outcome in RedriveOutcome)
    for outcome in RedriveOutcome:
        lines.append(f"  {outcome!s:<{width}} {report.outcomes[outcome]:>6}  {EXPLANATIONS[outcome]}")
    lines.append(f"received {report.received}, deleted {report.deleted}, left on the DLQ {report.kept}")
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m infra.redrive",
        description=(
            "Move the scheduler's DLQ back: re-drive FAILED runs (a new attempt each), send "
            "poison run messages back to their queue, drop records of runs that moved on, "
            "leave the unreadable."
        ),
    )
    parser.add_argument("--stack", default=STACK_NAME, help=f"the stack's name (default {STACK_NAME})")
    parser.add_argument(
        "--endpoint-url",
        default=None,
        help="an AWS endpoint such as the local cloud's moto (default: AWS_ENDPOINT_URL, else AWS)",
    )
    parser.add_argument("--region", default=None, help="default: your configured region")
    parser.add_argument("--limit", type=int, default=None, help="handle at most this many messages")
    parser.add_argument("--verbose", action="store_true", help="log every message that is not re-driven")
    args = parser.parse_args(argv)
    if args.limit is not None and args.limit < 1:
        parser.error("--limit must be at least 1")
    return args


def redrive_pass(
    session: boto3.session.Session,
    settings: Settings,
    limit: int | None = None,
    *,
    wait_seconds: int = 1,
) -> RedriveReport:
    """One pass over the DLQ of the stack whose settings these are."""
    redriver = build_redriver(settings, AwsClients(session), SystemClock(), wait_seconds=wait_seconds)
    # The lifecycle's CloudWatch metrics mean nothing outside Lambda; Powertools prints them
    # (EMF to stdout) every 100 values and needs a namespace to do so.
    metrics.namespace = metrics.namespace or METRICS_NAMESPACE
    with contextlib.redirect_stdout(io.StringIO()):
        report = redriver.redrive(limit)
    metrics.clear_metrics()
    return report


def run(
    session: boto3.session.Session,
    stack_name: str,
    limit: int | None = None,
    *,
    wait_seconds: int = 1,
) -> tuple[Settings, RedriveReport]:
    """Look the stack up and make one pass over its DLQ."""
    settings = deployed_settings(session.client("cloudformation"), stack_name)
    return settings, redrive_pass(session, settings, limit, wait_seconds=wait_seconds)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    logger.setLevel("INFO" if args.verbose else "WARNING")
    try:
        session = make_session(args.endpoint_url, args.region)
        settings, report = run(session, args.stack, args.limit)
    except StackNotReady as error:
        print(f"redrive: {error}", file=sys.stderr)
        return 2
    except (NoCredentialsError, NoRegionError) as error:
        print(f"redrive: {error} (configure AWS credentials and a region, or pass --region)", file=sys.stderr)
        return 2
    except (BotoCoreError, ClientError) as error:
        print(f"redrive: {refusal(error)}", file=sys.stderr)
        return 1
    print(render(report, args.stack, settings))
    return 0


if __name__ == "__main__":
    sys.exit(main())
