"""The worker: SQS batches from the priority queues, records executed concurrently (a slow
target must not make the other runs of its batch late), failures reported per record."""

from __future__ import annotations

import asyncio
from typing import Any

from aws_lambda_powertools.utilities.batch import (
    AsyncBatchProcessor,
    EventType,
    async_process_partial_response,
)
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from scheduler_core.composition import default_run_executor
from scheduler_core.execution import Outcome, RunExecutor
from scheduler_core.model import RunMessage
from scheduler_core.observability import logger, metrics, tracer


def record_handler_for(executor: RunExecutor) -> Any:
    async def handle_record(record: SQSRecord) -> str:
        # A malformed body raises here: reported as a failed item, it returns to the
        # queue and, after maxReceiveCount, lands on the DLQ. The batch goes on.
        message = RunMessage.model_validate_json(record.body)
        outcome: Outcome = await asyncio.to_thread(executor.execute, message)
        return str(outcome)

    return handle_record


@logger.inject_lambda_context
@metrics.log_metrics
@tracer.capture_lambda_handler
def handler(
    event: dict[str, Any], context: LambdaContext, executor: RunExecutor | None = None
) -> PartialItemFailureResponse:
    # A batch of nothing but poison messages is still reported item by item, not as a
    # function error: the redrive policy dead-letters them without tripping error alarms.
    processor = AsyncBatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
    metrics.add_metric(name="RecordsReceived", unit="Count", value=len(event.get("Records", [])))
    return async_process_partial_response(
        event=event,
        record_handler=record_handler_for(executor or default_run_executor()),
        processor=processor,
        context=context,
    )
