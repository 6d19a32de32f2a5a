"""SNS, EventBridge and Lambda targets and FIFO queues (DESIGN §7), end to end on moto: a job
per kind through the API, the run delivered by the worker, its effect read back from moto;
targets that do not exist fail at once with the reason; bad targets are 400s naming the field."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from moto import mock_aws

from scheduler_core.adapters.targets import TargetDelivery
from scheduler_core.domain.entities import Run
from scheduler_core.domain.target_spec import EventBridgeTarget
from scheduler_core.domain.vocabulary import Priority, RunStatus, Trigger
from tests.support.events import ACCOUNT, ALICE_TENANT
from tests.support.harness import FrozenClock, SchedulerHarness
from tests.support.helpers import a_function

REGION = "us-east-1"


def create_due_soon(
    cloud: SchedulerHarness, clock: FrozenClock, target: dict[str, Any], payload: Any = None, **job: Any
) -> dict[str, Any]:
    """A one-off job to `target`, due in 2 s."""
    body: dict[str, Any] = {
        "name": f"to-{target['type'].lower()}",
        "schedule": {"at": (clock.now() + timedelta(seconds=2)).isoformat()},
        "target": target,
        **job,
    }
    if payload is not None:
        body["payload"] = payload
    return cloud.create(body)


def run_when_due(cloud: SchedulerHarness, clock: FrozenClock, job: dict[str, Any]) -> dict[str, Any]:
    """Moves the clock to the job's time, lets the worker deliver it; returns its one run."""
    clock.advance(2)
    cloud.deliver()
    [run] = cloud.call("GET", f"/v1/jobs/{job['job_id']}/runs").body["items"]
    return run  # type: ignore[no-any-return]


def queue(cloud: SchedulerHarness, name: str, region: str = REGION, **attributes: str) -> tuple[str, str]:
    """A queue to read what a target received: (url, arn)."""
    sqs = cloud.clients.client("sqs", region)
    url = sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    return url, arn


def received(cloud: SchedulerHarness, url: str, region: str = REGION) -> list[Any]:
    reply = cloud.clients.client("sqs", region).receive_message(
        QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"], MessageAttributeNames=["All"]
    )
    return reply.get("Messages", [])  # type: ignore[no-any-return]


def assert_failed_at_once(run: dict[str, Any], reason: str) -> None:
    """FAILED on its first attempt although the job allows 3: the error is final."""
    assert (run["status"], run["attempt"]) == ("FAILED", 1), run
    assert reason in run["error"], run["error"]


# --- SQS FIFO ---------------------------------------------------------------------------------


def test_a_fifo_queue_gets_the_job_as_group_and_the_run_as_deduplication_id(
    cloud: SchedulerHarness, clock: FrozenClock
) -> None:
    url, _ = queue(cloud, "orders.fifo", FifoQueue="true")
    job = create_due_soon(cloud, clock, {"type": "SQS", "queue_url": url}, payload={"order": 42})

    run = run_when_due(cloud, clock, job)

    assert run["status"] == "SUCCEEDED", run
    [message] = received(cloud, url)
    assert json.loads(message["Body"]) == {"order": 42}
    assert message["Attributes"]["MessageGroupId"] == job["job_id"]
    assert message["Attributes"]["MessageDeduplicationId"] == run["run_id"]
    assert message["MessageAttributes"]["X-Scheduler-Run-Id"]["StringValue"] == run["run_id"]


def test_a_run_sent_twice_to_a_fifo_queue_arrives_once(cloud: SchedulerHarness, clock: FrozenClock) -> None:
    """An attempt whose answer was lost is tried again with the same deduplication id: within
    SQS's 5-minute window the queue keeps one message."""
    url, _ = queue(cloud, "orders.fifo", FifoQueue="true")
    job_id = create_due_soon(cloud, clock, {"type": "SQS", "queue_url": url})["job_id"]
    run_id = run_when_due(cloud, clock, {"job_id": job_id})["run_id"]
    job, run = cloud.jobs.get(ALICE_TENANT, job_id), cloud.jobs.get_run(ALICE_TENANT, job_id, run_id)

    assert TargetDelivery(cloud.clients).deliver(job, run).ok  # the same run once more

    assert len(received(cloud, url)) == 1


# --- SNS --------------------------------------------------------------------------------------


def subscribed_queue(cloud: SchedulerHarness, topic_arn: str, name: str, region: str = REGION) -> str:
    """A queue subscribed to the topic: SNS hands it each message in its JSON envelope."""
    attributes = {"FifoQueue": "true"} if name.endswith(".fifo") else {}
    url, arn = queue(cloud, name, region, **attributes)
    cloud.clients.sns(region).subscribe(TopicArn=topic_arn, Protocol="sqs", Endpoint=arn)
    return url


