"""scheduler_cli.operator on moto in process: it finds a stack's queues in its outputs (as
`make redrive` does), peeks at the DLQ without taking anything off it, counts every queue,
and makes one re-drive pass. What a pass does with each message is specified with the
service (tests/unit/test_redrive_rules_on_fakes.py, tests/integration/test_redrive.py); the
local cloud's e2e test (tests/e2e/test_cli.py) re-drives a real failed run."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import boto3
import pytest
from moto import mock_aws
from moto.server import ThreadedMotoServer

from infra.config import output_key
from infra.redrive import with_endpoint
from scheduler_cli.operator import Operator, RedriveOutcome, StackNotReady
from scheduler_core.adapters.aws import AwsClients
from scheduler_core.domain.messages import DeadLetter, RunMessage
from scheduler_core.settings import Settings
from tests.support.harness import create_scheduler_resources

STACK = "Scheduler"
OUTPUTS = (
    "JOBS_TABLE_NAME",
    "QUEUE_URL_HIGH",
    "QUEUE_URL_NORMAL",
    "QUEUE_URL_LOW",
    "DLQ_URL",
    "SHARD_COUNT",
    "RESEND_AFTER_SECONDS",
    "RUN_RETENTION_DAYS",
)
RUN_ID = "j1:1795695216983"


def deploy(session: boto3.session.Session) -> Settings:
    """The scheduler's tables and queues, and a stack whose outputs name them."""
    settings = create_scheduler_resources(AwsClients(session))
    values = settings.model_dump(by_alias=True)
    template = {
        "Resources": {
            "Marker": {
                "Type": "AWS::SSM::Parameter",
                "Properties": {"Name": "cli-operator-marker", "Type": "String", "Value": "x"},
            }
        },
        "Outputs": {output_key(name): {"Value": str(values[name])} for name in OUTPUTS},
    }
    session.client("cloudformation").create_stack(StackName=STACK, TemplateBody=json.dumps(template))
    return settings


@pytest.fixture
def stack() -> Iterator[Settings]:
    with mock_aws():
        yield deploy(boto3.session.Session(region_name="us-east-1"))


def operator() -> Operator:
    return Operator.for_stack(boto3.session.Session(region_name="us-east-1"), STACK)


def fill_dlq(settings: Settings) -> None:
    sqs = boto3.client("sqs", region_name="us-east-1")
    pointer = RunMessage(job_id="j1", run_id=RUN_ID, scheduled_for_ms=1795695216983, attempt=3)
    record = DeadLetter(
        job_id="j1",
        run_id=RUN_ID,
        scheduled_for="2026-11-26T12:13:36.983Z",
        attempts=3,
        last_error="HTTP 503 from example.com",
        response_code=503,
        failed_at="2026-11-26T12:14:00.000Z",
        message=pointer,
    )
    for body in (record.model_dump_json(), pointer.model_dump_json(), "{not json"):
        sqs.send_message(QueueUrl=settings.dlq_url, MessageBody=body)


def test_it_reads_the_stacks_queues_from_its_outputs(stack: Settings) -> None:
    found = operator()

    assert found.dlq_url == stack.dlq_url
    assert found.queue_urls() == {
        "high": stack.queue_url_high,
        "normal": stack.queue_url_normal,
        "low": stack.queue_url_low,
        "dlq": stack.dlq_url,
    }


def test_a_stack_without_the_outputs_is_not_ready(stack: Settings) -> None:
    with pytest.raises(StackNotReady, match="'NoSuchStack' not found"):
        Operator.for_stack(boto3.session.Session(region_name="us-east-1"), "NoSuchStack")


def test_dead_letters_are_described_and_left_on_the_queue(stack: Settings) -> None:
    fill_dlq(stack)

    letters = operator().dead_letters()
    again = operator().dead_letters(limit=2)

    # Oldest first: the three were sent within a millisecond or two, so their order is SQS's.
    by_kind = {letter["kind"]: letter for letter in letters}
    assert len(letters) == 3
    assert {kind: letter["run_id"] for kind, letter in by_kind.items()} == {
        "RUN_FAILED": RUN_ID,
        "RUN_MESSAGE": RUN_ID,
        "UNREADABLE": None,
    }
    assert [letter["sent_at"] for letter in letters] == sorted(letter["sent_at"] for letter in letters)
    failed, poison, unreadable = by_kind["RUN_FAILED"], by_kind["RUN_MESSAGE"], by_kind["UNREADABLE"]
    assert failed["reason"] == "failed after 3 attempt(s): HTTP 503 from example.com"
    assert (failed["job_id"], failed["attempts"], failed["response_code"]) == ("j1", 3, 503)
    assert failed["body"]["last_error"] == "HTTP 503 from example.com"
    assert poison["reason"].startswith("poison")
    assert unreadable["body"] == "{not json"
    assert all(letter["sent_at"].endswith("Z") and letter["receive_count"] >= 1 for letter in letters)
    assert len(again) == 2
    depth = operator().queue_depths()["dlq"]
    assert depth["visible"] + depth["in_flight"] == 3


def test_queue_depths_count_each_queue(stack: Settings) -> None:
    sqs = boto3.client("sqs", region_name="us-east-1")
    sqs.send_message(QueueUrl=stack.queue_url_high, MessageBody="{}")
    sqs.send_message(QueueUrl=stack.queue_url_low, MessageBody="{}", DelaySeconds=600)

    depths = operator().queue_depths()

    assert set(depths) == {"high", "normal", "low", "dlq"}
    assert {k: v for k, v in depths["high"].items() if k != "oldest_age_seconds"} == {
        "visible": 1, "delayed": 0, "in_flight": 0,
    }  # fmt: skip
    assert depths["low"]["delayed"] == 1
    assert depths["normal"]["visible"] == depths["dlq"]["visible"] == 0


def test_a_redrive_makes_one_pass_of_the_service(stack: Settings) -> None:
    fill_dlq(stack)

    report = operator().redrive()

    assert report.received == 3
    # Job j1 does not exist: its record and its message are dropped; the unreadable one stays.
    assert report.outcomes[RedriveOutcome.GONE] == 2
    assert report.outcomes[RedriveOutcome.UNREADABLE] == 1
    assert report.kept == 1


def test_an_endpoint_url_sends_every_call_there() -> None:
    """As the console reaches the local cloud: moto over HTTP, named by its URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        url = f"http://127.0.0.1:{port}"
        session = boto3.session.Session(region_name="us-east-1")
        settings = deploy(with_endpoint(session, url))

        found = Operator.for_stack(session, STACK, endpoint_url=url)

        assert found.dlq_url == settings.dlq_url
        assert found.queue_depths()["dlq"]["visible"] == 0
        # Without the endpoint, the same session asks AWS (here an empty mock), which has no such stack.
        with mock_aws(), pytest.raises(StackNotReady):
            Operator.for_stack(session, STACK)
    finally:
        server.stop()
