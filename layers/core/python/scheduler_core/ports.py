"""The interfaces the services depend on. Adapters (store, queues, targets) implement
them with boto3; tests may pass anything that fits."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from scheduler_core.model import Job, JobStatus, Run, RunStatus


@dataclass(frozen=True)
class Page:
    """One page of a listing; `next_cursor` is opaque to callers (None at the end)."""

    items: list[Any]
    next_cursor: str | None


class StoreContention(Exception):
    """A write failed for a reason worth retrying later (throttling, transaction conflict),
    as opposed to a lost race, which callers see as a False/None result."""


class JobStore(Protocol):
    def put_job_if_absent(self, job: Job) -> None: ...

    def get_job(self, job_id: str) -> Job | None: ...

    def list_jobs(self, tenant: str, limit: int, cursor: str | None, status: JobStatus | None) -> Page: ...

    def jobs_due(self, shard: int, bucket_ms: int, until_ms: int) -> list[Job]: ...

    def claim_if_unchanged(
        self, job: Job, run: Run, next_fire_at: datetime | None, now: datetime
    ) -> bool: ...

    def cancel_job_if_active(self, job_id: str, now: datetime) -> bool: ...

    def complete_job_if_done(self, job_id: str, now: datetime) -> bool: ...

    def get_run(self, job_id: str, scheduled_for_ms: int) -> Run | None: ...

    def list_runs(self, job_id: str, limit: int, cursor: str | None) -> Page: ...

    def start_run_if_waiting(
        self, job_id: str, scheduled_for_ms: int, attempt: int, now: datetime, lease_until: datetime
    ) -> Run | None: ...

    def finish_run_if_running(
        self,
        job_id: str,
        scheduled_for_ms: int,
        attempt: int,
        status: RunStatus,
        now: datetime,
        error: str | None,
        response_code: int | None,
        lateness_ms: int | None = None,
    ) -> bool: ...

    def cancel_run_if_not_started(
        self, job_id: str, scheduled_for_ms: int, attempt: int, now: datetime
    ) -> bool: ...

    def get_watermark(self, shard: int) -> int | None: ...

    def advance_watermark(self, shard: int, bucket_ms: int) -> None: ...


class RunQueue(Protocol):
    def send_runs(self, runs: list[Run]) -> list[Run]:
        """Enqueue runs on their priority queues, each delayed until its time; returns the
        runs that could not be sent (never raises for a failed send)."""
        ...


@dataclass(frozen=True)
class Delivery:
    """What a target said: ok, or an error and whether trying again may help."""

    ok: bool
    status_code: int | None = None
    error: str | None = None
    retryable: bool = False


class TargetInvoker(Protocol):
    def deliver(self, job: Job, run: Run) -> Delivery: ...
