"""The `SigningKeyRecords` port on the jobs table: one item per tenant,
pk `SIGNING#<tenant>`, holding its sealed webhook signing keys and a version."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError

from scheduler_core.adapters.dynamodb.codec import expression_values, from_item, to_item
from scheduler_core.adapters.dynamodb.table import TableAdapter, condition_failed
from scheduler_core.domain import keys
from scheduler_core.ports import SealedSigningKeys


class SigningKeysTable(TableAdapter):
    def get_signing_keys(self, tenant: str) -> SealedSigningKeys | None:
        reply = self._ddb.get_item(
            TableName=self._table,
            Key=to_item({"pk": keys.signing_pk(tenant), "sk": keys.SIGNING_SK}),
            ConsistentRead=True,
        )
        if "Item" not in reply:
            return None
        item = from_item(reply["Item"])
        until = item.get("previous_until")
        return SealedSigningKeys(
            sealed=str(item["sealed"]),
            version=int(item["version"]),
            created_at=datetime.fromisoformat(str(item["created_at"])),
            previous_until=datetime.fromisoformat(str(until)) if until else None,
        )

    def put_signing_keys_if_unchanged(
        self, tenant: str, signing: SealedSigningKeys, expected_version: int | None
    ) -> bool:
        item = {
            "pk": keys.signing_pk(tenant),
            "sk": keys.SIGNING_SK,
            "sealed": signing.sealed,
            "version": signing.version,
            "created_at": signing.created_at.isoformat(),
        }
        if signing.previous_until is not None:
            item["previous_until"] = signing.previous_until.isoformat()
        condition: dict[str, Any]
        if expected_version is None:
            condition = {"ConditionExpression": "attribute_not_exists(pk)"}
        else:
            condition = {
                "ConditionExpression": "version = :expected",
                "ExpressionAttributeValues": expression_values(expected=expected_version),
            }
        try:
            self._ddb.put_item(TableName=self._table, Item=to_item(item), **condition)
        except ClientError as error:
            if condition_failed(error):
                return False
            raise
        return True
