"""What every part of the jobs-table adapter stands on: the table, its client, how a
DynamoDB error reads (a lost race, contention worth trying again, or a fault), the one
conditional write and the consistent reads of items by key."""

from __future__ import annotations

import re
import time
from collections.abc import Collection, Iterator, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from scheduler_core.adapters.aws import THROTTLING_CODES, AwsClients, error_code
from scheduler_core.adapters.dynamodb.codec import (
    NOT_KEPT_WITH_JOB,
    ItemCodec,
    expression_values,
    from_value,
    holds_run_with_job,
    to_item,
    with_job_name,
)
from scheduler_core.adapters.dynamodb.expressions import RUN_EXISTS, status_one_of_values
from scheduler_core.domain import keys, run_state
from scheduler_core.domain.clock import to_ms
from scheduler_core.domain.entities import Run
from scheduler_core.domain.vocabulary import RunStatus
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
# The same update of a run on its own item, carried by its update on its job's item
# (`Run.with_job`), and the other way round: where it goes if the run is not where expected.
ON_ITS_OWN = "_on_its_own"
WITH_ITS_JOB = "_with_its_job"
# A bare attribute name in a run's condition (not a placeholder, value or function).
_ATTRIBUTE = re.compile(r"(?<![\w:#.])([a-z][a-z0-9_]*)\b(?!\s*\()")


def started_sets(now: datetime, lease_until: datetime, owner: str) -> dict[str, Any]:
    """What a run's start sets (`_run_update` sets): RUNNING, since `now`, leased to `owner`
    until `lease_until`."""
    return {
        "status": str(RunStatus.RUNNING),
        "started_at_ms": to_ms(now),
        "lease_until_ms": to_ms(lease_until),
        "lease_owner": owner,
    }


