"""A run's last write and its job's completion are one transaction: no crash between them
can leave a finished one-off job SCHEDULED forever (found by `make chaos`)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from scheduler_core.domain.messages import RunMessage
from scheduler_core.domain.overlap import slots_as_read
from scheduler_core.domain.vocabulary import RunStatus
from tests.support.harness import FrozenClock, SchedulerHarness
from tests.support.receiver import WebhookReceiver


def one_off(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> tuple[dict[str, Any], RunMessage]:
    at = clock.now() + timedelta(seconds=5)
    job = cloud.create(
        {"name": "once", "schedule": {"at": at.isoformat()}, "target": {"type": "HTTP", "url": receiver.url}}
    )
    [run] = cloud.call("GET", f"/v1/jobs/{job['job_id']}/runs").body["items"]
    fire_ms = int(at.timestamp() * 1000)
    return job, RunMessage(job_id=job["job_id"], run_id=run["run_id"], scheduled_for_ms=fire_ms, attempt=1)


def test_the_last_run_and_its_job_end_in_one_write(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    job, message = one_off(cloud, clock, receiver)
    store, now = cloud.poll_store, clock.now()
    assert store.start_run_if_waiting(message, now, now + timedelta(minutes=9), "worker-a") is not None

    assert store.finish_run_if_held(message, "worker-a", RunStatus.SUCCEEDED, now, complete_job=True)
    assert cloud.call("GET", f"/v1/jobs/{job['job_id']}").body["status"] == "COMPLETED"


def test_a_worker_that_lost_its_lease_ends_neither_the_run_nor_the_job(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    job, message = one_off(cloud, clock, receiver)
    store, now = cloud.poll_store, clock.now()
    assert store.start_run_if_waiting(message, now, now + timedelta(minutes=9), "worker-a") is not None

    assert not store.finish_run_if_held(message, "worker-b", RunStatus.SUCCEEDED, now, complete_job=True)
    assert cloud.call("GET", f"/v1/jobs/{job['job_id']}").body["status"] == "SCHEDULED"
    assert cloud.call("GET", f"/v1/jobs/{job['job_id']}/runs/{message.run_id}").body["status"] == "RUNNING"


def test_a_job_cancelled_meanwhile_stays_cancelled_and_the_run_still_ends(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    job, message = one_off(cloud, clock, receiver)
    store, now = cloud.poll_store, clock.now()
    assert store.start_run_if_waiting(message, now, now + timedelta(minutes=9), "worker-a") is not None
    assert cloud.call("DELETE", f"/v1/jobs/{job['job_id']}").status == 200

    assert store.finish_run_if_held(message, "worker-a", RunStatus.SUCCEEDED, now, complete_job=True)
    assert cloud.call("GET", f"/v1/jobs/{job['job_id']}").body["status"] == "CANCELLED"
    assert cloud.call("GET", f"/v1/jobs/{job['job_id']}/runs/{message.run_id}").body["status"] == "SUCCEEDED"


def test_the_watchdog_fails_a_lost_last_attempt_and_completes_its_job_together(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    job = cloud.create(
        {
            "name": "once",
            "schedule": {"at": (clock.now() + timedelta(seconds=5)).isoformat()},
            "target": {"type": "HTTP", "url": receiver.url},
            "retry": {"max_attempts": 1},
        }
    )
    [run] = cloud.call("GET", f"/v1/jobs/{job['job_id']}/runs").body["items"]
    store, now = cloud.poll_store, clock.now()
    message = RunMessage(
        job_id=job["job_id"],
        run_id=run["run_id"],
        scheduled_for_ms=int(run["run_id"].split(":")[1]),
        attempt=1,
    )
    assert (
        store.start_run_if_waiting(message, now, now + timedelta(seconds=30), "worker-that-dies") is not None
    )

    clock.advance(95)  # past the lease and a poll's reach
    cloud.poll()
    assert cloud.call("GET", f"/v1/jobs/{job['job_id']}/runs/{run['run_id']}").body["status"] == "FAILED"
    assert cloud.call("GET", f"/v1/jobs/{job['job_id']}").body["status"] == "COMPLETED"
    assert receiver.requests == []


# --- a job paused while its last run runs: it completes all the same ------------------------


def test_the_watchdog_completes_a_job_paused_while_its_lost_last_attempt_ran(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    job, message = one_off(cloud, clock, receiver)
    assert cloud.call("PATCH", f"/v1/jobs/{job['job_id']}", {"retry": {"max_attempts": 1}}).status == 200
    store, now = cloud.poll_store, clock.now()
    assert (
        store.start_run_if_waiting(message, now, now + timedelta(seconds=30), "worker-that-dies") is not None
    )
    assert cloud.call("POST", f"/v1/jobs/{job['job_id']}/pause").status == 200

    clock.advance(95)  # past the lease and a poll's reach
    cloud.poll()
    assert cloud.call("GET", f"/v1/jobs/{job['job_id']}/runs/{message.run_id}").body["status"] == "FAILED"
    assert cloud.call("GET", f"/v1/jobs/{job['job_id']}").body["status"] == "COMPLETED"
    assert cloud.call("POST", f"/v1/jobs/{job['job_id']}/resume").status == 409


def test_a_skipped_last_run_completes_a_job_paused_since_its_worker_read_it(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    job, message = one_off(cloud, clock, receiver)  # overlap SKIP, one running slot
    store, now = cloud.poll_store, clock.now()
    manual = cloud.call("POST", f"/v1/jobs/{job['job_id']}/trigger").body
    manual_message = RunMessage(
        job_id=job["job_id"],
        run_id=manual["run_id"],
        scheduled_for_ms=int(manual["run_id"].split(":")[1]),
        attempt=1,
    )
    before_slot, manual_run = store.get_job_and_run(job["job_id"], manual_message.scheduled_for_ms)
    assert before_slot is not None
    assert manual_run is not None
    assert (
        store.start_run_in_slot(
            manual_run,
            slots_as_read(before_slot, manual_run.scheduled_for_ms),
            now,
            now + timedelta(minutes=9),
            "w",
        )
        is not None
    )
    read = store.get_job(job["job_id"])  # as the worker of the one-off's run reads it: slot taken
    assert read is not None
    assert cloud.call("POST", f"/v1/jobs/{job['job_id']}/pause").status == 200

    assert store.skip_run_if_waiting(
        message,
        slots_as_read(read, message.scheduled_for_ms),
        now,
        "every running slot is taken",
        complete_job=True,
    )
    assert cloud.call("GET", f"/v1/jobs/{job['job_id']}/runs/{message.run_id}").body["status"] == "SKIPPED"
    assert cloud.call("GET", f"/v1/jobs/{job['job_id']}").body["status"] == "COMPLETED"


def test_a_late_success_is_recorded_on_a_run_that_may_run_again_never_on_one_ended(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    """A worker whose call succeeded after it lost the lease records the answer for the next
    attempt, unless the run ended for good meanwhile (attempt 2 already succeeded)."""
    _, message = one_off(cloud, clock, receiver)
    store, now = cloud.poll_store, clock.now()
    assert store.start_run_if_waiting(message, now, now + timedelta(minutes=9), "worker-a") is not None

    assert store.record_late_success_if_may_run_again(message, 204, now)
    running = store.get_run(message.job_id, message.scheduled_for_ms)
    assert running is not None
    assert (running.status, running.delivered_at, running.delivered_code) == (RunStatus.RUNNING, now, 204)
    assert "delivered_at" not in cloud.call("GET", f"/v1/jobs/{message.job_id}/runs/{message.run_id}").body

    assert store.finish_run_if_held(message, "worker-a", RunStatus.SUCCEEDED, now, complete_job=True)
    assert not store.record_late_success_if_may_run_again(message, 500, now + timedelta(seconds=1))
    ended = store.get_run(message.job_id, message.scheduled_for_ms)
    assert ended is not None
    assert (ended.status, ended.delivered_code) == (RunStatus.SUCCEEDED, 204)
