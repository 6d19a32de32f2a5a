"""moto in server mode as the local cloud runs it: `python -m infra.local.moto_process -H
HOST -p PORT`. What differs from `python -m moto.server`:

- DynamoDB requests are handled one at a time. moto's DynamoDB backend is not thread-safe:
  TransactWriteItems deep-copies a table for rollback while other requests write to it, and
  answers 500 ("dictionary changed size during iteration"). Other services, SQS's long
  polls among them, stay concurrent.
- A failed TransactWriteItems rolls back the items it touched, not the whole table: moto
  deep-copies every table a transaction names before it starts (about 44 ms per claim at
  1,260 items, growing with the table), and with DynamoDB serialized every other request
  waited for that copy. Safe because DynamoDB requests run one at a time here.
- A received message's retention check reads the queue's retention period alone: moto
  computes every attribute of the queue for it, the approximate counts among them, each a
  pass over every message (delayed ones included) with a clock read per message, for every
  message it hands out. With the runs of a few minutes delayed in a queue that was about a
  seventh of moto's busy time in a chaos soak, and the soak's creates fell behind their plan.
- The garbage collector's thresholds: with the defaults, moto paused 1-2.4 s every half
  minute under load, making every run due in that time late; with these, its slowest
  trivial call measured 0.36 s instead of 1.96 s."""

from __future__ import annotations

import copy
import gc
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from moto.core.utils import unix_time
from moto.dynamodb import models as dynamodb_models
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.dynamo_type import DynamoType, Item
from moto.dynamodb.models.table import Table
from moto.dynamodb.responses import DynamoHandler
from moto.server import main
from moto.sqs.models import SQSBackend


def serialize_dynamodb() -> None:
    lock = threading.Lock()
    handle = DynamoHandler.call_action

    def call_action_alone(self: DynamoHandler) -> Any:
        with lock:
            return handle(self)

    DynamoHandler.call_action = call_action_alone  # type: ignore[method-assign]


class _TablesByReference:
    """Stands in for the `copy` module inside moto's DynamoDB backend during a transaction:
    a table is "copied" by reference (the items it touches are snapshotted instead);
    everything else is deep-copied as before."""

    @staticmethod
    def deepcopy(value: Any, memo: dict[int, Any] | None = None) -> Any:
        return value if isinstance(value, Table) else copy.deepcopy(value, memo)


_Snapshot = tuple[Table, DynamoType, DynamoType | None, Item | None]


def _snapshot(backend: DynamoDBBackend, entry: dict[str, Any]) -> _Snapshot | None:
    """A copy of the item one transaction entry names, as it is now (None inside: absent).
    An entry moto will refuse (unknown table, bad key) is not snapshotted: it changes nothing."""
    try:
        op_type, op = next(iter(entry.items()))
        table = backend.get_table(op["TableName"])
        key = op["Key"] if op_type != "Put" else {name: op["Item"][name] for name in table.table_key_attrs}
        hash_key, range_key = backend.get_keys_value(table, key)
        return table, hash_key, range_key, copy.deepcopy(table.get_item(hash_key, range_key))
    except Exception:
        return None


def _restore(snapshot: _Snapshot) -> None:
    table, hash_key, range_key, item = snapshot
    if item is None:
        table.delete_item(hash_key, range_key)
    elif range_key is not None:
        table.items[hash_key][range_key] = item
    else:
        table.items[hash_key] = item  # type: ignore[assignment]


@contextmanager
def _tables_copied_by_reference() -> Iterator[None]:
    setattr(dynamodb_models, "copy", _TablesByReference)  # noqa: B010 (moto's module global)
    try:
        yield
    finally:
        setattr(dynamodb_models, "copy", copy)  # noqa: B010


def roll_back_items_not_tables() -> Callable[[], None]:
    """Make a failed TransactWriteItems restore the items it touched instead of whole tables.
    Requires DynamoDB requests to run one at a time (`serialize_dynamodb`). Returns the undo."""
    transact = DynamoDBBackend.transact_write_items

    def transact_write_items(self: DynamoDBBackend, transact_items: list[dict[str, Any]]) -> None:
        snapshots = [snapshot for entry in transact_items if (snapshot := _snapshot(self, entry))]
        try:
            with _tables_copied_by_reference():
                transact(self, transact_items)
        except Exception:
            for snapshot in reversed(snapshots):
                _restore(snapshot)
            raise

    DynamoDBBackend.transact_write_items = transact_write_items  # type: ignore[method-assign]

    def undo() -> None:
        DynamoDBBackend.transact_write_items = transact  # type: ignore[method-assign]

    return undo


def retention_checked_alone() -> Callable[[], None]:
    """moto's check that a received message is within its queue's retention period, with the
    period read from the queue itself (the same value `get_queue_attributes` would give,
    without computing every other attribute for it). Returns the undo."""
    check = SQSBackend.is_message_valid_based_on_retention_period

    def is_message_valid_based_on_retention_period(self: SQSBackend, queue_name: str, message: Any) -> bool:
        # moto sets each attribute of the queue as its own (`Queue._set_attributes`).
        retention_period = int(self.get_queue(queue_name).message_retention_period)  # type: ignore[attr-defined]
        return bool(retention_period + message.sent_timestamp / 1000 > unix_time())

    SQSBackend.is_message_valid_based_on_retention_period = (  # type: ignore[method-assign]
        is_message_valid_based_on_retention_period
    )

    def undo() -> None:
        SQSBackend.is_message_valid_based_on_retention_period = check  # type: ignore[method-assign]

    return undo


if __name__ == "__main__":
    serialize_dynamodb()
    retention_checked_alone()
    roll_back_items_not_tables()
    gc.set_threshold(50_000, 50, 1_000)
    main(sys.argv[1:])