class Appended(list[Any]):
    """A value of a run's update (`_run_update`) added to the end of the list the attribute
    holds (a new list if it holds none), not written over it."""


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
        else won); throttling and conflicts raise StoreContention. A run's update goes where
        the run is (`_send_update`)."""
        if put:
            try:
                self._ddb.put_item(**request)
            except ClientError as error:
                if condition_failed(error):
                    return False
                if is_contention(error):
                    raise StoreContention(str(error)) from error
                raise
            return True
        return self._send_update(request) is not None

    def _send_update(self, request: Mapping[str, Any], **options: Any) -> dict[str, Any] | None:
        """One conditional UpdateItem: DynamoDB's reply, or None when its condition failed;
        throttling and conflicts raise StoreContention. A run's update (`_run_update`) carries
        the same update of the run where it is not expected (`ON_ITS_OWN`, `WITH_ITS_JOB`):
        sent there if the run is not where it was expected (it left its job's item, or it is
        kept on it though the caller did not say so)."""
        request = dict(request)
        elsewhere = request.pop(ON_ITS_OWN, None) or request.pop(WITH_ITS_JOB, None)
        if elsewhere is not None:
            options["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
        try:
            return dict(self._ddb.update_item(**request, **options))
        except ClientError as error:
            if condition_failed(error):
                if elsewhere is not None and self._run_is_elsewhere(error, request):
                    return self._send_update(elsewhere, **options)
                return None
            if is_contention(error):
                raise StoreContention(str(error)) from error
            raise

    @staticmethod
    def _run_is_elsewhere(error: ClientError, request: Mapping[str, Any]) -> bool:
        """Whether a run's update failed because the run is not on the item it went to: the
        job's item keeps no such run, or the run has no item of its own."""
        item: dict[str, Any] | None = error.response.get("Item")  # type: ignore[assignment]
        if request["Key"]["sk"]["S"] != keys.JOB_SK:
            return not item
        return not holds_run_with_job(item, int(request["ExpressionAttributeValues"][":kept_ms"]["N"]))

    def _run_update(
        self,
        job_id: str,
        scheduled_for_ms: int,
        sets: Mapping[str, Any],
        condition: str,
        condition_values: Mapping[str, Any],
        remove: Collection[str] = (),
        *,
        with_job: bool = False,
        elsewhere: bool = True,
    ) -> dict[str, Any]:
        """The conditional update of a run: SET `sets` (attribute → value; None values are
        skipped, an `Appended` list goes onto the end of the one there), REMOVE `remove`, if
        `condition` holds. `with_job`: the run is kept on its
        job's item (`Run.with_job`): the same update of its attributes there, each under its
        name on the job's item; a timer set moves the item's index entry with it, a timer
        removed takes the entry out. The request then carries the update of the run's own
        item (`ON_ITS_OWN`) for a run that has left its job's item since it was read."""
        name = with_job_name if with_job else (lambda attribute: attribute)
        # The variant for the run's own item (`elsewhere`) keeps what a kept run leaves out.
        here = {
            attribute: value
            for attribute, value in sets.items()
            if not (with_job and attribute in NOT_KEPT_WITH_JOB)
        }
        names = {"#status": name("status")}
        values: dict[str, Any] = expression_values(**condition_values)
        actions = []
        for position, (attribute, value) in enumerate(here.items()):
            if value is None:
                continue
            names[f"#s{position}"] = attribute if attribute == "due_pk" else name(attribute)
            if isinstance(value, Appended):  # onto the list there is, or a new one
                values |= expression_values(**{f"s{position}": list(value), "none_yet": []})
                current = f"if_not_exists(#s{position}, :none_yet)"
                actions.append(f"#s{position} = list_append({current}, :s{position})")
                continue
            values |= expression_values(**{f"s{position}": value})
            actions.append(f"#s{position} = :s{position}")
            if with_job and attribute == "due_sk":  # the index entry moves to the timer
                names["#t"] = "due_sk"
                actions.append(f"#t = :s{position}")
        update = f"SET {', '.join(actions)}"
        removable = [attribute for attribute in remove if here.get(attribute) is None]
        if with_job and "due_sk" in removable:
            removable.append("due_pk")  # the index entry leaves with the timer
        removable = list(dict.fromkeys(removable))
        if removable:
            names |= {
                f"#r{position}": attribute if attribute in ("due_pk",) else name(attribute)
                for position, attribute in enumerate(removable)
            }
            update += " REMOVE " + ", ".join(f"#r{position}" for position in range(len(removable)))
            if with_job and "due_sk" in removable:
                names["#rt"] = "due_sk"
                update += ", #rt"
        request: dict[str, Any] = {
            "TableName": self._table,
            "UpdateExpression": update,
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
        }
        if elsewhere:
            other = self._run_update(
                job_id,
                scheduled_for_ms,
                sets,
                condition,
                condition_values,
                remove,
                with_job=not with_job,
                elsewhere=False,
            )
            request[ON_ITS_OWN if with_job else WITH_ITS_JOB] = other
        if not with_job:
            return request | {
                "Key": self._codec.run_key(job_id, scheduled_for_ms),
                "ConditionExpression": f"{RUN_EXISTS} AND {condition}",
            }
        request["ExpressionAttributeValues"] |= expression_values(kept_ms=scheduled_for_ms)
        return request | {
            "Key": self._codec.job_key(job_id),
            "ConditionExpression": f"{with_job_name('scheduled_for_ms')} = :kept_ms AND "
            + _ATTRIBUTE.sub(lambda match: with_job_name(match[1]), condition),
        }

    def _update_run(
        self,
        job_id: str,
        scheduled_for_ms: int,
        sets: Mapping[str, Any],
        condition: str,
        condition_values: Mapping[str, Any],
        remove: Collection[str] = (),
        *,
        with_job: bool = False,
    ) -> Run | None:
        """One conditional UpdateItem of a run (see `_run_update`), where the run is. The run
        as written, or None when the condition failed (someone else moved the run first)."""
        request = self._run_update(
            job_id, scheduled_for_ms, sets, condition, condition_values, remove, with_job=with_job
        )
        reply = self._send_update(request, ReturnValues="ALL_NEW")
        if reply is None:
            return None
        written = reply["Attributes"]
        if written["sk"]["S"] != keys.JOB_SK:
            return self._codec.run_from_item(written)
        run = self._codec.run_with_job_from_item(written)
        assert run is not None, "the update was conditioned on the run being there"
        return run

    def _items_of(
        self, entries: Sequence[Mapping[str, Any]], attributes: Sequence[str] = (), consistent: bool = True
    ) -> list[dict[str, Any] | None]:
        """The items of index entries (only `attributes` of them, if given; strongly
        consistent unless not `consistent`), in their order; None where the item is gone. An
        entry given twice is read once (BatchGetItem refuses a key twice)."""
        unique = {(entry["pk"]["S"], entry["sk"]["S"]): entry for entry in entries}
        found = self._get_items(
            [{"pk": entry["pk"], "sk": entry["sk"]} for entry in unique.values()], attributes, consistent
        )
        return [found.get((entry["pk"]["S"], entry["sk"]["S"])) for entry in entries]

    def _get_items(
        self, keys: Sequence[Mapping[str, Any]], attributes: Sequence[str] = (), consistent: bool = True
    ) -> dict[tuple[str, str], dict[str, Any]]:
        """The items of `keys` (strongly consistent unless not `consistent`; BatchGetItem 100
        keys at a time; only `attributes` of them, plus their keys, if given), by (pk, sk); a
        key with no item is left out. Keys DynamoDB leaves unprocessed (throttling, a reply's
        16 MB) are asked again, with growing pauses (`_UNPROCESSED_PAUSES`); then
        StoreContention."""
        found: dict[tuple[str, str], dict[str, Any]] = {}
        request: Any = {"ConsistentRead": consistent}  # boto3's KeysAndAttributes
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