def test_an_sns_topic_gets_the_payload_as_the_message_and_the_run_as_attributes(
    cloud: SchedulerHarness, clock: FrozenClock
) -> None:
    topic = cloud.clients.sns().create_topic(Name="reports")["TopicArn"]
    inbox = subscribed_queue(cloud, topic, "report-inbox")
    job = create_due_soon(cloud, clock, {"type": "SNS", "topic_arn": topic}, payload={"report": "daily"})

    run = run_when_due(cloud, clock, job)

    assert run["status"] == "SUCCEEDED", run
    [message] = received(cloud, inbox)
    envelope = json.loads(message["Body"])
    assert envelope["TopicArn"] == topic
    assert json.loads(envelope["Message"]) == {"report": "daily"}
    attributes = {name: value["Value"] for name, value in envelope["MessageAttributes"].items()}
    assert attributes == {
        "Idempotency-Key": run["run_id"],
        "X-Scheduler-Job-Id": job["job_id"],
        "X-Scheduler-Run-Id": run["run_id"],
        "X-Scheduler-Scheduled-For": run["scheduled_for"],
        "X-Scheduler-Attempt": "1",
    }


def test_a_fifo_topic_gets_the_job_as_group_and_the_run_as_deduplication_id(
    cloud: SchedulerHarness, clock: FrozenClock
) -> None:
    topic = cloud.clients.sns().create_topic(Name="ledger.fifo", Attributes={"FifoTopic": "true"})["TopicArn"]
    inbox = subscribed_queue(cloud, topic, "ledger-inbox.fifo")
    job = create_due_soon(cloud, clock, {"type": "SNS", "topic_arn": topic}, payload=[1, 2, 3])

    run = run_when_due(cloud, clock, job)

    assert run["status"] == "SUCCEEDED", run
    [message] = received(cloud, inbox)
    assert json.loads(json.loads(message["Body"])["Message"]) == [1, 2, 3]
    assert message["Attributes"]["MessageGroupId"] == job["job_id"]
    assert message["Attributes"]["MessageDeduplicationId"] == run["run_id"]


def test_a_topic_in_another_region_is_published_to_in_its_region(
    cloud: SchedulerHarness, clock: FrozenClock
) -> None:
    """SNS answers for a topic only in the topic's own region."""
    topic = cloud.clients.sns("eu-west-1").create_topic(Name="eu-reports")["TopicArn"]
    inbox = subscribed_queue(cloud, topic, "eu-inbox", region="eu-west-1")
    job = create_due_soon(cloud, clock, {"type": "SNS", "topic_arn": topic}, payload={"eu": True})

    assert run_when_due(cloud, clock, job)["status"] == "SUCCEEDED"
    [message] = received(cloud, inbox, region="eu-west-1")
    assert json.loads(json.loads(message["Body"])["Message"]) == {"eu": True}


def test_a_topic_that_does_not_exist_fails_the_run_at_once(
    cloud: SchedulerHarness, clock: FrozenClock
) -> None:
    topic = f"arn:aws:sns:{REGION}:{ACCOUNT}:never-created"
    job = create_due_soon(cloud, clock, {"type": "SNS", "topic_arn": topic})

    assert_failed_at_once(run_when_due(cloud, clock, job), "SNS NotFound")


# --- EventBridge -------------------------------------------------------------------------------


def bus_to_queue(cloud: SchedulerHarness, bus: str, source: str) -> tuple[str, str]:
    """An event bus with a rule sending its events of `source` to a queue: (bus ARN, queue URL)."""
    events = cloud.clients.events()
    bus_arn = events.create_event_bus(Name=bus)["EventBusArn"]
    url, queue_arn = queue(cloud, f"{bus}-events")
    events.put_rule(Name=f"{bus}-all", EventBusName=bus, EventPattern=json.dumps({"source": [source]}))
    events.put_targets(Rule=f"{bus}-all", EventBusName=bus, Targets=[{"Id": "inbox", "Arn": queue_arn}])
    return bus_arn, url


