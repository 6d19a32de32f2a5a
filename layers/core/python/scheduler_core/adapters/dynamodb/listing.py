"""The `Listing` port on the jobs table: a tenant's jobs (the `by_tenant` index) and a job's
runs, a page at a time behind opaque cursors."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from itertools import islice
from typing import Any

from botocore.exceptions import ClientError

from scheduler_core.adapters.dynamodb.codec import expression_values, from_value, to_item, with_job_attributes
from scheduler_core.adapters.dynamodb.cursors import decode_cursor, encode_cursor
from scheduler_core.adapters.dynamodb.table import DUE_INDEX, TENANT_INDEX, TableAdapter, condition_failed
from scheduler_core.domain import keys
from scheduler_core.domain.clock import to_ms
from scheduler_core.domain.entities import Job, Run
from scheduler_core.domain.vocabulary import JobStatus, RunStatus
from scheduler_core.ports import CursorNotValid, Page

# The most items one page of a filtered listing reads (DynamoDB filters after reading).
FILTERED_READ_BUDGET = 1_000
# What the job listing's filters look at (`list_jobs`), and where a job is listed.
_FILTERED_ATTRIBUTES = ("status", "name", "tenant", "tenant_id", "kind")
# A tenant index entry's key, as a listing cursor holds it.
_TENANT_ENTRY = ("pk", "sk", "tenant", "created_key")
# The most jobs a filtered listing reads at a time.
_LISTING_PAGE = 100


@dataclass(frozen=True)
class _Listed:
    """A job as the tenant index lists it: its item's key, the cursor's key that resumes
    after it, and whether it is listed by an entry of its own or by a listing's."""

    job_key: dict[str, Any]
    resume: dict[str, Any]
    on_its_own: bool

    def lists(self, item: Mapping[str, Any], tenant: str) -> bool:
        """Whether the job `item` is still listed here: a job keeps the entry of its own (in
        `tenant`); a listing's job is listed by it while it has none (`tenant_id`, a job's)."""
        if self.on_its_own:
            return bool(item.get("tenant", {}).get("S") == tenant)
        return "tenant" not in item and "kind" not in item and item.get("tenant_id", {}).get("S") == tenant


def _is_listing(entry: Mapping[str, Any]) -> bool:
    return str(entry["pk"]["S"]).startswith(keys.LISTING_PK_PREFIX)


def _a_place_in_a_listing(key: Mapping[str, Any]) -> bool:
    at = key["at"]
    return str(key["pk"]).startswith(keys.LISTING_PK_PREFIX) and isinstance(at, int) and at > 0


def _jobs_in(entry: dict[str, Any], listing: Mapping[str, Any] | None, at: int) -> Iterator[_Listed]:
    """The jobs a listing item lists, newest id first (as the index orders jobs made in the
    same millisecond), from the `at`th on; none if the item is gone."""
    ids = (
        sorted(listing["job_ids"]["SS"], reverse=True) if listing is not None and "job_ids" in listing else []
    )
    for n in range(at, len(ids)):
        resume = {**entry, "at": n + 1} if n + 1 < len(ids) else entry
        yield _Listed(to_item({"pk": keys.job_pk(ids[n]), "sk": keys.JOB_SK}), resume, on_its_own=False)


