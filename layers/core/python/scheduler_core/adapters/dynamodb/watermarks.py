"""The `Watermarks` port on the jobs table: the oldest minute bucket of each shard a poll has
not drained (DESIGN §2), only ever moved forward; and, beside it on the same item, where the
shard's next poll resumes claiming a bucket a poll stopped in, and the time before which its
polls sent every one-off firing they send unclaimed."""

from __future__ import annotations

from botocore.exceptions import ClientError

from scheduler_core.adapters.dynamodb.codec import expression_values, from_item, to_item
from scheduler_core.adapters.dynamodb.table import TableAdapter, condition_failed
from scheduler_core.domain import keys
from scheduler_core.poll_ports import PollResume, Watermark


class WatermarksTable(TableAdapter):
    def get_watermark(self, shard: int) -> Watermark | None:
        reply = self._ddb.get_item(
            TableName=self._table,
            Key=to_item({"pk": keys.shard_pk(shard), "sk": keys.WATERMARK_SK}),
            ConsistentRead=True,
        )
        item = reply.get("Item")
        if not item or "bucket_ms" not in item:
            return None
        values = from_item(item)
        resume = None
        if "resume_bucket_ms" in values and "resume_after" in values:
            resume = PollResume(int(values["resume_bucket_ms"]), str(values["resume_after"]))
        sent = values.get("sent_until_ms")
        return Watermark(int(values["bucket_ms"]), resume, int(sent) if sent is not None else None)

    def set_poll_resume(self, shard: int, resume: PollResume | None) -> None:
        """Unconditional: a hint of where to claim first, which no guarantee rests on."""
        key = to_item({"pk": keys.shard_pk(shard), "sk": keys.WATERMARK_SK})
        if resume is None:
            self._ddb.update_item(
                TableName=self._table, Key=key, UpdateExpression="REMOVE resume_bucket_ms, resume_after"
            )
            return
        self._ddb.update_item(
            TableName=self._table,
            Key=key,
            UpdateExpression="SET resume_bucket_ms = :bucket, resume_after = :after",
            ExpressionAttributeValues=expression_values(bucket=resume.bucket_ms, after=resume.after),
        )

    def raise_sent_until(self, shard: int, sent_until_ms: int) -> None:
        """`Watermarks.raise_sent_until`: only ever moved forward."""
        self._raise_if_lower(shard, "sent_until_ms", sent_until_ms)

    def advance_watermark(self, shard: int, bucket_ms: int) -> None:
        """Move the watermark forward only: a poller with a slow clock never moves it back."""
        self._raise_if_lower(shard, "bucket_ms", bucket_ms)

    def _raise_if_lower(self, shard: int, attribute: str, value: int) -> None:
        """Set the shard's `attribute` to `value` on the condition that it is lower or absent."""
        try:
            self._ddb.update_item(
                TableName=self._table,
                Key=to_item({"pk": keys.shard_pk(shard), "sk": keys.WATERMARK_SK}),
                UpdateExpression="SET #a = :value",
                ConditionExpression="attribute_not_exists(#a) OR #a < :value",
                ExpressionAttributeNames={"#a": attribute},
                ExpressionAttributeValues=expression_values(value=value),
            )
        except ClientError as error:
            if not condition_failed(error):
                raise
