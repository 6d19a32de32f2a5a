"""`DynamoJobStore`: every port of the jobs table on one DynamoDB table, for the composition
root to hand each service.

Every write that can race states its condition in its name (`claim_if_unchanged`,
`start_run_if_waiting`, ...). A failed condition means someone else won: the method
returns False/None and the caller moves on. Throttling and transaction conflicts raise
`StoreContention` so callers can leave the work for the next attempt.
"""

from __future__ import annotations

from scheduler_core.adapters.dynamodb.due import DueIndexTable
from scheduler_core.adapters.dynamodb.jobs import JobRecordsTable
from scheduler_core.adapters.dynamodb.listing import ListingTable
from scheduler_core.adapters.dynamodb.quotas import QuotaCountersTable
from scheduler_core.adapters.dynamodb.runs import RunsTable
from scheduler_core.adapters.dynamodb.signing import SigningKeysTable
from scheduler_core.adapters.dynamodb.slots import SlotsTable
from scheduler_core.adapters.dynamodb.tenants import TenantRecordsTable
from scheduler_core.adapters.dynamodb.timers import RunTimersTable
from scheduler_core.adapters.dynamodb.watermarks import WatermarksTable
from scheduler_core.adapters.dynamodb.workflows import WorkflowRunsTable


class DynamoJobStore(
    JobRecordsTable,
    ListingTable,
    DueIndexTable,
    WatermarksTable,
    RunsTable,
    RunTimersTable,
    SlotsTable,
    WorkflowRunsTable,
    SigningKeysTable,
    QuotaCountersTable,
    TenantRecordsTable,
):
    """`JobStore` on one DynamoDB table."""
