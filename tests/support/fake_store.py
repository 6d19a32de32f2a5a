"""An in-memory fake of every port of the jobs table (`scheduler_core.ports.JobStore`, and
`WorkflowRuns`), for service tests that need no moto. It keeps jobs and runs as the entities
themselves and applies each write's condition as the port states it, under one lock (the
poll claims on threads). `tests/integration/test_store_contract*.py` run the same cases
against it and the DynamoDB adapter, so the two cannot drift.

Where it knowingly differs: it keeps every run apart (no run kept on its job's item, so
`with_job` is ignored), and a run is in the due bucket of its timer, where the adapter
leaves a one-off's run in its firing's bucket until a write moves its timer; a poll, which
reads every bucket from its watermark, finds it either way. Its change of a job never fails
because the job's kept run changed meanwhile (the adapter's does: the caller reads again).
`get_runs` answers a ref asked twice (the adapter's BatchGetItem refuses repeated keys)."""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from datetime import datetime

from scheduler_core.adapters.dynamodb.cursors import decode_cursor, encode_cursor
from scheduler_core.domain import keys
from scheduler_core.domain.clock import to_ms
from scheduler_core.domain.entities import Job, Run
from scheduler_core.domain.vocabulary import ENDED_JOB, JobStatus, RunStatus
from scheduler_core.poll_ports import DueItems, PollResume, Watermark
from scheduler_core.ports import CursorNotValid, Page
from tests.support.fake_table import FakeTable, created_key
from tests.support.fake_transitions import FakeRunningSlots, FakeRunTransitions, FakeWorkflowRuns


