"""A tenant's jobs (and workflows), a page at a time behind opaque cursors: the `by_tenant`
index, whose entries are jobs' own or batches' listings (`list_together`: one item lists a
batch's jobs, one index entry for them all instead of a write unit a job)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from itertools import chain, islice
from typing import Any

from botocore.exceptions import ClientError

from scheduler_core.adapters.dynamodb.codec import expression_values, from_value, to_item
from scheduler_core.adapters.dynamodb.cursors import decode_cursor, encode_cursor
from scheduler_core.adapters.dynamodb.table import TENANT_INDEX, TableAdapter, condition_failed
from scheduler_core.domain import keys
from scheduler_core.domain.clock import to_ms
from scheduler_core.domain.entities import Job
from scheduler_core.domain.vocabulary import JobStatus
from scheduler_core.ports import CursorNotValid, Page

# The most jobs, and batches' listings, one page of the job listing reads, and the most runs
# a filtered page of a job's runs reads: a filter (DynamoDB filters after reading), or ids of
# writes that failed, may leave fewer than `limit` in them.
FILTERED_READ_BUDGET = 1_000
# What the job listing's filters look at, and where a job is listed.
_FILTERED_ATTRIBUTES = ("status", "name", "tenant", "tenant_id", "kind")
# A tenant index entry's key, as a cursor holds it; one inside a listing adds `after`.
_TENANT_ENTRY = ("pk", "sk", "tenant", "created_key")
# The most jobs a filtered page reads at a time, and the most listings one read asks for.
_LISTING_PAGE = 100
# What a page reads of a listing item: whose it is, and the jobs it lists.
_LISTING_ATTRIBUTES = ("job_ids", "tenant")


@dataclass(frozen=True)
class _Listed:
    """A job as the tenant index lists it: its item's key, the cursor key that resumes after
    it, and whether an entry of its own lists it or a listing's."""

    job_key: dict[str, Any]
    resume: dict[str, Any]
    on_its_own: bool

    def lists(self, item: Mapping[str, Any], tenant: str) -> bool:
        """Whether the job `item` is still listed here: a job keeps the entry of its own (in
        `tenant`); a listing's job is listed by it while it has none (`tenant_id`, a job's)."""
        if self.on_its_own:
            return bool(item.get("tenant", {}).get("S") == tenant)
        return "tenant" not in item and "kind" not in item and item.get("tenant_id", {}).get("S") == tenant


@dataclass
class _Reads:
    """What a page has read: jobs and listings, against `FILTERED_READ_BUDGET`."""

    count: int = 0

    @property
    def left(self) -> int:
        return FILTERED_READ_BUDGET - self.count


def _is_listing(entry: Mapping[str, Any]) -> bool:
    return str(entry["pk"]["S"]).startswith(keys.LISTING_PK_PREFIX)


def _cursor_key(cursor: str, tenant: str) -> dict[str, Any]:
    key = decode_cursor(cursor, _TENANT_ENTRY, optional=("after",))
    if not all(isinstance(value, str) for value in key.values()):
        raise CursorNotValid("a key value that is not a string")
    if key["tenant"] != tenant:
        raise CursorNotValid("another tenant's")
    if "after" in key and not key["pk"].startswith(keys.LISTING_PK_PREFIX):
        raise CursorNotValid("not a place in a listing")
    return key


def _jobs_in(
    entry: dict[str, Any], listing: Mapping[str, Any] | None, tenant: str, after: str | None = None
) -> Iterator[_Listed]:
    """The jobs a listing item lists, newest id first (as the index orders jobs made in the
    same millisecond), those after the id `after` if given; none if the item is gone or is
    not `tenant`'s."""
    if listing is None or listing.get("tenant", {}).get("S") != tenant:
        return
    ids = sorted(
        (job_id for job_id in listing.get("job_ids", {}).get("SS", []) if after is None or job_id < after),
        reverse=True,
    )
    for n, job_id in enumerate(ids):
        resume = {**entry, "after": job_id} if n + 1 < len(ids) else entry
        yield _Listed(to_item({"pk": keys.job_pk(job_id), "sk": keys.JOB_SK}), resume, on_its_own=False)