class ListingTable(TableAdapter):
    def list_jobs(
        self,
        tenant: str,
        limit: int,
        cursor: str | None,
        status: JobStatus | None,
        name_prefix: str | None = None,
    ) -> Page:
        """Newest first, optionally only those in `status` and/or whose name starts with
        `name_prefix`. The tenant index holds keys only (so a job's changes never rewrite its
        entry): each page reads index keys, then the jobs themselves with BatchGetItem, and
        filters those. An entry is a job's, or a listing's (`list_together`): the jobs a
        batch made, newest id first, in its place; a cursor inside one names the entry and
        how many of its jobs came before (`at`). A filtered page reads at most
        `FILTERED_READ_BUDGET` jobs: it may hold fewer than `limit`, even none, and still a
        `next_cursor`."""
        start = decode_cursor(cursor, _TENANT_ENTRY, optional=("at",)) if cursor else None
        if start is not None and start.get("tenant") != tenant:
            raise CursorNotValid("another tenant's")
        if start is not None and "at" in start and not _a_place_in_a_listing(start):
            raise CursorNotValid("not a place in a listing")

        def wanted(item: dict[str, Any]) -> bool:
            # The index holds keys only: status and name are the item's, read after the index.
            return (status is None or item["status"]["S"] == str(status)) and (
                name_prefix is None or item["name"]["S"].startswith(name_prefix)
            )

        filtered = status is not None or name_prefix is not None
        slots = self._listed_jobs(
            tenant, start, page_size=min(FILTERED_READ_BUDGET if filtered else limit, _LISTING_PAGE) + 1
        )
        jobs: list[Job] = []
        read = 0
        while True:
            size = min(_LISTING_PAGE, FILTERED_READ_BUDGET - read) if filtered else limit - len(jobs)
            chunk = list(islice(slots, size))
            if not chunk:
                return Page(jobs, None)
            read += len(chunk)
            found = self._jobs_of(chunk, tenant, wanted if filtered else None, limit - len(jobs))
            for position, (slot, item) in enumerate(zip(chunk, found, strict=True)):
                if item is None:
                    continue
                jobs.append(self._codec.job_from_item(item))
                if len(jobs) == limit:
                    more = position < len(chunk) - 1 or next(slots, None) is not None
                    return Page(jobs, encode_cursor(slot.resume) if more else None)
            if filtered and read >= FILTERED_READ_BUDGET:
                more = next(slots, None) is not None
                return Page(jobs, encode_cursor(chunk[-1].resume) if more else None)

    def list_together(self, tenant: str, listing_id: str, job_ids: Sequence[str], now: datetime) -> None:
        """One item lists a batch's jobs, with one tenant index entry for them all (its own
        entry each would cost a write unit a job): 100 ids, about 3.3 KB, 4 write units and
        the entry's one. Written before the jobs, so no job of it is ever unlisted; a job it
        names that was never written is left out of the listing. Written again (a keyed
        batch sent again), the ids join those there."""
        try:
            self._ddb.update_item(
                TableName=self._table,
                Key=to_item({"pk": keys.listing_pk(listing_id), "sk": keys.LISTING_SK}),
                UpdateExpression=(
                    "SET tenant = if_not_exists(tenant, :tenant),"
                    " created_key = if_not_exists(created_key, :created) ADD job_ids :ids"
                ),
                ConditionExpression="attribute_not_exists(pk) OR tenant = :tenant",
                ExpressionAttributeValues=expression_values(
                    tenant=tenant, created=f"{to_ms(now):013d}#{listing_id}", ids=set(job_ids)
                ),
            )
        except ClientError as error:
            if condition_failed(error):
                raise RuntimeError(f"listing {listing_id} is another tenant's") from error
            raise

    def _listed_jobs(self, tenant: str, start: dict[str, Any] | None, page_size: int) -> Iterator[_Listed]:
        """Every job the tenant index lists for `tenant`, newest first, after `start` (a
        cursor's key): a job's own entry, or each job of a listing's."""
        exclusive = None
        if start is not None:
            entry = {name: start[name] for name in _TENANT_ENTRY}
            if "at" in start:
                [listing] = self._items_of([to_item(entry)], ("job_ids",))
                yield from _jobs_in(entry, listing, start["at"])
            exclusive = to_item(entry)
        query: dict[str, Any] = {
            "TableName": self._table,
            "IndexName": TENANT_INDEX,
            "KeyConditionExpression": "tenant = :tenant",
            "ExpressionAttributeValues": expression_values(tenant=tenant),
            "ScanIndexForward": False,
            "Limit": page_size,
        }
        while True:
            request = query | ({"ExclusiveStartKey": exclusive} if exclusive else {})
            page = self._ddb.query(**request)
            for entry in page.get("Items", []):
                at = {name: from_value(entry[name]) for name in _TENANT_ENTRY}
                if _is_listing(entry):  # read when the listing reaches it: a page may stop in one
                    [listing] = self._items_of([entry], ("job_ids",))
                    yield from _jobs_in(at, listing, 0)
                else:
                    yield _Listed({"pk": entry["pk"], "sk": entry["sk"]}, at, on_its_own=True)
            if "LastEvaluatedKey" not in page:
                return
            exclusive = page["LastEvaluatedKey"]

    def _jobs_of(
        self,
        listed: Sequence[_Listed],
        tenant: str,
        keep: Callable[[dict[str, Any]], bool] | None,
        wanted: int,
    ) -> list[dict[str, Any] | None]:
        """The items of `listed`, in their order; None for a job gone, no longer listed there
        (`_Listed.lists`), or not kept. With `keep`, the filter reads only the attributes it
        looks at (a page may read up to `FILTERED_READ_BUDGET` jobs, each up to 256 KiB: in
        full, that could fill the function's memory); only the first `wanted` kept jobs are
        read whole."""
        job_keys = [slot.job_key for slot in listed]
        if keep is None:
            whole = self._items_of(job_keys)
            return [
                item if item is not None and slot.lists(item, tenant) else None
                for slot, item in zip(listed, whole, strict=True)
            ]
        brief = self._items_of(job_keys, _FILTERED_ATTRIBUTES)
        kept = [
            n
            for n, (slot, item) in enumerate(zip(listed, brief, strict=True))
            if item is not None and slot.lists(item, tenant) and keep(item)
        ][:wanted]
        items: list[dict[str, Any] | None] = [None] * len(listed)
        for n, item in zip(kept, self._items_of([job_keys[n] for n in kept]), strict=True):
            items[n] = item if item is not None and listed[n].lists(item, tenant) and keep(item) else None
        return items

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
        self,
        query: dict[str, Any],
        start: dict[str, Any] | None,
        limit: int,
        keep: Callable[[dict[str, Any]], bool] | None = None,
    ) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
        """One page of a listing: up to `limit` items and the key to resume after (None at
        the end). A query of a keys-only index reads the items from the table (BatchGetItem);
        with `keep`, only the items it keeps count. A filtered listing (`FilterExpression` or `keep`)
        reads at most `FILTERED_READ_BUDGET` entries per page: a page may then hold fewer than
        `limit` items, even none, and still a `next_cursor`, which the caller follows."""
        key_names = ("pk", "sk", *self._index_keys(query.get("IndexName")))
        exclusive = to_item(start) if start else None
        keys_only = query.get("IndexName") in (TENANT_INDEX, DUE_INDEX)
        budget = FILTERED_READ_BUDGET if (keep is not None or "FilterExpression" in query) else None
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
            if keys_only and keep is not None:
                items = self._kept_items_of(entries, keep, limit - len(matched))
            else:
                items = self._items_of(entries) if keys_only else list(entries)
            more = "LastEvaluatedKey" in page
            for position, (entry, item) in enumerate(zip(entries, items, strict=True)):
                if item is None or (keep is not None and not keep(item)):
                    continue
                matched.append(item)
                if len(matched) == limit:
                    if position == len(entries) - 1 and not more:
                        return matched, None
                    return matched, {name: from_value(entry[name]) for name in key_names}
            if not more:
                return matched, None
            exclusive = page["LastEvaluatedKey"]
            if budget is not None and budget <= 0:
                return matched, {k: from_value(v) for k, v in exclusive.items()}

    def _kept_items_of(
        self, entries: Sequence[Mapping[str, Any]], keep: Callable[[dict[str, Any]], bool], wanted: int
    ) -> list[dict[str, Any] | None]:
        """`_items_of` for a filtered listing: the filter reads only the attributes it looks at
        (a page may read up to `FILTERED_READ_BUDGET` jobs, each up to 256 KiB: in full, that
        could fill the function's memory); only the first `wanted` kept jobs are read whole.
        None in the place of every other entry."""
        brief = self._items_of(entries, _FILTERED_ATTRIBUTES)
        kept = [n for n, item in enumerate(brief) if item is not None and keep(item)][:wanted]
        whole = self._items_of([entries[n] for n in kept])
        items: list[dict[str, Any] | None] = [None] * len(entries)
        for n, item in zip(kept, whole, strict=True):
            items[n] = item if item is not None and keep(item) else None
        return items
