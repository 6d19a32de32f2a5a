"""Per-tenant quotas (docs/security.md, "Quotas"): what a job or workflow counts against,
and the shortest interval a schedule may have. Pure.

- `tenant_max_jobs`: the jobs and workflows that keep firing (cron, rate, a workflow) a
  tenant holds, SCHEDULED or PAUSED. Each fires at most once a minute.
- `tenant_max_firings_per_minute`: the one-off jobs a tenant has due in any one minute.
  One-offs are counted by the minute they fire in, not held: they end by firing, so a
  burst of them never has to be counted back down at once (a hot counter).
So in any minute a tenant's firings are at most `tenant_max_jobs` (its recurring jobs and
workflows) plus `tenant_max_firings_per_minute` (its one-offs due then).
- `min_interval_seconds`: the shortest time between two firings of a cron or rate schedule.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from scheduler_core.domain import wallclock
from scheduler_core.domain.entities import Job
from scheduler_core.domain.errors import SchedulerError, field_error
from scheduler_core.domain.schedule import ScheduleSpec
from scheduler_core.domain.vocabulary import JobKind

JOBS_COUNTER = "JOBS"
# A minute's counter is kept a day past its minute (then DynamoDB's TTL removes it).
MINUTE_COUNTER_KEPT = timedelta(days=1)


@dataclass(frozen=True)
class QuotaLimits:
    max_jobs: int = 10_000
    max_firings_per_minute: int = 6_000
    min_interval_seconds: int = 60


@dataclass(frozen=True)
class Charge:
    """A count jobs take: `counter` (per tenant), its `limit` and the limit's name; `count`
    of it (one job takes one; a batch's jobs on the same counter take theirs at once)."""

    counter: str
    limit_name: str
    limit: int
    expires_at: datetime | None = None
    count: int = 1


def summed(charges: list[Charge]) -> list[Charge]:
    """The same counts, one charge per counter (in the order each counter first comes): what
    a batch of jobs takes in one write per counter."""
    by_counter: dict[str, Charge] = {}
    for charge in charges:
        held = by_counter.get(charge.counter)
        by_counter[charge.counter] = (
            charge if held is None else replace(held, count=held.count + charge.count)
        )
    return list(by_counter.values())


class QuotaExceeded(SchedulerError):
    """429 QUOTA_EXCEEDED, naming the limit (its CDK context key) as the field."""

    def __init__(self, limit_name: str, reason: str) -> None:
        super().__init__(f"{limit_name}: {reason}", [field_error(limit_name, reason)], "QUOTA_EXCEEDED", 429)


def charges_of(job: Job, limits: QuotaLimits) -> list[Charge]:
    """What `job` counts against: nothing for a task (its workflow counts), the held count
    for a recurring job or any workflow, its minute for a one-off."""
    if job.kind is JobKind.TASK:
        return []
    schedule = job.schedule
    if job.kind is JobKind.WORKFLOW or schedule is None or schedule.recurring:
        return [Charge(JOBS_COUNTER, "tenant_max_jobs", limits.max_jobs)]
    assert schedule.at is not None
    minute = schedule.at.replace(second=0, microsecond=0)
    return [
        Charge(
            f"MINUTE#{minute:%Y%m%d%H%M}",
            "tenant_max_firings_per_minute",
            limits.max_firings_per_minute,
            minute + MINUTE_COUNTER_KEPT,
        )
    ]


def check_interval(schedule: ScheduleSpec | None, limits: QuotaLimits) -> None:
    """Refuses a cron or rate schedule that fires more often than the deployment allows."""
    if schedule is None or not schedule.recurring or limits.min_interval_seconds <= 60:
        return  # every cron and rate fires at most once a minute
    if schedule.rate is not None:
        gap = wallclock.parse_rate(schedule.rate)
    else:
        assert schedule.cron is not None
        try:
            gap = wallclock.smallest_cron_gap(schedule.cron)
        except wallclock.NeverFires:
            return  # a 422 when its first firing is computed
    if gap.total_seconds() < limits.min_interval_seconds:
        raise QuotaExceeded(
            "min_interval_seconds",
            f"this schedule fires every {int(gap.total_seconds())} s at its most frequent; this "
            f"deployment allows every {limits.min_interval_seconds} s at most (CDK context "
            "min_interval_seconds)",
        )