class JobListingTable(TableAdapter):
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
        entry): a page reads index keys, then the jobs themselves with BatchGetItem, and
        filters those. An entry is a job's, or a batch's listing, whose jobs come in its
        place, newest id first; a cursor inside one names the last job it returned
        (`after`). A page reads at most `FILTERED_READ_BUDGET` jobs and listings: it may
        hold fewer than `limit` jobs, even none, and still a `next_cursor`."""
        start = _cursor_key(cursor, tenant) if cursor else None

        def wanted(item: dict[str, Any]) -> bool:
            # The index holds keys only: status and name are the item's, read after the index.
            return (status is None or item["status"]["S"] == str(status)) and (
                name_prefix is None or item["name"]["S"].startswith(name_prefix)
            )

        filtered = status is not None or name_prefix is not None
        reads = _Reads()
        slots: Iterator[_Listed] = self._listed_jobs(tenant, start, min(limit, _LISTING_PAGE) + 1, reads)
        jobs: list[Job] = []
        while True:
            size = min(_LISTING_PAGE if filtered else limit - len(jobs), max(reads.left, 1))
            chunk = list(islice(slots, size))
            if not chunk:
                return Page(jobs, None)
            found = self._jobs_of(chunk, tenant, wanted if filtered else None, limit - len(jobs))
            reads.count += len(found)
            slots = chain(chunk[len(found) :], slots)  # those not read whole yet: next time
            for position, (slot, item) in enumerate(zip(chunk, found, strict=False)):
                if item is None:
                    continue
                jobs.append(self._codec.job_from_item(item))
                if len(jobs) == limit:
                    more = position < len(chunk) - 1 or next(slots, None) is not None
                    return Page(jobs, encode_cursor(slot.resume) if more else None)
            if reads.left <= 0:
                more = next(slots, None) is not None
                return Page(jobs, encode_cursor(chunk[len(found) - 1].resume) if more else None)

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

    def _listed_jobs(
        self, tenant: str, start: dict[str, Any] | None, page_size: int, reads: _Reads
    ) -> Iterator[_Listed]:
        """Every job the tenant index lists for `tenant`, newest first, after `start` (a
        cursor's key): a job's own entry, or each job of a listing's. A listing is read when
        the listing reaches it, with the next ones of its index page, twice as many each
        time (a page of a big batch reads one, of many small ones a few reads)."""
        exclusive = None
        if start is not None:
            entry = {name: start[name] for name in _TENANT_ENTRY}
            if "after" in start:
                [listing] = self._listings([to_item(entry)], reads)
                yield from _jobs_in(entry, listing, tenant, start["after"])
            exclusive = to_item(entry)
        query: dict[str, Any] = {
            "TableName": self._table,
            "IndexName": TENANT_INDEX,
            "KeyConditionExpression": "tenant = :tenant",
            "ExpressionAttributeValues": expression_values(tenant=tenant),
            "ScanIndexForward": False,
            "Limit": page_size,
        }
        ahead = 1
        while True:
            page = self._ddb.query(**query | ({"ExclusiveStartKey": exclusive} if exclusive else {}))
            entries = page.get("Items", [])
            listings = [entry for entry in entries if _is_listing(entry)]
            read: dict[str, Mapping[str, Any] | None] = {}
            for entry in entries:
                at = {name: from_value(entry[name]) for name in _TENANT_ENTRY}
                if not _is_listing(entry):
                    yield _Listed({"pk": entry["pk"], "sk": entry["sk"]}, at, on_its_own=True)
                    continue
                if entry["pk"]["S"] not in read:
                    unread = [other for other in listings if other["pk"]["S"] not in read][:ahead]
                    found = self._listings(unread, reads)
                    read |= {other["pk"]["S"]: item for other, item in zip(unread, found, strict=True)}
                    ahead = min(ahead * 2, _LISTING_PAGE)
                yield from _jobs_in(at, read[entry["pk"]["S"]], tenant)
            if "LastEvaluatedKey" not in page:
                return
            exclusive = page["LastEvaluatedKey"]

    def _listings(self, entries: Sequence[Mapping[str, Any]], reads: _Reads) -> list[dict[str, Any] | None]:
        """The listing items of `entries` (None where one is gone), counted in `reads`."""
        reads.count += len(entries)
        return self._items_of(entries, _LISTING_ATTRIBUTES)

    def _jobs_of(
        self,
        listed: Sequence[_Listed],
        tenant: str,
        keep: Callable[[dict[str, Any]], bool] | None,
        wanted: int,
    ) -> list[dict[str, Any] | None]:
        """The items of `listed`, in their order, None for a job gone, no longer listed there
        (`_Listed.lists`), or not kept. With `keep`, the filter reads only the attributes it
        looks at (a page may read up to `FILTERED_READ_BUDGET` jobs, each up to 256 KiB: in
        full, that could fill the function's memory), then the kept jobs whole, up to the
        `wanted`th: the answer stops there (those after it are for the next call)."""
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
        ]
        items: list[dict[str, Any] | None] = [None] * (
            kept[wanted - 1] + 1 if len(kept) > wanted else len(listed)
        )
        read = kept[:wanted]
        for n, item in zip(read, self._items_of([job_keys[n] for n in read]), strict=True):
            items[n] = item if item is not None and listed[n].lists(item, tenant) and keep(item) else None
        return items
