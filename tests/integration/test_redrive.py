"""`make redrive` on moto: only what the fakes cannot show. A poison message moved to the
DLQ by the queues' real redrive policy (maxReceiveCount) and sent back to its run's
priority queue; the messages a pass keeps made visible again on SQS when it ends; and the
CLI that finds a deployed stack's DLQ and settings in its outputs (in process and over
HTTP), which re-drives a failed run end to end.

The service's rules (what a pass does with each record and run message: re-driven, stale,
gone, cancelled, paused, requeued, deferred, unreadable; batch by batch, a limit, a run that
fails again during the pass) are specified on the in-memory fakes in
`tests/unit/test_redrive_rules_on_fakes.py`."""

from __future__ import annotations

import json
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.server import ThreadedMotoServer

from infra import redrive as cli
from infra.config import output_key
from scheduler_core.adapters.aws import AwsClients
from scheduler_core.composition import build_redriver
from scheduler_core.domain.clock import SystemClock
from scheduler_core.domain.vocabulary import Priority
from scheduler_core.services.redrive import DeadLetterRedriver, RedriveOutcome
from scheduler_core.settings import Settings
from tests.support.harness import FrozenClock, SchedulerHarness, create_scheduler_resources
from tests.support.receiver import WebhookReceiver

STACK = "ServerlessScheduler"
# The stack outputs the CLI reads (as infra/stack.py names them), besides ApiUrl.
SHARED_SETTINGS = (*cli.REQUIRED_SETTINGS, "LOOKAHEAD_SECONDS", "DELIVERY_LEAD_SECONDS")


def job(receiver: WebhookReceiver, at: str, **extra: Any) -> dict[str, Any]:
    """A one-off job for now whose first failed attempt is its last."""
    return {
        "name": "redrive",
        "schedule": {"at": at},
        "target": {"type": "HTTP", "url": receiver.url},
        "retry": {"max_attempts": 1},
        **extra,
    }


def only_run(cloud: SchedulerHarness, job_id: str) -> dict[str, Any]:
    [run] = cloud.call("GET", f"/v1/jobs/{job_id}/runs").body["items"]
    return run  # type: ignore[no-any-return]


def fail_one_run(cloud: SchedulerHarness, receiver: WebhookReceiver, **extra: Any) -> dict[str, Any]:
    """A run that FAILED (its target answered 500, no attempts left): its record is on the DLQ."""
    receiver.respond_with(500)
    created = cloud.create(job(receiver, cloud.clock.now().isoformat(), **extra))
    cloud.deliver()
    run = only_run(cloud, created["job_id"])
    assert (run["status"], run["attempt"]) == ("FAILED", 1)
    return created


def dlq_bodies(cloud: SchedulerHarness) -> list[dict[str, Any] | str]:
    """What the DLQ holds (visible), taken off it."""
    sqs, url = cloud.clients.sqs(), cloud.settings.dlq_url
    bodies: list[dict[str, Any] | str] = []
    while messages := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", []):
        for message in messages:
            try:
                bodies.append(json.loads(message["Body"]))
            except ValueError:
                bodies.append(message["Body"])
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    return bodies


def dlq_depth(cloud: SchedulerHarness) -> tuple[int, int]:
    """(visible, in flight) messages on the DLQ."""
    attributes = cloud.clients.sqs().get_queue_attributes(
        QueueUrl=cloud.settings.dlq_url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"]), int(
        attributes["ApproximateNumberOfMessagesNotVisible"]
    )


def redriver(cloud: SchedulerHarness) -> DeadLetterRedriver:
    return build_redriver(cloud.settings, cloud.clients, cloud.clock, wait_seconds=0)


def counts(report: Any) -> dict[RedriveOutcome, int]:
    return {outcome: count for outcome, count in report.outcomes.items() if count}


# --- what only real SQS shows: its redrive policy, a kept message's visibility ----------


