"""The jobs table on DynamoDB (DESIGN §2): jobs, runs and shard watermarks in one table.

Every write that can race states its condition in its name (`claim_if_unchanged`,
`start_run_if_waiting`, ...). A failed condition means someone else won: the method
returns False/None and the caller moves on. Throttling and transaction conflicts raise
`StoreContention` so callers can leave the work for the next attempt.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.exceptions import ClientError
from pydantic import ValidationError

from scheduler_core import keys, run_state
from scheduler_core.aws import AwsClients
from scheduler_core.clock import from_ms, to_ms
from scheduler_core.cursors import decode_cursor, encode_cursor
from scheduler_core.errors import InvalidRequest, field_error
from scheduler_core.model import Job, JobStatus, Overlap, Run, RunStatus
from scheduler_core.observability import logger
from scheduler_core.overlap import waits_behind_another
from scheduler_core.ports import DueItems, Page, RunRef, SlotsChanged, StoreContention

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

DUE_INDEX = "due"
TENANT_INDEX = "by_tenant"
_CONTENTION_CODES = {
    "ProvisionedThroughputExceededException",
    "ThrottlingException",
    "RequestLimitExceeded",
    "TransactionConflictException",
    "TransactionInProgressException",
    "InternalServerError",
}
# The claim's condition: the job is still scheduled, at the version and firing we read.
_UNCHANGED_SINCE_READ = "version = :seen AND due_sk = :seen_fire AND #status = :scheduled"
_RUN_EXISTS = "attribute_exists(sk)"
_RUN_ABSENT = "attribute_not_exists(sk)"
_RUNNING_ATTEMPT = "#status = :running AND attempt = :attempt"
# A running attempt still held by the worker that started it: the fencing of every finish.
_HELD_BY_OWNER = f"{_RUNNING_ATTEMPT} AND lease_owner = :owner"
# A job its last run's end completes: SCHEDULED or PAUSED, with no next firing (what
# `lifecycle.is_last` reads as `next_fire_at`). A scheduled job's next firing is also its due
# index entry; a paused job keeps its next firing out of the index, so a job paused while its
# last run was calling its target completes too, and one with firings left stays PAUSED.
_ACTIVE_WITH_NOTHING_LEFT_TO_FIRE = (
    "#status IN (:scheduled, :paused) AND attribute_not_exists(next_fire_at_ms)"
)
_LEASE_AND_TIMER = ("lease_until_ms", "lease_owner", "due_pk", "due_sk", "next_attempt_at_ms", "slot")
# A running attempt that holds one of its job's running slots (`slot`: see `overlap`).
_HOLDS_SLOT = "attribute_exists(slot)"
# Pauses (seconds) before a transaction cancelled by contention on its items is tried again.
_CONTENTION_PAUSES = (0.02, 0.1)
# Pauses (seconds) before keys a BatchGetItem left unprocessed are asked again: throttling,
# or a reply past its 16 MB (100 jobs of a few hundred KB take two or three rounds).
_UNPROCESSED_PAUSES = (0.0, 0.05, 0.1, 0.2, 0.4, 0.8)
_MAX_ERROR = 2000
_CONTENTION_REASONS = {"TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded"}
# The most items one page of a filtered listing reads (DynamoDB filters after reading).
FILTERED_READ_BUDGET = 1_000
# BatchGetItem's ceiling on keys per request.
_BATCH_GET = 100
# Index entries a poll reads before acting on them (`due_pages`): the items of 10 BatchGetItems.
DUE_PAGE = 1_000
# What the job listing's filters look at (`list_jobs`).
_FILTERED_ATTRIBUTES = ("status", "name")
# Job attributes the owner of the job may not change, and those a job holds only sometimes.
_IMMUTABLE_JOB_ATTRIBUTES = frozenset({"pk", "sk", "job_id", "tenant", "created_key", "created_at_ms"})
_OPTIONAL_JOB_ATTRIBUTES = ("due_pk", "due_sk", "next_fire_at_ms", "paused_at_ms")
# The job's caught-up firings waiting their turn for a running slot, oldest first (`overlap`).
_CATCH_UP_QUEUE = "catch_up_ms"
_JOIN_CATCH_UP_QUEUE = f"{_CATCH_UP_QUEUE} = list_append(if_not_exists({_CATCH_UP_QUEUE}, :no_runs), :queued)"
_serializer = TypeSerializer()
_deserializer = TypeDeserializer()


def _to_item(values: Mapping[str, Any]) -> dict[str, Any]:
    return {name: _serializer.serialize(value) for name, value in values.items() if value is not None}


def _from_item(item: Mapping[str, Any]) -> dict[str, Any]:
    return {name: _deserializer.deserialize(value) for name, value in item.items()}


def _values(**values: Any) -> dict[str, Any]:
    """Expression attribute values: `_values(seen=3)` → `{":seen": {"N": "3"}}`."""
    return {f":{name}": _serializer.serialize(value) for name, value in values.items()}


def _error_code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


def _is_contention(error: ClientError) -> bool:
    """Throttling, a transaction conflict, or DynamoDB failing on its side (5xx, after
    botocore's own retries): worth trying again later, not a verdict on the request."""
    status = int(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))
    return _error_code(error) in _CONTENTION_CODES or status >= 500


def _condition_failed(error: ClientError) -> bool:
    return _error_code(error) == "ConditionalCheckFailedException"


def _status_in_values(target: RunStatus) -> tuple[str, dict[str, Any]]:
    """`#status IN (...)` of every status the run state machine lets move to `target`, with
    its (unserialized) values."""
    return _status_one_of_values(run_state.sources_of(target))


def _holds_slot(run: RunRef) -> bool:
    """Whether `run` is an attempt that holds one of its job's running slots (a queue message
    never says so: only a run as its start wrote it)."""
    return isinstance(run, Run) and run.holds_slot


def _status_one_of_values(statuses: Collection[RunStatus]) -> tuple[str, dict[str, Any]]:
    names = {f"src{i}": str(status) for i, status in enumerate(sorted(statuses))}
    return f"#status IN ({', '.join(':' + n for n in names)})", names


