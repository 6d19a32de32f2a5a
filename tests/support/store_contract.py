"""What the contract suites of the jobs table's ports share (`tests/integration/
test_store_contract*.py`): the firing they claim, and helpers that read the due index and
set up claimed and started runs, on whichever store the `store` fixture hands them."""

from __future__ import annotations

from datetime import datetime, timedelta

from scheduler_core.domain import keys
from scheduler_core.domain.clock import to_ms
from scheduler_core.domain.entities import Job, Run
from scheduler_core.domain.schedule import ScheduleSpec
from scheduler_core.ports import JobStore
from tests.support.builders import T0, a_job, a_run

SHARDS = 4
MINUTE = timedelta(minutes=1)
LEASE = timedelta(minutes=9)
AT = T0 + MINUTE  # the firing the cases claim
TIMER = AT + timedelta(seconds=30)  # a claimed one-off's re-send timer


def due_jobs(store: JobStore, job: Job, when: datetime, until: datetime | None = None) -> list[str]:
    """The ids of the jobs in the due index bucket of `job`'s shard at `when`."""
    shard = keys.shard_for(job.job_id, SHARDS)
    bucket = to_ms(when) // 60_000 * 60_000
    limit = to_ms(until or when + MINUTE)
    return [j.job_id for page in store.due_pages(shard, bucket, limit) for j in page.jobs]


def due_runs(
    store: JobStore, job: Job, when: datetime, runs_until: datetime | None = None
) -> tuple[list[int], int]:
    shard = keys.shard_for(job.job_id, SHARDS)
    bucket = to_ms(when) // 60_000 * 60_000
    pages = list(store.due_pages(shard, bucket, bucket + 59_999, to_ms(runs_until) if runs_until else None))
    return [r.scheduled_for_ms for page in pages for r in page.runs], sum(page.later_runs for page in pages)


def claimed(store: JobStore, job: Job | None = None) -> tuple[Job, Run]:
    """`job` (a new one by default) created and its firing at `AT` claimed."""
    job = job or a_job()
    assert store.put_job_if_absent(job)
    run = a_run(job, AT, due_at=AT + timedelta(seconds=30))
    assert store.claim_if_unchanged(job, run, AT + MINUTE, T0)
    stored = store.get_run(job.job_id, to_ms(AT))
    assert stored is not None
    return job, stored


def started(store: JobStore, owner: str = "w1") -> tuple[Job, Run]:
    job, run = claimed(store)
    running = store.start_run_if_waiting(run, AT, AT + LEASE, owner)
    assert running is not None
    return job, running


def one_off_claimed(store: JobStore) -> tuple[Job, Run]:
    """A one-off job due at `AT`, its only firing claimed (as the poll or the create does;
    the DynamoDB adapter keeps its run on the job's item). The job as claimed, and the run."""
    job = a_job("once", schedule=ScheduleSpec(at=AT), next_fire_at=AT)
    assert store.put_job_if_absent(job)
    run = store.claim_if_unchanged(job, a_run(job, AT, due_at=TIMER), None, T0)
    assert run is not None
    read = store.get_job(job.job_id)
    assert read is not None
    return read, run
