"""The contract of the jobs table's ports (`scheduler_core.ports`), part one: job records,
the due index and its claims, watermarks, listing. Every case runs against the DynamoDB
adapter on moto and against the in-memory fake (`tests/support/fake_store.py`; the `store`
fixture is in `conftest.py`), so a service test on the fake tests what the adapter does.
Runs and running slots are part two (`test_store_contract_runs.py`)."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from scheduler_core.domain.clock import to_ms
from scheduler_core.domain.vocabulary import JobStatus, RunStatus, Trigger
from scheduler_core.poll_ports import PollResume, Watermark
from scheduler_core.ports import CursorNotValid, JobStore
from tests.support.builders import T0, a_job, a_run
from tests.support.store_contract import AT, MINUTE, claimed, due_jobs, due_runs


def every_job(store: JobStore, tenant: str, limit: int) -> list[str]:
    """The ids of the tenant's jobs, `limit` a page, following the cursors to the end."""
    seen: list[str] = []
    cursor = None
    while True:
        page = store.list_jobs(tenant, limit, cursor, None)
        seen += [job.job_id for job in page.items]
        cursor = page.next_cursor
        if cursor is None:
            return seen


# --- job records ---------------------------------------------------------------------


def test_a_job_is_created_once_and_reads_back(store: JobStore) -> None:
    job = a_job()
    assert store.put_job_if_absent(job)
    assert not store.put_job_if_absent(job.model_copy(update={"name": "other"}))
    read = store.get_job(job.job_id)
    assert read is not None
    assert (read.name, read.status, read.next_fire_at, read.version) == (job.name, job.status, AT, 1)
    assert store.get_job("nope") is None


def test_jobs_are_read_together_by_id_leaving_out_those_that_do_not_exist(store: JobStore) -> None:
    jobs = [a_job(job_id=f"job-{n}", name=f"n{n}") for n in range(3)]
    for job in jobs:
        store.put_job_if_absent(job)
    found = store.get_jobs(["job-2", "nope", "job-0", "job-2"])
    assert {job_id: job.name for job_id, job in found.items()} == {"job-2": "n2", "job-0": "n0"}
    assert store.get_jobs([]) == {}


def test_a_change_is_written_only_over_the_version_read(store: JobStore) -> None:
    job = a_job()
    store.put_job_if_absent(job)
    after = job.model_copy(update={"name": "renamed", "version": 2})
    assert not store.update_job_if_unchanged(job.model_copy(update={"version": 7}), after, T0)
    assert store.update_job_if_unchanged(job, after, T0)
    read = store.get_job(job.job_id)
    assert read is not None
    assert (read.name, read.version) == ("renamed", 2)
    assert not store.update_job_if_unchanged(job, after, T0)  # version 1 is gone


def test_a_change_with_a_run_writes_both_or_neither(store: JobStore) -> None:
    job = a_job()
    store.put_job_if_absent(job)
    run = a_run(job, T0, trigger=Trigger.MANUAL)
    store.put_run_if_absent(run, T0)
    after = job.model_copy(update={"name": "renamed", "version": 2})
    assert not store.update_job_if_unchanged(job, after, T0, run=run)  # the run exists
    read = store.get_job(job.job_id)
    assert read is not None
    assert read.name == job.name
    other = a_run(job, T0 + timedelta(seconds=1), trigger=Trigger.MANUAL)
    assert store.update_job_if_unchanged(job, after, T0, run=other)
    assert store.get_run(job.job_id, other.scheduled_for_ms) is not None


def test_cancel_ends_an_active_job_once(store: JobStore) -> None:
    job = a_job()
    store.put_job_if_absent(job)
    assert store.cancel_job_if_active(job.job_id, T0)
    read = store.get_job(job.job_id)
    assert read is not None
    assert (read.status, read.version, read.next_fire_at) == (JobStatus.CANCELLED, 2, None)
    assert not store.cancel_job_if_active(job.job_id, T0)
    assert due_jobs(store, job, AT) == []


# --- the due index, claims and watermarks --------------------------------------------


def test_a_scheduled_job_waits_in_its_bucket_until_its_time(store: JobStore) -> None:
    job = a_job()
    store.put_job_if_absent(job)
    assert due_jobs(store, job, AT) == [job.job_id]
    assert due_jobs(store, job, AT, until=AT - timedelta(milliseconds=1)) == []
    assert due_jobs(store, job, AT + MINUTE) == []


def test_a_firing_is_claimed_once(store: JobStore) -> None:
    job, run = claimed(store)
    assert run.status is RunStatus.PENDING
    read = store.get_job(job.job_id)
    assert read is not None
    assert (read.next_fire_at, read.version) == (AT + MINUTE, 2)
    assert due_jobs(store, job, AT) == []
    assert due_jobs(store, job, AT + MINUTE) == [job.job_id]
    again = a_run(job, AT)
    assert not store.claim_if_unchanged(job, again, AT + MINUTE, T0)  # the job as first read


def test_a_job_changed_since_it_was_read_is_not_claimed(store: JobStore) -> None:
    job = a_job()
    store.put_job_if_absent(job)
    store.update_job_if_unchanged(job, job.model_copy(update={"name": "renamed", "version": 2}), T0)
    assert not store.claim_if_unchanged(job, a_run(job, AT), AT + MINUTE, T0)  # same firing, old version
    assert store.get_run(job.job_id, to_ms(AT)) is None


