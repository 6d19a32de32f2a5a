"""The worker: SQS batches with partial failures; duplicates and stale messages dropped;
SQS targets."""

from __future__ import annotations

import json
from datetime import timedelta

from scheduler_core.domain.vocabulary import Priority
from tests.support.harness import FrozenClock, SchedulerHarness
from tests.support.receiver import WebhookReceiver


def one_off(receiver: WebhookReceiver, clock: FrozenClock, seconds: int = 5) -> dict[str, object]:
    at = (clock.now() + timedelta(seconds=seconds)).isoformat()
    return {"name": "once", "schedule": {"at": at}, "target": {"type": "HTTP", "url": receiver.url}}


def test_a_malformed_message_fails_alone_and_ends_on_the_dlq(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    sqs = cloud.clients.sqs()
    url = cloud.queue_url(Priority.NORMAL)
    sqs.send_message(QueueUrl=url, MessageBody="{not json")
    sqs.send_message(QueueUrl=url, MessageBody=json.dumps({"job_id": "x"}))
    cloud.create(one_off(receiver, clock, seconds=0))

    messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert len(messages) == 3
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    result = cloud.invoke_worker(messages, url, arn)

    assert len(result["batchItemFailures"]) == 2
    assert len(receiver.requests) == 1  # the good run in the same batch was delivered
    # Each failure comes back after the visibility timeout; after maxReceiveCount it is dead-lettered.
    for _ in range(5):
        clock.advance(541)
        cloud.deliver()
    dead = sqs.receive_message(QueueUrl=cloud.settings.dlq_url, MaxNumberOfMessages=10)["Messages"]
    assert sorted(m["Body"] for m in dead) == sorted(["{not json", json.dumps({"job_id": "x"})])
    assert len(receiver.requests) == 1


def test_the_same_message_delivered_twice_calls_the_target_once(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    cloud.create(one_off(receiver, clock, seconds=0))
    sqs = cloud.clients.sqs()
    url = cloud.queue_url(Priority.NORMAL)
    [message] = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    sqs.send_message(QueueUrl=url, MessageBody=message["Body"])  # a duplicate, as SQS may deliver
    cloud.invoke_worker([message], url, "arn:aws:sqs:us-east-1:123456789012:scheduler-normal")
    cloud.deliver()
    assert len(receiver.requests) == 1


def test_the_records_of_one_batch_are_delivered_concurrently(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    receiver.hold_seconds = 0.5
    for _ in range(5):
        cloud.create(one_off(receiver, clock, seconds=3))
    clock.advance(3)
    assert cloud.deliver() == 5
    runs = [r.headers["x-scheduler-run-id"] for r in receiver.requests]
    assert len(set(runs)) == 5
    # The records of one batch were in flight together, not one after the other.
    assert receiver.max_in_flight > 1


def test_an_sqs_target_receives_the_payload_and_run_attributes(
    cloud: SchedulerHarness, clock: FrozenClock
) -> None:
    sqs = cloud.clients.sqs()
    target_url = sqs.create_queue(QueueName="customer-inbox")["QueueUrl"]
    job = cloud.create(
        {
            "name": "to-sqs",
            "schedule": {"at": (clock.now() + timedelta(seconds=2)).isoformat()},
            "target": {"type": "SQS", "queue_url": target_url},
            "payload": {"order": 42},
        }
    )
    clock.advance(2)
    cloud.deliver()
    [message] = sqs.receive_message(QueueUrl=target_url, MessageAttributeNames=["All"])["Messages"]
    assert json.loads(message["Body"]) == {"order": 42}
    run_id = message["MessageAttributes"]["X-Scheduler-Run-Id"]["StringValue"]
    assert run_id.startswith(job["job_id"] + ":")
    assert message["MessageAttributes"]["Idempotency-Key"]["StringValue"] == run_id


def test_an_sqs_target_that_does_not_exist_fails_the_run(cloud: SchedulerHarness, clock: FrozenClock) -> None:
    job = cloud.create(
        {
            "name": "to-nowhere",
            "schedule": {"at": clock.now().isoformat()},
            "target": {
                "type": "SQS",
                "queue_url": "https://sqs.us-east-1.amazonaws.com/123456789012/missing",
            },
        }
    )
    cloud.deliver()
    [run] = cloud.call("GET", f"/v1/jobs/{job['job_id']}/runs").body["items"]
    assert run["status"] == "FAILED"
    assert "SQS" in run["error"]


def test_an_unreachable_webhook_fails_the_run_with_the_reason(
    cloud: SchedulerHarness, clock: FrozenClock
) -> None:
    job = cloud.create(
        {
            "name": "closed-port",
            "schedule": {"at": clock.now().isoformat()},
            "target": {"type": "HTTP", "url": "http://127.0.0.1:9/hook", "timeout_seconds": 2},
            "retry": {"max_attempts": 1},
        }
    )
    cloud.deliver()
    [run] = cloud.call("GET", f"/v1/jobs/{job['job_id']}/runs").body["items"]
    assert run["status"] == "FAILED"
    assert "cannot reach" in run["error"]
