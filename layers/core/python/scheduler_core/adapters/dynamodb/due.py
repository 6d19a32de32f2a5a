"""The `DueIndex` port on the jobs table: what one shard's minute bucket of the due index
holds, a page at a time, and the claim of a job's firing in one transaction."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError
from pydantic import ValidationError

from scheduler_core.adapters.dynamodb.codec import expression_values, to_item
from scheduler_core.adapters.dynamodb.expressions import JOIN_CATCH_UP_QUEUE, RUN_ABSENT, UNCHANGED_SINCE_READ
from scheduler_core.adapters.dynamodb.table import DUE_INDEX, is_contention
from scheduler_core.adapters.dynamodb.transactions import TransactionalWrites
from scheduler_core.domain import keys
from scheduler_core.domain.clock import to_ms
from scheduler_core.domain.entities import Job, Run
from scheduler_core.observability import logger
from scheduler_core.ports import DueItems, StoreContention


class DueIndexTable(TransactionalWrites):
    def due_pages(
        self, shard: int, bucket_ms: int, until_ms: int, runs_until_ms: int | None = None
    ) -> Iterator[DueItems]:
        """Jobs and runs of one shard's minute bucket due at or before `until_ms`, a page of up
        to `due_page` index entries at a time (oldest first), so a poll acts on the first of a
        big bucket before it has read the last. With `runs_until_ms`, runs only up to then,
        the later ones counted (`later_runs`), not read. The index holds keys only (a run's
        key says it is a run): each page's items are then read (strongly consistent, in
        batches), and one that moved on since the index saw it (claimed, finished, its timer
        moved) is left out. Every write that follows still re-checks the item it read.
        Throttling raises StoreContention, from the page it met it on."""
        bucket = keys.due_pk(bucket_ms, shard)
        query: dict[str, Any] = {
            "TableName": self._table,
            "IndexName": DUE_INDEX,
            "KeyConditionExpression": "due_pk = :bucket AND due_sk <= :until",
            "ExpressionAttributeValues": expression_values(bucket=bucket, until=until_ms),
        }
        entries: list[dict[str, Any]] = []
        later_runs = 0
        try:
            for entry, resume in self._query_items(query, None):
                is_run = entry["sk"]["S"].startswith(keys.RUN_SK_PREFIX)
                if is_run and runs_until_ms is not None and int(entry["due_sk"]["N"]) > runs_until_ms:
                    later_runs += 1
                else:
                    entries.append(entry)
                if len(entries) >= self._due_page_size or resume is None:
                    yield self._due_page(bucket, until_ms, entries, later_runs)
                    entries, later_runs = [], 0
        except ClientError as error:
            if is_contention(error):
                raise StoreContention(str(error)) from error
            raise
        if entries or later_runs:  # a query whose last page came back empty
            yield self._due_page(bucket, until_ms, entries, later_runs)

    def _due_page(
        self, bucket: str, until_ms: int, entries: list[dict[str, Any]], later_runs: int
    ) -> DueItems:
        items = [
            item
            for item in self._items_of(entries)
            if item is not None
            and item.get("due_pk", {}).get("S") == bucket
            and int(item["due_sk"]["N"]) <= until_ms
        ]
        due = DueItems([], [], later_runs)
        for item in items:
            try:
                if item["sk"]["S"] == keys.JOB_SK:
                    due.jobs.append(self._codec.job_from_item(item))
                elif item["sk"]["S"].startswith(keys.RUN_SK_PREFIX):
                    due.runs.append(self._codec.run_from_item(item))
            except (ValidationError, KeyError, ValueError) as error:
                # One unreadable item (stored under older, looser rules) must not stop the
                # shard's poll: it is logged and left where it is for a person to look at.
                logger.error(
                    "due item unreadable; skipped",
                    extra={"pk": item["pk"]["S"], "sk": item["sk"]["S"], "error": str(error)},
                )
        return due

    def claim_if_unchanged(
        self, job: Job, run: Run, next_fire_at: datetime | None, now: datetime, catch_up: bool = False
    ) -> bool:
        """Claim the firing `run.scheduled_for` of `job` in one transaction: move the job from
        the firing we read (`job.next_fire_at`) to `next_fire_at` (or out of the due index) if
        nobody changed it since we read it, and create the run if it does not exist yet. With
        `catch_up`, the run joins the end of the job's catch-up queue (a missed firing caught
        up: it waits its turn for a running slot). False: another poller or an API call won."""
        assert job.next_fire_at is not None, "only a job with a due firing can be claimed"
        update = "SET version = version + :one, updated_at_ms = :now"
        values = expression_values(
            one=1, now=to_ms(now), seen=job.version, seen_fire=to_ms(job.next_fire_at), scheduled="SCHEDULED"
        )
        if catch_up:
            update += f", {JOIN_CATCH_UP_QUEUE}"
            values |= expression_values(no_runs=[], queued=[run.scheduled_for_ms])
        if next_fire_at is None:
            update += " REMOVE due_pk, due_sk, next_fire_at_ms"
        else:
            next_ms = to_ms(next_fire_at)
            update += ", due_pk = :next_pk, due_sk = :next_ms, next_fire_at_ms = :next_ms"
            values |= expression_values(
                next_pk=keys.due_pk(next_ms, keys.shard_for(job.job_id, self._shards)), next_ms=next_ms
            )
        try:
            self._ddb.transact_write_items(
                TransactItems=[
                    {
                        "Update": {
                            "TableName": self._table,
                            "Key": to_item({"pk": keys.job_pk(job.job_id), "sk": keys.JOB_SK}),
                            "UpdateExpression": update,
                            "ConditionExpression": UNCHANGED_SINCE_READ,
                            "ExpressionAttributeNames": {"#status": "status"},
                            "ExpressionAttributeValues": values,
                        }
                    },
                    {
                        "Put": {
                            "TableName": self._table,
                            "Item": self._codec.run_item(run, now),
                            "ConditionExpression": RUN_ABSENT,
                        }
                    },
                ]
            )
        except ClientError as error:
            job_update, run_put = self._cancellation_reasons(error, expected=2)
            if job_update == "ConditionalCheckFailed" or run_put == "ConditionalCheckFailed":
                return False
            raise
        return True
