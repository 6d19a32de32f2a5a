"""A run's last write and its job's completion are one transaction: no crash between them
can leave a finished one-off job SCHEDULED forever (found by `make chaos`). Here, only what
the fakes cannot show: the DynamoDB adapter's transactions under the conditions that bear on
the job (a lost lease cancels the job's update with the run's; a job cancelled meanwhile is
not completed; one paused while its last attempt ran, or since the worker read it, is), seen
through the API.

The rules as the worker and the watchdog apply them (the last run's end completes its job in
the same write; a lost lease ends neither, its late success kept for the next attempt and
never written on a run ended for good; the watchdog's failure of a lost last attempt
completes its job, paused or not) are specified on the in-memory fakes in
`tests/unit/test_run_endings_rules_on_fakes.py`; the fake's writes are held to the adapter's
by `tests/integration/test_store_contract_runs.py`."""

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
    assert cloud.job_expiry(job["job_id"]) == cloud.kept_until(now)  # ended: kept for the retention
