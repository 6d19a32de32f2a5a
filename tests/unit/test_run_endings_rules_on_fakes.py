"""How a run's end and its job's end go together, as the services write them, on the
in-memory fakes (`tests/support/fakes.py`): the worker's end of a job's last run completes
the job in the same write (no crash between the two can leave a finished one-off SCHEDULED
forever: found by `make chaos`); a worker that lost its lease ends neither the run nor the
job, and its late success is kept for the next attempt, never written on a run ended for
good; the watchdog's failure of a lost last attempt completes its job, paused or not; a job
cancelled while its last run calls the target stays CANCELLED; a last run skipped after its
job was paused completes the job.

Elsewhere: the same writes' conditions on the DynamoDB adapter (its transactions: a lost
lease cancels the job's update too, a cancelled job is not completed, a paused one is) in
`tests/integration/test_run_endings.py`; the fake held to the adapter by
`tests/integration/test_store_contract_runs.py`."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from scheduler_core.domain.api_shapes import JobCreate
from scheduler_core.domain.clock import to_ms
from scheduler_core.domain.entities import Job, Run
from scheduler_core.domain.errors import Conflict
from scheduler_core.domain.messages import DeadLetter
from scheduler_core.domain.outcomes import Outcome
from scheduler_core.domain.overlap import slots_as_read
from scheduler_core.domain.vocabulary import JobStatus, RunStatus, Trigger
from scheduler_core.ports import Delivery
from tests.support.builders import T0
from tests.support.fakes import CallsHeldOpen, Deliveries, FakeWorld, fake_world
from tests.support.helpers import iso

ALICE = "alice"
START = T0 + timedelta(seconds=30)  # 09:00:30
FIRE_AT = START + timedelta(seconds=5)  # the one-off's firing: claimed and sent at its create
LEASE = timedelta(seconds=180)  # fake_world's
ONE_SECOND_RETRIES = {"max_attempts": 3, "backoff_seconds": 1, "max_backoff_seconds": 1}


class WorkerDied(BaseException):
    """The worker's process ended (a timeout, an OOM): nothing after this point runs."""


@pytest.fixture
def targets() -> CallsHeldOpen:
    return CallsHeldOpen()


@pytest.fixture
def world(targets: CallsHeldOpen) -> FakeWorld:
    return fake_world(START, targets=targets)


@pytest.fixture
def worker(world: FakeWorld) -> Deliveries:
    return Deliveries(world)


def one_off(world: FakeWorld, **fields: Any) -> Job:
    """A one-off HTTP job at `FIRE_AT` (overlap SKIP, one running slot)."""
    body = {
        "name": "once",
        "schedule": {"at": iso(FIRE_AT)},
        "target": {"type": "HTTP", "url": "https://example.com/hook"},
    }
    return world.jobs.create(ALICE, JobCreate.model_validate(body | fields))


def job_now(world: FakeWorld, job: Job) -> Job:
    read = world.store.get_job(job.job_id)
    assert read is not None
    return read


def run_at(world: FakeWorld, job: Job, when: datetime = FIRE_AT) -> Run:
    run = world.store.get_run(job.job_id, to_ms(when))
    assert run is not None
    return run


def started_by_a_worker_that_dies(world: FakeWorld, worker: Deliveries, job: Job) -> Run:
    """The one-off's run started (its message taken off the queue) by a worker whose lease
    runs 30 s and that dies before it calls the target: nothing after its start is written."""
    [message] = worker.take(lambda run: run.job_id == job.job_id)
    now = world.clock.now()
    started = world.store.start_run_if_waiting(message, now, now + timedelta(seconds=30), "worker-that-dies")
    assert started is not None
    return started


def watchdog(world: FakeWorld) -> list[dict[str, int]]:
    """A poll of every shard; what its watchdog did, for the shards where it did something."""
    reports = [world.dispatcher.poll_shard(shard) for shard in range(4)]
    return [report.watched for report in reports if report.watched]


# --- the worker's end of a job's last run ------------------------------------------------


