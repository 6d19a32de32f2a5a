"""The API's use cases: create, read, list and cancel jobs; read their runs.

Tenancy is enforced here: another tenant's job is indistinguishable from a missing one
(404), in every call.
"""

from __future__ import annotations

import uuid
from datetime import timedelta

from scheduler_core import keys
from scheduler_core.clock import Clock
from scheduler_core.dispatch import Dispatcher
from scheduler_core.errors import Conflict, InvalidRequest, NotFound, Unprocessable, field_error
from scheduler_core.lifecycle import RunLifecycle
from scheduler_core.model import Job, JobCreate, JobStatus, Run, RunStatus, SqsTarget
from scheduler_core.ports import JobStore, Page
from scheduler_core.schedule import NeverFires, first_fire_at

# A one-off `at` slightly in the past (clock skew, a slow client) still fires, at once.
AT_PAST_TOLERANCE = timedelta(seconds=60)


def queue_name(queue_url: str) -> str:
    return queue_url.rstrip("/").rsplit("/", 1)[-1]


class JobService:
    def __init__(
        self,
        store: JobStore,
        dispatcher: Dispatcher,
        clock: Clock,
        lifecycle: RunLifecycle,
        own_queue_urls: set[str] | None = None,
    ) -> None:
        self._store = store
        self._dispatcher = dispatcher
        self._clock = clock
        self._lifecycle = lifecycle
        # The scheduler's own queues are never targets: a job could forge run messages.
        self._own_queues = {queue_name(url) for url in own_queue_urls or set()}

    def create(self, tenant: str, request: JobCreate) -> Job:
        now = self._clock.now()
        if isinstance(request.target, SqsTarget) and queue_name(request.target.queue_url) in self._own_queues:
            raise InvalidRequest(
                "target.queue_url is one of the scheduler's own queues; target a queue of yours",
                [field_error("target.queue_url", "is one of the scheduler's own queues")],
            )
        schedule = request.schedule
        if schedule.at is not None and schedule.at < now - AT_PAST_TOLERANCE:
            raise Unprocessable(
                "schedule.at is in the past; give a future time (up to 60 s of skew is tolerated)",
                [field_error("schedule.at", "is in the past")],
            )
        try:
            first = first_fire_at(schedule, now, now)
        except NeverFires as exc:
            raise Unprocessable(str(exc), [field_error("schedule.cron", "matches no date")]) from exc
        job = Job(
            job_id=uuid.uuid4().hex,
            tenant=tenant,
            name=request.name,
            status=JobStatus.SCHEDULED,
            schedule=schedule,
            target=request.target,
            payload=request.payload,
            priority=request.priority,
            retry=request.retry,
            next_fire_at=first,
            created_at=now,
            updated_at=now,
            version=1,
        )
        self._store.put_job_if_absent(job)
        return self._dispatcher.claim_and_enqueue(job, now).job

    def get(self, tenant: str, job_id: str) -> Job:
        job = self._store.get_job(job_id)
        if job is None or job.tenant != tenant:
            raise NotFound(f"job '{job_id}' not found")
        return job

    def list(self, tenant: str, limit: int, cursor: str | None, status: JobStatus | None) -> Page:
        return self._store.list_jobs(tenant, limit, cursor, status)

    def cancel(self, tenant: str, job_id: str) -> Job:
        """Cancel a job: it fires no more, and runs not yet started are dropped by the worker.
        Cancelling a cancelled job is a no-op; a completed job cannot be cancelled (409)."""
        job = self.get(tenant, job_id)
        if job.status in (JobStatus.SCHEDULED, JobStatus.PAUSED):
            self._store.cancel_job_if_active(job_id, self._clock.now())
            job = self.get(tenant, job_id)
        if job.status is JobStatus.COMPLETED:
            raise Conflict(f"job '{job_id}' already completed; there is nothing left to cancel")
        return job

    def list_runs(self, tenant: str, job_id: str, limit: int, cursor: str | None) -> Page:
        self.get(tenant, job_id)
        return self._store.list_runs(job_id, limit, cursor)

    def get_run(self, tenant: str, job_id: str, run_id: str) -> Run:
        self.get(tenant, job_id)
        try:
            owner, scheduled_ms = keys.parse_run_id(run_id)
        except ValueError:
            owner, scheduled_ms = "", 0
        run = self._store.get_run(job_id, scheduled_ms) if owner == job_id else None
        if run is None:
            raise NotFound(f"run '{run_id}' not found for job '{job_id}'")
        return run

    def retry_run(self, tenant: str, job_id: str, run_id: str) -> Run:
        """Re-drive a FAILED run: a new attempt now, with a fresh round of `max_attempts`."""
        job = self.get(tenant, job_id)
        run = self.get_run(tenant, job_id, run_id)
        if job.status is JobStatus.CANCELLED:
            raise Conflict(f"job '{job_id}' is cancelled; its runs cannot be retried")
        if run.status is not RunStatus.FAILED:
            raise Conflict(f"run '{run_id}' is {run.status}; only a FAILED run can be retried")
        redriven = self._lifecycle.redrive(run)
        if redriven is None:
            raise Conflict(f"run '{run_id}' changed while it was being retried; read it again")
        return redriven
