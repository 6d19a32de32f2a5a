"""The `Watermarks` port on the jobs table: the oldest minute bucket of each shard a poll has
not drained (DESIGN §2), only ever moved forward."""

from __future__ import annotations

from botocore.exceptions import ClientError

from scheduler_core.adapters.dynamodb.codec import expression_values, from_item, to_item
from scheduler_core.adapters.dynamodb.table import TableAdapter, condition_failed
from scheduler_core.domain import keys


class WatermarksTable(TableAdapter):
    def get_watermark(self, shard: int) -> int | None:
        reply = self._ddb.get_item(
            TableName=self._table,
            Key=to_item({"pk": keys.shard_pk(shard), "sk": keys.WATERMARK_SK}),
            ConsistentRead=True,
        )
        item = reply.get("Item")
        return int(from_item(item)["bucket_ms"]) if item else None

    def advance_watermark(self, shard: int, bucket_ms: int) -> None:
        """Move the watermark forward only: a poller with a slow clock never moves it back."""
        try:
            self._ddb.update_item(
                TableName=self._table,
                Key=to_item({"pk": keys.shard_pk(shard), "sk": keys.WATERMARK_SK}),
                UpdateExpression="SET bucket_ms = :bucket",
                ConditionExpression="attribute_not_exists(bucket_ms) OR bucket_ms < :bucket",
                ExpressionAttributeValues=expression_values(bucket=bucket_ms),
            )
        except ClientError as error:
            if not condition_failed(error):
                raise
