"""Jobs and runs as a test wants them, each field a sensible default unless given."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from scheduler_core.domain import keys
from scheduler_core.domain.clock import to_ms
from scheduler_core.domain.entities import Job, Run
from scheduler_core.domain.policies import ConcurrencyPolicy, RetryPolicy
from scheduler_core.domain.schedule import ScheduleSpec
from scheduler_core.domain.vocabulary import JobStatus, Priority, RunStatus, Trigger

T0 = datetime(2026, 11, 26, 9, 0, tzinfo=UTC)


def a_job(job_id: str = "job-1", **fields: Any) -> Job:
    """A SCHEDULED cron job (every minute) of tenant `alice`, created at `T0`, firing next at
    `T0` + 1 minute, one run at a time (SKIP); `fields` override any of it."""
    concurrency = fields.pop("concurrency", None)
    values: dict[str, Any] = {
        "job_id": job_id,
        "tenant": "alice",
        "name": job_id,
        "status": JobStatus.SCHEDULED,
        "schedule": ScheduleSpec(cron="* * * * *"),
        "target": {"type": "HTTP", "url": "https://example.com/hook"},
        "priority": Priority.NORMAL,
        "retry": RetryPolicy(),
        "concurrency": concurrency if concurrency is not None else ConcurrencyPolicy(),
        "next_fire_at": T0.replace(minute=1),
        "created_at": T0,
        "updated_at": T0,
    }
    return Job.model_validate(values | fields)


def a_run(job: Job, when: datetime, **fields: Any) -> Run:
    """The PENDING scheduled run of `job` at `when`; `fields` override any of it."""
    values: dict[str, Any] = {
        "run_id": keys.run_id(job.job_id, to_ms(when)),
        "job_id": job.job_id,
        "status": RunStatus.PENDING,
        "trigger": Trigger.SCHEDULE,
        "scheduled_for": when,
        "priority": job.priority,
    }
    return Run.model_validate(values | fields)
