"""Counting AWS API calls with botocore's event hooks, the DynamoDB capacity units they
cost, the SQS requests they are billed as, and the bytes the functions log.

moto answers `ReturnConsumedCapacity` with fixed figures (1.0 per write, whatever the
item), so write units are computed from item sizes instead: the meter reads each item
written before and after the write (with a client of its own, not counted) and applies
DynamoDB's rules — a write costs 1 WCU per started KB of the larger of the two images,
twice that inside `TransactWriteItems` (where a `ConditionCheck` counts as a write of the
item it checks); each global secondary index the write touches costs 1 WCU per started KB
of the index entry (2 entries when an index key changes). A write whose condition fails
still costs its table units.

Read units likewise: a read costs 1 unit per started 4 KB of the whole item (a projection
does not make it cheaper), half that when eventually consistent, twice that in
`TransactGetItems`; `BatchGetItem` is priced item by item; a `Query` or `Scan` costs the
total size of the items it evaluated (before any filter) rounded up to 4 KB, at least one
unit. The meter reads the items again in full, or repeats the query without its filter
and projection, with its own client.

SQS bills a request per started 64 KiB of payload: message bodies and attributes sent, or
received.
"""

from __future__ import annotations

import contextlib
import io
import math
import re
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import boto3

_WRITES = {"PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem"}
_READS = {"GetItem", "BatchGetItem", "TransactGetItems", "Query", "Scan"}
_CONTEXT_KEY = "bench_writes"
_PARAMS_KEY = "bench_params"
READ_UNIT_BYTES = 4096
SQS_CHUNK_BYTES = 64 * 1024


@dataclass(frozen=True)
class Call:
    role: str  # whose call: a function, or the event source mapping
    label: str  # what the benchmark was driving at the time
    operation: str  # e.g. dynamodb.TransactWriteItems
    attempts: int
    seconds: float  # from the call's parameters to its parsed reply (botocore's work included)
    table_wcu: float
    index_wcu: float
    failed: bool
    read_units: float = 0.0
    billed_requests: int = 1  # SQS: one per started 64 KiB of payload
    write_units_by_table: Mapping[str, float] = field(default_factory=dict)  # table + its indexes
    partition_key: str = ""  # a one-item DynamoDB call's: `SHARD#n` (a watermark), `JOB#...`
    log_bytes: int = 0  # CloudWatch Logs PutLogEvents: the bytes ingested (the audit lines)

    @property
    def service(self) -> str:
        return self.operation.split(".", 1)[0]


def attribute_size(value: Mapping[str, Any]) -> int:
    """Bytes of one attribute value, by DynamoDB's item-size rules (approximate for numbers)."""
    (kind, raw), *_ = value.items()
    if kind == "S":
        return len(str(raw).encode())
    if kind == "N":
        digits = str(raw).lstrip("-").replace(".", "").lstrip("0").rstrip("0")
        return math.ceil(len(digits) / 2) + 1
    if kind == "B":
        return len(raw)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(len(str(s).encode()) for s in raw)
    if kind == "NS":
        return sum(attribute_size({"N": n}) for n in raw)
    if kind == "BS":
        return sum(len(b) for b in raw)
    if kind == "L":
        return 3 + sum(1 + attribute_size(v) for v in raw)
    if kind == "M":
        return 3 + sum(1 + len(k.encode()) + attribute_size(v) for k, v in raw.items())
    raise ValueError(f"unknown attribute type {kind}")


def item_size(item: Mapping[str, Any] | None) -> int:
    if not item:
        return 0
    return sum(len(name.encode()) + attribute_size(value) for name, value in item.items())


def _units(size: int) -> int:
    return max(1, math.ceil(size / 1024))


def read_units(size: int, consistent: bool, transactional: bool = False) -> float:
    """Read units of one read of `size` bytes: 1 per started 4 KB (at least 1), half when
    eventually consistent, twice in a transaction."""
    units = max(1, math.ceil(size / READ_UNIT_BYTES))
    if transactional:
        return 2.0 * units
    return float(units) if consistent else units / 2


