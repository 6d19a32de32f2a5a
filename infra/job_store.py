"""The `jobs` table (jobs, runs, shard watermarks; DESIGN §2) and the idempotency table."""

from __future__ import annotations

from typing import Any

from aws_cdk import RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from constructs import Construct

from infra.config import TableCapacity
from infra.keys import StackKeys

# checkov: "Ensure DynamoDB Tables are encrypted using a KMS Customer Managed CMK".
CMK_CHECK = "CKV_AWS_119"

DUE_INDEX = "due"
TENANT_INDEX = "by_tenant"


def _key(name: str, attribute_type: dynamodb.AttributeType) -> dynamodb.Attribute:
    return dynamodb.Attribute(name=name, type=attribute_type)


_PITR = dynamodb.PointInTimeRecoverySpecification(point_in_time_recovery_enabled=True)


class JobStore(Construct):
    """Both tables with point-in-time recovery, billed as context `table_capacity` says: on
    demand, or provisioned with auto scaling (`infra.config.TableCapacity`); encrypted under
    the stack's data key if it has one (`infra.keys.StackKeys`).

    `dynamodb.Table`, not `TableV2`: the template also deploys into moto's CloudFormation,
    which has no AWS::DynamoDB::GlobalTable.
    """

    def __init__(
        self, scope: Construct, construct_id: str, *, capacity: TableCapacity, keys: StackKeys
    ) -> None:
        super().__init__(scope, construct_id)
        self._capacity = capacity
        self._keys = keys
        string, number = dynamodb.AttributeType.STRING, dynamodb.AttributeType.NUMBER
        self.jobs_table = dynamodb.Table(
            self,
            "Jobs",
            partition_key=_key("pk", string),
            sort_key=_key("sk", string),
            **self._billing(),
            **self._warm(),
            **self._encryption(),
            point_in_time_recovery_specification=_PITR,
            # Run items and ended jobs carry `expires_at`: history ages out after RUN_RETENTION_DAYS.
            time_to_live_attribute="expires_at",
            # The jobs are the users' data: deleting the stack must not delete them.
            removal_policy=RemovalPolicy.RETAIN,
        )
        # Sparse: an item is in it only while a timer of it is pending (next firing,
        # lease expiry, long retry). `due_pk` = minute bucket#shard, `due_sk` = fire time ms.
        # Both indexes hold keys only: an index entry is written when its keys change, not
        # with every change of its item (a claim, a start, a finish), which would cost a
        # write unit each; readers fetch the items themselves with BatchGetItem.
        self.jobs_table.add_global_secondary_index(
            index_name=DUE_INDEX,
            partition_key=_key("due_pk", string),
            sort_key=_key("due_sk", number),
            projection_type=dynamodb.ProjectionType.KEYS_ONLY,
            **self._units(),
            **self._warm(),
        )
        self.jobs_table.add_global_secondary_index(
            index_name=TENANT_INDEX,
            partition_key=_key("tenant", string),
            sort_key=_key("created_key", string),
            projection_type=dynamodb.ProjectionType.KEYS_ONLY,
            **self._units(),
            **self._warm(),
        )

        # Powertools idempotency layout: key `id`, TTL `expiration`.
        self.idempotency_table = dynamodb.Table(
            self,
            "Idempotency",
            partition_key=_key("id", string),
            **self._billing(),
            **self._encryption(),
            point_in_time_recovery_specification=_PITR,
            time_to_live_attribute="expiration",
            # Short-lived records (a day) that only deduplicate creates sent again.
            removal_policy=RemovalPolicy.DESTROY,
        )
        if capacity.provisioned:
            self._scale(self.jobs_table, indexes=(DUE_INDEX, TENANT_INDEX))
            self._scale(self.idempotency_table, indexes=())
        for table in (self.jobs_table, self.idempotency_table):
            keys.skip_if_aws_keys(table, CMK_CHECK)

    def _encryption(self) -> dict[str, Any]:
        """A table's encryption: the stack's data key, else DynamoDB's own key (the default)."""
        if self._keys.data is None:
            return {}
        return {"encryption": dynamodb.TableEncryption.CUSTOMER_MANAGED, "encryption_key": self._keys.data}

    def _units(self) -> dict[str, Any]:
        """A provisioned table's or index's least units (none on demand)."""
        if not self._capacity.provisioned:
            return {}
        return {"read_capacity": self._capacity.read_min, "write_capacity": self._capacity.write_min}

    def _warm(self) -> dict[str, Any]:
        """The jobs table's and its indexes' warm throughput, if context sets it: what they
        serve at once in a burst (the idempotency table sees only creates)."""
        capacity = self._capacity
        if capacity.warm_read is None and capacity.warm_write is None:
            return {}
        return {
            "warm_throughput": dynamodb.WarmThroughput(
                read_units_per_second=capacity.warm_read, write_units_per_second=capacity.warm_write
            )
        }

    def _billing(self) -> dict[str, Any]:
        """A table's billing properties."""
        mode = (
            dynamodb.BillingMode.PROVISIONED
            if self._capacity.provisioned
            else dynamodb.BillingMode.PAY_PER_REQUEST
        )
        return {"billing_mode": mode, **self._units()}

    def _scale(self, table: dynamodb.Table, indexes: tuple[str, ...]) -> None:
        """Target tracking on the table's and each index's read and write units."""
        capacity = self._capacity
        target = capacity.target_utilization_percent
        table.auto_scale_read_capacity(
            min_capacity=capacity.read_min, max_capacity=capacity.read_max
        ).scale_on_utilization(target_utilization_percent=target)
        table.auto_scale_write_capacity(
            min_capacity=capacity.write_min, max_capacity=capacity.write_max
        ).scale_on_utilization(target_utilization_percent=target)
        for index in indexes:
            table.auto_scale_global_secondary_index_read_capacity(
                index, min_capacity=capacity.read_min, max_capacity=capacity.read_max
            ).scale_on_utilization(target_utilization_percent=target)
            table.auto_scale_global_secondary_index_write_capacity(
                index, min_capacity=capacity.write_min, max_capacity=capacity.write_max
            ).scale_on_utilization(target_utilization_percent=target)

    def jobs_index_arn(self, index_name: str) -> str:
        """The ARN IAM needs for a Query on one of the jobs table's indexes."""
        return f"{self.jobs_table.table_arn}/index/{index_name}"