class DynamoJobStore:
    """`JobStore` on one DynamoDB table."""

    def __init__(
        self,
        clients: AwsClients,
        table_name: str,
        shard_count: int,
        retention_days: int,
        due_page: int = DUE_PAGE,
    ) -> None:
        """`due_page`: index entries `due_pages` reads before handing them on."""
        self._clients = clients
        self._table = table_name
        self._shards = shard_count
        self._retention = timedelta(days=retention_days)
        self._due_page_size = due_page

    @property
    def _ddb(self) -> DynamoDBClient:
        return self._clients.dynamodb()

    # --- jobs -----------------------------------------------------------------------

    def _job_item(self, job: Job) -> dict[str, Any]:
        values: dict[str, Any] = {
            "pk": keys.job_pk(job.job_id),
            "sk": keys.JOB_SK,
            "job_id": job.job_id,
            "tenant": job.tenant,
            "created_key": f"{to_ms(job.created_at):013d}#{job.job_id}",
            "name": job.name,
            "status": str(job.status),
            "priority": str(job.priority),
            "version": job.version,
            "created_at_ms": to_ms(job.created_at),
            "updated_at_ms": to_ms(job.updated_at),
            # UTF-8, not \u escapes: a payload of non-ASCII text stays the size it was sent.
            "spec": json.dumps(
                job.model_dump(
                    mode="json",
                    include={
                        "schedule",
                        "target",
                        "payload",
                        "retry",
                        "concurrency",
                        "misfire",
                        "catch_up_window_seconds",
                    },
                ),
                separators=(",", ":"),
                ensure_ascii=False,
            ),
        }
        if job.next_fire_at is not None:
            fire_ms = to_ms(job.next_fire_at)
            values["next_fire_at_ms"] = fire_ms
            # Only a scheduled job waits in the due index; a paused one keeps its next firing
            # (where a resume carries on from) out of it.
            if job.status is JobStatus.SCHEDULED:
                values |= {
                    "due_pk": keys.due_pk(fire_ms, keys.shard_for(job.job_id, self._shards)),
                    "due_sk": fire_ms,
                }
        if job.paused_at is not None:
            values["paused_at_ms"] = to_ms(job.paused_at)
        return _to_item(values)

    @staticmethod
    def _job_from_item(item: Mapping[str, Any]) -> Job:
        raw = _from_item(item)
        spec = json.loads(raw["spec"])
        next_fire = raw.get("next_fire_at_ms")
        paused = raw.get("paused_at_ms")
        return Job.model_validate(
            {
                **spec,
                "job_id": raw["job_id"],
                "tenant": raw["tenant"],
                "name": raw["name"],
                "status": raw["status"],
                "priority": raw["priority"],
                "version": int(raw["version"]),
                "next_fire_at": from_ms(int(next_fire)) if next_fire is not None else None,
                "created_at": from_ms(int(raw["created_at_ms"])),
                "updated_at": from_ms(int(raw["updated_at_ms"])),
                "paused_at": from_ms(int(paused)) if paused is not None else None,
                "running_count": int(raw.get("running_count", 0)),
                "buffered_run_ms": int(raw["buffered_run_ms"]) if "buffered_run_ms" in raw else None,
                "catch_up_queue_ms": [int(ms) for ms in raw.get(_CATCH_UP_QUEUE, [])],
            }
        )

    def put_job_if_absent(self, job: Job) -> bool:
        """Write a new job; False if a job with its id exists already."""
        try:
            self._ddb.put_item(
                TableName=self._table,
                Item=self._job_item(job),
                ConditionExpression="attribute_not_exists(pk)",
            )
        except ClientError as error:
            if _condition_failed(error):
                return False
            raise
        return True

    def get_job(self, job_id: str) -> Job | None:
        reply = self._ddb.get_item(
            TableName=self._table,
            Key=_to_item({"pk": keys.job_pk(job_id), "sk": keys.JOB_SK}),
            ConsistentRead=True,
        )
        item = reply.get("Item")
        return self._job_from_item(item) if item else None

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
        filters those. A filtered page reads at most `FILTERED_READ_BUDGET` index entries: it
        may hold fewer than `limit` jobs, even none, and still a `next_cursor`."""
        query: dict[str, Any] = {
            "TableName": self._table,
            "IndexName": TENANT_INDEX,
            "KeyConditionExpression": "tenant = :tenant",
            "ExpressionAttributeValues": _values(tenant=tenant),
            "ScanIndexForward": False,
        }

        def wanted(item: dict[str, Any]) -> bool:
            # The index holds keys only: status and name are the item's, read after the index.
            return (status is None or item["status"]["S"] == str(status)) and (
                name_prefix is None or item["name"]["S"].startswith(name_prefix)
            )

        start = decode_cursor(cursor, ("pk", "sk", *self._index_keys(TENANT_INDEX))) if cursor else None
        if start is not None and start.get("tenant") != tenant:
            raise InvalidRequest("cursor belongs to another listing", [field_error("cursor", "not yours")])
        filtered = status is not None or name_prefix is not None
        items, resume_key = self._page(query, start, limit, keep=wanted if filtered else None)
        return Page(
            [self._job_from_item(item) for item in items], encode_cursor(resume_key) if resume_key else None
        )

    def _items_of(
        self, entries: Sequence[Mapping[str, Any]], attributes: Sequence[str] = ()
    ) -> list[dict[str, Any] | None]:
        """The items of index entries (only `attributes` of them, if given), in their order;
        None where the item is gone."""
        found = self._get_items([{"pk": entry["pk"], "sk": entry["sk"]} for entry in entries], attributes)
        return [found.get((entry["pk"]["S"], entry["sk"]["S"])) for entry in entries]

    def _get_items(
        self, keys: Sequence[Mapping[str, Any]], attributes: Sequence[str] = ()
    ) -> dict[tuple[str, str], dict[str, Any]]:
        """The items of `keys` (strongly consistent, BatchGetItem 100 keys at a time; only
        `attributes` of them, plus their keys, if given), by (pk, sk); a key with no item is
        left out. Keys DynamoDB leaves unprocessed (throttling, a reply's 16 MB) are asked
        again, with growing pauses (`_UNPROCESSED_PAUSES`); then StoreContention."""
        found: dict[tuple[str, str], dict[str, Any]] = {}
        request: Any = {"ConsistentRead": True}  # boto3's KeysAndAttributes
        if attributes:
            names = {f"#a{n}": name for n, name in enumerate(("pk", "sk", *attributes))}
            request |= {"ProjectionExpression": ", ".join(names), "ExpressionAttributeNames": names}
        for first in range(0, len(keys), _BATCH_GET):
            pending: list[Mapping[str, Any]] = list(keys[first : first + _BATCH_GET])
            for pause in (*_UNPROCESSED_PAUSES, None):
                try:
                    reply = self._ddb.batch_get_item(RequestItems={self._table: request | {"Keys": pending}})
                except ClientError as error:
                    if _is_contention(error):
                        raise StoreContention(str(error)) from error
                    raise
                for item in reply.get("Responses", {}).get(self._table, []):
                    found[(item["pk"]["S"], item["sk"]["S"])] = item
                unprocessed: Mapping[str, Any] = reply.get("UnprocessedKeys", {}).get(self._table, {})
                pending = list(unprocessed.get("Keys", []))
                if not pending:
                    break
                if pause is None:
                    raise StoreContention(f"{len(pending)} keys left unprocessed by BatchGetItem")
                time.sleep(pause)
        return found

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
        exclusive = _to_item(start) if start else None
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
                    return matched, {name: _deserializer.deserialize(entry[name]) for name in key_names}
            if not more:
                return matched, None
            exclusive = page["LastEvaluatedKey"]
            if budget is not None and budget <= 0:
                return matched, {k: _deserializer.deserialize(v) for k, v in exclusive.items()}

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

    def _query_items(
        self, query: dict[str, Any], start: dict[str, Any] | None
    ) -> Iterator[tuple[dict[str, Any], dict[str, Any] | None]]:
        """Items of a query across pages, each with the key to resume after it (None when
        it is the very last item)."""
        key_names = ("pk", "sk", *self._index_keys(query.get("IndexName")))
        exclusive = _to_item(start) if start else None
        while True:
            request = dict(query) | ({"ExclusiveStartKey": exclusive} if exclusive else {})
            page = self._ddb.query(**request)
            items = page.get("Items", [])
            more = "LastEvaluatedKey" in page
            for position, item in enumerate(items):
                last = position == len(items) - 1 and not more
                resume = None if last else {k: _deserializer.deserialize(item[k]) for k in key_names}
                yield item, resume
            if not more:
                return
            exclusive = page["LastEvaluatedKey"]

    @staticmethod
    def _index_keys(index: str | None) -> tuple[str, ...]:
        return {DUE_INDEX: ("due_pk", "due_sk"), TENANT_INDEX: ("tenant", "created_key")}.get(index or "", ())

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
            "ExpressionAttributeValues": _values(bucket=bucket, until=until_ms),
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
            if _is_contention(error):
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
                    due.jobs.append(self._job_from_item(item))
                elif item["sk"]["S"].startswith(keys.RUN_SK_PREFIX):
                    due.runs.append(self._run_from_item(item))
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
        values = _values(
            one=1, now=to_ms(now), seen=job.version, seen_fire=to_ms(job.next_fire_at), scheduled="SCHEDULED"
        )
        if catch_up:
            update += f", {_JOIN_CATCH_UP_QUEUE}"
            values |= _values(no_runs=[], queued=[run.scheduled_for_ms])
        if next_fire_at is None:
            update += " REMOVE due_pk, due_sk, next_fire_at_ms"
        else:
            next_ms = to_ms(next_fire_at)
            update += ", due_pk = :next_pk, due_sk = :next_ms, next_fire_at_ms = :next_ms"
            values |= _values(
                next_pk=keys.due_pk(next_ms, keys.shard_for(job.job_id, self._shards)), next_ms=next_ms
            )
        try:
            self._ddb.transact_write_items(
                TransactItems=[
                    {
                        "Update": {
                            "TableName": self._table,
                            "Key": _to_item({"pk": keys.job_pk(job.job_id), "sk": keys.JOB_SK}),
                            "UpdateExpression": update,
                            "ConditionExpression": _UNCHANGED_SINCE_READ,
                            "ExpressionAttributeNames": {"#status": "status"},
                            "ExpressionAttributeValues": values,
                        }
                    },
                    {
                        "Put": {
                            "TableName": self._table,
                            "Item": self._run_item(run, now),
                            "ConditionExpression": _RUN_ABSENT,
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

    def cancel_job_if_active(self, job_id: str, now: datetime) -> bool:
        """SCHEDULED/PAUSED → CANCELLED and out of the due index. False if it was not active."""
        return self._update_job_if(
            job_id,
            "SET #status = :cancelled, version = version + :one, updated_at_ms = :now"
            " REMOVE due_pk, due_sk, next_fire_at_ms",
            "#status IN (:scheduled, :paused)",
            _values(cancelled="CANCELLED", one=1, now=to_ms(now), scheduled="SCHEDULED", paused="PAUSED"),
        )

    def _update_job_if(self, job_id: str, update: str, condition: str, values: dict[str, Any]) -> bool:
        try:
            self._ddb.update_item(
                TableName=self._table,
                Key=_to_item({"pk": keys.job_pk(job_id), "sk": keys.JOB_SK}),
                UpdateExpression=update,
                ConditionExpression=f"attribute_exists(pk) AND {condition}",
                ExpressionAttributeNames={"#status": "status"},
                ExpressionAttributeValues=values,
            )
        except ClientError as error:
            if _condition_failed(error):
                return False
            raise
        return True

    # --- runs -----------------------------------------------------------------------

    def _run_item(self, run: Run, now: datetime) -> dict[str, Any]:
        scheduled_ms = run.scheduled_for_ms
        return _to_item(
            {
                "pk": keys.job_pk(run.job_id),
                "sk": keys.run_sk(scheduled_ms),
                "run_id": run.run_id,
                "job_id": run.job_id,
                "status": str(run.status),
                "trigger": str(run.trigger),
                "priority": str(run.priority),
                "scheduled_for_ms": scheduled_ms,
                "attempt": run.attempt,
                "first_attempt": run.first_attempt,
                "next_attempt_at_ms": to_ms(run.next_attempt_at) if run.next_attempt_at else None,
                "caught_up": True if run.caught_up else None,
                "created_at_ms": to_ms(now),
                "expires_at": self._expiry(run.scheduled_for),
                **(self._due_attributes(run.job_id, run.due_at) if run.due_at else {}),
            }
        )

    def _due_attributes(self, job_id: str, when: datetime) -> dict[str, Any]:
        """The due index keys that make the poller look at a job's item at `when`."""
        when_ms = to_ms(when)
        return {"due_pk": keys.due_pk(when_ms, keys.shard_for(job_id, self._shards)), "due_sk": when_ms}

    def _expiry(self, when: datetime) -> int:
        """TTL (epoch seconds) that keeps run history for the retention period."""
        return int((when + self._retention).timestamp())

    @staticmethod
    def _run_from_item(item: Mapping[str, Any]) -> Run:
        raw = _from_item(item)

        def time_of(name: str) -> datetime | None:
            return from_ms(int(raw[name])) if name in raw else None

        return Run(
            run_id=raw["run_id"],
            job_id=raw["job_id"],
            status=raw["status"],
            trigger=raw["trigger"],
            priority=raw["priority"],
            scheduled_for=from_ms(int(raw["scheduled_for_ms"])),
            attempt=int(raw["attempt"]),
            first_attempt=int(raw.get("first_attempt", 1)),
            next_attempt_at=time_of("next_attempt_at_ms"),
            due_at=time_of("due_sk"),
            lease_until=time_of("lease_until_ms"),
            started_at=time_of("started_at_ms"),
            finished_at=time_of("finished_at_ms"),
            lateness_ms=int(raw["lateness_ms"]) if "lateness_ms" in raw else None,
            error=raw.get("error"),
            response_code=int(raw["response_code"]) if "response_code" in raw else None,
            holds_slot=bool(raw.get("slot", False)),
            caught_up=bool(raw.get("caught_up", False)),
            delivered_at=time_of("delivered_at_ms"),
            delivered_code=int(raw["delivered_code"]) if "delivered_code" in raw else None,
        )

    def _run_key(self, job_id: str, scheduled_for_ms: int) -> dict[str, Any]:
        return _to_item({"pk": keys.job_pk(job_id), "sk": keys.run_sk(scheduled_for_ms)})

    def get_run(self, job_id: str, scheduled_for_ms: int) -> Run | None:
        reply = self._ddb.get_item(
            TableName=self._table, Key=self._run_key(job_id, scheduled_for_ms), ConsistentRead=True
        )
        item = reply.get("Item")
        return self._run_from_item(item) if item else None

    def get_job_and_run(self, job_id: str, scheduled_for_ms: int) -> tuple[Job | None, Run | None]:
        """A job and one of its runs, read together (one consistent BatchGetItem)."""
        job_key = _to_item({"pk": keys.job_pk(job_id), "sk": keys.JOB_SK})
        run_key = self._run_key(job_id, scheduled_for_ms)
        job, run = self._items_of([job_key, run_key])
        return (self._job_from_item(job) if job else None, self._run_from_item(run) if run else None)

    def list_runs(self, job_id: str, limit: int, cursor: str | None, status: RunStatus | None = None) -> Page:
        """Newest first (by scheduled time), optionally only those in `status` (a filter:
        see `_page` for what it costs)."""
        start = decode_cursor(cursor, ("pk", "sk")) if cursor else None
        if start is not None and start.get("pk") != keys.job_pk(job_id):
            raise InvalidRequest(
                "cursor belongs to another listing", [field_error("cursor", "not for this job")]
            )
        query: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :run)",
            "ExpressionAttributeValues": _values(pk=keys.job_pk(job_id), run=keys.RUN_SK_PREFIX),
            "ScanIndexForward": False,
            "Limit": limit,
        }
        if status is not None:
            query["FilterExpression"] = "#status = :status"
            query["ExpressionAttributeNames"] = {"#status": "status"}
            query["ExpressionAttributeValues"] |= _values(status=str(status))
        items, resume_key = self._page(query, start, limit)
        return Page(
            [self._run_from_item(item) for item in items], encode_cursor(resume_key) if resume_key else None
        )

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
        values = _values(pk=keys.job_pk(job_id))
        if after is None:
            key_condition = "pk = :pk AND begins_with(sk, :run)"
            values |= _values(run=keys.RUN_SK_PREFIX)
        else:
            key_condition = "pk = :pk AND sk > :after"
            values |= _values(after=keys.run_sk(to_ms(after)))
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
            runs += [self._run_from_item(item) for item in items]
            if "LastEvaluatedKey" not in page:
                break
            exclusive = page["LastEvaluatedKey"]
        return [run for run in runs if statuses is None or run.status in statuses]

    def put_run_if_absent(self, run: Run, now: datetime) -> bool:
        """Write a new run (a manual one, a resume's catch-up run); False if one already
        exists at its time."""
        return self._write_if(
            {"TableName": self._table, "Item": self._run_item(run, now), "ConditionExpression": _RUN_ABSENT},
            put=True,
        )

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
        item = self._job_item(after)
        sets = {name: value for name, value in item.items() if name not in _IMMUTABLE_JOB_ATTRIBUTES}
        removes = [name for name in _OPTIONAL_JOB_ATTRIBUTES if name not in item]
        names = {f"#a{i}": name for i, name in enumerate(sets)}
        values = {f":a{i}": value for i, value in enumerate(sets.values())}
        update = "SET " + ", ".join(f"#a{i} = :a{i}" for i in range(len(sets)))
        if catch_up:
            update += f", {_JOIN_CATCH_UP_QUEUE}"
            values |= _values(no_runs=[], queued=list(catch_up))
        if removes:
            names |= {f"#r{i}": name for i, name in enumerate(removes)}
            update += " REMOVE " + ", ".join(f"#r{i}" for i in range(len(removes)))
        job_update: dict[str, Any] = {
            "TableName": self._table,
            "Key": _to_item({"pk": keys.job_pk(before.job_id), "sk": keys.JOB_SK}),
            "UpdateExpression": update,
            "ConditionExpression": "attribute_exists(pk) AND version = :seen AND #status = :seen_status",
            "ExpressionAttributeNames": names | {"#status": "status"},
            "ExpressionAttributeValues": values
            | _values(seen=before.version, seen_status=str(before.status)),
        }
        if run is None:
            return self._write_if(job_update)
        run_put = {
            "TableName": self._table,
            "Item": self._run_item(run, now),
            "ConditionExpression": _RUN_ABSENT,
        }
        try:
            self._ddb.transact_write_items(TransactItems=[{"Update": job_update}, {"Put": run_put}])  # type: ignore[typeddict-item]
        except ClientError as error:
            if "ConditionalCheckFailed" in self._cancellation_reasons(error, expected=2):
                return False
            raise
        return True

    def _cancellation_reasons(self, error: ClientError, expected: int) -> list[str | None]:
        """The per-item codes of a cancelled transaction; contention raises StoreContention."""
        if _is_contention(error):
            raise StoreContention(str(error)) from error
        if _error_code(error) != "TransactionCanceledException":
            raise error
        cancellations: list[dict[str, Any]] = error.response.get("CancellationReasons", [])  # type: ignore[assignment]
        reasons = [reason.get("Code") for reason in cancellations] + [None] * expected
        if any(reason in _CONTENTION_REASONS for reason in reasons):
            raise StoreContention(f"transaction cancelled: {reasons[:expected]}") from error
        return reasons[:expected]

    def _run_update(
        self,
        job_id: str,
        scheduled_for_ms: int,
        sets: Mapping[str, Any],
        condition: str,
        condition_values: Mapping[str, Any],
        remove: Collection[str] = (),
    ) -> dict[str, Any]:
        """The conditional update of a run: SET `sets` (attribute → value; None values are
        skipped), REMOVE `remove`, if `condition` holds."""
        names = {"#status": "status"}
        values: dict[str, Any] = _values(**condition_values)
        actions = []
        for position, (attribute, value) in enumerate(sets.items()):
            if value is None:
                continue
            names[f"#s{position}"] = attribute
            values |= _values(**{f"s{position}": value})
            actions.append(f"#s{position} = :s{position}")
        update = f"SET {', '.join(actions)}"
        removable = [attribute for attribute in remove if attribute not in sets or sets[attribute] is None]
        if removable:
            names |= {f"#r{position}": attribute for position, attribute in enumerate(removable)}
            update += " REMOVE " + ", ".join(f"#r{position}" for position in range(len(removable)))
        return {
            "TableName": self._table,
            "Key": self._run_key(job_id, scheduled_for_ms),
            "UpdateExpression": update,
            "ConditionExpression": f"{_RUN_EXISTS} AND {condition}",
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
        }

    def _update_run(
        self,
        job_id: str,
        scheduled_for_ms: int,
        sets: Mapping[str, Any],
        condition: str,
        condition_values: Mapping[str, Any],
        remove: Collection[str] = (),
    ) -> Run | None:
        """One conditional UpdateItem of a run (see `_run_update`). The run as written, or
        None when the condition failed (someone else moved the run first)."""
        request = self._run_update(job_id, scheduled_for_ms, sets, condition, condition_values, remove)
        try:
            reply = self._ddb.update_item(**request, ReturnValues="ALL_NEW")
        except ClientError as error:
            if _condition_failed(error):
                return None
            if _is_contention(error):
                raise StoreContention(str(error)) from error
            raise
        return self._run_from_item(reply["Attributes"])

    def _end_run(
        self,
        request: dict[str, Any],
        job_id: str,
        now: datetime,
        *,
        complete: bool = False,
        release: bool = False,
    ) -> bool:
        """Apply a run's update that ends its attempt. With `release`, give the attempt's
        running slot back (the request must hold it: `_HOLDS_SLOT`); with `complete`, complete
        the job (its last run has ended). Both are one update of the job item, in the same
        transaction as the run's, so no crash can leave a finished one-off job SCHEDULED
        forever, nor a slot taken by an attempt that ended. False if the run's condition
        failed. A job that cannot complete (cancelled meanwhile, or already completed) stops
        neither the run's update nor the release."""
        variants = [(release, complete)]
        if release and complete:
            variants.append((True, False))
        if release or complete:
            variants.append((False, False))
        for give_back, completing in variants:
            job_update = self._job_end_update(job_id, now, give_back, completing)
            if job_update is None:
                return self._write_if(request)
            reasons = self._transact([{"Update": request}, {"Update": job_update}])
            if not reasons:
                return True
            if reasons[0] == "ConditionalCheckFailed":
                return False
        raise AssertionError("the last variant writes the run alone")

    def _job_end_update(
        self, job_id: str, now: datetime, release: bool, complete: bool
    ) -> dict[str, Any] | None:
        """The job's part of a run's end: a running slot given back, the job completed."""
        if not release and not complete:
            return None
        sets: list[str] = []
        conditions = ["attribute_exists(pk)"]
        values: dict[str, Any] = {"one": 1}
        update: dict[str, Any] = {"TableName": self._table, "Key": self._job_key(job_id)}
        if release:
            sets.append("running_count = running_count - :one")
            conditions.append("running_count >= :one")
        if complete:
            sets += ["#status = :completed", "version = version + :one", "updated_at_ms = :now"]
            conditions.append(_ACTIVE_WITH_NOTHING_LEFT_TO_FIRE)
            values |= {
                "completed": "COMPLETED",
                "now": to_ms(now),
                "scheduled": "SCHEDULED",
                "paused": "PAUSED",
            }
            update["ExpressionAttributeNames"] = {"#status": "status"}
        return update | {
            "UpdateExpression": "SET " + ", ".join(sets),
            "ConditionExpression": " AND ".join(conditions),
            "ExpressionAttributeValues": _values(**values),
        }

    def _transact(self, items: list[dict[str, Any]]) -> list[str | None]:
        """Write `items` in one transaction: [] when it committed, else each item's reason
        (`ConditionalCheckFailed`, or None for an item that was fine). A transaction cancelled
        by contention (another transaction on one of its items, throttling) is tried again
        at once, twice; then StoreContention."""
        for pause in (*_CONTENTION_PAUSES, None):
            try:
                self._ddb.transact_write_items(TransactItems=items)  # type: ignore[arg-type]
            except ClientError as error:
                try:
                    reasons = self._cancellation_reasons(error, expected=len(items))
                except StoreContention:
                    if pause is None:
                        raise
                    time.sleep(pause)
                    continue
                if "ConditionalCheckFailed" not in reasons:
                    raise
                return reasons
            return []
        raise AssertionError("the last try returns or raises")

    def _write_if(self, request: dict[str, Any], put: bool = False) -> bool:
        """One conditional UpdateItem (or PutItem): False when its condition failed (someone
        else won); throttling and conflicts raise StoreContention."""
        try:
            if put:
                self._ddb.put_item(**request)
            else:
                self._ddb.update_item(**request)
        except ClientError as error:
            if _condition_failed(error):
                return False
            if _is_contention(error):
                raise StoreContention(str(error)) from error
            raise
        return True

    def start_run_if_waiting(
        self, run: RunRef, now: datetime, lease_until: datetime, owner: str, timer: datetime | None = None
    ) -> Run | None:
        """PENDING/RETRYING → RUNNING for exactly this attempt, leased to `owner` until
        `lease_until`; the run's timer moves to `timer` if given, else stays where it is. None
        for a duplicate or stale message: the run already started, finished, or moved on to
        another attempt."""
        condition, values = _status_in_values(RunStatus.RUNNING)
        return self._update_run(
            run.job_id,
            run.scheduled_for_ms,
            {
                "status": str(RunStatus.RUNNING),
                "started_at_ms": to_ms(now),
                "lease_until_ms": to_ms(lease_until),
                "lease_owner": owner,
                **(self._due_attributes(run.job_id, timer) if timer else {}),
            },
            f"{condition} AND attempt = :attempt",
            values | {"attempt": run.attempt},
        )

    # --- running slots (a job's concurrency policy; see `overlap`) ---------------------

    def _job_key(self, job_id: str) -> dict[str, Any]:
        return _to_item({"pk": keys.job_pk(job_id), "sk": keys.JOB_SK})

    def _job_write(
        self, job_id: str, sets: list[str], removes: list[str], conditions: list[str], values: dict[str, Any]
    ) -> dict[str, Any]:
        """The job item's part of a transaction: an update (SET `sets`, REMOVE `removes`) if
        `conditions` hold."""
        write: dict[str, Any] = {
            "TableName": self._table,
            "Key": self._job_key(job_id),
            "ConditionExpression": " AND ".join(["attribute_exists(pk)", *conditions]),
            "ExpressionAttributeValues": _values(**values),
        }
        if any("#status" in part for part in (*sets, *conditions)):
            write["ExpressionAttributeNames"] = {"#status": "status"}
        update = f"SET {', '.join(sets)}" if sets else ""
        if removes:
            update += f" REMOVE {', '.join(removes)}"
        return {"Update": write | {"UpdateExpression": update.strip()}}

    def _admit(self, run_request: dict[str, Any], job_write: dict[str, Any]) -> bool:
        """Write a run's admission (started, buffered, skipped) with its condition on the job's
        slots. False if the run's condition failed (a duplicate or stale message); SlotsChanged
        if only the job's did (its slots are no longer as read)."""
        reasons = self._transact([{"Update": run_request}, job_write])
        if not reasons:
            return True
        if reasons[0] == "ConditionalCheckFailed":
            return False
        raise SlotsChanged(f"running slots of job {run_request['Key']['pk']['S']} changed")

    @staticmethod
    def _max_running(job: Job) -> int:
        limit = job.concurrency.max_running
        assert job.concurrency.overlap is not Overlap.ALLOW, "ALLOW counts no slots"
        assert limit is not None
        return limit

    def start_run_in_slot(
        self,
        run: Run,
        job: Job,
        now: datetime,
        lease_until: datetime,
        owner: str,
        timer: datetime | None = None,
    ) -> Run | None:
        """`start_run_if_waiting` for `run` as read, taking one of the job's running slots in
        the same transaction: if the job is still at the version read (not paused, cancelled
        or changed since) and fewer than `concurrency.max_running` slots are taken and, under
        BUFFER_ONE, no other run waits for one. The job's buffered run gives up its place as
        it starts. The run as started (no read after the write); None when the run is not as
        read (a duplicate or stale message, or a late success recorded on it since);
        SlotsChanged when the job is no longer as read."""
        me = run.scheduled_for_ms
        condition, values = _status_in_values(RunStatus.RUNNING)
        request = self._run_update(
            run.job_id,
            me,
            {
                "status": str(RunStatus.RUNNING),
                "started_at_ms": to_ms(now),
                "lease_until_ms": to_ms(lease_until),
                "lease_owner": owner,
                "slot": True,
                **(self._due_attributes(run.job_id, timer) if timer else {}),
            },
            # The run as read: a late success recorded since must not be missed (see `execution`).
            f"{condition} AND attempt = :attempt"
            + ("" if run.delivered_at is not None else " AND attribute_not_exists(delivered_at_ms)"),
            values | {"attempt": run.attempt},
        )
        conditions = ["version = :version", "(attribute_not_exists(running_count) OR running_count < :max)"]
        slot_values: dict[str, Any] = {
            "zero": 0,
            "one": 1,
            "max": self._max_running(job),
            "version": job.version,
        }
        removes = []
        if job.buffered_run_ms == me:
            conditions.append("buffered_run_ms = :me")
            slot_values["me"] = me
            removes.append("buffered_run_ms")
        elif job.concurrency.overlap is Overlap.BUFFER_ONE:
            conditions.append("attribute_not_exists(buffered_run_ms)")
        if job.catch_up_queue_ms[:1] == [me]:  # its turn: it leaves the queue as it starts
            conditions.append(f"{_CATCH_UP_QUEUE}[0] = :me")
            slot_values["me"] = me
            removes.append(f"{_CATCH_UP_QUEUE}[0]")
        sets = ["running_count = if_not_exists(running_count, :zero) + :one"]
        if not self._admit(request, self._job_write(run.job_id, sets, removes, conditions, slot_values)):
            return None
        started = {"status": RunStatus.RUNNING, "started_at": now, "lease_until": lease_until}
        return run.model_copy(update=started | {"holds_slot": True, "due_at": timer or run.due_at})

    def buffer_run_if_waiting(self, run: RunRef, job: Job, due_at: datetime) -> bool:
        """Make the waiting run the job's buffered run (BUFFER_ONE): the one that starts when a
        slot is given back. Only while every slot is taken and no other run waits (as `job`
        was read). Its timer moves to `due_at`: if no slot's release sends its message by
        then, the poller does. False for a duplicate or stale message; SlotsChanged when
        the job's slots are no longer as read."""
        me = run.scheduled_for_ms
        condition, values = _status_one_of_values(run_state.WAITING)
        request = self._run_update(
            run.job_id,
            me,
            self._due_attributes(run.job_id, due_at),
            f"{condition} AND attempt = :attempt",
            values | {"attempt": run.attempt},
        )
        conditions = [
            "running_count >= :max",
            "(attribute_not_exists(buffered_run_ms) OR buffered_run_ms = :me)",
        ]
        job_write = self._job_write(
            run.job_id, ["buffered_run_ms = :me"], [], conditions, {"max": self._max_running(job), "me": me}
        )
        return self._admit(request, job_write)

    def skip_run_if_waiting(
        self, run: RunRef, job: Job, now: datetime, reason: str, complete_job: bool = False
    ) -> bool:
        """PENDING/RETRYING → SKIPPED (`reason` as its error; the target is not called) while
        the job's slots are as `job` was read: every one taken, or (BUFFER_ONE) another run
        waiting for one. The job's buffered run, skipped, gives up its place. `complete_job`:
        this was the job's last run; the job completes in the same transaction. False for a
        duplicate or stale message; SlotsChanged when the job's slots are no longer as read."""
        me = run.scheduled_for_ms
        condition, values = _status_in_values(RunStatus.SKIPPED)
        request = self._run_update(
            run.job_id,
            me,
            {
                "status": str(RunStatus.SKIPPED),
                "finished_at_ms": to_ms(now),
                "expires_at": self._expiry(now),
                "error": reason[:_MAX_ERROR],
            },
            f"{condition} AND attempt = :attempt",
            values | {"attempt": run.attempt},
            remove=_LEASE_AND_TIMER,
        )
        sets: list[str] = []
        removes: list[str] = []
        slot_values: dict[str, Any] = {}
        # With nothing to change on the job, an attribute the conditions hold is rewritten as
        # it is: an update, not a ConditionCheck, which would need one more IAM action.
        if waits_behind_another(job.concurrency, job.buffered_run_ms, me):
            conditions = ["buffered_run_ms = :other"]
            slot_values["other"] = job.buffered_run_ms
            unchanged = "buffered_run_ms = buffered_run_ms"
        else:
            conditions = ["running_count >= :max"]
            unchanged = "running_count = running_count"
            slot_values["max"] = self._max_running(job)
            if job.buffered_run_ms == me:
                conditions.append("buffered_run_ms = :me")
                slot_values["me"] = me
                removes.append("buffered_run_ms")
        if complete_job:
            sets += ["#status = :completed", "version = version + :one", "updated_at_ms = :now"]
            conditions.append(_ACTIVE_WITH_NOTHING_LEFT_TO_FIRE)
            slot_values |= {
                "completed": "COMPLETED",
                "one": 1,
                "now": to_ms(now),
                "scheduled": "SCHEDULED",
                "paused": "PAUSED",
            }
        if not sets and not removes:
            sets.append(unchanged)
        return self._admit(request, self._job_write(run.job_id, sets, removes, conditions, slot_values))

    def leave_catch_up_queue(self, job_id: str, run_ms: int) -> bool:
        """Take `run_ms` off the front of the job's catch-up queue (it ended without starting:
        cancelled, failed), if it still is there."""
        return self._write_if(
            {
                "TableName": self._table,
                "Key": self._job_key(job_id),
                "UpdateExpression": f"REMOVE {_CATCH_UP_QUEUE}[0]",
                "ConditionExpression": f"{_CATCH_UP_QUEUE}[0] = :seen",
                "ExpressionAttributeValues": _values(seen=run_ms),
            }
        )

    def clear_buffered_run(self, job_id: str, run_ms: int) -> bool:
        """Forget the job's buffered run `run_ms` (it ended without starting: cancelled,
        failed), if it still is the buffered one."""
        return self._write_if(
            {
                "TableName": self._table,
                "Key": self._job_key(job_id),
                "UpdateExpression": "REMOVE buffered_run_ms",
                "ConditionExpression": "buffered_run_ms = :seen",
                "ExpressionAttributeValues": _values(seen=run_ms),
            }
        )

    def extend_lease_if_held(self, run: RunRef, owner: str, lease_until: datetime) -> bool:
        """Push the lease (and the watchdog's timer) of a running attempt `owner` still holds."""
        return (
            self._update_run(
                run.job_id,
                run.scheduled_for_ms,
                {"lease_until_ms": to_ms(lease_until), **self._due_attributes(run.job_id, lease_until)},
                _HELD_BY_OWNER,
                {"running": "RUNNING", "attempt": run.attempt, "owner": owner},
            )
            is not None
        )

    def finish_run_if_held(
        self,
        run: RunRef,
        owner: str,
        status: RunStatus,
        now: datetime,
        error: str | None = None,
        response_code: int | None = None,
        lateness_ms: int | None = None,
        complete_job: bool = False,
    ) -> bool:
        """RUNNING → `status` (SUCCEEDED, FAILED, CANCELLED) only for the attempt `owner` holds;
        False if the lease was lost to another attempt (a slow worker cannot finish the run).
        `lateness_ms`: how late the target was called. `complete_job`: this was the job's
        last run; the job becomes COMPLETED in the same transaction."""
        request = self._run_update(
            run.job_id,
            run.scheduled_for_ms,
            {
                "status": str(status),
                "finished_at_ms": to_ms(now),
                "expires_at": self._expiry(now),
                "error": error[:_MAX_ERROR] if error else None,
                "response_code": response_code,
                "lateness_ms": lateness_ms,
            },
            _HELD_BY_OWNER + (f" AND {_HOLDS_SLOT}" if _holds_slot(run) else ""),
            {"running": "RUNNING", "attempt": run.attempt, "owner": owner},
            remove=_LEASE_AND_TIMER,
        )
        return self._end_run(request, run.job_id, now, complete=complete_job, release=_holds_slot(run))

    def record_late_success_if_may_run_again(
        self, run: RunRef, response_code: int | None, now: datetime
    ) -> bool:
        """Remember that an attempt whose lease was lost called the target successfully, on
        a run that may still run again (waiting, running another attempt, or FAILED and
        re-drivable): its next attempt then finishes with this answer instead of a call.
        False when the run ended for good meanwhile (SUCCEEDED, CANCELLED, SKIPPED)."""
        condition, values = _status_one_of_values(
            [RunStatus.PENDING, RunStatus.RETRYING, RunStatus.RUNNING, RunStatus.FAILED]
        )
        sets = {"delivered_at_ms": to_ms(now), "delivered_code": response_code}
        return self._update_run(run.job_id, run.scheduled_for_ms, sets, condition, values) is not None

    def retry_run_if_held(
        self,
        run: RunRef,
        owner: str,
        error: str | None,
        response_code: int | None,
        next_attempt_at: datetime,
        due_at: datetime,
        lateness_ms: int | None = None,
    ) -> Run | None:
        """RUNNING → RETRYING as the next attempt, due at `next_attempt_at`, only for the
        attempt `owner` holds (its running slot, if it holds one, is given back: the retry
        takes one again when it starts). The poller looks at it again at `due_at`."""
        return self._move_to_retry(
            run,
            {
                "status": str(RunStatus.RETRYING),
                "attempt": run.attempt + 1,
                "next_attempt_at_ms": to_ms(next_attempt_at),
                "error": error[:_MAX_ERROR] if error else None,
                "response_code": response_code,
                "lateness_ms": lateness_ms,
                **self._due_attributes(run.job_id, due_at),
            },
            _HELD_BY_OWNER,
            {"running": "RUNNING", "attempt": run.attempt, "owner": owner},
            {
                "next_attempt_at": next_attempt_at,
                "due_at": due_at,
                "error": error,
                "response_code": response_code,
                "lateness_ms": lateness_ms,
            },
        )

    def _move_to_retry(
        self,
        run: RunRef,
        sets: Mapping[str, Any],
        condition: str,
        condition_values: Mapping[str, Any],
        changes: Mapping[str, Any],
    ) -> Run | None:
        """A running attempt → RETRYING (`sets`, if `condition`), giving its running slot back
        in the same transaction when it holds one. The run as written (`changes`: its new
        values, None ones left as they were), or None when the condition failed."""
        remove = ("lease_until_ms", "lease_owner", "slot")
        if not _holds_slot(run):
            return self._update_run(
                run.job_id, run.scheduled_for_ms, sets, condition, condition_values, remove
            )
        assert isinstance(run, Run)
        request = self._run_update(
            run.job_id, run.scheduled_for_ms, sets, f"{condition} AND {_HOLDS_SLOT}", condition_values, remove
        )
        if not self._end_run(request, run.job_id, run.scheduled_for, release=True):
            return None
        updates = {name: value for name, value in changes.items() if value is not None}
        return run.model_copy(
            update=updates
            | {
                "status": RunStatus.RETRYING,
                "attempt": run.attempt + 1,
                "lease_until": None,
                "holds_slot": False,
            }
        )

    def move_timer_to_lease_if_unchanged(self, run: Run) -> bool:
        """A running attempt's timer came before its lease ends (a start leaves the run's
        re-send timer in place, which saves two index writes for a run that ends in time):
        the timer moves to the lease's end, if the attempt and its lease are as read."""
        assert run.lease_until is not None, "only a leased run has a lease to wait for"
        condition = f"{_RUNNING_ATTEMPT} AND lease_until_ms = :seen_lease"
        values = {"running": "RUNNING", "attempt": run.attempt, "seen_lease": to_ms(run.lease_until)}
        sets = self._due_attributes(run.job_id, run.lease_until)
        return self._update_run(run.job_id, run.scheduled_for_ms, sets, condition, values) is not None

    def take_over_expired_lease(
        self,
        run: Run,
        now: datetime,
        status: RunStatus,
        error: str,
        next_attempt_at: datetime | None = None,
        due_at: datetime | None = None,
        complete_job: bool = False,
    ) -> Run | None:
        """The watchdog: a RUNNING attempt whose lease (as we read it) has expired moves on:
        to RETRYING as the next attempt (`next_attempt_at`, `due_at`), or to FAILED/CANCELLED
        (with `complete_job`, its job completes in the same transaction). None if its worker
        finished, heartbeated or another poller acted first."""
        assert run.lease_until is not None, "only a leased run can expire"
        condition = f"{_RUNNING_ATTEMPT} AND lease_until_ms = :seen_lease AND lease_until_ms <= :now"
        values = {
            "running": "RUNNING",
            "attempt": run.attempt,
            "seen_lease": to_ms(run.lease_until),
            "now": to_ms(now),
        }
        sets: dict[str, Any] = {"status": str(status), "error": error[:_MAX_ERROR]}
        if status is RunStatus.RETRYING:
            assert next_attempt_at is not None
            assert due_at is not None
            sets |= {"attempt": run.attempt + 1, "next_attempt_at_ms": to_ms(next_attempt_at)}
            sets |= self._due_attributes(run.job_id, due_at)
            changes = {"next_attempt_at": next_attempt_at, "due_at": due_at, "error": error}
            return self._move_to_retry(run, sets, condition, values, changes)
        sets |= {"finished_at_ms": to_ms(now), "expires_at": self._expiry(now)}
        release = run.holds_slot
        request = self._run_update(
            run.job_id,
            run.scheduled_for_ms,
            sets,
            condition + (f" AND {_HOLDS_SLOT}" if release else ""),
            values,
            remove=_LEASE_AND_TIMER,
        )
        if not self._end_run(request, run.job_id, now, complete=complete_job, release=release):
            return None
        return run.model_copy(
            update={
                "status": status,
                "error": error,
                "finished_at": now,
                "due_at": None,
                "lease_until": None,
                "holds_slot": False,
            }
        )

    def resend_if_unchanged(self, run: Run, due_at: datetime, caught_up: bool = False) -> bool:
        """Reserve the (re-)send of a waiting run's message, as read from the due index: move
        its timer to `due_at` if nobody moved the run since. Two pollers never both send.
        `caught_up`: the run is a missed firing caught up (see `Run.caught_up`) from now on."""
        assert run.due_at is not None, "only a run in the due index is re-sent"
        return self._update_run(*self._waiting_timer_update(run, due_at, run.due_at, caught_up)) is not None

    def _waiting_timer_update(
        self, run: RunRef, due_at: datetime, seen_due: datetime | None = None, caught_up: bool = False
    ) -> tuple[str, int, dict[str, Any], str, dict[str, Any]]:
        """The `_run_update` arguments that move the timer of a run waiting at this attempt
        (and, with `seen_due`, still at that timer) to `due_at`."""
        condition, values = _status_one_of_values(run_state.WAITING)
        condition += " AND attempt = :attempt"
        values |= {"attempt": run.attempt}
        if seen_due is not None:
            condition += " AND due_sk = :seen_due"
            values |= {"seen_due": to_ms(seen_due)}
        sets = self._due_attributes(run.job_id, due_at) | ({"caught_up": True} if caught_up else {})
        return run.job_id, run.scheduled_for_ms, sets, condition, values

    def fail_waiting_run(self, run: Run, now: datetime, error: str) -> bool:
        """A waiting run that may not be sent again (its job is gone) ends as FAILED."""
        condition, values = _status_one_of_values(run_state.WAITING)
        return (
            self._update_run(
                run.job_id,
                run.scheduled_for_ms,
                {
                    "status": str(RunStatus.FAILED),
                    "error": error[:_MAX_ERROR],
                    "finished_at_ms": to_ms(now),
                    "expires_at": self._expiry(now),
                },
                f"{condition} AND attempt = :attempt",
                values | {"attempt": run.attempt},
                remove=_LEASE_AND_TIMER,
            )
            is not None
        )

    def redrive_run_if_failed(self, run: Run, now: datetime, due_at: datetime) -> Run | None:
        """A manual re-drive: FAILED → RETRYING as a new attempt that starts a fresh round of
        `max_attempts`, due now. None if the run is not FAILED at the attempt we read."""
        return self._update_run(
            run.job_id,
            run.scheduled_for_ms,
            {
                "status": str(RunStatus.RETRYING),
                "trigger": "RETRY",
                "attempt": run.attempt + 1,
                "first_attempt": run.attempt + 1,
                "next_attempt_at_ms": to_ms(now),
                "expires_at": self._expiry(now),
                **self._due_attributes(run.job_id, due_at),
            },
            "#status = :failed AND attempt = :attempt",
            {"failed": "FAILED", "attempt": run.attempt},
            remove=("finished_at_ms",),
        )

    def wait_turn_if_waiting(self, run: RunRef, due_at: datetime) -> bool:
        """A waiting run of the catch-up queue stays waiting for its turn, same attempt, its
        message acknowledged (the end of the run before it sends it). Its timer moves to
        `due_at`, when the poller looks at it again should no wake-up come. False if the run
        is no longer waiting at this attempt."""
        return self._update_run(*self._waiting_timer_update(run, due_at)) is not None

    def set_aside_while_paused(self, run: RunRef, due_at: datetime) -> bool | None:
        """A waiting run whose job is paused stays waiting, same attempt, its message
        acknowledged: the resume decides whether it runs (the job's misfire policy). Its timer
        moves to `due_at`, when the poller looks at it again should no resume have. Written
        only while the job is still PAUSED, in one transaction with that condition, so a
        resume that has already decided never finds its decision undone. False if the run is
        no longer waiting at this attempt; None if the job is no longer paused (nothing
        written)."""
        request = self._run_update(*self._waiting_timer_update(run, due_at))
        return self._write_while_paused(request, run.job_id)

    def set_aside_if_held(self, run: Run, owner: str, due_at: datetime) -> bool | None:
        """RUNNING → waiting again (PENDING, or RETRYING for a retry), same attempt, for the
        attempt `owner` holds: it found its job paused before it called the target (an ALLOW
        run, whose start does not fence its job, reads the job once more before the call). Its
        running slot, if any, is given back in the same transaction; its timer moves to
        `due_at`. Only while the job is still PAUSED (see `set_aside_while_paused`): False if
        the lease was lost, None if the job is no longer paused (nothing written: the run
        goes on)."""
        status = RunStatus.RETRYING if run.attempt > run.first_attempt else RunStatus.PENDING
        request = self._run_update(
            run.job_id,
            run.scheduled_for_ms,
            {"status": str(status), **self._due_attributes(run.job_id, due_at)},
            _HELD_BY_OWNER + (f" AND {_HOLDS_SLOT}" if _holds_slot(run) else ""),
            {"running": "RUNNING", "attempt": run.attempt, "owner": owner},
            remove=("lease_until_ms", "lease_owner", "slot", "started_at_ms"),
        )
        return self._write_while_paused(request, run.job_id, release=_holds_slot(run))

    def _write_while_paused(
        self, run_request: dict[str, Any], job_id: str, release: bool = False
    ) -> bool | None:
        """Write a run's update in one transaction with the condition that its job is PAUSED
        (with `release`, giving a running slot back). True when written; False if the run's
        condition failed; None if only the job's did (it is no longer paused)."""
        sets, conditions = ["#status = #status"], ["#status = :paused"]
        values: dict[str, Any] = {"paused": "PAUSED"}
        if release:
            sets = ["running_count = running_count - :one"]
            conditions.append("running_count >= :one")
            values["one"] = 1
        job_write = self._job_write(job_id, sets, [], conditions, values)
        reasons = self._transact([{"Update": run_request}, job_write])
        if not reasons:
            return True
        return False if reasons[0] == "ConditionalCheckFailed" else None

    def rejoin_catch_up_queue(self, run: RunRef, job: Job, due_at: datetime) -> bool:
        """A caught-up run that left the catch-up queue at an earlier start (it is retrying, or
        was set aside by a pause) and finds no running slot free takes the queue's front again,
        so the next slot given back is its turn. Only while the job's slots are as `job` was
        read (every one taken, or a run buffered for one): the release it then waits for
        wakes it. Its timer moves to `due_at`. False for a duplicate or stale message;
        SlotsChanged when the job's slots are no longer as read."""
        me = run.scheduled_for_ms
        request = self._run_update(*self._waiting_timer_update(run, due_at))
        values: dict[str, Any] = {"queued": [me], "no_runs": []}
        if job.running_count >= self._max_running(job):
            conditions = ["running_count >= :max"]
            values["max"] = self._max_running(job)
        else:  # a run buffered for a slot (BUFFER_ONE) goes first
            conditions = ["buffered_run_ms = :other"]
            values["other"] = job.buffered_run_ms
        sets = [f"{_CATCH_UP_QUEUE} = list_append(:queued, if_not_exists({_CATCH_UP_QUEUE}, :no_runs))"]
        return self._admit(request, self._job_write(run.job_id, sets, [], conditions, values))

    def cancel_run_if_not_started(self, run: RunRef, now: datetime) -> bool:
        """PENDING/RETRYING → CANCELLED (its job was cancelled before any worker took the run)."""
        condition, values = _status_one_of_values(run_state.WAITING)
        return (
            self._update_run(
                run.job_id,
                run.scheduled_for_ms,
                {
                    "status": str(RunStatus.CANCELLED),
                    "finished_at_ms": to_ms(now),
                    "expires_at": self._expiry(now),
                },
                f"{condition} AND attempt = :attempt",
                values | {"attempt": run.attempt},
                remove=_LEASE_AND_TIMER,
            )
            is not None
        )

    # --- shard watermarks -----------------------------------------------------------

    def get_watermark(self, shard: int) -> int | None:
        reply = self._ddb.get_item(
            TableName=self._table,
            Key=_to_item({"pk": keys.shard_pk(shard), "sk": keys.WATERMARK_SK}),
            ConsistentRead=True,
        )
        item = reply.get("Item")
        return int(_from_item(item)["bucket_ms"]) if item else None

    def advance_watermark(self, shard: int, bucket_ms: int) -> None:
        """Move the watermark forward only: a poller with a slow clock never moves it back."""
        try:
            self._ddb.update_item(
                TableName=self._table,
                Key=_to_item({"pk": keys.shard_pk(shard), "sk": keys.WATERMARK_SK}),
                UpdateExpression="SET bucket_ms = :bucket",
                ConditionExpression="attribute_not_exists(bucket_ms) OR bucket_ms < :bucket",
                ExpressionAttributeValues=_values(bucket=bucket_ms),
            )
        except ClientError as error:
            if not _condition_failed(error):
                raise
