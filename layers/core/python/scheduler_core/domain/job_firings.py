"""A job's firings as runs: the run of one firing, and the firing after one. Pure."""

from __future__ import annotations

from datetime import datetime

from scheduler_core.domain import keys
from scheduler_core.domain.clock import to_ms
from scheduler_core.domain.entities import Job, Run
from scheduler_core.domain.schedule import next_fire_after
from scheduler_core.domain.vocabulary import RunStatus, Trigger
from scheduler_core.domain.wallclock import NeverFires


def scheduled_run(job: Job, fire_at: datetime, starts_at: datetime | None = None) -> Run:
    """The run of the firing `fire_at`; its first attempt starts at `starts_at` when jitter
    moved it (the run keeps its nominal time: its id and `scheduled_for`)."""
    fire_ms = to_ms(fire_at)
    return Run(
        run_id=keys.run_id(job.job_id, fire_ms),
        job_id=job.job_id,
        status=RunStatus.PENDING,
        trigger=Trigger.SCHEDULE,
        scheduled_for=fire_at,
        attempt=1,
        priority=job.priority,
        next_attempt_at=starts_at if starts_at is not None and starts_at != fire_at else None,
    )


def following_firing(job: Job, fire_at: datetime) -> datetime | None:
    if job.schedule is None:
        return None  # a workflow that runs only when triggered
    try:
        return next_fire_after(job.schedule, job.created_at, fire_at)
    except NeverFires:
        return None
