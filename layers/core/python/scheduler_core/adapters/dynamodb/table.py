"""What every part of the jobs-table adapter stands on: the table, its client, how a
DynamoDB error reads (a lost race, contention worth trying again, or a fault), the one
conditional write and the consistent reads of items by key."""

from __future__ import annotations

import time
from collections.abc import Collection, Iterator, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from scheduler_core.adapters.aws import THROTTLING_CODES, AwsClients, error_code
from scheduler_core.adapters.dynamodb.codec import ItemCodec, expression_values, from_value, to_item
from scheduler_core.adapters.dynamodb.expressions import RUN_EXISTS, status_one_of_values
from scheduler_core.domain import run_state
from scheduler_core.domain.clock import to_ms
from scheduler_core.domain.entities import Run
from scheduler_core.ports import RunRef, StoreContention

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

DUE_INDEX = "due"
TENANT_INDEX = "by_tenant"
# Index entries a poll reads before acting on them (`due_pages`): the items of 10 BatchGetItems.
DUE_PAGE = 1_000
CONTENTION_CODES = THROTTLING_CODES | {
    "TransactionConflictException",
    "TransactionInProgressException",
    "InternalServerError",
}
# Pauses (seconds) before keys a BatchGetItem left unprocessed are asked again: throttling,
# or a reply past its 16 MB (100 jobs of a few hundred KB take two or three rounds).
_UNPROCESSED_PAUSES = (0.0, 0.05, 0.1, 0.2, 0.4, 0.8)
# BatchGetItem's ceiling on keys per request.
_BATCH_GET = 100


def is_contention(error: ClientError) -> bool:
    """Throttling, a transaction conflict, or DynamoDB failing on its side (5xx, after
    botocore's own retries): worth trying again later, not a verdict on the request."""
    status = int(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))
    return error_code(error) in CONTENTION_CODES or status >= 500


def condition_failed(error: ClientError) -> bool:
    return error_code(error) == "ConditionalCheckFailedException"


class TableAdapter:
    """The jobs table, for the adapters of each port to build on (see `store`)."""

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
        self._codec = ItemCodec(shard_count, retention_days)
        self._due_page_size = due_page

    @property
    def _ddb(self) -> DynamoDBClient:
        return self._clients.dynamodb()

    def _write_if(self, request: dict[str, Any], put: bool = False) -> bool:
        """One conditional UpdateItem (or PutItem): False when its condition failed (someone
        else won); throttling and conflicts raise StoreContention."""
        try:
            if put:
                self._ddb.put_item(**request)
            else:
                self._ddb.update_item(**request)
        except ClientError as error:
            if condition_failed(error):
                return False
            if is_contention(error):
                raise StoreContention(str(error)) from error
            raise
        return True

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
        values: dict[str, Any] = expression_values(**condition_values)
        actions = []
        for position, (attribute, value) in enumerate(sets.items()):
            if value is None:
                continue
            names[f"#s{position}"] = attribute
            values |= expression_values(**{f"s{position}": value})
            actions.append(f"#s{position} = :s{position}")
        update = f"SET {', '.join(actions)}"
        removable = [attribute for attribute in remove if attribute not in sets or sets[attribute] is None]
        if removable:
            names |= {f"#r{position}": attribute for position, attribute in enumerate(removable)}
            update += " REMOVE " + ", ".join(f"#r{position}" for position in range(len(removable)))
        return {
            "TableName": self._table,
            "Key": self._codec.run_key(job_id, scheduled_for_ms),
            "UpdateExpression": update,
            "ConditionExpression": f"{RUN_EXISTS} AND {condition}",
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
            if condition_failed(error):
                return None
            if is_contention(error):
                raise StoreContention(str(error)) from error
            raise
        return self._codec.run_from_item(reply["Attributes"])

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
                    if is_contention(error):
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

    def _query_items(
        self, query: dict[str, Any], start: dict[str, Any] | None
    ) -> Iterator[tuple[dict[str, Any], dict[str, Any] | None]]:
        """Items of a query across pages, each with the key to resume after it (None when
        it is the very last item)."""
        key_names = ("pk", "sk", *self._index_keys(query.get("IndexName")))
        exclusive = to_item(start) if start else None
        while True:
            request = dict(query) | ({"ExclusiveStartKey": exclusive} if exclusive else {})
            page = self._ddb.query(**request)
            items = page.get("Items", [])
            more = "LastEvaluatedKey" in page
            for position, item in enumerate(items):
                last = position == len(items) - 1 and not more
                resume = None if last else {k: from_value(item[k]) for k in key_names}
                yield item, resume
            if not more:
                return
            exclusive = page["LastEvaluatedKey"]

    @staticmethod
    def _index_keys(index: str | None) -> tuple[str, ...]:
        return {DUE_INDEX: ("due_pk", "due_sk"), TENANT_INDEX: ("tenant", "created_key")}.get(index or "", ())

    def _waiting_timer_update(
        self, run: RunRef, due_at: datetime, seen_due: datetime | None = None, caught_up: bool = False
    ) -> tuple[str, int, dict[str, Any], str, dict[str, Any]]:
        """The `_run_update` arguments that move the timer of a run waiting at this attempt
        (and, with `seen_due`, still at that timer) to `due_at`."""
        condition, values = status_one_of_values(run_state.WAITING)
        condition += " AND attempt = :attempt"
        values |= {"attempt": run.attempt}
        if seen_due is not None:
            condition += " AND due_sk = :seen_due"
            values |= {"seen_due": to_ms(seen_due)}
        sets = self._codec.due_attributes(run.job_id, due_at) | ({"caught_up": True} if caught_up else {})
        return run.job_id, run.scheduled_for_ms, sets, condition, values
