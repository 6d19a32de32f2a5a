"""The contract of the jobs table's ports, part three: a one-off's run. The DynamoDB adapter
keeps it on its job's item (`Run.with_job`: its claim, start and end each write one item);
every port must read, list, move and end it as it does a run of its own, and the fake (which
keeps no such thing) must agree."""

from __future__ import annotations

from datetime import timedelta

from scheduler_core.domain.clock import to_ms
from scheduler_core.domain.entities import Job, Run
from scheduler_core.domain.messages import run_message
from scheduler_core.domain.overlap import slots_as_read
from scheduler_core.domain.schedule import ScheduleSpec
from scheduler_core.domain.vocabulary import JobStatus, RunStatus, Trigger
from scheduler_core.ports import JobStore
from tests.support.builders import T0, a_run
from tests.support.store_contract import AT, LEASE, MINUTE, TIMER, due_jobs, due_runs, one_off_claimed


def started(store: JobStore) -> tuple[Job, Run]:
    job, run = one_off_claimed(store)
    running = store.start_run_in_slot(run, slots_as_read(job, run.scheduled_for_ms), AT, AT + LEASE, "w1")
    assert running is not None
    return job, running


def test_a_one_offs_run_is_read_listed_and_paged_among_its_other_runs(store: JobStore) -> None:
    job, run = one_off_claimed(store)
    for when in (T0 + timedelta(seconds=30), AT + timedelta(seconds=30)):
        assert store.put_run_if_absent(a_run(job, when, trigger=Trigger.MANUAL), T0)
    read = store.get_run(job.job_id, run.scheduled_for_ms)
    assert read is not None
    assert (read.run_id, read.status, read.trigger, read.due_at) == (
        run.run_id,
        RunStatus.PENDING,
        Trigger.SCHEDULE,
        TIMER,
    )
    read_job, read_run = store.get_job_and_run(job.job_id, run.scheduled_for_ms)
    assert read_job is not None
    assert (read_job.next_fire_at, read_run) == (None, read)

    newest_first = [AT + timedelta(seconds=30), AT, T0 + timedelta(seconds=30)]
    pages, cursor = [], None
    for _ in range(4):
        page = store.list_runs(job.job_id, 1, cursor)
        pages += [r.scheduled_for for r in page.items]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert pages == newest_first
    assert [r.scheduled_for for r in store.list_runs(job.job_id, 2, None).items] == newest_first[:2]
    assert [
        r.scheduled_for for r in store.list_runs(job.job_id, 10, None, RunStatus.PENDING).items
    ] == newest_first
    assert [r.scheduled_for for r in store.recent_runs(job.job_id, 10)] == newest_first
    assert [
        r.scheduled_for for r in store.recent_runs(job.job_id, 5, after=T0 + timedelta(seconds=30))
    ] == newest_first[:2]


def test_a_one_offs_run_takes_its_slot_ends_and_completes_its_job(store: JobStore) -> None:
    job, running = started(store)
    assert (running.status, running.holds_slot) == (RunStatus.RUNNING, True)
    slots = store.get_job(job.job_id)
    assert slots is not None
    assert slots.running_count == 1
    assert store.start_run_if_waiting(running, AT, AT + LEASE, "w2") is None  # a duplicate
    assert not store.finish_run_if_held(running, "w2", RunStatus.SUCCEEDED, AT, complete_job=True)
    assert store.finish_run_if_held(
        running, "w1", RunStatus.SUCCEEDED, AT, response_code=200, complete_job=True
    )
    done = store.get_job(job.job_id)
    ended = store.get_run(job.job_id, running.scheduled_for_ms)
    assert done is not None
    assert ended is not None
    assert (done.status, done.running_count) == (JobStatus.COMPLETED, 0)
    assert (ended.status, ended.response_code, ended.due_at, ended.lease_until) == (
        RunStatus.SUCCEEDED,
        200,
        None,
        None,
    )
    assert due_runs(store, job, AT, runs_until=AT + LEASE) == ([], 0)  # nothing left to watch


def test_a_reference_that_does_not_say_where_the_run_is_still_finds_it(store: JobStore) -> None:
    job, run = one_off_claimed(store)
    message = run_message(run).model_copy(update={"with_job": False})  # e.g. a message made by hand
    running = store.start_run_if_waiting(message, AT, AT + LEASE, "w1")
    assert running is not None
    assert store.finish_run_if_held(message, "w1", RunStatus.SUCCEEDED, AT, complete_job=True)
    ended = store.get_run(job.job_id, run.scheduled_for_ms)
    assert ended is not None
    assert ended.status is RunStatus.SUCCEEDED


def test_a_one_offs_retry_and_expired_lease_are_watched_at_their_timers(store: JobStore) -> None:
    job, running = started(store)
    retry_at = AT + timedelta(minutes=20)
    retried = store.retry_run_if_held(
        running, "w1", running.ended_attempt(AT, "boom", 500), retry_at, retry_at
    )
    assert retried is not None
    assert (retried.status, retried.attempt, retried.due_at) == (RunStatus.RETRYING, 2, retry_at)
    assert due_runs(store, job, retry_at, runs_until=retry_at) == ([to_ms(AT)], 0)
    job_now = store.get_job(job.job_id)
    assert job_now is not None
    assert job_now.running_count == 0  # the retry gave its slot back
    again = store.start_run_in_slot(
        retried, slots_as_read(job_now, to_ms(AT)), retry_at, retry_at + LEASE, "w2"
    )
    assert again is not None
    expired = retry_at + LEASE
    taken = store.take_over_expired_lease(again, expired, RunStatus.FAILED, "lease lost", complete_job=True)
    assert taken is not None
    done = store.get_job(job.job_id)
    assert done is not None
    assert (done.status, done.running_count) == (JobStatus.COMPLETED, 0)


