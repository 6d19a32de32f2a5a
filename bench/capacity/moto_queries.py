"""moto's DynamoDB queries, sped up for the simulation without changing an answer.

moto 5 answers a `Query` by sorting every item of the table (DynamoType comparisons, each
casting its values) and then testing each against the partition key: a poll's query of
one due bucket reads the whole table twice over. In the capacity simulation (2026-11-27,
profiled) the sort and the comparisons' casts were the largest cost after the simulation's
own modeling. Here, for the length of the context, a query's `all_items` holds only the
items of the key it asks for (the table's partition key, or every hash key attribute of the
index; string keys, compared on their raw values: any other query goes moto's own way),
unsorted: moto sorts its candidates itself afterwards (a base-table query by range key, an
index query by the index's keys and then the table's), so the answer and its order are
moto's own. Scans and every other caller of `all_items` are left as they are. The simulation
runs its tasks on one thread (greenlets), so one cell holds the query under way.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from moto.dynamodb.models.dynamo_type import DynamoType, Item
from moto.dynamodb.models.table import Table

_NOT_IN_QUERY = None


@contextlib.contextmanager
def queries_read_their_key_only() -> Iterator[None]:
    """Within the context, moto's `Table.query` looks only at items of its partition key."""
    original_query, original_all_items = Table.query, Table.all_items
    wanted: list[list[tuple[str, DynamoType]] | None] = [_NOT_IN_QUERY]

    def query(self: Table, hash_key: Any, *args: Any, **kwargs: Any) -> Any:
        index_name = kwargs.get("index_name", args[6] if len(args) > 6 else None)
        conditions = kwargs.get("hash_key_conditions")
        if index_name:
            index_hash = [
                key["AttributeName"] for key in self.get_index(index_name).schema if key["KeyType"] == "HASH"
            ]
            pairs = list(conditions) if conditions else [(index_hash[0], hash_key)]
        else:
            pairs = [(self.hash_key_attr, hash_key)]
        # Raw values compare as moto does for strings (the keys this project queries by);
        # anything else (a number, whose "1" is "1.0"; no key at all) goes moto's own way.
        strings = all(isinstance(value, DynamoType) and value.type == "S" for _, value in pairs)
        wanted[0] = pairs if strings else _NOT_IN_QUERY
        try:
            return original_query(self, hash_key, *args, **kwargs)
        finally:
            wanted[0] = _NOT_IN_QUERY

    def all_items(self: Table) -> list[Item]:
        pairs = wanted[0]
        if pairs is _NOT_IN_QUERY:
            return original_all_items(self)
        raw = [(name, value.type, value.value) for name, value in pairs]
        candidates: list[Item] = []
        for hash_set in self.items.values():
            items: Any = hash_set.values() if self.range_key_attr else (hash_set,)
            candidates += [
                item
                for item in items
                if all(_raw_equal(item.attrs.get(name), kind, value) for name, kind, value in raw)
            ]
        return candidates

    Table.query = query  # type: ignore[method-assign]
    Table.all_items = all_items  # type: ignore[method-assign]
    try:
        yield
    finally:
        Table.query, Table.all_items = original_query, original_all_items  # type: ignore[method-assign]


def _raw_equal(attribute: DynamoType | None, kind: str, value: Any) -> bool:
    return attribute is not None and attribute.type == kind and attribute.value == value
