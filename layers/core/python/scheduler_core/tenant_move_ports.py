"""The ports of a tenant move (services/tenant_migration.py, `python -m infra.migrate_tenants`):
what each tenant owns in the jobs table, and the account's users and roles. Apart from
scheduler_core.ports: no function's request path uses them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol


@dataclass(frozen=True)
class TenantItem:
    """A job, workflow or task item as a tenant move sees it: its id, its kind (`JobKind`),
    its tenant, its stored spec (JSON text: sealed headers are in it) and when it was made."""

    job_id: str
    kind: str
    tenant: str
    spec: str
    created_at: datetime


class TenantRecords(Protocol):
    """What a tenant owns in the jobs table, for moving it to a new tenant name
    (services/tenant_migration.py). Runs name no tenant: they move with their job."""

    def holdings(self) -> dict[str, list[TenantItem]]:
        """Every tenant that owns a job, a workflow, a task, a quota counter or signing keys,
        with its job, workflow and task items."""
        ...

    def read_item(self, job_id: str) -> TenantItem | None: ...

    def retag_if_unchanged(self, item: TenantItem, new: str, spec: str, now: datetime) -> bool:
        """Give the item tenant `new` and `spec` (and a new version, so that a writer that read
        it before reads it again), if it is still `item.tenant`'s with the spec read; False
        when it changed since."""
        ...

    def move_quota_counters(self, old: str, new: str) -> int:
        """Add each of `old`'s counters to `new`'s and remove it, both in one transaction;
        how many counters moved."""
        ...

    def remove_signing_keys(self, tenant: str) -> None: ...


@dataclass(frozen=True)
class Principal:
    """A user or role as IAM holds it now."""

    unique_id: str
    arn: str
    created_at: datetime


class PrincipalDirectory(Protocol):
    """The account's users and roles."""

    def principal(self, kind: str, name: str) -> Principal | None:
        """The user (`kind` "user") or role ("role") named `name`; None: none now."""
        ...
