"""The `JobRecords` port on the jobs table: a job created once, read, replaced if unchanged
since it was read, cancelled while active."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError

from scheduler_core.adapters.dynamodb.codec import (
    WITH_JOB_TIMER,
    expression_values,
    to_item,
    with_job_attributes,
    with_job_name,
)
from scheduler_core.adapters.dynamodb.expressions import JOIN_CATCH_UP_QUEUE, RUN_ABSENT
from scheduler_core.adapters.dynamodb.table import condition_failed
from scheduler_core.adapters.dynamodb.transactions import TransactionalWrites
from scheduler_core.domain import keys
from scheduler_core.domain.clock import to_ms
from scheduler_core.domain.entities import Job, Run
from scheduler_core.domain.vocabulary import ENDED_JOB

# Job attributes the owner of the job may not change, and those a job holds only sometimes.
_IMMUTABLE_JOB_ATTRIBUTES = frozenset(
    {"pk", "sk", "job_id", "tenant", "tenant_id", "kind", "created_key", "created_at_ms"}
)
_OPTIONAL_JOB_ATTRIBUTES = ("due_pk", "due_sk", "next_fire_at_ms", "paused_at_ms", "expires_at")


class JobRecordsTable(TransactionalWrites):
    def put_job_if_absent(self, job: Job, listed: bool = True, due_listed: bool = False) -> bool:
        """Write a new job (not `listed`: its batch's listing item lists it; `due_listed`: its
        batch's due listing holds its firing in the due index); False if a job with its id
        exists already."""
        try:
            self._ddb.put_item(
                TableName=self._table,
                Item=self._codec.job_item(job, listed, due_listed),
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

    def get_jobs(self, job_ids: Sequence[str], consistent: bool = True) -> dict[str, Job]:
        found = self._get_items(
            [to_item({"pk": keys.job_pk(job_id), "sk": keys.JOB_SK}) for job_id in set(job_ids)],
            consistent=consistent,
        )
        jobs = (self._codec.job_from_item(item) for item in found.values())
        return {job.job_id: job for job in jobs}

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
        # A job ended before and after keeps its expiry as stored: it may have been kept
        # longer than its last change for the work a backfill or re-drive revived.
        as_stored = ("expires_at",) if before.status in ENDED_JOB and after.status in ENDED_JOB else ()
        for name in as_stored:
            item.pop(name, None)
        job_key = to_item({"pk": keys.job_pk(before.job_id), "sk": keys.JOB_SK})
        seen = expression_values(seen=before.version, seen_status=str(before.status))
        unchanged = "attribute_exists(pk) AND version = :seen AND #status = :seen_status"
        run_put = (
            [
                {
                    "Put": {
                        "TableName": self._table,
                        "Item": self._codec.run_item(run, now),
                        "ConditionExpression": RUN_ABSENT,
                    }
                }
            ]
            if run is not None
            else []
        )
        # A job's item keeps a run only while the job has no firing of its own (`Run.with_job`):
        # the index entry is that run's then, until it ends. A write that gives the job a
        # firing (a new schedule, paused or not) moves the run it keeps, ended or not, to an
        # item of its own, as it is, in the same transaction; one that does not leaves the
        # entry of a run that has not ended where it is.
        own_firing = "next_fire_at_ms" in item
        kept_marker = with_job_name("status") if own_firing else WITH_JOB_TIMER
        job_update = self._job_replacement(job_key, item, catch_up, keep_entry=False, kept=as_stored)
        job_update["ConditionExpression"] = f"{unchanged} AND attribute_not_exists({kept_marker})"
        job_update["ExpressionAttributeValues"] |= seen
        if self._write_all([{"Update": job_update}, *run_put]):
            return True
        kept = self._ddb.get_item(TableName=self._table, Key=job_key, ConsistentRead=True).get("Item")
        if kept is None or kept_marker not in kept:
            return False  # the job changed since it was read (or the run exists already)
        if own_firing:
            job_update["ConditionExpression"] = unchanged
            return self._write_all([{"Update": job_update}, *run_put, *self._move_kept_run(job_update, kept)])
        job_update = self._job_replacement(job_key, item, catch_up, keep_entry=True, kept=as_stored)
        job_update["ConditionExpression"] = f"{unchanged} AND attribute_exists({WITH_JOB_TIMER})"
        job_update["ExpressionAttributeValues"] |= seen
        return self._write_all([{"Update": job_update}, *run_put])

    def _job_replacement(
        self,
        key: dict[str, Any],
        item: dict[str, Any],
        catch_up: Sequence[int],
        keep_entry: bool,
        kept: Collection[str] = (),
    ) -> dict[str, Any]:
        """The update that writes a job's `item` over its stored one (its immutable attributes
        aside): the optional ones it lacks are removed (the index entry too, unless
        `keep_entry`; never those `kept` as stored); `catch_up` runs join the job's catch-up
        queue."""
        sets = {name: value for name, value in item.items() if name not in _IMMUTABLE_JOB_ATTRIBUTES}
        removes = [
            name
            for name in _OPTIONAL_JOB_ATTRIBUTES
            if name not in item and name not in kept and not (keep_entry and name in ("due_pk", "due_sk"))
        ]
        names = {f"#a{i}": name for i, name in enumerate(sets)} | {"#status": "status"}
        values = {f":a{i}": value for i, value in enumerate(sets.values())}
        update = "SET " + ", ".join(f"#a{i} = :a{i}" for i in range(len(sets)))
        if catch_up:
            update += f", {JOIN_CATCH_UP_QUEUE}"
            values |= expression_values(no_runs=[], queued=list(catch_up))
        if removes:
            names |= {f"#r{i}": name for i, name in enumerate(removes)}
            update += " REMOVE " + ", ".join(f"#r{i}" for i in range(len(removes)))
        return {
            "TableName": self._table,
            "Key": key,
            "UpdateExpression": update,
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
        }

    def _write_all(self, items: list[dict[str, Any]]) -> bool:
        """`items` in one transaction, or the one update alone; False if a condition failed."""
        if len(items) == 1:
            return self._write_if(items[0]["Update"])
        try:
            self._ddb.transact_write_items(TransactItems=items)  # type: ignore[arg-type]
        except ClientError as error:
            if "ConditionalCheckFailed" in self._cancellation_reasons(error, expected=len(items)):
                return False
            raise
        return True

    def _move_kept_run(self, job_update: dict[str, Any], kept: dict[str, Any]) -> list[dict[str, Any]]:
        """The writes that move the run a job's item keeps to an item of its own, on the
        condition that it is still as read: the job's update (`job_update`, amended: the
        kept run's attributes removed, its condition extended) and the put."""
        present = [name for name in with_job_attributes() if name in kept]
        absent = [name for name in with_job_attributes() if name not in kept]
        names = {f"#e{n}": name for n, name in enumerate(present)} | {
            f"#x{n}": name for n, name in enumerate(absent)
        }
        job_update["ExpressionAttributeNames"] |= names
        job_update["ExpressionAttributeValues"] |= {f":e{n}": kept[name] for n, name in enumerate(present)}
        as_read = [f"#e{n} = :e{n}" for n in range(len(present))]
        as_read += [f"attribute_not_exists(#x{n})" for n in range(len(absent))]
        job_update["ConditionExpression"] += " AND " + " AND ".join(as_read)
        removes = ", ".join(f"#e{n}" for n in range(len(present)))
        update = job_update["UpdateExpression"]
        job_update["UpdateExpression"] = (
            update.replace(" REMOVE ", f" REMOVE {removes}, ")
            if " REMOVE " in update
            else f"{update} REMOVE {removes}"
        )
        own = self._codec.run_item_from_job_item(kept)
        return [{"Put": {"TableName": self._table, "Item": own, "ConditionExpression": RUN_ABSENT}}]

    def keep_ended_job_until(self, job_id: str, when: datetime) -> bool:
        expires = self._codec.expiry(when)
        try:
            self._ddb.update_item(
                TableName=self._table,
                Key=self._codec.job_key(job_id),
                UpdateExpression="SET expires_at = :expires",
                ConditionExpression="attribute_exists(expires_at) AND expires_at < :expires",
                ExpressionAttributeValues=expression_values(expires=expires),
            )
        except ClientError as error:
            if condition_failed(error):
                return False
            raise
        return True

    def cancel_job_if_active(self, job_id: str, now: datetime) -> bool:
        """SCHEDULED/PAUSED → CANCELLED and out of the due index: its entry leaves with it,
        unless it is a run's its item keeps and that has not ended (`Run.with_job`), which
        the run's end takes out. False if it was not active."""
        values = expression_values(
            cancelled="CANCELLED",
            one=1,
            now=to_ms(now),
            expires=self._codec.expiry(now),
            scheduled="SCHEDULED",
            paused="PAUSED",
        )
        cancel = (
            "SET #status = :cancelled, version = version + :one, updated_at_ms = :now, expires_at = :expires"
            " REMOVE next_fire_at_ms"
        )
        active = "#status IN (:scheduled, :paused)"
        keeps_entry = False  # whether the item keeps a run that has not ended: its entry stays
        for _ in range(3):  # the kept run may start or end between the tries
            kept_run = f"attribute_{'exists' if keeps_entry else 'not_exists'}({WITH_JOB_TIMER})"
            try:
                self._ddb.update_item(
                    TableName=self._table,
                    Key=self._codec.job_key(job_id),
                    UpdateExpression=cancel if keeps_entry else f"{cancel}, due_pk, due_sk",
                    ConditionExpression=f"attribute_exists(pk) AND {active} AND {kept_run}",
                    ExpressionAttributeNames={"#status": "status"},
                    ExpressionAttributeValues=values,
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                )
            except ClientError as error:
                if not condition_failed(error):
                    raise
                old: dict[str, Any] = error.response.get("Item", {})  # type: ignore[assignment]
                if old.get("status", {}).get("S") not in ("SCHEDULED", "PAUSED"):
                    return False
                keeps_entry = WITH_JOB_TIMER in old
                continue
            return True
        return False