def test_the_last_runs_end_completes_its_job_in_the_same_write(
    world: FakeWorld, worker: Deliveries, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker's process dies right after the run's end write: its job is completed by
    then, so nothing is left for a write that never comes."""
    job = one_off(world)
    finish = world.store.finish_run_if_held
    finished: list[RunStatus] = []

    def finish_then_die(run: Any, owner: str, status: RunStatus, *args: Any, **kwargs: Any) -> bool:
        assert finish(run, owner, status, *args, **kwargs)
        finished.append(status)
        raise WorkerDied

    monkeypatch.setattr(world.store, "finish_run_if_held", finish_then_die)
    world.clock.set(FIRE_AT)
    with pytest.raises(WorkerDied):
        worker.deliver()
    assert finished == [RunStatus.SUCCEEDED]
    assert run_at(world, job).status is RunStatus.SUCCEEDED
    assert job_now(world, job).status is JobStatus.COMPLETED


def test_a_worker_that_lost_its_lease_ends_neither_the_run_nor_the_job_and_its_success_is_reused(
    world: FakeWorld, worker: Deliveries, targets: CallsHeldOpen
) -> None:
    """Attempt 1's call outlives its lease: the watchdog takes the run over (attempt 2
    waits for its retry). The call then succeeds: neither the run nor the job is ended by
    it, its answer is kept on the run (not shown by the API), and attempt 2 finishes with
    it instead of calling the target again."""
    job = one_off(world, retry=ONE_SECOND_RETRIES)
    targets.answers = [Delivery(ok=True, status_code=204)]
    lease_ends = FIRE_AT + LEASE

    def the_lease_runs_out() -> None:
        world.clock.set(lease_ends + timedelta(seconds=5))
        assert watchdog(world) == [{"retried": 1}]
        taken_over = run_at(world, job)
        assert (taken_over.status, taken_over.attempt) == (RunStatus.RETRYING, 2)

    targets.meanwhile[FIRE_AT] = the_lease_runs_out
    world.clock.set(FIRE_AT)
    assert worker.deliver() == [Outcome.LEASE_LOST]
    waiting = run_at(world, job)
    assert (waiting.status, waiting.attempt, waiting.finished_at) == (RunStatus.RETRYING, 2, None)
    assert (waiting.delivered_at, waiting.delivered_code) == (world.clock.now(), 204)
    assert job_now(world, job).status is JobStatus.SCHEDULED
    shown = world.jobs.get_run(ALICE, job.job_id, waiting.run_id).to_api()
    assert "delivered_at" not in shown
    assert "delivered_code" not in shown

    assert waiting.next_attempt_at is not None
    world.clock.set(waiting.next_attempt_at)
    assert worker.deliver() == [Outcome.SUCCEEDED]
    assert len(targets.calls) == 1  # attempt 2 reused attempt 1's answer
    done = run_at(world, job)
    assert (done.status, done.attempt, done.response_code) == (RunStatus.SUCCEEDED, 2, 204)
    assert job_now(world, job).status is JobStatus.COMPLETED


def test_a_late_success_is_never_written_on_a_run_that_ended_meanwhile(
    world: FakeWorld, worker: Deliveries, targets: CallsHeldOpen
) -> None:
    """Attempt 1's call outlives its lease, and attempt 2 runs and succeeds before it ends:
    attempt 1's success changes nothing on the run ended for good."""
    job = one_off(world, retry=ONE_SECOND_RETRIES)
    targets.answers = [Delivery(ok=True, status_code=204), Delivery(ok=True, status_code=200)]

    def attempt_2_runs_meanwhile() -> None:
        world.clock.set(FIRE_AT + LEASE + timedelta(seconds=5))
        assert watchdog(world) == [{"retried": 1}]
        retry_at = run_at(world, job).next_attempt_at
        assert retry_at is not None
        world.clock.set(retry_at)
        assert worker.deliver() == [Outcome.SUCCEEDED]  # another worker, side by side

    targets.meanwhile[FIRE_AT] = attempt_2_runs_meanwhile
    world.clock.set(FIRE_AT)
    assert worker.deliver() == [Outcome.LEASE_LOST]
    assert len(targets.calls) == 2
    done = run_at(world, job)
    assert (done.status, done.attempt, done.response_code) == (RunStatus.SUCCEEDED, 2, 200)
    assert (done.delivered_at, done.delivered_code) == (None, None)
    assert job_now(world, job).status is JobStatus.COMPLETED


