"""Overlap and concurrency (issue 5) through the real handlers on moto: only what the fakes
cannot show. A run skipped end to end (its target call held in flight by a real webhook
receiver, in a worker pass of its own thread, and the skipped run as the API shows it); a
worker process that dies mid-attempt (its slot held until its lease runs out; a late
success reused); the API's JSON and 400s for `concurrency`; DynamoDB's one update that
ends a run, gives its slot back and (not) completes its job.

The rules themselves (SKIP, BUFFER_ONE, ALLOW, manual runs, every way a slot is given back,
early and duplicate messages, a change of policy) are specified on the in-memory fakes in
`tests/unit/test_overlap_rules_on_fakes.py`; the pure decisions in `tests/unit/test_overlap.py`."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from scheduler_core.domain.messages import RunMessage
from scheduler_core.domain.overlap import slots_as_read
from scheduler_core.domain.vocabulary import Priority, RunStatus
from tests.support.faults import WorkerDied, dying_executor
from tests.support.harness import FrozenClock, SchedulerHarness
from tests.support.helpers import iso
from tests.support.receiver import WebhookReceiver


def at(minute: int, second: int = 0) -> datetime:
    return datetime(2026, 11, 21, 10, minute, second, tzinfo=UTC)


def every_minute(receiver: WebhookReceiver, **concurrency: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": "every-minute",
        "schedule": {"cron": "* * * * *"},
        "target": {"type": "HTTP", "url": receiver.url},
    }
    return body | ({"concurrency": concurrency} if concurrency else {})


def slots(cloud: SchedulerHarness, job_id: str) -> tuple[int, int | None]:
    """The job's running slots taken, and the run (by time in ms) waiting for one."""
    job = cloud.api_store.get_job(job_id)
    assert job is not None
    return job.running_count, job.buffered_run_ms


def runs_of(cloud: SchedulerHarness, job_id: str) -> dict[str, dict[str, Any]]:
    """The job's runs by `scheduled_for`."""
    return {run["scheduled_for"]: run for run in cloud.runs(job_id)}


def statuses(cloud: SchedulerHarness, job_id: str) -> dict[str, str]:
    """The job's runs' statuses by `scheduled_for`."""
    return {when: run["status"] for when, run in runs_of(cloud, job_id).items()}


def called(receiver: WebhookReceiver) -> list[str]:
    return sorted(request.headers["x-scheduler-scheduled-for"] for request in receiver.requests)


class InBackground:
    """A worker pass (the queue mapping) in a thread of its own: its target call can stay in
    flight (held by the receiver) while the test goes on."""

    def __init__(self, work: Callable[[], object]) -> None:
        self._error: BaseException | None = None

        def run() -> None:
            try:
                work()
            except BaseException as error:  # re-raised in the test's thread by `join`
                self._error = error

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()

    def join(self) -> None:
        self._thread.join(timeout=30)
        assert not self._thread.is_alive(), "the worker pass did not end"
        if self._error is not None:
            raise self._error


def hold_a_run(cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver, when: datetime) -> Any:
    """Move to `when` and start a worker pass whose target call is held: the run due then
    stays RUNNING until the returned gate is set (then `.worker.join()`)."""
    gate = receiver.hold_until_released()
    held = receiver.in_flight + 1
    clock.move_to(when)
    worker = InBackground(cloud.deliver)
    receiver.wait_in_flight(held)
    return gate, worker


# --- end to end: a run held in flight by a real webhook, in a worker thread ------------------


