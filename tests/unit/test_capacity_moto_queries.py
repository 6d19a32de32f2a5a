"""The simulation's faster moto queries answer exactly as moto does (`bench.capacity.moto_queries`)."""

from __future__ import annotations

from typing import Any

import boto3
from moto import mock_aws

from bench.capacity.moto_queries import queries_read_their_key_only


def _table() -> Any:
    ddb = boto3.client("dynamodb", region_name="us-east-1")
    ddb.create_table(
        TableName="t",
        BillingMode="PAY_PER_REQUEST",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
            {"AttributeName": "due_pk", "AttributeType": "S"},
            {"AttributeName": "due_sk", "AttributeType": "N"},
        ],
        GlobalSecondaryIndexes=[
            {
                "IndexName": "due",
                "KeySchema": [
                    {"AttributeName": "due_pk", "KeyType": "HASH"},
                    {"AttributeName": "due_sk", "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "KEYS_ONLY"},
            }
        ],
    )
    for n in range(60):
        item = {"pk": {"S": f"JOB#{n % 7}"}, "sk": {"S": f"RUN#{n:03d}"}, "v": {"N": str(n)}}
        if n % 4:  # a sparse index: some items have no entry
            item |= {"due_pk": {"S": f"B#{n % 3}"}, "due_sk": {"N": str(1000 - n * 7 % 50)}}
        ddb.put_item(TableName="t", Item=item)
    return ddb


def _pages(ddb: Any, **query: Any) -> list[list[dict[str, Any]]]:
    pages, start = [], None
    while True:
        page = ddb.query(TableName="t", Limit=4, **query, **({"ExclusiveStartKey": start} if start else {}))
        pages.append(page["Items"])
        start = page.get("LastEvaluatedKey")
        if not start:
            return pages


QUERIES: list[dict[str, Any]] = [
    {"KeyConditionExpression": "pk = :p", "ExpressionAttributeValues": {":p": {"S": "JOB#3"}}},
    {
        "KeyConditionExpression": "pk = :p AND begins_with(sk, :r)",
        "ExpressionAttributeValues": {":p": {"S": "JOB#5"}, ":r": {"S": "RUN#0"}},
        "ScanIndexForward": False,
    },
    {
        "IndexName": "due",
        "KeyConditionExpression": "due_pk = :b AND due_sk <= :u",
        "ExpressionAttributeValues": {":b": {"S": "B#1"}, ":u": {"N": "990"}},
    },
    {
        "IndexName": "due",
        "KeyConditionExpression": "due_pk = :b",
        "ExpressionAttributeValues": {":b": {"S": "B#2"}},
        "ScanIndexForward": False,
    },
    {"KeyConditionExpression": "pk = :p", "ExpressionAttributeValues": {":p": {"S": "JOB#none"}}},
]


def test_queries_and_their_pages_are_moto_s_own_and_scans_are_untouched():
    with mock_aws():
        ddb = _table()
        expected = [_pages(ddb, **query) for query in QUERIES]
        scan = ddb.scan(TableName="t", Limit=9)["Items"]
        with queries_read_their_key_only():
            assert [_pages(ddb, **query) for query in QUERIES] == expected
            assert ddb.scan(TableName="t", Limit=9)["Items"] == scan
        assert sum(len(page) for page in expected[2]) > 4  # paged: the resume keys were followed
        assert expected[4] == [[]]
