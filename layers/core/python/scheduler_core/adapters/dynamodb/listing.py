"""The `Listing` port on the jobs table: a job's runs, a page at a time behind opaque
cursors (a tenant's jobs: `job_listing`)."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Any

from scheduler_core.adapters.dynamodb.codec import expression_values, from_value, to_item, with_job_attributes
from scheduler_core.adapters.dynamodb.cursors import decode_cursor, encode_cursor
from scheduler_core.adapters.dynamodb.job_listing import FILTERED_READ_BUDGET, JobListingTable
from scheduler_core.domain import keys
from scheduler_core.domain.clock import to_ms
from scheduler_core.domain.entities import Run
from scheduler_core.domain.vocabulary import RunStatus
from scheduler_core.ports import CursorNotValid, Page


class ListingTable(JobListingTable):
    def list_runs(self, job_id: str, limit: int, cursor: str | None, status: RunStatus | None = None) -> Page:
        """Newest first (by scheduled time), optionally only those in `status` (a filter:
        see `_page` for what it costs)."""
        start = decode_cursor(cursor, ("pk", "sk")) if cursor else None
        if start is not None and start.get("pk") != keys.job_pk(job_id):
            raise CursorNotValid("another job's")
        query: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :run)",
            "ExpressionAttributeValues": expression_values(pk=keys.job_pk(job_id), run=keys.RUN_SK_PREFIX),
            "ScanIndexForward": False,
            "Limit": limit,
        }
        if status is not None:
            query["FilterExpression"] = "#status = :status"
            query["ExpressionAttributeNames"] = {"#status": "status"}
            query["ExpressionAttributeValues"] |= expression_values(status=str(status))
        items, resume_key = self._page(query, start, limit)
        runs = [self._codec.run_from_item(item) for item in items]
        kept = self._kept_run(job_id)  # a one-off's run, on its job's item
        if kept is not None and (status is None or kept.status is status):
            kept_sk = keys.run_sk(kept.scheduled_for_ms)
            after_cursor = start is None or kept_sk < start["sk"]
            in_page = resume_key is None or kept_sk > resume_key["sk"]
            if after_cursor and in_page:
                runs = sorted([*runs, kept], key=lambda run: run.scheduled_for, reverse=True)
                if len(runs) > limit:
                    runs = runs[:limit]
                    resume_key = {"pk": keys.job_pk(job_id), "sk": keys.run_sk(runs[-1].scheduled_for_ms)}
        return Page(runs, encode_cursor(resume_key) if resume_key else None)

    def recent_runs(
        self,
        job_id: str,
        limit: int,
        *,
        after: datetime | None = None,
        statuses: Collection[RunStatus] | None = None,
    ) -> list[Run]:
        """Among the job's `limit` newest runs (those scheduled after `after`, if given), the
        ones in `statuses` (all if None), newest first. Reads at most `limit` items, consistently."""
        values = expression_values(pk=keys.job_pk(job_id))
        if after is None:
            key_condition = "pk = :pk AND begins_with(sk, :run)"
            values |= expression_values(run=keys.RUN_SK_PREFIX)
        else:
            key_condition = "pk = :pk AND sk > :after"
            values |= expression_values(after=keys.run_sk(to_ms(after)))
        query: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": key_condition,
            "ExpressionAttributeValues": values,
            "ScanIndexForward": False,
            "ConsistentRead": True,
        }
        runs: list[Run] = []
        exclusive: Any = None
        left = limit
        while left > 0:
            page = self._ddb.query(
                **query, Limit=left, **({"ExclusiveStartKey": exclusive} if exclusive else {})
            )
            items = page.get("Items", [])
            left -= len(items)
            runs += [self._codec.run_from_item(item) for item in items]
            if "LastEvaluatedKey" not in page:
                break
            exclusive = page["LastEvaluatedKey"]
        kept = self._kept_run(job_id)  # a one-off's run, on its job's item
        if kept is not None and (after is None or kept.scheduled_for > after):
            runs = sorted([*runs, kept], key=lambda run: run.scheduled_for, reverse=True)[:limit]
        return [run for run in runs if statuses is None or run.status in statuses]

    def _kept_run(self, job_id: str) -> Run | None:
        """The run the job's item keeps (`Run.with_job`), read as far as it goes, or None."""
        [item] = self._items_of([self._codec.job_key(job_id)], ("job_id", *with_job_attributes()))
        return self._codec.run_with_job_from_item(item) if item else None

    def _page(
        self, query: dict[str, Any], start: dict[str, Any] | None, limit: int
    ) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
        """One page of a listing of a job's runs: up to `limit` items and the key to resume
        after (None at the end). A filtered one (`FilterExpression`) reads at most
        `FILTERED_READ_BUDGET` items per page: a page may then hold fewer than `limit` items,
        even none, and still a `next_cursor`, which the caller follows."""
        exclusive = to_item(start) if start else None
        budget = FILTERED_READ_BUDGET if "FilterExpression" in query else None
        matched: list[dict[str, Any]] = []
        while True:
            request: dict[str, Any] = dict(query) | {
                "Limit": budget if budget is not None else limit - len(matched)
            }
            if exclusive:
                request["ExclusiveStartKey"] = exclusive
            page = self._ddb.query(**request)
            entries = page.get("Items", [])
            if budget is not None:
                budget -= int(page.get("ScannedCount", len(entries)))
            more = "LastEvaluatedKey" in page
            for position, item in enumerate(entries):
                matched.append(item)
                if len(matched) == limit:
                    if position == len(entries) - 1 and not more:
                        return matched, None
                    return matched, {name: from_value(item[name]) for name in ("pk", "sk")}
            if not more:
                return matched, None
            exclusive = page["LastEvaluatedKey"]
            if budget is not None and budget <= 0:
                return matched, {k: from_value(v) for k, v in exclusive.items()}
