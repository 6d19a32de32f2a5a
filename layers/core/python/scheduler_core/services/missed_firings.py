"""Firings a poll finds missed (its job's next firing is past: nothing polled in time), as
the job's misfire policy says (docs/concepts/misfires.md): which of them run, each its own
run, and the move past those none of which runs."""

from __future__ import annotations

from datetime import datetime

from scheduler_core.domain import misfire
from scheduler_core.domain.entities import Job, iso_or_none
from scheduler_core.domain.vocabulary import JobStatus, MisfirePolicy
from scheduler_core.observability import logger, metrics
from scheduler_core.ports import JobRecords, StoreContention
from scheduler_core.services.lifecycle import RunLifecycle
from scheduler_core.services.polls import ClaimResult


def missed_to_run(job: Job, now: datetime) -> list[datetime]:
    """The firings from the job's next one (past) to now that run, each its own run,
    oldest first, as its misfire policy says (none: the others are skipped)."""
    assert job.next_fire_at is not None
    chosen = misfire.firings_to_run(
        job.fires_by, job.created_at, job.next_fire_at, now, job.misfire, job.catch_up_window
    )
    if not chosen and job.misfire is MisfirePolicy.FIRE_ONCE:
        chosen = [job.next_fire_at]  # fire once, never drop: the firing it was waiting for
    if misfire.is_misfire(job.next_fire_at, now):
        logger.warning(
            "firings missed (no poll in time); misfire policy applied",
            extra={
                "job_id": job.job_id,
                "misfire": str(job.misfire),
                "missed_since": iso_or_none(job.next_fire_at),
                "runs": [iso_or_none(when) for when in chosen],
            },
        )
        metrics.add_metric(name="MisfiredJobs", unit="Count", value=1)
    return chosen


class MissedFirings:
    def __init__(self, store: JobRecords, lifecycle: RunLifecycle) -> None:
        self._store = store
        self._lifecycle = lifecycle

    def skip(self, job: Job, skip_to: datetime | None, now: datetime) -> ClaimResult:
        """Move the job past missed firings none of which runs, to `skip_to` (beyond the
        horizon); with no firing left, the job is COMPLETED (it has no run to wait for)."""
        moved = job.model_copy(
            update={
                "next_fire_at": skip_to,
                "status": JobStatus.SCHEDULED if skip_to is not None else JobStatus.COMPLETED,
                "version": job.version + 1,
                "updated_at": now,
            }
        )
        try:
            if not self._store.update_job_if_unchanged(job, moved, now):
                return ClaimResult([], job)
        except StoreContention:
            return ClaimResult([], job, contended=True)
        logger.info(
            "missed firings skipped",
            extra={"job_id": job.job_id, "next_fire_at": iso_or_none(skip_to), "status": str(moved.status)},
        )
        if moved.status is JobStatus.COMPLETED:
            self._lifecycle.job_completed(moved)
        return ClaimResult([], moved, skipped=True)