def test_a_run_due_while_the_previous_one_runs_is_skipped_by_default(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    job = cloud.create(every_minute(receiver))  # 10:00:30: 10:01 and 10:02 claimed
    assert job["concurrency"] == {"overlap": "SKIP", "max_running": 1}
    job_id = job["job_id"]

    gate, worker = hold_a_run(cloud, clock, receiver, at(1))  # the 10:01 run takes over a minute
    assert slots(cloud, job_id) == (1, None)
    clock.move_to(at(2))
    assert cloud.deliver() == 1
    skipped = runs_of(cloud, job_id)[iso(at(2))]
    assert skipped["status"] == "SKIPPED"
    assert skipped["error"] == (
        "skipped: 1 run of the job running when it was due (concurrency.max_running 1, overlap SKIP)"
    )
    assert (skipped["started_at"], skipped["finished_at"]) == (None, iso(at(2)))

    gate.set()
    worker.join()
    assert statuses(cloud, job_id) == {iso(at(1)): "SUCCEEDED", iso(at(2)): "SKIPPED"}
    assert called(receiver) == [iso(at(1))]  # the skipped run's target was never called
    assert slots(cloud, job_id) == (0, None)

    clock.move_to(at(3))  # the slot is free again: the next run goes ahead
    cloud.poll()
    cloud.deliver()
    assert statuses(cloud, job_id)[iso(at(3))] == "SUCCEEDED"
    assert slots(cloud, job_id) == (0, None)


# --- a worker process that dies mid-attempt ---------------------------------------------------


def test_the_slot_of_a_worker_that_died_is_given_back_at_its_lease_expiry(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    """A worker dies after its call: its run holds the slot (it might still be running) until
    the lease runs out; then the watchdog retries it and the slot is free. A manual run
    triggered meanwhile obeys the policy too: it is skipped."""
    job_id = cloud.create(
        every_minute(receiver) | {"schedule": {"cron": "0 * * * *"}, "retry": {"backoff_seconds": 1}}
    )["job_id"]
    clock.move_to(datetime(2026, 11, 21, 10, 59, tzinfo=UTC))
    cloud.poll()  # 11:00 claimed
    clock.move_to(datetime(2026, 11, 21, 11, 0, tzinfo=UTC))
    sqs, url = cloud.clients.sqs(), cloud.queue_url(Priority.NORMAL)
    [message] = sqs.receive_message(QueueUrl=url)["Messages"]
    with pytest.raises(WorkerDied):
        dying_executor(cloud).execute(RunMessage.model_validate_json(message["Body"]))
    assert slots(cloud, job_id) == (1, None)

    manual = cloud.call("POST", f"/v1/jobs/{job_id}/trigger")
    assert manual.status == 202, manual.body
    cloud.deliver()
    assert runs_of(cloud, job_id)[manual.body["scheduled_for"]]["status"] == "SKIPPED"
    assert slots(cloud, job_id) == (1, None)

    clock.advance(cloud.settings.run_lease_seconds + 5)
    cloud.poll()  # the watchdog: attempt 1 is lost, attempt 2 is due after its backoff
    hourly = runs_of(cloud, job_id)[iso(datetime(2026, 11, 21, 11, 0, tzinfo=UTC))]
    assert (hourly["status"], hourly["attempt"]) == ("RETRYING", 2)
    assert slots(cloud, job_id) == (0, None)

    clock.advance(10)
    cloud.deliver()  # attempt 2 calls again, with the same Idempotency-Key: one effect
    assert runs_of(cloud, job_id)[hourly["scheduled_for"]]["status"] == "SUCCEEDED"
    assert [request.headers["idempotency-key"] for request in receiver.requests] == [hourly["run_id"]] * 2
    assert slots(cloud, job_id) == (0, None)


@pytest.mark.parametrize("concurrency", [None, {"overlap": "ALLOW"}], ids=["slots", "allow"])
def test_a_late_success_recorded_while_the_next_attempt_waits_is_reused(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver, concurrency: dict[str, str] | None
) -> None:
    """Attempt 1 outlived its lease; attempt 2's worker has read the run and waits for its
    time when attempt 1's call comes back successful and is written on the run. Attempt 2's
    start, conditioned on the run as read, notices, and it finishes with that answer: the
    target is not called again, whether its start takes a slot or not (found in review)."""
    body = every_minute(receiver) | {"schedule": {"cron": "0 * * * *"}, "retry": {"backoff_seconds": 1}}
    job_id = cloud.create(body | ({"concurrency": concurrency} if concurrency else {}))["job_id"]
    eleven = datetime(2026, 11, 21, 11, 0, tzinfo=UTC)
    clock.move_to(eleven - timedelta(minutes=1))
    cloud.poll()
    clock.move_to(eleven)
    [message] = cloud.clients.sqs().receive_message(QueueUrl=cloud.queue_url(Priority.NORMAL))["Messages"]
    first = RunMessage.model_validate_json(message["Body"])
    with pytest.raises(WorkerDied):
        dying_executor(cloud, after_the_call=False).execute(first)  # attempt 1 hangs before its answer
    clock.advance(cloud.settings.run_lease_seconds + 5)
    cloud.poll()  # the watchdog: attempt 2
    assert (
        runs_of(cloud, job_id)[iso(eleven)]["status"],
        runs_of(cloud, job_id)[iso(eleven)]["attempt"],
    ) == (
        "RETRYING",
        2,
    )
    waiting = clock.sleep_until
    recorded: list[bool] = []

    def late_answer_meanwhile(when: datetime) -> None:
        if not recorded:
            recorded.append(cloud.api_store.record_late_success_if_may_run_again(first, 204, clock.now()))
        waiting(when)

    clock.sleep_until = late_answer_meanwhile  # type: ignore[method-assign]
    clock.advance(10)
    cloud.deliver()
    clock.sleep_until = waiting  # type: ignore[method-assign]
    assert recorded == [True]
    run = runs_of(cloud, job_id)[iso(eleven)]
    assert (run["status"], run["attempt"], run["response_code"]) == ("SUCCEEDED", 2, 204)
    assert receiver.requests == []
    assert slots(cloud, job_id) == (0, None)


# --- DynamoDB's one update: a run's end, its slot, its job's completion -----------------------


def test_the_last_run_ending_gives_its_slot_back_even_when_its_job_cannot_complete(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    """The release and the completion are one update of the job; a job cancelled meanwhile
    cannot complete, and the run still ends and gives its slot back."""
    job_id = cloud.create(every_minute(receiver) | {"schedule": {"at": iso(at(1))}})["job_id"]
    store, now = cloud.api_store, clock.now()
    job, waiting = store.get_job_and_run(job_id, int(at(1).timestamp() * 1000))
    assert job is not None
    assert waiting is not None
    run = store.start_run_in_slot(
        waiting, slots_as_read(job, waiting.scheduled_for_ms), now, now + timedelta(minutes=9), "worker-a"
    )
    assert run is not None
    assert run.holds_slot
    assert slots(cloud, job_id) == (1, None)
    assert cloud.call("DELETE", f"/v1/jobs/{job_id}").status == 200

    assert store.finish_run_if_held(run, "worker-a", RunStatus.SUCCEEDED, now, complete_job=True)
    assert cloud.call("GET", f"/v1/jobs/{job_id}").body["status"] == "CANCELLED"
    assert statuses(cloud, job_id) == {iso(at(1)): "SUCCEEDED"}
    assert slots(cloud, job_id) == (0, None)


# --- the API's JSON --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("concurrency", "field"),
    [
        pytest.param({"max_running": 0}, "concurrency.max_running", id="max_running below 1"),
        pytest.param({"max_running": 1001}, "concurrency.max_running", id="max_running above 1000"),
        pytest.param({"max_running": "many"}, "concurrency.max_running", id="max_running not a number"),
        pytest.param({"overlap": "QUEUE"}, "concurrency.overlap", id="unknown overlap"),
        pytest.param(
            {"overlap": "ALLOW", "max_running": 2}, "concurrency.max_running", id="limit with ALLOW"
        ),
        pytest.param({"parallel": 2}, "concurrency.parallel", id="unknown field"),
    ],
)
def test_a_bad_concurrency_is_a_400_naming_the_field(
    cloud: SchedulerHarness, receiver: WebhookReceiver, concurrency: dict[str, Any], field: str
) -> None:
    reply = cloud.call("POST", "/v1/jobs", every_minute(receiver, **concurrency))
    assert reply.status == 400, reply.body
    assert reply.body["error"]["code"] == "VALIDATION_ERROR"
    assert field in [detail["field"] for detail in reply.body["error"]["details"]], reply.body

    job_id = cloud.create(every_minute(receiver))["job_id"]
    reply = cloud.call("PATCH", f"/v1/jobs/{job_id}", {"concurrency": concurrency})
    assert reply.status == 400, reply.body
    assert field in [detail["field"] for detail in reply.body["error"]["details"]], reply.body


def test_the_job_echoes_its_concurrency_and_a_patch_replaces_it_whole(
    cloud: SchedulerHarness, receiver: WebhookReceiver
) -> None:
    job = cloud.create(every_minute(receiver, max_running=3))
    assert job["concurrency"] == {"overlap": "SKIP", "max_running": 3}
    assert "running_count" not in job
    assert cloud.call("GET", f"/v1/jobs/{job['job_id']}").body["concurrency"] == job["concurrency"]

    reply = cloud.call("PATCH", f"/v1/jobs/{job['job_id']}", {"concurrency": {"overlap": "BUFFER_ONE"}})
    assert reply.status == 200, reply.body
    assert reply.body["concurrency"] == {"overlap": "BUFFER_ONE", "max_running": 1}
    reply = cloud.call("PATCH", f"/v1/jobs/{job['job_id']}", {"concurrency": None})
    assert reply.status == 400
    assert reply.body["error"]["details"][0]["field"] == "concurrency"