@pytest.mark.parametrize("by", ["name", "arn"])
def test_an_event_bus_gets_the_payload_object_and_the_run_ids_as_detail(
    cloud: SchedulerHarness, clock: FrozenClock, by: str
) -> None:
    bus_arn, inbox = bus_to_queue(cloud, "billing", "com.example.billing")
    target = {
        "type": "EVENTBRIDGE",
        "event_bus_name": "billing" if by == "name" else bus_arn,
        "source": "com.example.billing",
        "detail_type": "InvoiceDue",
    }
    job = create_due_soon(cloud, clock, target, payload={"invoice": 42, "lines": [1, 2]})

    run = run_when_due(cloud, clock, job)

    assert run["status"] == "SUCCEEDED", run
    [message] = received(cloud, inbox)
    event = json.loads(message["Body"])
    assert (event["source"], event["detail-type"]) == ("com.example.billing", "InvoiceDue")
    assert event["detail"] == {
        "invoice": 42,
        "lines": [1, 2],
        "scheduler": {
            "job_id": job["job_id"],
            "run_id": run["run_id"],
            "scheduled_for": run["scheduled_for"],
            "attempt": 1,
        },
    }


@pytest.mark.parametrize(
    ("payload", "detail"),
    [
        pytest.param(["a", "b"], {"payload": ["a", "b"]}, id="a list sits under payload"),
        pytest.param("text", {"payload": "text"}, id="a string sits under payload"),
        pytest.param(None, {}, id="no payload: only the run's ids"),
    ],
)
def test_a_payload_that_is_no_object_becomes_one(
    cloud: SchedulerHarness, clock: FrozenClock, payload: Any, detail: dict[str, Any]
) -> None:
    """EventBridge drops an event whose detail is not a JSON object."""
    _, inbox = bus_to_queue(cloud, "shapes", "com.example.shapes")
    target = {
        "type": "EVENTBRIDGE",
        "event_bus_name": "shapes",
        "source": "com.example.shapes",
        "detail_type": "T",
    }
    job = create_due_soon(cloud, clock, target, payload=payload)

    run = run_when_due(cloud, clock, job)

    [message] = received(cloud, inbox)
    sent = json.loads(message["Body"])["detail"]
    assert sent.pop("scheduler")["run_id"] == run["run_id"]
    assert sent == detail


def test_an_event_bus_that_does_not_exist_fails_the_run_at_once_on_moto(
    cloud: SchedulerHarness, clock: FrozenClock
) -> None:
    """moto refuses PutEvents to a missing bus (ResourceNotFoundException). AWS itself accepts
    such an event and drops it (aws/aws-sdk#186): there the run succeeds."""
    target = {
        "type": "EVENTBRIDGE",
        "event_bus_name": "no-such-bus",
        "source": "com.example",
        "detail_type": "T",
    }
    job = create_due_soon(cloud, clock, target)

    assert_failed_at_once(run_when_due(cloud, clock, job), "EventBridge ResourceNotFoundException")


def test_an_entry_putevents_refuses_is_a_failed_delivery_with_the_entrys_error(
    cloud: SchedulerHarness,
) -> None:
    """PutEvents answers 200 and reports a refused entry in the entry itself. Validation never
    lets an empty source through, so the job here is one stored as validation would refuse it."""
    target = {"type": "EVENTBRIDGE", "event_bus_name": "default", "source": "s", "detail_type": "T"}
    job = cloud.jobs.get(ALICE_TENANT, cloud.create(job_to(target))["job_id"])
    empty_source = EventBridgeTarget.model_construct(
        type="EVENTBRIDGE", event_bus_name="default", source="", detail_type="T"
    )
    when = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
    run = Run(
        run_id=f"{job.job_id}:{int(when.timestamp() * 1000)}",
        job_id=job.job_id,
        status=RunStatus.RUNNING,
        trigger=Trigger.SCHEDULE,
        scheduled_for=when,
        priority=Priority.NORMAL,
    )

    delivery = TargetDelivery(cloud.clients).deliver(job.model_copy(update={"target": empty_source}), run)

    assert (delivery.ok, delivery.retryable) == (False, False)
    assert (delivery.error or "").startswith("EventBridge InvalidArgument: Parameter Source is not valid")


# --- Lambda ------------------------------------------------------------------------------------