# What CloudWatch Logs bills per log event beyond its message (its ingestion size rule).
LOG_EVENT_OVERHEAD_BYTES = 26


def ingested_bytes(params: Mapping[str, Any]) -> int:
    """The bytes one PutLogEvents ingests: each event's message and its overhead."""
    return sum(
        len(str(event.get("message", "")).encode()) + LOG_EVENT_OVERHEAD_BYTES
        for event in params.get("logEvents", [])
    )


def sqs_billed_requests(payload_bytes: int) -> int:
    """SQS bills every request, and one more per further started 64 KiB of payload."""
    return max(1, math.ceil(payload_bytes / SQS_CHUNK_BYTES))


def _message_bytes(message: Mapping[str, Any]) -> int:
    size = len(str(message.get("MessageBody", message.get("Body", ""))).encode())
    for name, attribute in message.get("MessageAttributes", {}).items():
        size += len(name.encode()) + len(str(attribute.get("DataType", "")).encode())
        size += len(str(attribute.get("StringValue", "")).encode()) + len(attribute.get("BinaryValue", b""))
    return size


def sqs_payload_bytes(operation: str, params: Mapping[str, Any], parsed: Mapping[str, Any]) -> int:
    """The payload SQS bills a request by: the messages sent, or the messages received."""
    if operation == "SendMessage":
        return _message_bytes(params)
    if operation == "SendMessageBatch":
        return sum(_message_bytes(entry) for entry in params.get("Entries", []))
    if operation == "ReceiveMessage":
        return sum(_message_bytes(message) for message in parsed.get("Messages", []))
    return 0


@dataclass(frozen=True)
class TableShape:
    key: tuple[str, ...]
    indexes: dict[str, tuple[tuple[str, ...], str, tuple[str, ...]]]  # name → keys, projection, included


@dataclass
class _Write:
    table: str
    key: dict[str, Any]
    transactional: bool
    before: dict[str, Any] | None = None