def test_a_new_firing_of_a_one_off_moves_its_waiting_run_to_an_item_of_its_own(store: JobStore) -> None:
    job, run = one_off_claimed(store)
    later = AT + timedelta(minutes=10)
    moved = job.model_copy(
        update={"schedule": ScheduleSpec(at=later), "next_fire_at": later, "version": job.version + 1}
    )
    assert store.update_job_if_unchanged(job, moved, T0)
    read = store.get_run(job.job_id, run.scheduled_for_ms)
    assert read is not None
    assert (read.status, read.due_at) == (RunStatus.PENDING, TIMER)  # as it was
    assert due_runs(store, job, TIMER, runs_until=TIMER) == ([to_ms(AT)], 0)  # still watched
    running = store.start_run_if_waiting(run, AT, AT + LEASE, "w1")  # a message from before the move
    assert running is not None
    assert store.finish_run_if_held(running, "w1", RunStatus.SUCCEEDED, AT)
    job_now = store.get_job(job.job_id)
    assert job_now is not None
    assert (job_now.status, job_now.next_fire_at) == (JobStatus.SCHEDULED, later)
    second = store.claim_if_unchanged(job_now, a_run(job_now, later, due_at=later + MINUTE), None, T0)
    assert second is not None
    assert [r.scheduled_for for r in store.list_runs(job.job_id, 10, None).items] == [later, AT]


def test_a_one_off_cancelled_or_paused_while_its_run_runs_leaves_that_run_watched(store: JobStore) -> None:
    job, running = started(store)
    paused = job.model_copy(update={"status": JobStatus.PAUSED, "paused_at": AT, "version": job.version + 1})
    assert store.update_job_if_unchanged(job, paused, AT)
    assert store.cancel_job_if_active(job.job_id, AT)
    cancelled = store.get_job(job.job_id)
    assert cancelled is not None
    assert cancelled.status is JobStatus.CANCELLED
    # The run's timer (its re-send timer, left by the start) is still where the poll looks.
    assert due_runs(store, job, AT, runs_until=TIMER) == ([to_ms(AT)], 0)
    assert store.finish_run_if_held(running, "w1", RunStatus.SUCCEEDED, AT, complete_job=True)
    ended = store.get_run(job.job_id, running.scheduled_for_ms)
    assert ended is not None
    assert ended.status is RunStatus.SUCCEEDED
    still = store.get_job(job.job_id)
    assert still is not None
    assert (still.status, still.running_count) == (JobStatus.CANCELLED, 0)


def test_a_paused_one_off_given_a_new_time_moves_its_running_run_to_an_item_of_its_own(
    store: JobStore,
) -> None:
    """Paused, the job's item has no index entry of its own, but a new time is a firing of
    its own all the same: the run it keeps (running here) moves out, still watched."""
    job, running = started(store)
    paused = job.model_copy(update={"status": JobStatus.PAUSED, "paused_at": AT, "version": job.version + 1})
    assert store.update_job_if_unchanged(job, paused, AT)
    later = AT + timedelta(minutes=10)
    moved = paused.model_copy(
        update={"schedule": ScheduleSpec(at=later), "next_fire_at": later, "version": paused.version + 1}
    )
    assert store.update_job_if_unchanged(paused, moved, AT)
    assert due_runs(store, job, AT, runs_until=TIMER) == ([to_ms(AT)], 0)  # still watched
    assert store.finish_run_if_held(running, "w1", RunStatus.FAILED, AT, error="boom")
    job_now = store.get_job(job.job_id)
    assert job_now is not None
    assert (job_now.status, job_now.next_fire_at, job_now.running_count) == (JobStatus.PAUSED, later, 0)


def test_an_ended_kept_run_moves_out_when_its_job_gets_a_firing_and_is_redriven_there(
    store: JobStore,
) -> None:
    """A run its job's item keeps must not share the job's index entry once the job has a
    firing of its own: the job's change moves it out even though it has ended, so a
    re-drive of it never moves the job's entry."""
    job, running = started(store)
    assert store.finish_run_if_held(running, "w1", RunStatus.FAILED, AT, error="boom")  # not the last
    job_now = store.get_job(job.job_id)
    assert job_now is not None
    later = AT + timedelta(minutes=10)
    moved = job_now.model_copy(
        update={"schedule": ScheduleSpec(at=later), "next_fire_at": later, "version": job_now.version + 1}
    )
    assert store.update_job_if_unchanged(job_now, moved, AT)
    failed = store.get_run(job.job_id, to_ms(AT))
    assert failed is not None
    assert failed.status is RunStatus.FAILED
    redriven = store.redrive_run_if_failed(failed, AT + MINUTE, AT + 2 * MINUTE)
    assert redriven is not None
    assert redriven.status is RunStatus.RETRYING
    assert due_jobs(store, job, later) == [job.job_id]  # the job's own entry, where it was
    assert due_runs(store, job, AT + 2 * MINUTE, runs_until=AT + 2 * MINUTE) == ([to_ms(AT)], 0)