def test_a_paused_job_is_not_claimed_nor_due(store: JobStore) -> None:
    job = a_job(status=JobStatus.PAUSED, paused_at=T0)
    store.put_job_if_absent(job)
    assert due_jobs(store, job, AT) == []
    assert not store.claim_if_unchanged(job, a_run(job, AT), AT + MINUTE, T0)


def test_a_caught_up_claim_joins_the_catch_up_queue(store: JobStore) -> None:
    job = a_job()
    store.put_job_if_absent(job)
    assert store.claim_if_unchanged(job, a_run(job, AT, caught_up=True), AT + MINUTE, T0, catch_up=True)
    read = store.get_job(job.job_id)
    assert read is not None
    assert read.catch_up_queue_ms == [to_ms(AT)]


def test_runs_with_a_timer_are_due_and_later_ones_only_counted(store: JobStore) -> None:
    job, run = claimed(store)  # its timer: AT + 30 s
    assert due_runs(store, job, AT) == ([run.scheduled_for_ms], 0)
    assert due_runs(store, job, AT, runs_until=AT + timedelta(seconds=10)) == ([], 1)


def test_a_watermark_only_moves_forward(store: JobStore) -> None:
    assert store.get_watermark(2) is None
    store.advance_watermark(2, 120_000)
    store.advance_watermark(2, 60_000)
    assert store.get_watermark(2) == Watermark(120_000)


def test_a_poll_resume_point_sits_beside_the_watermark_until_cleared(store: JobStore) -> None:
    store.advance_watermark(3, 120_000)
    store.set_poll_resume(3, PollResume(180_000, "after-this"))
    assert store.get_watermark(3) == Watermark(120_000, PollResume(180_000, "after-this"))
    store.advance_watermark(3, 180_000)  # the watermark moves on; the point stays as written
    assert store.get_watermark(3) == Watermark(180_000, PollResume(180_000, "after-this"))
    store.set_poll_resume(3, None)
    assert store.get_watermark(3) == Watermark(180_000)


# --- listing ---------------------------------------------------------------------------


def test_jobs_are_listed_newest_first_per_tenant_a_page_at_a_time(store: JobStore) -> None:
    for n in range(5):
        created = T0 + timedelta(seconds=n)
        status = JobStatus.PAUSED if n % 2 else JobStatus.SCHEDULED
        store.put_job_if_absent(a_job(f"job-{n}", created_at=created, status=status, name=f"n{n % 2}-{n}"))
    store.put_job_if_absent(a_job("bobs", tenant="bob"))
    seen = every_job(store, "alice", 2)
    assert seen == ["job-4", "job-3", "job-2", "job-1", "job-0"]
    paused = store.list_jobs("alice", 10, None, JobStatus.PAUSED)
    assert [job.job_id for job in paused.items] == ["job-3", "job-1"]
    named = store.list_jobs("alice", 10, None, None, name_prefix="n0-")
    assert [job.job_id for job in named.items] == ["job-4", "job-2", "job-0"]
    first = store.list_jobs("alice", 1, None, None)
    assert first.next_cursor is not None
    with pytest.raises(CursorNotValid):
        store.list_jobs("bob", 1, first.next_cursor, None)
    with pytest.raises(CursorNotValid):
        store.list_jobs("alice", 1, "not-a-cursor", None)


def test_jobs_a_listing_lists_are_listed_in_its_place_newest_id_first(store: JobStore) -> None:
    store.put_job_if_absent(a_job("job-old", created_at=T0))
    together = [a_job(f"job-b{n}", created_at=T0 + timedelta(seconds=1)) for n in range(3)]
    store.list_together("alice", "batch-1", [job.job_id for job in together], T0 + timedelta(seconds=1))
    for job in together:
        assert store.put_job_if_absent(job, listed=False)
    store.put_job_if_absent(a_job("job-new", created_at=T0 + timedelta(seconds=2)))
    seen = every_job(store, "alice", 2)
    assert seen == ["job-new", "job-b2", "job-b1", "job-b0", "job-old"]
    assert store.list_jobs("bob", 10, None, None).items == []
    read = store.get_job("job-b1")
    assert read is not None
    assert read.tenant == "alice"


def test_runs_are_listed_newest_first_a_page_at_a_time(store: JobStore) -> None:
    job = a_job()
    store.put_job_if_absent(job)
    times = [T0 + timedelta(minutes=n) for n in range(5)]
    for n, when in enumerate(times):
        store.put_run_if_absent(a_run(job, when, status=RunStatus.FAILED if n % 2 else RunStatus.PENDING), T0)
    seen: list[datetime] = []
    cursor = None
    while True:
        page = store.list_runs(job.job_id, 2, cursor)
        seen += [run.scheduled_for for run in page.items]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seen == times[::-1]
    failed: list[datetime] = []
    cursor = None
    while True:
        page = store.list_runs(job.job_id, 10, cursor, RunStatus.FAILED)
        failed += [run.scheduled_for for run in page.items]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert failed == [times[3], times[1]]
    first = store.list_runs(job.job_id, 1, None)
    assert first.next_cursor is not None
    store.put_job_if_absent(a_job("other"))
    with pytest.raises(CursorNotValid):
        store.list_runs("other", 1, first.next_cursor)
    recent = store.recent_runs(job.job_id, 3, statuses={RunStatus.PENDING})
    assert [run.scheduled_for for run in recent] == [times[4], times[2]]  # among the 3 newest
    after = store.recent_runs(job.job_id, 10, after=times[2])
    assert [run.scheduled_for for run in after] == [times[4], times[3]]
