"""The contract of a start that claims its firing (`claim_and_start_if_unchanged`, for a
one-off's firing a poll sent unclaimed): one write claims the firing and starts its run in a
running slot, the run kept on its job's item with its priority and its re-send timer, only
if the job is still as the poll read it and keeps no run; in every other case it writes
nothing and says None (the worker then reads and decides). On the DynamoDB adapter and the
fake alike."""

from __future__ import annotations

from datetime import timedelta

from scheduler_core.domain.clock import to_ms
from scheduler_core.domain.entities import Job, Run
from scheduler_core.domain.messages import run_message
from scheduler_core.domain.overlap import slots_as_read
from scheduler_core.domain.schedule import ScheduleSpec
from scheduler_core.domain.vocabulary import JobStatus, Priority, RunStatus, Trigger
from scheduler_core.ports import JobStore
from scheduler_core.services.unclaimed_sends import run_claimed_by_start, sent_unclaimed
from tests.support.builders import T0, a_job, a_run
from tests.support.store_contract import AT, LEASE, TIMER, due_jobs, due_runs

NOW = AT + timedelta(milliseconds=5)  # the worker's start, at the run's time


def a_one_off(store: JobStore, **fields: object) -> Job:
    job = a_job("once", schedule=ScheduleSpec(at=AT), next_fire_at=AT, priority=Priority.HIGH, **fields)
    assert store.put_job_if_absent(job)
    read = store.get_job(job.job_id)
    assert read is not None
    return read


def as_started(job: Job) -> Run:
    """The run a start claims for the message the poll sent for `job` (read as it was)."""
    message = run_message(sent_unclaimed(a_run(job, AT, due_at=TIMER), job))
    assert message.claim_version == job.version
    return run_claimed_by_start(message, TIMER)


def nothing_written(store: JobStore, job: Job) -> None:
    read = store.get_job(job.job_id)
    assert read is not None
    assert (read.version, read.next_fire_at, read.running_count) == (job.version, job.next_fire_at, 0)
    assert store.get_run(job.job_id, to_ms(AT)) is None


def test_the_start_claims_the_firing_and_starts_its_run_in_one_write(store: JobStore) -> None:
    job = a_one_off(store)
    started = store.claim_and_start_if_unchanged(as_started(job), job.version, NOW, NOW + LEASE, "w1")
    assert started is not None
    written_job, run = started
    assert (written_job.status, written_job.next_fire_at, written_job.running_count) == (
        JobStatus.SCHEDULED,
        None,
        1,
    )
    assert written_job.version == job.version + 1
    assert (run.status, run.attempt, run.holds_slot, run.with_job) == (RunStatus.RUNNING, 1, True, True)
    assert (run.started_at, run.lease_until, run.due_at) == (NOW, NOW + LEASE, TIMER)
    assert run.priority is Priority.HIGH  # the job's, not the message's placeholder
    assert store.get_run(job.job_id, to_ms(AT)) == run
    # The poll finds the run at its timer (in the firing's minute), no longer the job's firing.
    assert due_runs(store, job, AT, runs_until=TIMER) == ([to_ms(AT)], 0)
    assert due_jobs(store, job, AT) == []
    # The run goes on as any kept run started in a slot: only its owner ends it.
    assert not store.finish_run_if_held(run, "w2", RunStatus.SUCCEEDED, NOW, complete_job=True)
    assert store.finish_run_if_held(run, "w1", RunStatus.SUCCEEDED, NOW, complete_job=True)
    done = store.get_job(job.job_id)
    assert done is not None
    assert (done.status, done.running_count) == (JobStatus.COMPLETED, 0)


def test_a_second_message_for_the_firing_claims_nothing(store: JobStore) -> None:
    job = a_one_off(store)
    assert store.claim_and_start_if_unchanged(as_started(job), job.version, NOW, NOW + LEASE, "w1")
    after = store.get_job(job.job_id)
    assert store.claim_and_start_if_unchanged(as_started(job), job.version, NOW, NOW + LEASE, "w2") is None
    assert store.get_job(job.job_id) == after


def test_a_job_changed_since_the_poll_read_it_is_not_claimed(store: JobStore) -> None:
    job = a_one_off(store)
    renamed = job.model_copy(update={"name": "renamed", "version": job.version + 1})
    assert store.update_job_if_unchanged(job, renamed, T0)
    assert store.claim_and_start_if_unchanged(as_started(job), job.version, NOW, NOW + LEASE, "w1") is None
    nothing_written(store, renamed)
    # Read again, as the worker does, the job's firing is the same: claimed at its version.
    current = store.get_job(job.job_id)
    assert current is not None
    assert store.claim_and_start_if_unchanged(as_started(job), current.version, NOW, NOW + LEASE, "w1")


def test_a_paused_job_is_not_claimed(store: JobStore) -> None:
    job = a_one_off(store)
    paused = job.model_copy(update={"status": JobStatus.PAUSED, "version": job.version + 1, "paused_at": T0})
    assert store.update_job_if_unchanged(job, paused, T0)
    assert store.claim_and_start_if_unchanged(as_started(job), paused.version, NOW, NOW + LEASE, "w1") is None
    assert store.get_run(job.job_id, to_ms(AT)) is None


def test_a_firing_claimed_by_a_poll_since_is_not_claimed_again(store: JobStore) -> None:
    job = a_one_off(store)
    assert store.claim_if_unchanged(job, a_run(job, AT, due_at=TIMER), None, T0)
    claimed = store.get_job(job.job_id)
    assert claimed is not None
    for version in (job.version, claimed.version):
        assert store.claim_and_start_if_unchanged(as_started(job), version, NOW, NOW + LEASE, "w1") is None
    run = store.get_run(job.job_id, to_ms(AT))
    assert run is not None
    assert run.status is RunStatus.PENDING  # the poll's claim stands, for its own message


def test_a_job_whose_firing_moved_is_not_claimed(store: JobStore) -> None:
    job = a_one_off(store)
    later = AT + timedelta(minutes=5)
    moved = job.model_copy(
        update={"schedule": ScheduleSpec(at=later), "next_fire_at": later, "version": job.version + 1}
    )
    assert store.update_job_if_unchanged(job, moved, T0)
    assert store.claim_and_start_if_unchanged(as_started(job), moved.version, NOW, NOW + LEASE, "w1") is None
    read = store.get_job(job.job_id)
    assert read is not None
    assert (read.next_fire_at, read.running_count) == (later, 0)


def test_a_job_whose_slot_a_manual_run_holds_is_not_claimed(store: JobStore) -> None:
    job = a_one_off(store)
    other = a_run(job, T0, trigger=Trigger.MANUAL)
    assert store.put_run_if_absent(other, T0)
    assert store.start_run_in_slot(other, slots_as_read(job, other.scheduled_for_ms), NOW, NOW + LEASE, "w0")
    busy = store.get_job(job.job_id)
    assert busy is not None
    assert (busy.running_count, busy.version) == (1, job.version)  # a slot taken: no new version
    assert store.claim_and_start_if_unchanged(as_started(job), job.version, NOW, NOW + LEASE, "w1") is None
    assert store.get_job(job.job_id) == busy
    assert store.get_run(job.job_id, to_ms(AT)) is None
