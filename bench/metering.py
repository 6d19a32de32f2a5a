"""Counting AWS API calls with botocore's event hooks, and the DynamoDB write units they cost.

moto answers `ReturnConsumedCapacity` with fixed figures (1.0 per write, whatever the
item), so write units are computed from item sizes instead: the meter reads each item
written before and after the write (with a client of its own, not counted) and applies
DynamoDB's rules — a write costs 1 WCU per started KB of the larger of the two images,
twice that inside `TransactWriteItems` (where a `ConditionCheck` counts as a write of the
item it checks); each global secondary index the write touches costs 1 WCU per started KB
of the index entry (2 entries when an index key changes). A write whose condition fails
still costs its table units.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import boto3

_WRITES = {"PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem"}
_CONTEXT_KEY = "bench_writes"


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
        item: dict[str, Any] | None = self.client.get_item(
            TableName=write.table, Key=write.key, ConsistentRead=True
        ).get("Item")
        return item

    def units(self, write: _Write, after: dict[str, Any] | None) -> tuple[float, float]:
        """(table WCU, index WCU) of one item write."""
        before = write.before
        table = _units(max(item_size(before), item_size(after))) * (2 if write.transactional else 1)
        index = 0
        shape = self.shape(write.table)
        for keys, projection, included in shape.indexes.values():
            old = _projected(before, keys, shape.key, projection, included)
            new = _projected(after, keys, shape.key, projection, included)
            if old == new:
                continue
            keys_changed = old is not None and new is not None and any(old[k] != new[k] for k in keys)
            if old is not None and (new is None or keys_changed):
                index += _units(item_size(old))  # the old entry is deleted
            if new is not None:
                index += _units(item_size(new))  # the new or changed entry is written
        return float(table), float(index)


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
        table_wcu = index_wcu = 0.0
        if self._meter is not None:
            for write in context.get(_CONTEXT_KEY, []):
                table, index = self._meter.units(write, self._meter.read(write))
                table_wcu += table
                index_wcu += index
        self.calls.append(
            Call(
                role=role,
                label=self.label,
                operation=f"{model.service_model.service_name}.{model.name}",
                attempts=1 + int(parsed.get("ResponseMetadata", {}).get("RetryAttempts", 0)),
                seconds=seconds,
                table_wcu=table_wcu,
                index_wcu=index_wcu,
                failed=http_response.status_code >= 300,
            )
        )

    def operations(self, label: str | None = None, role: str | None = None) -> Counter[str]:
        return Counter(
            call.operation
            for call in self.calls
            if (label is None or call.label == label) and (role is None or call.role == role)
        )
