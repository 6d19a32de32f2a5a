"""Moving tenants kept under their ARN (releases before unique ids) to their principal's
unique id (domain/tenancy.py): `python -m infra.migrate_tenants` (docs/security.md, "Tenants").

Which id an old tenant becomes is decided here:
- an IAM user's or role's id, if a principal of that ARN exists now **and was made before
  the tenant's first job** (one made later is a new principal under an old name: giving it
  the old jobs is what keying on ids prevents);
- the account for the root user; `account:name` for a federated user.
An old tenant stays as it is, reported, when its principal is gone, newer than its jobs, in
another account (this account's IAM cannot read it), or a role whose sessions are tenants
each (`per_session_tenant_roles`: its jobs belong to no one session).

For each tenant moved, in this order:
1. signing keys: copied (re-sealed by KMS ReEncrypt) to the new tenant first, so no
   delivery goes out unsigned meanwhile. If the new tenant has keys already: a secret never
   shown (made by its first HTTP job after the deploy) is replaced by the old keys; one it
   was shown is kept, and reported (the moved jobs' receivers must switch to it);
2. jobs, workflows and tasks: each given the new tenant and a new version, on a condition on
   what was read (a writer that read it before the move reads it again, never writes the old
   tenant's sealed headers back); secret headers re-sealed for the new tenant. An item that
   cannot be moved is reported and the rest go on;
3. quota counters, each added to the new tenant's and removed in one transaction;
4. the old signing keys removed, once every item moved.
Idempotency keys are not moved: a create repeated with the same key after the move makes a
new job. Running the move again finds only what has not moved.

The external id of an execution role is the tenant, so `plan` (a dry run) lists, per tenant,
the jobs whose target names a role and the external id those roles' trust policies must
accept: add it beside the old one before the move, remove the old one after.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any, Protocol

from scheduler_core.domain.clock import Clock
from scheduler_core.domain.execution_roles import external_id
from scheduler_core.domain.tenancy import ArnTenant, arn_tenant
from scheduler_core.domain.webhooks import SigningKeys
from scheduler_core.observability import logger
from scheduler_core.ports import SealedSigningKeys, Secrets, SigningKeyRecords
from scheduler_core.services.secret_headers import header_context
from scheduler_core.services.signing import signing_context
from scheduler_core.tenant_move_ports import PrincipalDirectory, TenantItem, TenantRecords

ITEM_TRIES = 5


@dataclass
class TenantMove:
    old: str
    new: str | None  # None: left as it is (`why`)
    why: str = ""
    items: int = 0
    external_id: str | None = None  # what the moved tenant's execution roles must accept
    role_targets: list[str] = field(default_factory=list)  # ids of jobs whose target names a role
    moved: int = 0
    failed: dict[str, str] = field(default_factory=dict)  # job id → why it did not move
    quota_counters: int = 0
    signing_keys: str = "none"  # moved | replaced the new tenant's unshown | kept the new tenant's | none

    def to_json(self) -> dict[str, Any]:
        return self.__dict__.copy()


class TenantRecordStore(TenantRecords, SigningKeyRecords, Protocol):
    """The records a move reads and writes (one table in practice)."""


class TenantMigration:
    def __init__(
        self,
        records: TenantRecordStore,
        principals: PrincipalDirectory,
        secrets: Secrets | None,
        clock: Clock,
        account: str,
        per_session_roles: Collection[str] = (),
    ) -> None:
        """`account`: the stack's (principals of other accounts cannot be read);
        `per_session_roles`: the deployment's `per_session_tenant_roles`."""
        self._records = records
        self._principals = principals
        self._secrets = secrets
        self._clock = clock
        self._account = account
        self._per_session_roles = tuple(per_session_roles)

    def new_tenant(self, old: str, parsed: ArnTenant, items: list[TenantItem]) -> tuple[str | None, str]:
        """The id `old` becomes, or None and why not."""
        if parsed.kind == "root":
            return parsed.account, ""
        if parsed.kind == "federated":
            return f"{parsed.account}:{parsed.name}", ""
        if parsed.account != self._account:
            return None, f"its principal is in account {parsed.account}, whose IAM this stack cannot read"
        if parsed.kind == "role" and any(fnmatchcase(parsed.name, p) for p in self._per_session_roles):
            return None, (
                f"role {parsed.name}'s sessions are tenants each (per_session_tenant_roles): its jobs "
                "belong to no one session"
            )
        found = self._principals.principal(parsed.kind, parsed.name)
        if found is None:
            return (
                None,
                f"no {parsed.kind} named {parsed.name} exists now (deleted): nobody can reach its jobs",
            )
        if parsed.kind == "user" and found.arn != old:
            return None, f"the user named {parsed.name} now is {found.arn}, another principal"
        first = min((item.created_at for item in items), default=None)
        if first is not None and found.created_at > first:
            return None, (
                f"the {parsed.kind} named {parsed.name} was made on {found.created_at.isoformat()}, after "
                f"the tenant's first job ({first.isoformat()}): a new principal under an old name"
            )
        return found.unique_id, ""

    def plan(self) -> list[TenantMove]:
        return [move for move, _ in self._planned()]

    def _planned(self) -> list[tuple[TenantMove, list[TenantItem]]]:
        planned = []
        for tenant, items in sorted(self._records.holdings().items()):
            parsed = arn_tenant(tenant)
            if parsed is None:
                continue  # already an id
            new, why = self.new_tenant(tenant, parsed, items)
            move = TenantMove(
                tenant,
                new,
                why,
                items=len(items),
                external_id=external_id(new) if new else None,
                role_targets=sorted(item.job_id for item in items if _names_a_role(item.spec)),
            )
            planned.append((move, items))
        return planned

    def run(self, dry_run: bool = False) -> list[TenantMove]:
        planned = self._planned()
        for move, items in planned:
            if move.new is not None and not dry_run:
                self._move(move, move.new, items)
        return [move for move, _ in planned]

    def _move(self, move: TenantMove, new: str, items: list[TenantItem]) -> None:
        move.signing_keys = self._copy_signing_keys(move.old, new)
        for item in items:
            try:
                self._move_item(item, new)
                move.moved += 1
            except Exception as error:  # one item's failure (a KMS refusal, ...) stops no other
                logger.exception("tenant item not moved", extra={"job_id": item.job_id})
                move.failed[item.job_id] = f"{type(error).__name__}: {error}"
        move.quota_counters = self._records.move_quota_counters(move.old, new)
        if not move.failed and move.signing_keys != "none":
            self._records.remove_signing_keys(move.old)
        logger.info("tenant moved", extra={"tenant_move": move.to_json()})

    def _move_item(self, item: TenantItem, new: str) -> None:
        current: TenantItem | None = item
        for _ in range(ITEM_TRIES):
            if current is None or current.tenant != item.tenant:
                return  # deleted, or moved meanwhile
            spec = self._resealed_spec(current, new)
            if self._records.retag_if_unchanged(current, new, spec, self._clock.now()):
                return
            current = self._records.read_item(item.job_id)
        raise RuntimeError("it kept changing while moved; run the move again")

    def _resealed_spec(self, item: TenantItem, new: str) -> str:
        spec = json.loads(item.spec)
        sealed: dict[str, str] = spec.get("sealed_headers") or {}
        if sealed:
            spec["sealed_headers"] = {
                name: self._need_secrets().reseal(
                    value,
                    header_context(item.tenant, item.job_id, name),
                    header_context(new, item.job_id, name),
                )
                for name, value in sealed.items()
            }
        return json.dumps(spec, separators=(",", ":"), ensure_ascii=False)

    def _copy_signing_keys(self, old: str, new: str) -> str:
        stored = self._records.get_signing_keys(old)
        if stored is None:
            return "none"
        secrets = self._need_secrets()
        theirs = self._records.get_signing_keys(new)
        if theirs is not None:
            opened = SigningKeys.from_json(secrets.unseal(theirs.sealed, signing_context(new)))
            if opened.revealed:
                return "kept the new tenant's"
        moved = SealedSigningKeys(
            sealed=secrets.reseal(stored.sealed, signing_context(old), signing_context(new)),
            version=(theirs.version + 1) if theirs else 1,
            created_at=stored.created_at,
            previous_until=stored.previous_until,
        )
        if not self._records.put_signing_keys_if_unchanged(new, moved, theirs.version if theirs else None):
            raise RuntimeError(f"{new}: its signing keys changed while moved; run the move again")
        return "replaced the new tenant's unshown" if theirs else "moved"

    def _need_secrets(self) -> Secrets:
        if self._secrets is None:
            raise RuntimeError("secrets to move but no secrets key: the stack's SecretsKeyId output")
        return self._secrets


def _names_a_role(spec: str) -> bool:
    return bool((json.loads(spec).get("target") or {}).get("role_arn"))