def test_a_function_is_invoked_asynchronously_with_the_payload_and_the_run_ids(
    cloud: SchedulerHarness, clock: FrozenClock
) -> None:
    """What moto can show without Docker: its Lambda without Docker ("use_docker": False)
    accepts an asynchronous invocation with 202 and echoes the event it received. It neither
    runs the function nor checks that it exists, so this shows the request, not its effect."""
    with mock_aws(config={"lambda": {"use_docker": False}}):  # nested: the cloud's state stays
        function = a_function(cloud, "send-report")
        job = create_due_soon(
            cloud, clock, {"type": "LAMBDA", "function_arn": function}, payload={"report": "daily"}
        )
        invocations: list[dict[str, Any]] = []

        def record_request(params: dict[str, Any], **kwargs: Any) -> None:
            invocations.append({"invocation_type": params["headers"]["X-Amz-Invocation-Type"]})

        def record_answer(parsed: dict[str, Any], **kwargs: Any) -> None:
            invocations[-1] |= {"status": parsed["StatusCode"], "event": json.loads(parsed["Payload"].read())}

        events = cloud.clients.lambda_(REGION).meta.events
        events.register("before-call.lambda.Invoke", record_request)
        events.register("after-call.lambda.Invoke", record_answer)
        run = run_when_due(cloud, clock, job)

    assert run["status"] == "SUCCEEDED", run
    [invocation] = invocations
    # Asynchronous: Lambda queues the event and answers 202 at once.
    assert (invocation["invocation_type"], invocation["status"]) == ("Event", 202)
    assert invocation["event"] == {
        "report": "daily",
        "scheduler": {
            "job_id": job["job_id"],
            "run_id": run["run_id"],
            "scheduled_for": run["scheduled_for"],
            "attempt": 1,
        },
    }


def test_a_function_that_does_not_exist_fails_the_run_at_once(
    cloud: SchedulerHarness, clock: FrozenClock
) -> None:
    function = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:never-created"
    job = create_due_soon(cloud, clock, {"type": "LAMBDA", "function_arn": function})

    assert_failed_at_once(run_when_due(cloud, clock, job), "Lambda ResourceNotFoundException")


# --- bad targets are 400s naming the field ------------------------------------------------------

SNS_TOPIC = f"arn:aws:sns:{REGION}:{ACCOUNT}:reports"
FUNCTION = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:send-report"
BUS = {"type": "EVENTBRIDGE", "event_bus_name": "default", "source": "com.example", "detail_type": "Tick"}


def job_to(target: dict[str, Any], **job: Any) -> dict[str, Any]:
    return {"name": "bad", "schedule": {"cron": "0 2 * * *"}, "target": target, **job}


