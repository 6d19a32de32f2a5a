"""`TenantRecords` on the jobs table: what each tenant owns, found by one Scan (a tenant move
is a one-off operation, not a request path), and moved item by item with conditions.

A job item names its tenant in `tenant` (the tenant index's key: the tenant for a job,
`WORKFLOWS#<tenant>` for a workflow) and, for workflows and tasks, in `tenant_id`; a job its
batch's listing lists names it in `tenant_id` only. Quota
counters live under `QUOTA#<tenant>`, signing keys under `SIGNING#<tenant>`."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError

from scheduler_core.adapters.aws import error_code
from scheduler_core.adapters.dynamodb.codec import expression_values, from_item, to_item
from scheduler_core.adapters.dynamodb.table import TableAdapter
from scheduler_core.domain import keys
from scheduler_core.domain.clock import from_ms, to_ms
from scheduler_core.domain.vocabulary import JobKind
from scheduler_core.tenant_move_ports import TenantItem

_WORKFLOWS = keys.workflows_of("")
_QUOTA = keys.quota_pk("")
_SIGNING = keys.signing_pk("")
_ITEM_FIELDS = "pk, sk, job_id, kind, spec, tenant, tenant_id, created_at_ms"
QUOTA_MOVE_TRIES = 5


def _tenant_item(item: dict[str, Any]) -> TenantItem:
    owner = item.get("tenant_id", str(item.get("tenant", "")).removeprefix(_WORKFLOWS))
    return TenantItem(
        job_id=str(item["job_id"]),
        kind=str(item.get("kind", JobKind.JOB)),
        tenant=str(owner),
        spec=str(item["spec"]),
        created_at=from_ms(int(item["created_at_ms"])),
    )


class TenantRecordsTable(TableAdapter):
    def holdings(self) -> dict[str, list[TenantItem]]:
        owned: dict[str, list[TenantItem]] = {}
        pages = self._ddb.get_paginator("scan").paginate(
            TableName=self._table, ConsistentRead=True, ProjectionExpression=_ITEM_FIELDS
        )
        for page in pages:
            for raw in page.get("Items", []):
                item = from_item(raw)
                pk = str(item["pk"])
                if pk.startswith(_QUOTA):
                    owned.setdefault(pk.removeprefix(_QUOTA), [])
                elif pk.startswith(_SIGNING):
                    owned.setdefault(pk.removeprefix(_SIGNING), [])
                elif item.get("sk") == keys.JOB_SK and ("tenant" in item or "tenant_id" in item):
                    found = _tenant_item(item)
                    owned.setdefault(found.tenant, []).append(found)
        return owned

    def read_item(self, job_id: str) -> TenantItem | None:
        reply = self._ddb.get_item(
            TableName=self._table,
            Key=self._codec.job_key(job_id),
            ConsistentRead=True,
            ProjectionExpression="job_id, kind, spec, tenant, tenant_id, created_at_ms",
        )
        return _tenant_item(from_item(reply["Item"])) if "Item" in reply else None

    def retag_if_unchanged(self, item: TenantItem, new: str, spec: str, now: datetime) -> bool:
        # A job is listed in the tenant index under its tenant, a workflow under
        # WORKFLOWS#<tenant> and names it in tenant_id, a task names it in tenant_id only.
        kind = JobKind(item.kind)
        values: dict[str, Any] = {
            "old": item.tenant,
            "new": new,
            "spec": spec,
            "read": item.spec,
            "one": 1,
            "now": to_ms(now),
        }
        if kind is JobKind.JOB:
            # A job its batch's listing listed (`tenant_id`) is listed on its own under the
            # new tenant: the old tenant's listing no longer lists it (`JobListingTable`).
            sets = "tenant = :new REMOVE tenant_id"
        elif kind is JobKind.WORKFLOW:
            sets, values["listed"] = "tenant = :listed, tenant_id = :new", keys.workflows_of(new)
        else:
            sets = "tenant_id = :new"
        return self._write_if(
            {
                "TableName": self._table,
                "Key": self._codec.job_key(item.job_id),
                "UpdateExpression": (
                    f"SET spec = :spec, version = version + :one, updated_at_ms = :now, {sets}"
                ),
                "ConditionExpression": "spec = :read AND (tenant = :old OR tenant_id = :old)",
                "ExpressionAttributeValues": expression_values(**values),
            }
        )

    def _quota_counters(self, tenant: str) -> list[dict[str, Any]]:
        reply = self._ddb.query(
            TableName=self._table,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues=expression_values(pk=keys.quota_pk(tenant)),
            ConsistentRead=True,
        )
        return [from_item(item) for item in reply.get("Items", [])]

    def move_quota_counters(self, old: str, new: str) -> int:
        moved = 0
        for _ in range(QUOTA_MOVE_TRIES):
            counters = self._quota_counters(old)
            if not counters:
                return moved
            for counter in counters:
                moved += self._move_counter_if_unchanged(counter, new)
        raise RuntimeError(f"{old}: its quota counters kept changing while moved; run the move again")

    def _move_counter_if_unchanged(self, counter: dict[str, Any], new: str) -> int:
        """Add the counter to `new`'s and delete it, in one transaction conditioned on the
        count read: a crash leaves it wholly moved or not at all. 0 when it changed since."""
        used = int(counter.get("used", 0))
        sets, values = "ADD used :used", {"used": used}
        if "expires_at" in counter:
            sets += " SET expires_at = :expires"
            values["expires"] = int(counter["expires_at"])
        try:
            self._ddb.transact_write_items(
                TransactItems=[
                    {
                        "Update": {
                            "TableName": self._table,
                            "Key": to_item({"pk": keys.quota_pk(new), "sk": counter["sk"]}),
                            "UpdateExpression": sets,
                            "ExpressionAttributeValues": expression_values(**values),
                        }
                    },
                    {
                        "Delete": {
                            "TableName": self._table,
                            "Key": to_item({"pk": counter["pk"], "sk": counter["sk"]}),
                            "ConditionExpression": "used = :used",
                            "ExpressionAttributeValues": expression_values(used=used),
                        }
                    },
                ]
            )
        except ClientError as error:
            if error_code(error) == "TransactionCanceledException":  # changed, or a conflict: read again
                return 0
            raise
        return 1

    def remove_signing_keys(self, tenant: str) -> None:
        self._ddb.delete_item(
            TableName=self._table, Key=to_item({"pk": keys.signing_pk(tenant), "sk": keys.SIGNING_SK})
        )
