"""The contract of a kept run's start without a read (`start_kept_run_if_job_idle`): it
starts the run in a running slot, and gives the job and the run as written, only when the
read it replaces would have decided to start it with no more to it; in every other case it
writes nothing and says None (the worker then reads and decides as usual). On the DynamoDB
adapter and the fake alike."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from scheduler_core.domain.clock import to_ms
from scheduler_core.domain.entities import Job, Run
from scheduler_core.domain.messages import run_message
from scheduler_core.domain.overlap import Admission, admit, slots_as_read
from scheduler_core.domain.policies import ConcurrencyPolicy
from scheduler_core.domain.vocabulary import JobStatus, Overlap, RunStatus, Trigger
from scheduler_core.ports import JobStore
from tests.support.builders import T0, a_run
from tests.support.store_contract import AT, LEASE, MINUTE, TIMER, one_off_claimed

SECOND = timedelta(seconds=1)
NOW = AT + SECOND  # the worker's start: after the firing, before the re-send timer


def unchanged(store: JobStore, job: Job, run: Run) -> None:
    """Nothing was written: the job's slots and the run are as claimed."""
    read_job, read_run = store.get_job_and_run(job.job_id, run.scheduled_for_ms)
    assert read_job is not None
    assert read_run is not None
    assert (read_job.running_count, read_job.version) == (job.running_count, job.version)
    assert (read_run.status, read_run.attempt, read_run.started_at) == (
        run.status,
        run.attempt,
        run.started_at,
    )


def test_an_idle_jobs_kept_run_starts_in_a_slot_without_a_read(store: JobStore) -> None:
    job, run = one_off_claimed(store)
    started = store.start_kept_run_if_job_idle(run_message(run), NOW, NOW + LEASE, "w1")
    assert started is not None
    written_job, written_run = started
    assert (written_job.job_id, written_job.status, written_job.running_count) == (
        job.job_id,
        JobStatus.SCHEDULED,
        1,
    )
    assert written_job.target == job.target
    assert (written_run.status, written_run.attempt, written_run.holds_slot) == (RunStatus.RUNNING, 1, True)
    assert (written_run.started_at, written_run.lease_until, written_run.due_at) == (NOW, NOW + LEASE, TIMER)
    assert store.get_run(job.job_id, run.scheduled_for_ms) == written_run
    # The run goes on as any started in a slot: only its owner ends it, and the slot is freed.
    assert not store.finish_run_if_held(written_run, "w2", RunStatus.SUCCEEDED, NOW, complete_job=True)
    assert store.finish_run_if_held(written_run, "w1", RunStatus.SUCCEEDED, NOW, complete_job=True)
    done = store.get_job(job.job_id)
    assert done is not None
    assert (done.status, done.running_count) == (JobStatus.COMPLETED, 0)


def test_a_duplicate_message_starts_nothing(store: JobStore) -> None:
    job, run = one_off_claimed(store)
    assert store.start_kept_run_if_job_idle(run_message(run), NOW, NOW + LEASE, "w1") is not None
    started = store.get_run(job.job_id, run.scheduled_for_ms)
    assert store.start_kept_run_if_job_idle(run_message(run), NOW, NOW + LEASE, "w2") is None
    assert store.get_run(job.job_id, run.scheduled_for_ms) == started
    later = run_message(run).model_copy(update={"attempt": 2})
    assert store.start_kept_run_if_job_idle(later, NOW, NOW + LEASE, "w2") is None


def test_a_paused_job_s_run_is_left_to_the_read(store: JobStore) -> None:
    job, run = one_off_claimed(store)
    paused = job.model_copy(update={"status": JobStatus.PAUSED, "paused_at": AT, "version": job.version + 1})
    assert store.update_job_if_unchanged(job, paused, AT)
    assert store.start_kept_run_if_job_idle(run_message(run), NOW, NOW + LEASE, "w1") is None
    unchanged(store, paused, run)


def test_a_job_with_a_slot_taken_is_left_to_the_read(store: JobStore) -> None:
    job, run = one_off_claimed(store)
    manual = store.get_job(job.job_id)
    assert manual is not None
    # Another run of the job (a manual one) holds a slot.
    other = a_run(job, T0, trigger=Trigger.MANUAL)
    assert store.put_run_if_absent(other, T0)
    slots = slots_as_read(manual, other.scheduled_for_ms)
    assert store.start_run_in_slot(other, slots, NOW, NOW + LEASE, "w0")
    busy = store.get_job(job.job_id)
    assert busy is not None
    assert busy.running_count == 1
    assert store.start_kept_run_if_job_idle(run_message(run), NOW, NOW + LEASE, "w1") is None
    unchanged(store, busy, run)


def test_a_late_success_recorded_on_the_run_is_left_to_the_read(store: JobStore) -> None:
    job, run = one_off_claimed(store)
    assert store.record_late_success_if_may_run_again(run, 204, NOW)
    assert store.start_kept_run_if_job_idle(run_message(run), NOW, NOW + LEASE, "w1") is None
    unchanged(store, job, run)


@pytest.mark.parametrize(
    ("now", "lease"),
    [(TIMER + SECOND, LEASE), (NOW, TIMER - NOW - SECOND)],
    ids=["timer-already-up", "timer-after-the-lease"],
)
def test_a_run_whose_timer_would_have_to_move_is_left_to_the_read(
    store: JobStore, now: datetime, lease: timedelta
) -> None:
    job, run = one_off_claimed(store)
    assert store.start_kept_run_if_job_idle(run_message(run), now, now + lease, "w1") is None
    unchanged(store, job, run)


@pytest.mark.parametrize("overlap", list(Overlap))
def test_every_policy_starts_a_run_of_an_idle_job(overlap: Overlap) -> None:
    """What the unread start assumes of `overlap.admit`: with no slot taken, no run buffered
    and no catch-up queue, a run that is not a caught-up firing starts, whatever the policy."""
    policy = ConcurrencyPolicy(overlap=overlap)
    assert admit(policy, 0, None, to_ms(AT)) is Admission.START
    assert admit(policy, 0, None, to_ms(AT + MINUTE)) is Admission.START