@pytest.mark.parametrize(
    ("target", "field", "reason"),
    [
        pytest.param({"type": "SNS"}, "target.topic_arn", "is required", id="SNS without a topic"),
        pytest.param(
            {"type": "SNS", "topic_arn": "reports"}, "target.topic_arn", "must be an ARN", id="SNS name"
        ),
        pytest.param(
            {"type": "SNS", "topic_arn": f"arn:aws:sqs:{REGION}:{ACCOUNT}:reports"},
            "target.topic_arn",
            "must be an ARN of sns, not of 'sqs'",
            id="SNS ARN of a queue",
        ),
        pytest.param(
            {"type": "SNS", "topic_arn": f"arn:aws:sns:us-east:{ACCOUNT}:t"},
            "target.topic_arn",
            "region 'us-east' is not an AWS region",
            id="SNS region",
        ),
        pytest.param(
            {"type": "SNS", "topic_arn": f"arn:aws:sns:{REGION}:12345:t"},
            "target.topic_arn",
            "account '12345' is not a 12-digit",
            id="SNS account",
        ),
        pytest.param(
            {"type": "SNS", "topic_arn": f"arn:aws:sns:{REGION}:{ACCOUNT}:my topic"},
            "target.topic_arn",
            "topic name 'my topic'",
            id="SNS topic name",
        ),
        pytest.param(
            {"type": "SNS", "topic_arn": f"arn:aws:sns:{REGION}:{ACCOUNT}:t", "extra": 1},
            "target.extra",
            "unknown field",
            id="SNS unknown field",
        ),
        pytest.param(
            {"type": "LAMBDA"}, "target.function_arn", "is required", id="Lambda without a function"
        ),
        pytest.param(
            {"type": "LAMBDA", "function_arn": "send-report"},
            "target.function_arn",
            "must be an ARN",
            id="Lambda function name",
        ),
        pytest.param(
            {"type": "LAMBDA", "function_arn": f"arn:aws:lambda:{REGION}:{ACCOUNT}:layer:x"},
            "target.function_arn",
            "must be function:<name>",
            id="Lambda layer ARN",
        ),
        pytest.param(
            {"type": "LAMBDA", "function_arn": FUNCTION + ":v1:extra"},
            "target.function_arn",
            "must be function:<name>",
            id="Lambda two qualifiers",
        ),
        pytest.param(
            {"type": "LAMBDA", "function_arn": f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:" + "f" * 65},
            "target.function_arn",
            "1-64 letters",
            id="Lambda name over 64",
        ),
        pytest.param(
            {k: v for k, v in BUS.items() if k != "source"}, "target.source", "is required", id="no source"
        ),
        pytest.param(BUS | {"source": ""}, "target.source", "at least 1", id="empty source"),
        pytest.param(BUS | {"source": "aws.ec2"}, "target.source", "reserved for AWS", id="aws. source"),
        pytest.param(
            BUS | {"detail_type": "x" * 129}, "target.detail_type", "at most 128", id="long detail type"
        ),
        pytest.param(BUS | {"detail_type": "a\nb"}, "target.detail_type", "control characters", id="newline"),
        pytest.param(
            BUS | {"event_bus_name": "my bus"}, "target.event_bus_name", "event bus name", id="bus name"
        ),
        pytest.param(
            BUS | {"event_bus_name": f"arn:aws:events:{REGION}:{ACCOUNT}:rule/r"},
            "target.event_bus_name",
            "is not an event bus",
            id="rule ARN as the bus",
        ),
        pytest.param(
            BUS | {"event_bus_name": f"arn:aws:events:{REGION}:1:event-bus/b"},
            "target.event_bus_name",
            "12-digit",
            id="bus ARN account",
        ),
    ],
)
def test_a_bad_target_is_a_400_naming_the_field(
    cloud: SchedulerHarness, target: dict[str, Any], field: str, reason: str
) -> None:
    reply = cloud.call("POST", "/v1/jobs", job_to(target))

    assert reply.status == 400, reply.body
    assert reply.body["error"]["code"] == "VALIDATION_ERROR"
    details = {detail["field"]: detail["message"] for detail in reply.body["error"]["details"]}
    assert field in details, details
    assert reason in details[field]


@pytest.mark.parametrize(
    "target", [BUS, {"type": "LAMBDA", "function_arn": FUNCTION}], ids=["EVENTBRIDGE", "LAMBDA"]
)
def test_a_payload_key_named_scheduler_is_refused_where_the_run_ids_go(
    cloud: SchedulerHarness, target: dict[str, Any]
) -> None:
    reply = cloud.call("POST", "/v1/jobs", job_to(target, payload={"scheduler": "nightly"}))

    assert reply.status == 400, reply.body
    [detail] = reply.body["error"]["details"]
    assert detail["field"] == "payload"
    assert "'scheduler' is where the target gets the run's ids" in detail["message"]


def test_a_payload_key_named_scheduler_is_anyones_for_other_targets(cloud: SchedulerHarness) -> None:
    reply = cloud.call(
        "POST", "/v1/jobs", job_to({"type": "SNS", "topic_arn": SNS_TOPIC}, payload={"scheduler": 1})
    )

    assert reply.status == 201, reply.body


@pytest.mark.parametrize(
    "target",
    [
        {"type": "SNS", "topic_arn": f"arn:aws-cn:sns:cn-north-1:{ACCOUNT}:ledger.fifo"},
        {"type": "SNS", "topic_arn": f"arn:aws-us-gov:sns:us-gov-west-1:{ACCOUNT}:{'t' * 256}"},
        {"type": "LAMBDA", "function_arn": FUNCTION + ":$LATEST"},
        {"type": "LAMBDA", "function_arn": FUNCTION + ":live"},
        {"type": "LAMBDA", "function_arn": FUNCTION + ":7"},
        BUS | {"event_bus_name": f"arn:aws:events:eu-central-2:{ACCOUNT}:event-bus/orders"},
        BUS | {"event_bus_name": "orders.prod/v1-x_y"},
        {"type": "SQS", "queue_url": f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/orders.fifo"},
    ],
    ids=[
        "FIFO topic in aws-cn",
        "256-character topic in GovCloud",
        "function at $LATEST",
        "function alias",
        "function version",
        "bus ARN",
        "bus name with / and .",
        "FIFO queue",
    ],
)
def test_valid_targets_of_every_kind_are_accepted_as_sent(
    cloud: SchedulerHarness, target: dict[str, Any]
) -> None:
    job = cloud.create(job_to(target))

    assert job["target"] == {"role_arn": None} | target  # no execution role: the deployment's shared targets


def test_the_schedulers_own_queues_are_still_refused(cloud: SchedulerHarness) -> None:
    for url in (cloud.settings.queue_url_normal, cloud.settings.dlq_url):
        reply = cloud.call("POST", "/v1/jobs", job_to({"type": "SQS", "queue_url": url}))
        assert reply.status == 400
        assert reply.body["error"]["details"][0]["field"] == "target.queue_url"
