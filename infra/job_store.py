"""The `jobs` table (jobs, runs, shard watermarks; DESIGN §2) and the idempotency table."""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from constructs import Construct

DUE_INDEX = "due"
TENANT_INDEX = "by_tenant"


def _key(name: str, attribute_type: dynamodb.AttributeType) -> dynamodb.Attribute:
    return dynamodb.Attribute(name=name, type=attribute_type)


_PITR = dynamodb.PointInTimeRecoverySpecification(point_in_time_recovery_enabled=True)


class JobStore(Construct):
    """Both tables on demand with point-in-time recovery.

    `dynamodb.Table`, not `TableV2`: the template also deploys into moto's CloudFormation,
    which has no AWS::DynamoDB::GlobalTable.
    """

    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        string, number = dynamodb.AttributeType.STRING, dynamodb.AttributeType.NUMBER
        self.jobs_table = dynamodb.Table(
            self,
            "Jobs",
            partition_key=_key("pk", string),
            sort_key=_key("sk", string),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            point_in_time_recovery_specification=_PITR,
            # Run items carry `expires_at` so run history ages out after RUN_RETENTION_DAYS.
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
        )
        self.jobs_table.add_global_secondary_index(
            index_name=TENANT_INDEX,
            partition_key=_key("tenant", string),
            sort_key=_key("created_key", string),
            projection_type=dynamodb.ProjectionType.KEYS_ONLY,
        )

        # Powertools idempotency layout: key `id`, TTL `expiration`.
        self.idempotency_table = dynamodb.Table(
            self,
            "Idempotency",
            partition_key=_key("id", string),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            point_in_time_recovery_specification=_PITR,
            time_to_live_attribute="expiration",
            # Short-lived records (a day) that only deduplicate creates sent again.
            removal_policy=RemovalPolicy.DESTROY,
        )

    def jobs_index_arn(self, index_name: str) -> str:
        """The ARN IAM needs for a Query on one of the jobs table's indexes."""
        return f"{self.jobs_table.table_arn}/index/{index_name}"
