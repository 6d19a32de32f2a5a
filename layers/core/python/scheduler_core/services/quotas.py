"""Per-tenant quotas, counted as jobs and workflows are made, changed and end
(domain/quotas.py says what counts against what).

A count is taken before the job is written (a conditional update of the tenant's counter:
refused → 429 QUOTA_EXCEEDED naming the limit) and given back if the write does not happen,
when the job is cancelled, when a recurring job or workflow completes, and when a change
moves it to another counter. Giving back is best effort, after the job's own write: a
crash in between leaves the count one too high (stricter, never looser), logged.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from scheduler_core.domain.entities import Job
from scheduler_core.domain.quotas import (
    Charge,
    QuotaExceeded,
    QuotaLimits,
    charges_of,
    check_interval,
    summed,
)
from scheduler_core.domain.schedule import ScheduleSpec
from scheduler_core.domain.vocabulary import JobStatus
from scheduler_core.observability import logger
from scheduler_core.ports import QuotaCounters

T = TypeVar("T")


class TenantQuotas:
    def __init__(self, counters: QuotaCounters, limits: QuotaLimits) -> None:
        self._counters = counters
        self.limits = limits

    def check_schedule(self, schedule: ScheduleSpec | None) -> None:
        check_interval(schedule, self.limits)

    def charge(self, tenant: str, charges: list[Charge]) -> None:
        """Take each count, or none: a refused one gives back those already taken."""
        taken: list[Charge] = []
        with self._given_back_on_error(tenant, taken):  # a counter's write failing: none taken
            for charge in charges:
                if (
                    charge.count > charge.limit
                    or self._counters.charge_if_within(
                        tenant, charge.counter, charge.limit, charge.expires_at, charge.count
                    )
                    is None
                ):
                    raise QuotaExceeded(charge.limit_name, _refusal(charge))
                taken.append(charge)

    def refund(self, tenant: str, charges: list[Charge]) -> None:
        for charge in charges:
            try:
                self._counters.refund(tenant, charge.counter, charge.count)
            except Exception:
                logger.exception(
                    "quota count not given back; it stays too high",
                    extra={"tenant": tenant, "counter": charge.counter, "count": charge.count},
                )

    def making(self, job: Job, put: Callable[[], bool]) -> bool:
        """`put()` the new `job`'s item(s) within its counts: taken first (so a refused job
        writes nothing), given back if `put` wrote nothing (the job existed) or raised."""
        [written] = self.making_each([job], lambda _: [put()])
        return written

    def making_each(self, jobs: list[Job], put_all: Callable[[list[Job]], list[bool]]) -> list[bool]:
        """`put_all(jobs)`: a batch of one tenant's new jobs within their counts, as `making`
        does for one, with one write per counter for the whole batch (its one-offs due in
        the same minute take their counts at once). `put_all` says of each job whether it
        was written; the counts of those that were not are given back together."""
        if not jobs:
            return []
        charges = [charges_of(job, self.limits) for job in jobs]
        tenant = jobs[0].tenant
        taken = summed([charge for each in charges for charge in each])
        self.charge(tenant, taken)
        with self._given_back_on_error(tenant, taken):
            written = put_all(jobs)
        unwritten = [charge for ok, each in zip(written, charges, strict=True) if not ok for charge in each]
        self.refund(tenant, summed(unwritten))
        return written

    def changing(self, before: Job, after: Job, write: Callable[[], T]) -> T:
        """`write()` a change of `before` into `after`: the counts `after` takes beyond
        `before`'s are taken first; those it no longer takes are given back after."""
        old, new = charges_of(before, self.limits), charges_of(after, self.limits)
        if old == new:
            return write()
        self.charge(after.tenant, new)
        with self._given_back_on_error(after.tenant, new):
            result = write()
        self.refund(before.tenant, old)
        return result

    def completed(self, job: Job) -> None:
        """`job` completed: a recurring job's or workflow's held count goes back (`ended`). A
        one-off holds none (its minute stays: it fired), so its completion costs no write —
        a midnight of a million of them adds nothing here."""
        if any(charge.expires_at is None for charge in charges_of(job, self.limits)):
            self.ended(job.job_id)

    def ended(self, job_id: str) -> None:
        """The job may have ended (cancelled or completed): if it has and its counts were not
        given back yet, they are now, once whatever calls this how often (a cancel racing its
        last run's end, a re-drive of that run), for the schedule it has as stored. A one-off's
        minute goes back only for a cancel (completed, it did fire)."""
        try:
            ended = self._counters.mark_quota_released_if_ended(job_id)
        except Exception:
            logger.exception("quota counts not given back; they stay one too high", extra={"job_id": job_id})
            return
        if ended is None:
            return
        cancelled = ended.status is JobStatus.CANCELLED
        self.refund(
            ended.tenant, [c for c in charges_of(ended, self.limits) if c.expires_at is None or cancelled]
        )

    @contextmanager
    def _given_back_on_error(self, tenant: str, charges: list[Charge]) -> Iterator[None]:
        try:
            yield
        except BaseException:
            self.refund(tenant, charges)
            raise


def put_counted(quotas: TenantQuotas | None, job: Job, put: Callable[[], bool]) -> bool:
    """`put()` a new job or workflow within its tenant's quotas (None: not counted)."""
    return put() if quotas is None else quotas.making(job, put)


def put_counted_each(
    quotas: TenantQuotas | None, jobs: list[Job], put_all: Callable[[list[Job]], list[bool]]
) -> list[bool]:
    """`put_all(jobs)`, a batch of new jobs, within their tenant's quotas (None: not counted)."""
    return put_all(jobs) if quotas is None else quotas.making_each(jobs, put_all)


def _refusal(charge: Charge) -> str:
    asked = f" (this batch asks for {charge.count:,} of it)" if charge.count > 1 else ""
    if charge.limit_name == "tenant_max_jobs":
        return (
            f"a tenant may hold {charge.limit:,} recurring jobs and workflows (SCHEDULED or PAUSED)"
            f"{asked}; cancel some, or ask the operator to raise CDK context tenant_max_jobs"
        )
    return (
        f"a tenant may have {charge.limit:,} one-off jobs due in one minute, and "
        f"{charge.counter.removeprefix('MINUTE#')} (UTC, yyyymmddHHMM) is full{asked}; pick another "
        "minute, or ask the operator to raise CDK context tenant_max_firings_per_minute"
    )