class _FakeRecords(FakeTable):
    # --- JobRecords ---------------------------------------------------------------------

    def put_job_if_absent(self, job: Job, listed: bool = True, due_listed: bool = False) -> bool:
        # Listed or not (its batch's listing lists it), the fake lists every job of a tenant;
        # due listed or not, its polls find every job with a firing (`due_pages`).
        with self._lock:
            if job.job_id in self._jobs:
                return False
            self._jobs[job.job_id] = job
            return True

    def put_job_claimed_if_absent(
        self, job: Job, run: Run, now: datetime, listed: bool = True, due_listed: bool = False
    ) -> Run | None:
        with self._lock:
            if not self.put_job_if_absent(job):
                return None
            claimed = self.claim_if_unchanged(job, run, None, now)
            assert claimed is not None, "a job just put is as read"
            return claimed

    def list_due_together(self, listing_id: str, jobs: Sequence[Job]) -> None:
        """Nothing to write: the fake's polls find every job by its firing (`due_pages`)."""

    def get_job(self, job_id: str) -> Job | None:
        with self._lock:
            return self._jobs.get(job_id)

    def get_jobs(self, job_ids: Sequence[str], consistent: bool = True) -> dict[str, Job]:
        with self._lock:
            return {job_id: self._jobs[job_id] for job_id in job_ids if job_id in self._jobs}

    def update_job_if_unchanged(
        self, before: Job, after: Job, now: datetime, run: Run | None = None, catch_up: Sequence[int] = ()
    ) -> bool:
        with self._lock:
            stored = self._jobs.get(before.job_id)
            if stored is None or stored.version != before.version or stored.status != before.status:
                return False
            if run is not None and self._key(run) in self._runs:
                return False
            kept = {
                "tenant": stored.tenant,
                "created_at": stored.created_at,
                "running_count": stored.running_count,
                "buffered_run_ms": stored.buffered_run_ms,
                "catch_up_queue_ms": [*stored.catch_up_queue_ms, *catch_up],
            }
            self._jobs[before.job_id] = after.model_copy(update=kept)
            if run is not None:
                self._runs[self._key(run)] = run
            return True

    def keep_ended_job_until(self, job_id: str, when: datetime) -> bool:
        """The fake keeps every job (no TTL): whether the job has ended, as the adapter's
        condition asks."""
        with self._lock:
            job = self._jobs.get(job_id)
            return job is not None and job.status in ENDED_JOB

    def cancel_job_if_active(self, job_id: str, now: datetime) -> bool:
        with self._lock:
            job = self._jobs.get(job_id)
            if job is None or job.status not in (JobStatus.SCHEDULED, JobStatus.PAUSED):
                return False
            self._jobs[job_id] = job.model_copy(
                update={
                    "status": JobStatus.CANCELLED,
                    "version": job.version + 1,
                    "updated_at": now,
                    "next_fire_at": None,
                }
            )
            return True

    # --- Listing ------------------------------------------------------------------------

    def list_jobs(
        self,
        tenant: str,
        limit: int,
        cursor: str | None,
        status: JobStatus | None,
        name_prefix: str | None = None,
    ) -> Page:
        after = decode_cursor(cursor, ("tenant", "created_key")) if cursor else None
        if after is not None and after["tenant"] != tenant:
            raise CursorNotValid("another tenant's")
        with self._lock:
            jobs = sorted(
                (job for job in self._jobs.values() if job.tenant == tenant), key=created_key, reverse=True
            )
        if after is not None:
            jobs = [job for job in jobs if created_key(job) < after["created_key"]]
        kept = [
            job
            for job in jobs
            if (status is None or job.status is status)
            and (name_prefix is None or job.name.startswith(name_prefix))
        ]
        page = kept[:limit]
        more = len(kept) > limit
        return Page(
            page, encode_cursor({"tenant": tenant, "created_key": created_key(page[-1])}) if more else None
        )

    def list_together(self, tenant: str, listing_id: str, job_ids: Sequence[str], now: datetime) -> None:
        """Nothing to write: the fake lists a tenant's jobs by their `tenant` (`list_jobs`)."""

    def list_runs(self, job_id: str, limit: int, cursor: str | None, status: RunStatus | None = None) -> Page:
        after = decode_cursor(cursor, ("job_id", "scheduled_for_ms")) if cursor else None
        if after is not None and after["job_id"] != job_id:
            raise CursorNotValid("another job's")
        runs = self._runs_of(job_id)
        if after is not None:
            runs = [run for run in runs if run.scheduled_for_ms < after["scheduled_for_ms"]]
        kept = [run for run in runs if status is None or run.status is status]
        page = kept[:limit]
        more = len(kept) > limit
        cursor_out = {"job_id": job_id, "scheduled_for_ms": page[-1].scheduled_for_ms} if more else None
        return Page(page, encode_cursor(cursor_out) if cursor_out else None)

    def recent_runs(
        self,
        job_id: str,
        limit: int,
        *,
        after: datetime | None = None,
        statuses: Collection[RunStatus] | None = None,
    ) -> list[Run]:
        runs = [run for run in self._runs_of(job_id) if after is None or run.scheduled_for > after][:limit]
        return [run for run in runs if statuses is None or run.status in statuses]

    def _runs_of(self, job_id: str) -> list[Run]:
        with self._lock:
            mine = [run for (owner, _), run in self._runs.items() if owner == job_id]
        return sorted(mine, key=lambda run: run.scheduled_for_ms, reverse=True)

    # --- RunRecords ---------------------------------------------------------------------

    def get_run(self, job_id: str, scheduled_for_ms: int) -> Run | None:
        with self._lock:
            return self._runs.get((job_id, scheduled_for_ms))

    def get_runs(self, refs: Sequence[tuple[str, int]]) -> list[Run | None]:
        """As the adapter's: in the order asked, None where there is none; a run its job's
        item would keep (`Run.with_job`) is one like any here, so it is read too."""
        with self._lock:
            return [self._runs.get(ref) for ref in refs]

    def get_job_and_run(self, job_id: str, scheduled_for_ms: int) -> tuple[Job | None, Run | None]:
        with self._lock:
            return self._jobs.get(job_id), self._runs.get((job_id, scheduled_for_ms))

    def put_run_if_absent(self, run: Run, now: datetime) -> bool:
        with self._lock:
            if self._key(run) in self._runs:
                return False
            self._runs[self._key(run)] = run
            return True

    # --- DueIndex and Watermarks --------------------------------------------------------

    def due_pages(
        self,
        shard: int,
        bucket_ms: int,
        until_ms: int,
        runs_until_ms: int | None = None,
        after: str | None = None,
    ) -> Iterator[DueItems]:
        # A bucket is one page here, the last: no poll has a point to resume from.
        assert after is None, "the fake's buckets are one page: nothing to resume after"
        bucket = keys.due_pk(bucket_ms, shard)
        with self._lock:
            jobs = [
                job
                for job in self._jobs.values()
                if job.status is JobStatus.SCHEDULED
                and job.next_fire_at is not None
                and self._due_pk(job.job_id, job.next_fire_at) == bucket
                and to_ms(job.next_fire_at) <= until_ms
            ]
            timed = [
                run
                for run in self._runs.values()
                if run.due_at is not None
                and self._due_pk(run.job_id, run.due_at) == bucket
                and to_ms(run.due_at) <= until_ms
            ]
        runs = [
            run
            for run in timed
            if runs_until_ms is None or to_ms(run.due_at or run.scheduled_for) <= runs_until_ms
        ]
        later = len(timed) - len(runs)
        if jobs or runs or later:
            yield DueItems(
                sorted(jobs, key=lambda job: to_ms(job.next_fire_at or job.created_at)),
                sorted(runs, key=lambda run: to_ms(run.due_at or run.scheduled_for)),
                later,
            )

    def claim_if_unchanged(
        self, job: Job, run: Run, next_fire_at: datetime | None, now: datetime, catch_up: bool = False
    ) -> Run | None:
        with self._lock:
            stored = self._jobs.get(job.job_id)
            if (
                stored is None
                or stored.version != job.version
                or stored.next_fire_at != job.next_fire_at
                or stored.status is not JobStatus.SCHEDULED
                or self._key(run) in self._runs
            ):
                return None
            queue = (
                [*stored.catch_up_queue_ms, run.scheduled_for_ms] if catch_up else stored.catch_up_queue_ms
            )
            self._jobs[job.job_id] = stored.model_copy(
                update={
                    "version": stored.version + 1,
                    "updated_at": now,
                    "next_fire_at": next_fire_at,
                    "catch_up_queue_ms": queue,
                }
            )
            self._runs[self._key(run)] = run
            return run

    def get_watermark(self, shard: int) -> Watermark | None:
        with self._lock:
            bucket_ms = self._watermarks.get(shard)
            if bucket_ms is None:
                return None
            return Watermark(bucket_ms, self._resumes.get(shard), self._sent_until.get(shard))

    def raise_sent_until(self, shard: int, sent_until_ms: int) -> None:
        with self._lock:
            if self._sent_until.get(shard, -1) < sent_until_ms:
                self._sent_until[shard] = sent_until_ms

    def set_poll_resume(self, shard: int, resume: PollResume | None) -> None:
        with self._lock:
            self._resumes[shard] = resume

    def advance_watermark(self, shard: int, bucket_ms: int) -> None:
        with self._lock:
            if self._watermarks.get(shard, -1) < bucket_ms:
                self._watermarks[shard] = bucket_ms


class InMemoryJobStore(_FakeRecords, FakeRunTransitions, FakeRunningSlots, FakeWorkflowRuns):
    """`JobStore` and `WorkflowRuns` in memory. `shard_count` places jobs and runs in the due
    index as the adapter does (`keys.shard_for`)."""
