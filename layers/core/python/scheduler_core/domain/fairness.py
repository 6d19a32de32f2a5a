"""Fair share between tenants (docs/security.md, "Fair share"). Pure.

A poll claims and sends a page of due jobs in this order: by due time, and among jobs due
at the same time, round-robin by tenant (each tenant's first, then each tenant's second,
...). So a tenant with 300 jobs due in one second does not put its 300 runs on the queue
ahead of another tenant's 10 due then: the other's go out among its first. On AWS each run
message also carries its tenant as `MessageGroupId` on the standard priority queues (SQS fair
queues), so a tenant's backlog does not hold up the others' messages on the queue either.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime

from scheduler_core.domain.entities import Job


def fair_order(jobs: Sequence[Job]) -> list[Job]:
    """`jobs` by due time, round-robin by tenant within each due time (stable otherwise)."""
    seen: Counter[tuple[datetime, str]] = Counter()
    ranked: list[tuple[datetime, int, int, Job]] = []
    for position, job in enumerate(jobs):
        due = job.next_fire_at or _NEVER
        ranked.append((due, seen[due, job.tenant], position, job))
        seen[due, job.tenant] += 1
    ranked.sort(key=lambda item: item[:3])
    return [job for *_, job in ranked]


_NEVER = datetime.max.replace(tzinfo=UTC)
