"""The jobs table on DynamoDB (DESIGN §2): jobs, runs and shard watermarks in one table,
one module per port (`store` puts them together), on a shared item codec, conditions and
transactions."""

from scheduler_core.adapters.dynamodb.job_listing import FILTERED_READ_BUDGET
from scheduler_core.adapters.dynamodb.store import DynamoJobStore
from scheduler_core.adapters.dynamodb.table import DUE_INDEX, DUE_PAGE, TENANT_INDEX

__all__ = ["DUE_INDEX", "DUE_PAGE", "FILTERED_READ_BUDGET", "TENANT_INDEX", "DynamoJobStore"]
