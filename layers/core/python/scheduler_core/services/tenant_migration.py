"""Moving tenants kept under their ARN (releases before unique ids) to their principal's
unique id (domain/tenancy.py): `python -m infra.migrate_tenants` (docs/security.md, "Tenants").

Which id an old tenant becomes is decided here: an IAM user's or role's id as IAM gives it
now (the principal that holds the name today), the account for the root user,
`account:name` for a federated user. A tenant whose principal no longer exists (deleted), or
belongs to another account (this account's IAM cannot read it), is left as it is and
reported: nobody can reach it through the API any more, and the operator decides.

For each tenant moved: its jobs, workflows and tasks are given the new tenant (each with a
condition on what was read, so a concurrent change is read again, never overwritten); secret
headers are sealed again under the new tenant's context (KMS ReEncrypt: never in the clear);
quota counters are added to the new tenant's; signing keys move unless the new tenant has
made its own already. Idempotency keys are not moved: a create repeated with the same key
after the move makes a new job. A move can be run again: what moved is not found again.

The external id of an execution role is the tenant, so each moved tenant's roles need the new
one in their trust policies: the report lists them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Protocol

from scheduler_core.domain.tenancy import ArnTenant, arn_tenant
from scheduler_core.observability import logger
from scheduler_core.ports import (
    PrincipalIds,
    Secrets,
    SigningKeyRecords,
    TenantItem,
    TenantRecords,
)
from scheduler_core.services.secret_headers import header_context
from scheduler_core.services.signing import signing_context

READ_TRIES = 5


@dataclass
class TenantMove:
    old: str
    new: str | None  # None: left as it is (`why`)
    why: str = ""
    items: int = 0
    quota_counters: int = 0
    signing_keys: str = "none"  # moved | kept the new tenant's | none
    role_targets: list[str] = field(default_factory=list)  # ids of jobs whose target names a role_arn

    def to_json(self) -> dict[str, Any]:
        return self.__dict__.copy()


class TenantRecordStore(TenantRecords, SigningKeyRecords, Protocol):
    """The records a move reads and writes (one table in practice)."""


class TenantMigration:
    def __init__(
        self,
        records: TenantRecordStore,
        principals: PrincipalIds,
        secrets: Secrets | None,
        account: str,
    ) -> None:
        """`account`: the stack's; principals of other accounts cannot be read."""
        self._records = records
        self._principals = principals
        self._secrets = secrets
        self._account = account

    def new_tenant(self, old: ArnTenant) -> tuple[str | None, str]:
        """The id `old` becomes, or None and why not."""
        if old.kind == "root":
            return old.account, ""
        if old.kind == "federated":
            return f"{old.account}:{old.name}", ""
        if old.account != self._account:
            return None, f"its principal is in account {old.account}, whose IAM this stack cannot read"
        found = self._principals.unique_id(old.kind, old.name)
        if found is None:
            return None, f"no {old.kind} named {old.name} exists now (deleted): nobody can reach its jobs"
        return found, ""

    def plan(self) -> list[TenantMove]:
        moves = []
        for tenant in sorted(self._records.tenants()):
            parsed = arn_tenant(tenant)
            if parsed is None:
                continue  # already an id
            new, why = self.new_tenant(parsed)
            moves.append(TenantMove(tenant, new, why, len(self._records.items_of(tenant))))
        return moves

    def run(self, dry_run: bool = False) -> list[TenantMove]:
        moves = self.plan()
        for move in moves:
            if move.new is not None and not dry_run:
                self._move(move, move.new)
        return moves

    def _move(self, move: TenantMove, new: str) -> None:
        for _ in range(READ_TRIES):
            pending = self._records.items_of(move.old)
            if not pending:
                break
            for item in pending:
                spec = self._resealed_spec(item, move.old, new)
                if self._records.retag_if_unchanged(item, move.old, new, spec) and _names_a_role(spec):
                    move.role_targets.append(item.job_id)
        else:
            raise RuntimeError(f"{move.old}: its jobs kept changing while moved; run the move again")
        move.quota_counters = self._records.move_quota_counters(move.old, new)
        move.signing_keys = self._move_signing_keys(move.old, new)
        logger.info("tenant moved", extra={"tenant_move": move.to_json()})

    def _resealed_spec(self, item: TenantItem, old: str, new: str) -> str:
        spec = json.loads(item.spec)
        sealed: dict[str, str] = spec.get("sealed_headers") or {}
        if sealed:
            if self._secrets is None:
                raise RuntimeError("secret headers to move but no secrets key: pass the stack's")
            spec["sealed_headers"] = {
                name: self._secrets.reseal(
                    value, header_context(old, item.job_id, name), header_context(new, item.job_id, name)
                )
                for name, value in sealed.items()
            }
        return json.dumps(spec, separators=(",", ":"), ensure_ascii=False)

    def _move_signing_keys(self, old: str, new: str) -> str:
        stored = self._records.get_signing_keys(old)
        if stored is None:
            return "none"
        if self._secrets is None:
            raise RuntimeError("signing keys to move but no secrets key: pass the stack's")
        moved = type(stored)(
            sealed=self._secrets.reseal(stored.sealed, signing_context(old), signing_context(new)),
            version=1,
            created_at=stored.created_at,
            previous_until=stored.previous_until,
        )
        outcome = "moved" if self._records.put_signing_keys_if_unchanged(new, moved, None) else "kept the new"
        self._records.remove_signing_keys(old)
        return outcome


def _names_a_role(spec: str) -> bool:
    return bool((json.loads(spec).get("target") or {}).get("role_arn"))