@dataclass
class WriteMeter:
    """Reads items around each write; `client` is a DynamoDB client nobody counts."""

    client: Any
    shapes: dict[str, TableShape] = field(default_factory=dict)

    def shape(self, table: str) -> TableShape:
        if table not in self.shapes:
            description = self.client.describe_table(TableName=table)["Table"]
            indexes = {
                index["IndexName"]: (
                    tuple(k["AttributeName"] for k in index["KeySchema"]),
                    index["Projection"]["ProjectionType"],
                    tuple(index["Projection"].get("NonKeyAttributes", ())),
                )
                for index in description.get("GlobalSecondaryIndexes", [])
            }
            key = tuple(k["AttributeName"] for k in description["KeySchema"])
            self.shapes[table] = TableShape(key, indexes)
        return self.shapes[table]

    def writes_of(self, operation: str, params: Mapping[str, Any]) -> list[_Write]:
        """The items a write request touches."""
        if operation == "TransactWriteItems":
            return [
                self._write(action, transactional=True)
                for entry in params["TransactItems"]
                for kind, action in entry.items()
                if kind in ("Put", "Update", "Delete", "ConditionCheck")
            ]
        if operation == "BatchWriteItem":
            return [
                self._write(
                    {"TableName": table, **request.get("PutRequest", request.get("DeleteRequest", {}))}
                )
                for table, requests in params["RequestItems"].items()
                for request in requests
            ]
        return [self._write(params)]

    def _write(self, action: Mapping[str, Any], transactional: bool = False) -> _Write:
        table = action["TableName"]
        key = action.get("Key") or {name: action["Item"][name] for name in self.shape(table).key}
        return _Write(table, dict(key), transactional)

    def read(self, write: _Write) -> dict[str, Any] | None:
        return self._item(write.table, write.key)

    def _item(self, table: str, key: Mapping[str, Any]) -> dict[str, Any] | None:
        item: dict[str, Any] | None = self.client.get_item(TableName=table, Key=key, ConsistentRead=True).get(
            "Item"
        )
        return item

    def read_units_of(self, operation: str, params: Mapping[str, Any], parsed: Mapping[str, Any]) -> float:
        """Read units of one read request, from the full items it read."""
        if operation == "GetItem":
            item = self._item(params["TableName"], params["Key"])
            return read_units(item_size(item), bool(params.get("ConsistentRead")))
        if operation == "BatchGetItem":
            return sum(
                read_units(item_size(self._item(table, key)), bool(request.get("ConsistentRead")))
                for table, request in params["RequestItems"].items()
                for key in request["Keys"]
            )
        if operation == "TransactGetItems":
            return sum(
                read_units(
                    item_size(self._item(entry["Get"]["TableName"], entry["Get"]["Key"])),
                    consistent=True,
                    transactional=True,
                )
                for entry in params["TransactItems"]
            )
        if operation in ("Query", "Scan"):
            evaluated = self._evaluated(operation, params)
            return read_units(sum(item_size(i) for i in evaluated), bool(params.get("ConsistentRead")))
        return 0.0

    def _evaluated(self, operation: str, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The items (or index entries) a query or scan page read, before its filter and
        projection: the same page asked again without them."""
        request = {
            k: v
            for k, v in params.items()
            if k not in ("FilterExpression", "ProjectionExpression", "Select", "ReturnConsumedCapacity")
        }
        used = set(re.findall(r"[:#][A-Za-z0-9_]+", str(request.get("KeyConditionExpression", ""))))
        names = {k: v for k, v in request.pop("ExpressionAttributeNames", {}).items() if k in used}
        values = {k: v for k, v in request.pop("ExpressionAttributeValues", {}).items() if k in used}
        if names:
            request["ExpressionAttributeNames"] = names
        if values:
            request["ExpressionAttributeValues"] = values
        reply = self.client.query(**request) if operation == "Query" else self.client.scan(**request)
        items: list[dict[str, Any]] = reply.get("Items", [])
        return items

    def units(self, write: _Write, after: dict[str, Any] | None) -> tuple[float, float]:
        """(table WCU, index WCU) of one item write."""
        before = write.before
        table = _units(max(item_size(before), item_size(after))) * (2 if write.transactional else 1)
        index = sum(units for _, _, units in self.index_writes(write.table, before, after))
        return float(table), float(index)

    def index_writes(
        self, table: str, before: Mapping[str, Any] | None, after: Mapping[str, Any] | None
    ) -> list[tuple[str, Any, int]]:
        """(index name, the entry's partition key value, WCU) of each index entry one item
        write deletes or writes: an entry whose keys change is deleted and written anew."""
        shape = self.shape(table)
        writes: list[tuple[str, Any, int]] = []
        for name, (keys, projection, included) in shape.indexes.items():
            old = _projected(before, keys, shape.key, projection, included)
            new = _projected(after, keys, shape.key, projection, included)
            if old == new:
                continue
            keys_changed = old is not None and new is not None and any(old[k] != new[k] for k in keys)
            if old is not None and (new is None or keys_changed):
                writes.append((name, old[keys[0]], _units(item_size(old))))  # the old entry is deleted
            if new is not None:
                writes.append((name, new[keys[0]], _units(item_size(new))))  # the new or changed entry
        return writes


def _projected(
    item: Mapping[str, Any] | None,
    index_keys: tuple[str, ...],
    table_keys: tuple[str, ...],
    projection: str,
    included: tuple[str, ...],
) -> dict[str, Any] | None:
    """The item's entry in an index, or None if the item is not in it (a sparse index)."""
    if item is None or any(k not in item for k in index_keys):
        return None
    if projection == "ALL":
        return dict(item)
    wanted = {*index_keys, *table_keys, *(included if projection == "INCLUDE" else ())}
    return {k: v for k, v in item.items() if k in wanted}


class CallLog:
    """Every call made through the sessions attached to it, labelled with what was going on.
    Without a meter, write units are not computed (and nothing is read around writes)."""

    def __init__(self, meter: WriteMeter | None = None) -> None:
        self.calls: list[Call] = []
        self.label = "setup"
        self._meter = meter

    @contextlib.contextmanager
    def unmetered(self) -> Iterator[None]:
        """Calls counted without write units: nothing read around writes, so a timed
        stretch is as long as the functions' own work makes it."""
        meter, self._meter = self._meter, None
        try:
            yield
        finally:
            self._meter = meter

    @contextlib.contextmanager
    def labelled(self, label: str) -> Iterator[None]:
        previous, self.label = self.label, label
        try:
            yield
        finally:
            self.label = previous

    def session(self, role: str, session: boto3.session.Session) -> boto3.session.Session:
        """Count the calls of every client later created from `session` as `role`'s."""
        events = session.events
        events.register("provide-client-params.*.*", self._before_call)
        events.register("after-call.*.*", partial(self._after_call, role))
        return session

    def _before_call(self, params: dict[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
        context["bench_started"] = time.perf_counter()
        context[_PARAMS_KEY] = dict(params)
        if (
            self._meter is not None
            and model.service_model.service_name == "dynamodb"
            and model.name in _WRITES
        ):
            writes = self._meter.writes_of(model.name, params)
            for write in writes:
                write.before = self._meter.read(write)
            context[_CONTEXT_KEY] = writes

    def _after_call(
        self,
        role: str,
        http_response: Any,
        parsed: dict[str, Any],
        model: Any,
        context: dict[str, Any],
        **_: Any,
    ) -> None:
        seconds = time.perf_counter() - context.get("bench_started", time.perf_counter())
        service, operation = model.service_model.service_name, model.name
        params = context.get(_PARAMS_KEY, {})
        failed = http_response.status_code >= 300
        table_wcu = index_wcu = units_read = 0.0
        by_table: dict[str, float] = {}
        if self._meter is not None and service == "dynamodb":
            for write in context.get(_CONTEXT_KEY, []):
                table, index = self._meter.units(write, self._meter.read(write))
                table_wcu += table
                index_wcu += index
                by_table[write.table] = by_table.get(write.table, 0.0) + table + index
            if operation in _READS and not failed:
                units_read = self._meter.read_units_of(operation, params, parsed)
        billed = sqs_billed_requests(sqs_payload_bytes(operation, params, parsed)) if service == "sqs" else 1
        self.calls.append(
            Call(
                role=role,
                label=self.label,
                operation=f"{service}.{operation}",
                attempts=1 + int(parsed.get("ResponseMetadata", {}).get("RetryAttempts", 0)),
                seconds=seconds,
                table_wcu=table_wcu,
                index_wcu=index_wcu,
                failed=failed,
                read_units=units_read,
                billed_requests=billed,
                write_units_by_table=by_table,
                partition_key=str(params.get("Key", {}).get("pk", {}).get("S", "")),
                log_bytes=ingested_bytes(params) if operation == "PutLogEvents" else 0,
            )
        )

    def operations(self, label: str | None = None, role: str | None = None) -> Counter[str]:
        return Counter(
            call.operation
            for call in self.calls
            if (label is None or call.label == label) and (role is None or call.role == role)
        )


class LogMeter(io.TextIOBase):
    """A stream for the functions' logger that keeps no text, only how many bytes and lines
    were written under each label of a `CallLog` (CloudWatch Logs bills ingestion by bytes)."""

    def __init__(self, log: CallLog) -> None:
        super().__init__()
        self._log = log
        self.bytes: Counter[str] = Counter()
        self.lines: Counter[str] = Counter()

    def write(self, text: str) -> int:
        self.add(text)
        return len(text)

    def add(self, text: str, label: str | None = None) -> None:
        """Count `text` as written under `label` (the log's current one by default)."""
        label = self._log.label if label is None else label
        self.bytes[label] += len(text.encode())
        self.lines[label] += text.count("\n")