def test_a_poison_message_goes_back_to_its_runs_priority_queue(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    created = cloud.create(job(receiver, clock.now().isoformat(), priority="HIGH"))
    sqs, high = cloud.clients.sqs(), cloud.queue_url(Priority.HIGH)
    # A message that crashes every worker that takes it: received, never deleted, until the
    # queue's redrive policy (maxReceiveCount 5) moves it to the DLQ.
    for _ in range(6):
        sqs.receive_message(QueueUrl=high, MaxNumberOfMessages=10)
        clock.advance(541)
    [poison] = dlq_bodies(cloud)
    assert isinstance(poison, dict)
    assert poison["run_id"] == only_run(cloud, created["job_id"])["run_id"]
    sqs.send_message(QueueUrl=cloud.settings.dlq_url, MessageBody=json.dumps(poison))

    report = redriver(cloud).redrive()

    assert counts(report) == {RedriveOutcome.REQUEUED: 1}
    assert dlq_depth(cloud) == (0, 0)
    assert cloud.visible_messages(Priority.HIGH) == 1
    assert cloud.deliver((Priority.HIGH,)) == 1
    run = only_run(cloud, created["job_id"])
    assert (run["status"], run["attempt"]) == ("SUCCEEDED", 1)


def test_unreadable_messages_stay_on_the_dlq_visible_again(
    cloud: SchedulerHarness, clock: FrozenClock
) -> None:
    sqs, dlq = cloud.clients.sqs(), cloud.settings.dlq_url
    unreadable = ["{not json", json.dumps({"job_id": "x"}), json.dumps({"kind": "RUN_FAILED"})]
    for body in unreadable:
        sqs.send_message(QueueUrl=dlq, MessageBody=body)

    report = redriver(cloud).redrive()

    assert counts(report) == {RedriveOutcome.UNREADABLE: 3}
    assert (report.received, report.deleted, report.kept) == (3, 0, 3)
    # Released when the pass ended, not hidden for its 15 minutes. (moto shows a message only
    # once its visibility time has passed, strictly: a frozen clock needs a tick.)
    clock.advance(1)
    assert dlq_depth(cloud) == (3, 0)
    assert sorted(json.dumps(b) if isinstance(b, dict) else b for b in dlq_bodies(cloud)) == sorted(
        unreadable
    )


# --- the CLI: the stack's outputs, against moto in process and over HTTP ---------------


def stack_body(outputs: dict[str, str]) -> str:
    """A template with these outputs (and one placeholder resource, as CloudFormation needs)."""
    marker = {
        "Type": "AWS::SSM::Parameter",
        "Properties": {"Name": f"marker-{uuid.uuid4().hex}", "Type": "String", "Value": "x"},
    }
    return json.dumps(
        {
            "Resources": {"Marker": marker},
            "Outputs": {key: {"Value": value} for key, value in outputs.items()},
        }
    )


def stack_template(settings: Settings) -> str:
    """A stack with the outputs the real one has, pointing at `settings`' resources."""
    values = settings.model_dump(by_alias=True)
    outputs = {output_key(name): str(values[name]) for name in SHARED_SETTINGS}
    return stack_body(outputs | {"ApiUrl": "https://example.execute-api.us-east-1.amazonaws.com/prod/"})


def live_cloud(session: boto3.session.Session) -> SchedulerHarness:
    """The scheduler on wall-clock time (the CLI runs on the system clock), stack included."""
    clients = AwsClients(session)
    settings = create_scheduler_resources(clients)
    session.client("cloudformation").create_stack(StackName=STACK, TemplateBody=stack_template(settings))
    return SchedulerHarness(clients, settings, SystemClock())


@pytest.fixture
def in_process_cloud() -> Iterator[SchedulerHarness]:
    with mock_aws():
        yield live_cloud(boto3.session.Session(region_name="us-east-1"))


def test_the_stack_lookup_reads_every_shared_setting_from_the_outputs(
    in_process_cloud: SchedulerHarness,
) -> None:
    cloudformation = boto3.client("cloudformation", region_name="us-east-1")
    found = cli.deployed_settings(cloudformation, STACK)
    # What only the api and the worker read (idempotency, leases, what targets may reach).
    theirs = {
        "idempotency_table_name",
        "run_lease_seconds",
        "target_private_cidrs",
        "allow_http_targets",
        "secrets_key_id",
        "audit_log_group",
        "stack_partition",
        "stack_region",
        "stack_account_id",
        "target_queue_arns",
        "target_topic_arns",
        "target_event_bus_arns",
        "target_function_arns",
        "worker_role_arn",
    }
    assert found.model_dump(include={*Settings.model_fields} - theirs) == (
        in_process_cloud.settings.model_dump(include={*Settings.model_fields} - theirs)
    )


def test_the_cli_redrives_the_dlq_of_the_stack_it_is_named(
    in_process_cloud: SchedulerHarness, receiver: WebhookReceiver, capsys: pytest.CaptureFixture[str]
) -> None:
    created = fail_one_run(in_process_cloud, receiver)
    in_process_cloud.clients.sqs().send_message(
        QueueUrl=in_process_cloud.settings.dlq_url, MessageBody="junk"
    )

    assert cli.main(["--stack", STACK, "--region", "us-east-1"]) == 0

    printed = capsys.readouterr().out
    assert f"DLQ of stack {STACK}: {in_process_cloud.settings.dlq_url}" in printed
    assert _counted(printed) == {"redriven": 1, "unreadable": 1}
    assert "received 2, deleted 1, left on the DLQ 1" in printed
    in_process_cloud.deliver()
    assert only_run(in_process_cloud, created["job_id"])["status"] == "SUCCEEDED"


def test_the_cli_explains_a_missing_stack_or_one_without_the_outputs(
    in_process_cloud: SchedulerHarness, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["--stack", "NoSuchStack", "--region", "us-east-1"]) == 2
    assert "stack 'NoSuchStack' not found" in capsys.readouterr().err

    boto3.client("cloudformation", region_name="us-east-1").create_stack(
        StackName="OldScheduler",
        TemplateBody=stack_body({"ApiUrl": "https://example.com/prod/"}),
    )
    assert cli.main(["--stack", "OldScheduler", "--region", "us-east-1"]) == 2
    assert "has no outputs for JOBS_TABLE_NAME" in capsys.readouterr().err


@pytest.fixture
def moto_server() -> Iterator[str]:
    """moto over HTTP, as the local cloud runs it: the CLI reaches it by its endpoint URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    yield f"http://127.0.0.1:{port}"
    server.stop()


def test_the_cli_works_against_an_endpoint_url_without_credentials_or_a_region(
    moto_server: str,
    receiver: WebhookReceiver,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    # Nothing configured, as on a laptop that never saw AWS: the local cloud's defaults apply.
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SECURITY_TOKEN", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    monkeypatch.delenv("AWS_REGION", raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    session = cli.make_session(moto_server, None)
    assert session.region_name == cli.LOCAL_REGION
    cloud = live_cloud(session)
    created = fail_one_run(cloud, receiver)

    assert cli.main(["--endpoint-url", moto_server]) == 0

    assert _counted(capsys.readouterr().out) == {"redriven": 1}
    cloud.deliver()
    assert only_run(cloud, created["job_id"])["status"] == "SUCCEEDED"


def _counted(printed: str) -> dict[str, int]:
    """The outcome lines of the CLI's report that counted something."""
    found = {}
    for line in printed.splitlines():
        words = line.split()
        if len(words) >= 2 and words[0] in {str(o) for o in RedriveOutcome} and int(words[1]):
            found[words[0]] = int(words[1])
    return found
