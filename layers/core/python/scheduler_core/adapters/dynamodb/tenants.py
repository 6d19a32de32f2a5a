"""`TenantRecords` on the jobs table: what a tenant owns, found by one Scan (a tenant move
is a one-off operation, not a request path), and moved item by item with conditions.

A job item names its tenant in `tenant` (the tenant index's key: the tenant for a job,
`WORKFLOWS#<tenant>` for a workflow) and, for workflows and tasks, in `tenant_id`. Quota
counters live under `QUOTA#<tenant>`, signing keys under `SIGNING#<tenant>`."""

from __future__ import annotations

from typing import Any

from scheduler_core.adapters.dynamodb.codec import expression_values, from_item, to_item
from scheduler_core.adapters.dynamodb.table import TableAdapter
from scheduler_core.domain import keys
from scheduler_core.domain.vocabulary import JobKind
from scheduler_core.ports import TenantItem

_WORKFLOWS = keys.workflows_of("")
_QUOTA = keys.quota_pk("")
_SIGNING = keys.signing_pk("")


class TenantRecordsTable(TableAdapter):
    def _scan(self, **request: Any) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        pages = self._ddb.get_paginator("scan").paginate(
            TableName=self._table, ConsistentRead=True, **request
        )
        for page in pages:
            found.extend(from_item(item) for item in page.get("Items", []))
        return found

    def tenants(self) -> set[str]:
        owned: set[str] = set()
        for item in self._scan(ProjectionExpression="pk, tenant, tenant_id"):
            pk = str(item["pk"])
            if pk.startswith(_QUOTA):
                owned.add(pk.removeprefix(_QUOTA))
            elif pk.startswith(_SIGNING):
                owned.add(pk.removeprefix(_SIGNING))
            elif "tenant_id" in item:
                owned.add(str(item["tenant_id"]))
            elif "tenant" in item:
                owned.add(str(item["tenant"]).removeprefix(_WORKFLOWS))
        return owned

    def items_of(self, tenant: str) -> list[TenantItem]:
        items = self._scan(
            FilterExpression="sk = :job AND (tenant = :tenant OR tenant_id = :tenant)",
            ExpressionAttributeValues=expression_values(job=keys.JOB_SK, tenant=tenant),
            ProjectionExpression="job_id, kind, spec",
        )
        return [TenantItem(str(i["job_id"]), str(i.get("kind", JobKind.JOB)), str(i["spec"])) for i in items]

    def retag_if_unchanged(self, item: TenantItem, old: str, new: str, spec: str) -> bool:
        # A job is listed in the tenant index under its tenant, a workflow under
        # WORKFLOWS#<tenant> and names it in tenant_id, a task names it in tenant_id only.
        kind = JobKind(item.kind)
        values: dict[str, Any] = {"old": old, "new": new, "spec": spec, "read": item.spec}
        if kind is JobKind.JOB:
            sets = "tenant = :new"
        elif kind is JobKind.WORKFLOW:
            sets, values["listed"] = "tenant = :listed, tenant_id = :new", keys.workflows_of(new)
        else:
            sets = "tenant_id = :new"
        return self._write_if(
            {
                "TableName": self._table,
                "Key": self._codec.job_key(item.job_id),
                "UpdateExpression": f"SET spec = :spec, {sets}",
                "ConditionExpression": "spec = :read AND (tenant = :old OR tenant_id = :old)",
                "ExpressionAttributeValues": expression_values(**values),
            }
        )

    def move_quota_counters(self, old: str, new: str) -> int:
        counters = self._scan(
            FilterExpression="pk = :pk",
            ExpressionAttributeValues=expression_values(pk=keys.quota_pk(old)),
        )
        for counter in counters:
            sets, values = "ADD used :used", {"used": int(counter.get("used", 0))}
            if "expires_at" in counter:
                sets += " SET expires_at = :expires"
                values["expires"] = int(counter["expires_at"])
            self._ddb.update_item(
                TableName=self._table,
                Key=to_item({"pk": keys.quota_pk(new), "sk": counter["sk"]}),
                UpdateExpression=sets,
                ExpressionAttributeValues=expression_values(**values),
            )
            self._ddb.delete_item(
                TableName=self._table, Key=to_item({"pk": counter["pk"], "sk": counter["sk"]})
            )
        return len(counters)

    def remove_signing_keys(self, tenant: str) -> None:
        self._ddb.delete_item(
            TableName=self._table, Key=to_item({"pk": keys.signing_pk(tenant), "sk": keys.SIGNING_SK})
        )