def test_a_job_cancelled_while_its_last_run_calls_the_target_stays_cancelled_and_the_run_ends(
    world: FakeWorld, worker: Deliveries, targets: CallsHeldOpen
) -> None:
    job = one_off(world)

    def cancelled_meanwhile() -> None:
        assert world.jobs.cancel(ALICE, job.job_id).status is JobStatus.CANCELLED

    targets.meanwhile[FIRE_AT] = cancelled_meanwhile
    world.clock.set(FIRE_AT)
    assert worker.deliver() == [Outcome.SUCCEEDED]
    assert run_at(world, job).status is RunStatus.SUCCEEDED
    assert job_now(world, job).status is JobStatus.CANCELLED


# --- the watchdog's end of a lost last attempt ----------------------------------------------


def test_the_watchdog_fails_a_lost_last_attempt_and_completes_its_job_together(
    world: FakeWorld, worker: Deliveries, targets: CallsHeldOpen
) -> None:
    job = one_off(world, retry={"max_attempts": 1})
    lost = started_by_a_worker_that_dies(world, worker, job)

    world.clock.advance(25)  # 09:00:55: the lease (30 s) holds, the run's timer is not up
    assert watchdog(world) == []
    assert run_at(world, job).status is RunStatus.RUNNING
    world.clock.advance(70)  # 09:02:05: past the lease and a poll's reach
    assert watchdog(world) == [{"failed": 1}]
    failed = run_at(world, job)
    assert (failed.status, failed.attempt) == (RunStatus.FAILED, 1)
    assert failed.error == "attempt 1 lost: its worker did not finish within its lease"
    assert job_now(world, job).status is JobStatus.COMPLETED
    assert targets.calls == []  # the watchdog calls nothing
    [record] = [DeadLetter.model_validate_json(message.body) for message in world.dead_letters.waiting]
    assert (record.run_id, record.attempts) == (lost.run_id, 1)
    assert worker.deliver() == []


def test_the_watchdog_completes_a_job_paused_while_its_lost_last_attempt_ran(
    world: FakeWorld, worker: Deliveries
) -> None:
    job = one_off(world, retry={"max_attempts": 1})
    started_by_a_worker_that_dies(world, worker, job)
    assert world.jobs.pause(ALICE, job.job_id).status is JobStatus.PAUSED

    world.clock.advance(95)  # past the lease and a poll's reach
    assert watchdog(world) == [{"failed": 1}]
    assert run_at(world, job).status is RunStatus.FAILED
    assert job_now(world, job).status is JobStatus.COMPLETED
    with pytest.raises(Conflict):
        world.jobs.resume(ALICE, job.job_id)


# --- a last run skipped -------------------------------------------------------------------


def test_a_skipped_last_run_completes_a_job_paused_since_its_worker_read_it(
    world: FakeWorld, worker: Deliveries, targets: CallsHeldOpen, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A manual run holds the one slot (overlap SKIP); the one-off's worker reads the job
    (slot taken: skip), then the job is paused before the skip is written. The skipped run
    was the job's last: the job is completed, paused or not."""
    job = one_off(world)
    manual = world.jobs.trigger(ALICE, job.job_id)
    assert manual.trigger is Trigger.MANUAL
    worker.take(lambda run: run.run_id == manual.run_id)  # another worker's, calling the target
    read = job_now(world, job)
    now = world.clock.now()
    slots = slots_as_read(read, manual.scheduled_for_ms)
    assert world.store.start_run_in_slot(manual, slots, now, now + LEASE, "another-worker") is not None

    real_read = world.store.get_job_and_run

    def paused_after_the_read(job_id: str, run_ms: int) -> tuple[Job | None, Run | None]:
        read = real_read(job_id, run_ms)
        if run_ms == to_ms(FIRE_AT):
            world.jobs.pause(ALICE, job.job_id)
        return read

    monkeypatch.setattr(world.store, "get_job_and_run", paused_after_the_read)
    world.clock.set(FIRE_AT)
    assert worker.deliver() == [Outcome.SKIPPED]
    assert run_at(world, job).status is RunStatus.SKIPPED
    assert job_now(world, job).status is JobStatus.COMPLETED
    assert targets.calls == []
