"""The `QuotaCounters` port on the jobs table: one item per tenant and counter,
pk `QUOTA#<tenant>`, sk the counter (`JOBS`, `MINUTE#<yyyymmddHHMM>`), updated in place
with a condition (never read-then-write)."""

from __future__ import annotations

from datetime import datetime

from botocore.exceptions import ClientError

from scheduler_core.adapters.dynamodb.codec import expression_values, from_item, to_item
from scheduler_core.adapters.dynamodb.table import TableAdapter, condition_failed
from scheduler_core.domain import keys
from scheduler_core.domain.entities import Job
from scheduler_core.domain.vocabulary import JobStatus


class QuotaCountersTable(TableAdapter):
    def charge_if_within(
        self, tenant: str, counter: str, limit: int, expires_at: datetime | None, count: int = 1
    ) -> int | None:
        sets = "used = if_not_exists(used, :zero) + :count"
        values: dict[str, object] = {"zero": 0, "count": count, "room": limit - count}
        if expires_at is not None:
            sets += ", expires_at = :expires"
            values["expires"] = int(expires_at.timestamp())
        try:
            reply = self._ddb.update_item(
                TableName=self._table,
                Key=to_item({"pk": keys.quota_pk(tenant), "sk": counter}),
                UpdateExpression=f"SET {sets}",
                ConditionExpression="attribute_not_exists(used) OR used <= :room",
                ExpressionAttributeValues=expression_values(**values),
                ReturnValues="UPDATED_NEW",
            )
        except ClientError as error:
            if condition_failed(error):
                return None
            raise
        return int(from_item(reply["Attributes"])["used"])

    def mark_quota_released_if_ended(self, job_id: str) -> Job | None:
        try:
            reply = self._ddb.update_item(
                TableName=self._table,
                Key=self._codec.job_key(job_id),
                UpdateExpression="SET quota_released = :yes",
                ConditionExpression=(
                    "attribute_exists(pk) AND #status IN (:cancelled, :completed) "
                    "AND attribute_not_exists(quota_released)"
                ),
                ExpressionAttributeNames={"#status": "status"},
                ExpressionAttributeValues=expression_values(
                    yes=True, cancelled=str(JobStatus.CANCELLED), completed=str(JobStatus.COMPLETED)
                ),
                ReturnValues="ALL_NEW",
            )
        except ClientError as error:
            if condition_failed(error):
                return None
            raise
        return self._codec.job_from_item(reply["Attributes"])

    def refund(self, tenant: str, counter: str, count: int = 1) -> None:
        try:
            self._ddb.update_item(
                TableName=self._table,
                Key=to_item({"pk": keys.quota_pk(tenant), "sk": counter}),
                UpdateExpression="SET used = used - :count",
                ConditionExpression="used >= :count",
                ExpressionAttributeValues=expression_values(count=count),
            )
        except ClientError as error:
            if not condition_failed(error):
                raise
