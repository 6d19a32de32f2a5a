"""A job's whole path through the real handlers on moto: create → claim → queue → worker
→ a real HTTP receiver."""

from __future__ import annotations

from datetime import timedelta

from scheduler_core.domain.vocabulary import Priority
from tests.support.harness import FrozenClock, SchedulerHarness
from tests.support.helpers import http_job, iso
from tests.support.receiver import WebhookReceiver


def test_one_off_job_reaches_its_webhook_with_the_scheduler_headers(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    fire_at = clock.now() + timedelta(minutes=10)
    job = cloud.create(
        http_job(receiver, payload={"hello": "world", "n": 1.5}, at=iso(fire_at)) | {"priority": "HIGH"}
    )
    assert job["next_fire_at"] == iso(fire_at)

    clock.move_to(fire_at - timedelta(seconds=90))
    cloud.poll()
    clock.move_to(fire_at)
    assert cloud.deliver() == 1

    [request] = receiver.requests
    run_id = f"{job['job_id']}:{int(fire_at.timestamp() * 1000)}"
    assert request.method == "POST"
    assert request.body == {"hello": "world", "n": 1.5}
    assert request.headers["idempotency-key"] == run_id
    assert request.headers["x-scheduler-run-id"] == run_id
    assert request.headers["x-scheduler-job-id"] == job["job_id"]
    assert request.headers["x-scheduler-scheduled-for"] == iso(fire_at)
    assert request.headers["x-scheduler-attempt"] == "1"
    assert request.headers["content-type"] == "application/json"

    run = cloud.call("GET", f"/v1/jobs/{job['job_id']}/runs/{run_id}").body
    assert run["status"] == "SUCCEEDED"
    assert run["lateness_ms"] == 0
    assert run["response_code"] == 200
    assert cloud.call("GET", f"/v1/jobs/{job['job_id']}").body["status"] == "COMPLETED"


def test_a_claimed_run_waits_on_the_queue_of_its_priority_until_its_second(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    fire_at = clock.now() + timedelta(minutes=5, seconds=30)
    cloud.create(
        http_job(receiver, payload={"hello": "world", "n": 1.5}, at=iso(fire_at)) | {"priority": "LOW"}
    )
    clock.move_to(fire_at - timedelta(seconds=100))
    claimed = sum(len(report.claimed) for report in cloud.poll())
    assert claimed == 1

    # Delayed until the delivery lead before its time, on the LOW queue only.
    lead = timedelta(seconds=cloud.settings.delivery_lead_seconds)
    clock.move_to(fire_at - lead - timedelta(seconds=1))
    assert cloud.deliver() == 0
    clock.move_to(fire_at - lead)
    assert cloud.deliver(priorities=(Priority.HIGH, Priority.NORMAL)) == 0
    assert cloud.deliver(priorities=(Priority.LOW,)) == 1
    # Picked up early, the worker waited: the target saw it exactly on time.
    [request] = receiver.requests
    assert request.received_at == fire_at


def test_a_job_due_within_the_lookahead_is_enqueued_at_create_time(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    fire_at = clock.now() + timedelta(seconds=20)
    job = cloud.create(http_job(receiver, payload={"hello": "world", "n": 1.5}, at=iso(fire_at)))
    assert job["next_fire_at"] is None  # claimed already: nothing left in the due index
    assert job["version"] == 2

    clock.move_to(fire_at)
    assert cloud.deliver(priorities=(Priority.NORMAL,)) == 1  # no poll needed
    assert len(receiver.requests) == 1
    assert sum(len(report.claimed) for report in cloud.poll()) == 0


def test_cancel_before_fire_means_no_delivery(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    fire_at = clock.now() + timedelta(minutes=10)
    job = cloud.create(http_job(receiver, payload={"hello": "world", "n": 1.5}, at=iso(fire_at)))
    cancelled = cloud.call("DELETE", f"/v1/jobs/{job['job_id']}")
    assert cancelled.status == 200
    assert cancelled.body["status"] == "CANCELLED"
    assert cancelled.body["next_fire_at"] is None

    clock.move_to(fire_at - timedelta(seconds=60))
    cloud.poll()
    clock.move_to(fire_at)
    cloud.deliver()
    assert receiver.requests == []
    assert cloud.call("GET", f"/v1/jobs/{job['job_id']}/runs").body["items"] == []


def test_cancel_after_the_claim_cancels_the_run_instead_of_delivering_it(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    fire_at = clock.now() + timedelta(seconds=30)
    job = cloud.create(
        http_job(receiver, payload={"hello": "world", "n": 1.5}, at=iso(fire_at))
    )  # claimed and enqueued at create
    cloud.call("DELETE", f"/v1/jobs/{job['job_id']}")

    clock.move_to(fire_at)
    assert cloud.deliver() == 1
    assert receiver.requests == []
    [run] = cloud.call("GET", f"/v1/jobs/{job['job_id']}/runs").body["items"]
    assert run["status"] == "CANCELLED"


def test_failed_target_marks_the_run_failed_with_the_reason(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    receiver.respond_with(404)
    fire_at = clock.now() + timedelta(seconds=5)
    job = cloud.create(http_job(receiver, payload={"hello": "world", "n": 1.5}, at=iso(fire_at)))
    clock.move_to(fire_at)
    cloud.deliver()
    [run] = cloud.call("GET", f"/v1/jobs/{job['job_id']}/runs").body["items"]
    assert run["status"] == "FAILED"
    assert run["response_code"] == 404
    assert "HTTP 404" in run["error"]
    # Its only firing is over: the one-off is done, whatever the outcome.
    assert cloud.call("GET", f"/v1/jobs/{job['job_id']}").body["status"] == "COMPLETED"
