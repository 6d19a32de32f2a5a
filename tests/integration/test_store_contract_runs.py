"""The contract of the jobs table's ports, part two: runs (read, started, ended, retried,
taken over, re-sent, set aside) and running slots, on the DynamoDB adapter and the fake
alike (see `test_store_contract.py`)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from scheduler_core.domain.overlap import slots_as_read
from scheduler_core.domain.policies import ConcurrencyPolicy
from scheduler_core.domain.schedule import ScheduleSpec
from scheduler_core.domain.vocabulary import JobStatus, Overlap, RunStatus, Trigger
from scheduler_core.ports import JobStore, SlotsChanged
from tests.support.builders import T0, a_job, a_run
from tests.support.store_contract import AT, LEASE, MINUTE, claimed, started

# --- runs ------------------------------------------------------------------------------


def test_a_run_is_created_once_and_read_with_its_job(store: JobStore) -> None:
    job = a_job()
    store.put_job_if_absent(job)
    run = a_run(job, T0, trigger=Trigger.MANUAL)
    assert store.put_run_if_absent(run, T0)
    assert not store.put_run_if_absent(run, T0)
    read_job, read_run = store.get_job_and_run(job.job_id, run.scheduled_for_ms)
    assert read_job is not None
    assert read_run is not None
    assert (read_job.job_id, read_run.run_id, read_run.trigger) == (job.job_id, run.run_id, Trigger.MANUAL)
    assert store.get_job_and_run(job.job_id, 1) == (read_job, None)


def test_an_attempt_starts_once(store: JobStore) -> None:
    _, run = claimed(store)
    running = store.start_run_if_waiting(run, AT, AT + LEASE, "w1")
    assert running is not None
    assert (running.status, running.started_at, running.lease_until) == (RunStatus.RUNNING, AT, AT + LEASE)
    assert store.start_run_if_waiting(run, AT, AT + LEASE, "w2") is None  # a duplicate message
    assert store.start_run_if_waiting(run.model_copy(update={"attempt": 2}), AT, AT + LEASE, "w2") is None


def test_only_the_lease_owner_extends_or_finishes(store: JobStore) -> None:
    job, run = started(store)
    assert not store.extend_lease_if_held(run, "w2", AT + 2 * LEASE)
    assert store.extend_lease_if_held(run, "w1", AT + 2 * LEASE)
    extended = store.get_run(job.job_id, run.scheduled_for_ms)
    assert extended is not None
    assert (extended.lease_until, extended.due_at) == (AT + 2 * LEASE, AT + 2 * LEASE)
    assert not store.finish_run_if_held(run, "w2", RunStatus.SUCCEEDED, AT)
    assert store.finish_run_if_held(run, "w1", RunStatus.SUCCEEDED, AT, response_code=200, lateness_ms=5)
    done = store.get_run(job.job_id, run.scheduled_for_ms)
    assert done is not None
    assert (done.status, done.response_code, done.lateness_ms, done.finished_at) == (
        RunStatus.SUCCEEDED,
        200,
        5,
        AT,
    )
    assert (done.due_at, done.lease_until) == (None, None)
    assert not store.finish_run_if_held(run, "w1", RunStatus.FAILED, AT)  # ended already


def test_the_last_run_s_end_completes_its_job_and_only_then(store: JobStore) -> None:
    job, run = started(store)  # the job fires again at AT + 1 minute
    assert store.finish_run_if_held(run, "w1", RunStatus.SUCCEEDED, AT, complete_job=True)
    read = store.get_job(job.job_id)
    assert read is not None
    assert read.status is JobStatus.SCHEDULED  # a firing is left: the run ends, the job goes on
    one_off = a_job("once", schedule=ScheduleSpec(at=AT))
    store.put_job_if_absent(one_off)
    last = store.claim_if_unchanged(one_off, a_run(one_off, AT), None, T0)
    assert last is not None
    running = store.start_run_if_waiting(last, AT, AT + LEASE, "w1")
    assert running is not None
    assert store.finish_run_if_held(running, "w1", RunStatus.SUCCEEDED, AT, complete_job=True)
    done = store.get_job("once")
    assert done is not None
    assert done.status is JobStatus.COMPLETED


def test_a_failed_attempt_becomes_the_next_one(store: JobStore) -> None:
    job, run = started(store)
    retry_at = AT + timedelta(seconds=20)
    assert store.retry_run_if_held(run, "w2", run.ended_attempt(AT, "boom", 500), retry_at, retry_at) is None
    retried = store.retry_run_if_held(run, "w1", run.ended_attempt(AT, "boom", 500), retry_at, retry_at)
    assert retried is not None
    read = store.get_run(job.job_id, run.scheduled_for_ms)
    assert read is not None
    for seen in (retried, read):
        assert (seen.status, seen.attempt, seen.next_attempt_at, seen.due_at, seen.error) == (
            RunStatus.RETRYING,
            2,
            retry_at,
            retry_at,
            "boom",
        )
    assert read.lease_until is None
    assert store.start_run_if_waiting(run, AT, AT + LEASE, "w3") is None  # attempt 1's message
    assert store.start_run_if_waiting(read, retry_at, retry_at + LEASE, "w3") is not None


def test_a_late_success_is_kept_for_a_run_that_may_run_again(store: JobStore) -> None:
    job, run = started(store)
    assert store.record_late_success_if_may_run_again(run, 204, AT)
    read = store.get_run(job.job_id, run.scheduled_for_ms)
    assert read is not None
    assert (read.delivered_at, read.delivered_code) == (AT, 204)
    assert store.finish_run_if_held(run, "w1", RunStatus.SUCCEEDED, AT)
    assert not store.record_late_success_if_may_run_again(run, 204, AT)  # ended for good


def test_the_watchdog_takes_over_an_expired_lease_only(store: JobStore) -> None:
    job, run = started(store)
    retry_at = AT + LEASE + timedelta(seconds=5)
    early = AT + LEASE - timedelta(seconds=1)
    assert store.take_over_expired_lease(run, early, RunStatus.RETRYING, "lost", retry_at, retry_at) is None
    taken = store.take_over_expired_lease(run, AT + LEASE, RunStatus.RETRYING, "lost", retry_at, retry_at)
    assert taken is not None
    read = store.get_run(job.job_id, run.scheduled_for_ms)
    assert read is not None
    assert (read.status, read.attempt, read.error, read.due_at) == (RunStatus.RETRYING, 2, "lost", retry_at)
    assert not store.finish_run_if_held(run, "w1", RunStatus.SUCCEEDED, AT + LEASE)  # the slow worker


def test_the_watchdog_fails_an_expired_attempt_and_completes_the_job(store: JobStore) -> None:
    one_off = a_job("once", schedule=ScheduleSpec(at=AT))
    store.put_job_if_absent(one_off)
    run = store.claim_if_unchanged(one_off, a_run(one_off, AT), None, T0)
    assert run is not None
    running = store.start_run_if_waiting(run, AT, AT + LEASE, "w1")
    assert running is not None
    failed = store.take_over_expired_lease(running, AT + LEASE, RunStatus.FAILED, "lost", complete_job=True)
    assert failed is not None
    read = store.get_run("once", run.scheduled_for_ms)
    job = store.get_job("once")
    assert read is not None
    assert job is not None
    assert (read.status, read.finished_at, read.due_at) == (RunStatus.FAILED, AT + LEASE, None)
    assert job.status is JobStatus.COMPLETED


def test_a_running_attempt_s_timer_moves_to_its_lease_s_end(store: JobStore) -> None:
    job, run = started(store)
    assert store.move_timer_to_lease_if_unchanged(run)
    read = store.get_run(job.job_id, run.scheduled_for_ms)
    assert read is not None
    assert read.due_at == AT + LEASE
    assert not store.move_timer_to_lease_if_unchanged(run.model_copy(update={"lease_until": AT}))


def test_a_resend_is_reserved_once_per_timer(store: JobStore) -> None:
    job, run = claimed(store)
    later = AT + timedelta(minutes=5)
    assert store.resend_if_unchanged(run, later, caught_up=True)
    read = store.get_run(job.job_id, run.scheduled_for_ms)
    assert read is not None
    assert (read.due_at, read.caught_up) == (later, True)
    assert not store.resend_if_unchanged(run, later)  # another poller read the old timer


def test_only_a_waiting_run_is_failed_or_cancelled_unstarted(store: JobStore) -> None:
    job, run = claimed(store)
    assert store.fail_waiting_run(run, AT, "its job is gone")
    read = store.get_run(job.job_id, run.scheduled_for_ms)
    assert read is not None
    assert (read.status, read.error, read.due_at) == (RunStatus.FAILED, "its job is gone", None)
    assert not store.cancel_run_if_not_started(run, AT)
    second = a_run(job, AT + MINUTE)
    store.put_run_if_absent(second, AT)
    assert store.cancel_run_if_not_started(second, AT)
    cancelled = store.get_run(job.job_id, second.scheduled_for_ms)
    assert cancelled is not None
    assert cancelled.status is RunStatus.CANCELLED


def test_a_failed_run_is_redriven_as_a_fresh_round(store: JobStore) -> None:
    job, run = claimed(store)
    store.fail_waiting_run(run, AT, "spent")
    failed = store.get_run(job.job_id, run.scheduled_for_ms)
    assert failed is not None
    redriven = store.redrive_run_if_failed(failed, AT + MINUTE, AT + MINUTE)
    assert redriven is not None
    read = store.get_run(job.job_id, run.scheduled_for_ms)
    assert read is not None
    assert (read.status, read.trigger, read.attempt, read.first_attempt, read.finished_at) == (
        RunStatus.RETRYING,
        Trigger.RETRY,
        2,
        2,
        None,
    )
    assert store.redrive_run_if_failed(failed, AT, AT) is None  # not FAILED any more


def test_a_waiting_run_waits_its_turn_or_is_set_aside_only_while_its_job_is_paused(store: JobStore) -> None:
    job, run = claimed(store)
    later = AT + timedelta(minutes=3)
    assert store.wait_turn_if_waiting(run, later)
    assert store.set_aside_while_paused(run, later) is None  # the job is not paused
    read = store.get_job(job.job_id)
    assert read is not None
    store.update_job_if_unchanged(
        read, read.model_copy(update={"status": JobStatus.PAUSED, "paused_at": AT}), AT
    )
    assert store.set_aside_while_paused(run, later + MINUTE) is True
    waiting = store.get_run(job.job_id, run.scheduled_for_ms)
    assert waiting is not None
    assert (waiting.status, waiting.due_at) == (RunStatus.PENDING, later + MINUTE)
    assert store.set_aside_while_paused(run.model_copy(update={"attempt": 3}), later) is False


# --- running slots ---------------------------------------------------------------------


def test_a_start_in_a_slot_takes_it_and_its_end_gives_it_back(store: JobStore) -> None:
    job, run = claimed(store)
    read = store.get_job(job.job_id)
    assert read is not None
    running = store.start_run_in_slot(run, slots_as_read(read, run.scheduled_for_ms), AT, AT + LEASE, "w1")
    assert running is not None
    assert running.holds_slot
    taken = store.get_job(job.job_id)
    assert taken is not None
    assert taken.running_count == 1
    other = a_run(job, AT + timedelta(seconds=1), trigger=Trigger.MANUAL)
    store.put_run_if_absent(other, AT)
    with pytest.raises(SlotsChanged):  # the slots as first read: free, but no longer
        store.start_run_in_slot(other, slots_as_read(read, other.scheduled_for_ms), AT, AT + LEASE, "w2")
    assert (
        store.start_run_in_slot(run, slots_as_read(read, run.scheduled_for_ms), AT, AT + LEASE, "w3") is None
    )
    assert store.finish_run_if_held(running, "w1", RunStatus.SUCCEEDED, AT)
    freed = store.get_job(job.job_id)
    assert freed is not None
    assert freed.running_count == 0


def test_a_run_is_skipped_only_while_every_slot_is_taken(store: JobStore) -> None:
    job, run = claimed(store)
    read = store.get_job(job.job_id)
    assert read is not None
    other = a_run(job, AT + timedelta(seconds=1), trigger=Trigger.MANUAL)
    store.put_run_if_absent(other, AT)
    with pytest.raises(SlotsChanged):  # read as full, but the slot is free
        store.skip_run_if_waiting(
            other, slots_as_read(read.model_copy(update={"running_count": 1}), 0), AT, "x"
        )
    assert store.start_run_in_slot(run, slots_as_read(read, run.scheduled_for_ms), AT, AT + LEASE, "w1")
    full = store.get_job(job.job_id)
    assert full is not None
    assert store.skip_run_if_waiting(
        other, slots_as_read(full, other.scheduled_for_ms), AT, "every slot taken"
    )
    skipped = store.get_run(job.job_id, other.scheduled_for_ms)
    assert skipped is not None
    assert (skipped.status, skipped.error, skipped.finished_at) == (RunStatus.SKIPPED, "every slot taken", AT)


def test_buffer_one_keeps_one_run_for_the_next_slot(store: JobStore) -> None:
    job = a_job(concurrency=ConcurrencyPolicy(overlap=Overlap.BUFFER_ONE))
    job, run = claimed(store, job)
    read = store.get_job(job.job_id)
    assert read is not None
    running = store.start_run_in_slot(run, slots_as_read(read, run.scheduled_for_ms), AT, AT + LEASE, "w1")
    assert running is not None
    full = store.get_job(job.job_id)
    assert full is not None
    waiting = a_run(job, AT + timedelta(seconds=1), trigger=Trigger.MANUAL)
    store.put_run_if_absent(waiting, AT)
    assert store.buffer_run_if_waiting(waiting, slots_as_read(full, waiting.scheduled_for_ms), AT + MINUTE)
    buffered = store.get_job(job.job_id)
    assert buffered is not None
    assert buffered.buffered_run_ms == waiting.scheduled_for_ms
    third = a_run(job, AT + timedelta(seconds=2), trigger=Trigger.MANUAL)
    store.put_run_if_absent(third, AT)
    with pytest.raises(SlotsChanged):  # read before the buffering: it would jump the queue
        store.buffer_run_if_waiting(third, slots_as_read(full, third.scheduled_for_ms), AT + MINUTE)
    assert store.skip_run_if_waiting(third, slots_as_read(buffered, third.scheduled_for_ms), AT, "behind")
    store.finish_run_if_held(running, "w1", RunStatus.SUCCEEDED, AT)
    free = store.get_job(job.job_id)
    assert free is not None
    slots = slots_as_read(free, waiting.scheduled_for_ms)
    assert store.start_run_in_slot(waiting, slots, AT, AT + LEASE, "w2") is not None
    after = store.get_job(job.job_id)
    assert after is not None
    assert (after.buffered_run_ms, after.running_count) == (None, 1)
    assert store.clear_buffered_run(job.job_id, waiting.scheduled_for_ms) is False


def test_the_catch_up_queue_is_left_from_its_front_and_rejoined_there(store: JobStore) -> None:
    job = a_job()
    store.put_job_if_absent(job)
    run = a_run(job, AT, caught_up=True)
    store.claim_if_unchanged(job, run, AT + MINUTE, T0, catch_up=True)
    assert not store.leave_catch_up_queue(job.job_id, 1)
    assert store.leave_catch_up_queue(job.job_id, run.scheduled_for_ms)
    read = store.get_job(job.job_id)
    assert read is not None
    manual = a_run(job, T0, trigger=Trigger.MANUAL)
    store.put_run_if_absent(manual, T0)
    assert store.start_run_in_slot(manual, slots_as_read(read, manual.scheduled_for_ms), AT, AT + LEASE, "w1")
    full = store.get_job(job.job_id)
    assert full is not None
    assert store.rejoin_catch_up_queue(run, slots_as_read(full, run.scheduled_for_ms), AT + MINUTE)
    queued = store.get_job(job.job_id)
    assert queued is not None
    assert queued.catch_up_queue_ms == [run.scheduled_for_ms]
