"""The `JobRecords` port on the jobs table: a job created once, read, replaced if unchanged
since it was read, cancelled while active."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError

from scheduler_core.adapters.dynamodb.codec import expression_values, to_item
from scheduler_core.adapters.dynamodb.expressions import JOIN_CATCH_UP_QUEUE, RUN_ABSENT
from scheduler_core.adapters.dynamodb.table import condition_failed
from scheduler_core.adapters.dynamodb.transactions import TransactionalWrites
from scheduler_core.domain import keys
from scheduler_core.domain.clock import to_ms
from scheduler_core.domain.entities import Job, Run

# Job attributes the owner of the job may not change, and those a job holds only sometimes.
_IMMUTABLE_JOB_ATTRIBUTES = frozenset({"pk", "sk", "job_id", "tenant", "created_key", "created_at_ms"})
_OPTIONAL_JOB_ATTRIBUTES = ("due_pk", "due_sk", "next_fire_at_ms", "paused_at_ms")


class JobRecordsTable(TransactionalWrites):
    def put_job_if_absent(self, job: Job) -> bool:
        """Write a new job; False if a job with its id exists already."""
        try:
            self._ddb.put_item(
                TableName=self._table,
                Item=self._codec.job_item(job),
                ConditionExpression="attribute_not_exists(pk)",
            )
        except ClientError as error:
            if condition_failed(error):
                return False
            raise
        return True

    def get_job(self, job_id: str) -> Job | None:
        reply = self._ddb.get_item(
            TableName=self._table,
            Key=to_item({"pk": keys.job_pk(job_id), "sk": keys.JOB_SK}),
            ConsistentRead=True,
        )
        item = reply.get("Item")
        return self._codec.job_from_item(item) if item else None

    def update_job_if_unchanged(
        self,
        before: Job,
        after: Job,
        now: datetime,
        run: Run | None = None,
        catch_up: Sequence[int] = (),
    ) -> bool:
        """Write `after` over the job read as `before` (its spec, status, next firing, due
        index entry), if nobody changed it since: same version and status. With `run`, create
        that run in the same transaction (it must not exist yet); `catch_up`: runs (by time)
        that join the end of the job's catch-up queue. False if either condition failed. The
        item's other attributes are left as they are."""
        item = self._codec.job_item(after)
        sets = {name: value for name, value in item.items() if name not in _IMMUTABLE_JOB_ATTRIBUTES}
        removes = [name for name in _OPTIONAL_JOB_ATTRIBUTES if name not in item]
        names = {f"#a{i}": name for i, name in enumerate(sets)}
        values = {f":a{i}": value for i, value in enumerate(sets.values())}
        update = "SET " + ", ".join(f"#a{i} = :a{i}" for i in range(len(sets)))
        if catch_up:
            update += f", {JOIN_CATCH_UP_QUEUE}"
            values |= expression_values(no_runs=[], queued=list(catch_up))
        if removes:
            names |= {f"#r{i}": name for i, name in enumerate(removes)}
            update += " REMOVE " + ", ".join(f"#r{i}" for i in range(len(removes)))
        job_update: dict[str, Any] = {
            "TableName": self._table,
            "Key": to_item({"pk": keys.job_pk(before.job_id), "sk": keys.JOB_SK}),
            "UpdateExpression": update,
            "ConditionExpression": "attribute_exists(pk) AND version = :seen AND #status = :seen_status",
            "ExpressionAttributeNames": names | {"#status": "status"},
            "ExpressionAttributeValues": values
            | expression_values(seen=before.version, seen_status=str(before.status)),
        }
        if run is None:
            return self._write_if(job_update)
        run_put = {
            "TableName": self._table,
            "Item": self._codec.run_item(run, now),
            "ConditionExpression": RUN_ABSENT,
        }
        try:
            self._ddb.transact_write_items(TransactItems=[{"Update": job_update}, {"Put": run_put}])  # type: ignore[typeddict-item]
        except ClientError as error:
            if "ConditionalCheckFailed" in self._cancellation_reasons(error, expected=2):
                return False
            raise
        return True

    def cancel_job_if_active(self, job_id: str, now: datetime) -> bool:
        """SCHEDULED/PAUSED → CANCELLED and out of the due index. False if it was not active."""
        return self._update_job_if(
            job_id,
            "SET #status = :cancelled, version = version + :one, updated_at_ms = :now"
            " REMOVE due_pk, due_sk, next_fire_at_ms",
            "#status IN (:scheduled, :paused)",
            expression_values(
                cancelled="CANCELLED", one=1, now=to_ms(now), scheduled="SCHEDULED", paused="PAUSED"
            ),
        )

    def _update_job_if(self, job_id: str, update: str, condition: str, values: dict[str, Any]) -> bool:
        try:
            self._ddb.update_item(
                TableName=self._table,
                Key=to_item({"pk": keys.job_pk(job_id), "sk": keys.JOB_SK}),
                UpdateExpression=update,
                ConditionExpression=f"attribute_exists(pk) AND {condition}",
                ExpressionAttributeNames={"#status": "status"},
                ExpressionAttributeValues=values,
            )
        except ClientError as error:
            if condition_failed(error):
                return False
            raise
        return True
