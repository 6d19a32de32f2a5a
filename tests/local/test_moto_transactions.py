"""The local cloud's moto runs TransactWriteItems with item-level rollback
(`infra.local.moto_process.roll_back_items_not_tables`): same outcomes as stock moto,
without deep-copying the table."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws
from moto.backends import get_backend

from infra.local.moto_process import roll_back_items_not_tables

TABLE = "items"


@pytest.fixture
def dynamodb() -> Iterator[Any]:
    undo = roll_back_items_not_tables()
    try:
        with mock_aws():
            client = boto3.client("dynamodb", region_name="us-east-1")
            client.create_table(
                TableName=TABLE,
                KeySchema=[
                    {"AttributeName": "pk", "KeyType": "HASH"},
                    {"AttributeName": "sk", "KeyType": "RANGE"},
                ],
                AttributeDefinitions=[
                    {"AttributeName": "pk", "AttributeType": "S"},
                    {"AttributeName": "sk", "AttributeType": "S"},
                ],
                BillingMode="PAY_PER_REQUEST",
            )
            client.put_item(TableName=TABLE, Item={"pk": {"S": "a"}, "sk": {"S": "1"}, "n": {"N": "1"}})
            yield client
    finally:
        undo()


def table_object() -> Any:
    return get_backend("dynamodb")["123456789012"]["us-east-1"].tables[TABLE]


def items(client: Any) -> list[dict[str, Any]]:
    return sorted(client.scan(TableName=TABLE)["Items"], key=lambda item: (item["pk"]["S"], item["sk"]["S"]))


def bump_a() -> dict[str, Any]:
    return {
        "Update": {
            "TableName": TABLE,
            "Key": {"pk": {"S": "a"}, "sk": {"S": "1"}},
            "UpdateExpression": "SET n = n + :one",
            "ExpressionAttributeValues": {":one": {"N": "1"}},
        }
    }


def put_b(condition: str = "attribute_not_exists(sk)") -> dict[str, Any]:
    return {
        "Put": {
            "TableName": TABLE,
            "Item": {"pk": {"S": "b"}, "sk": {"S": "1"}},
            "ConditionExpression": condition,
        }
    }


def test_a_transaction_that_succeeds_applies_every_item(dynamodb: Any) -> None:
    dynamodb.transact_write_items(TransactItems=[bump_a(), put_b()])

    assert [item["pk"]["S"] for item in items(dynamodb)] == ["a", "b"]
    assert items(dynamodb)[0]["n"] == {"N": "2"}


def test_a_failed_condition_undoes_the_items_written_before_it(dynamodb: Any) -> None:
    before = items(dynamodb)
    table = table_object()

    with pytest.raises(ClientError) as raised:
        dynamodb.transact_write_items(TransactItems=[bump_a(), put_b("attribute_exists(sk)")])

    assert raised.value.response["Error"]["Code"] == "TransactionCanceledException"
    assert items(dynamodb) == before
    assert table_object() is table  # restored item by item, not swapped for a copy of the table


def test_an_item_created_by_a_failed_transaction_is_removed_again(dynamodb: Any) -> None:
    failing_update = bump_a()["Update"] | {"ConditionExpression": "n = :zero"}
    failing_update["ExpressionAttributeValues"] = {":one": {"N": "1"}, ":zero": {"N": "0"}}

    with pytest.raises(ClientError):
        dynamodb.transact_write_items(TransactItems=[put_b(), {"Update": failing_update}])

    assert [item["pk"]["S"] for item in items(dynamodb)] == ["a"]


def test_two_writes_to_one_item_are_refused_and_change_nothing(dynamodb: Any) -> None:
    before = items(dynamodb)

    with pytest.raises(ClientError) as raised:
        dynamodb.transact_write_items(TransactItems=[bump_a(), bump_a()])

    assert raised.value.response["Error"]["Code"] == "ValidationException"
    assert items(dynamodb) == before
