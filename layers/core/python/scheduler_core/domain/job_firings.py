"""A job's firings as runs: the first firing of a new schedule, the run of one firing, and the
firing after one. Pure."""

from __future__ import annotations

from datetime import datetime, timedelta

from scheduler_core.domain import keys
from scheduler_core.domain.clock import to_ms
from scheduler_core.domain.entities import Job, Run
from scheduler_core.domain.errors import Unprocessable, field_error
from scheduler_core.domain.schedule import ScheduleSpec, first_fire_at, next_fire_after
from scheduler_core.domain.vocabulary import JobKind, JobStatus, RunStatus, Trigger
from scheduler_core.domain.wallclock import NeverFires, NoFiringInWindow

# A one-off `at` slightly in the past (clock skew, a slow client) still fires, at once.
AT_PAST_TOLERANCE = timedelta(seconds=60)


def first_firing(schedule: ScheduleSpec, anchor: datetime, now: datetime) -> datetime:
    """The first firing of a schedule that starts counting at `anchor`, seen at `now`; a 422
    naming the field when it has none (an `at` in the past, a cron that matches no date, a
    window that ends before the first firing)."""
    if schedule.at is not None and schedule.at < now - AT_PAST_TOLERANCE:
        raise Unprocessable(
            "schedule.at is in the past; give a future time (up to 60 s of skew is tolerated)",
            [field_error("schedule.at", "is in the past")],
        )
    try:
        return first_fire_at(schedule, anchor, now)
    except NoFiringInWindow as exc:
        past = schedule.end_at is not None and schedule.end_at < now
        reason = "is in the past" if past else "comes before the first firing"
        raise Unprocessable(str(exc), [field_error("schedule.end_at", reason)]) from exc
    except NeverFires as exc:
        raise Unprocessable(str(exc), [field_error("schedule.cron", "matches no date")]) from exc


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
        tenant=job.tenant,
    )


def waits_for_its_last_firing(job: Job) -> bool:
    """A scheduled job (not a workflow) whose next firing is its last, a one-off's: once that
    firing's run ends, nothing of it is due again (unless it is changed or re-driven), which
    is what lets a due listing hold it (`DueIndex.list_due_together`)."""
    fire_at = job.next_fire_at
    return (
        job.kind is JobKind.JOB
        and job.status is JobStatus.SCHEDULED
        and fire_at is not None
        and following_firing(job, fire_at) is None
    )


def following_firing(job: Job, fire_at: datetime) -> datetime | None:
    if job.schedule is None:
        return None  # a workflow that runs only when triggered
    try:
        return next_fire_after(job.schedule, job.created_at, fire_at)
    except NeverFires:
        return None
