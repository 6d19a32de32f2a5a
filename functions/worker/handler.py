"""The worker: SQS batches from the priority queues, records executed concurrently (a slow
target must not make the other runs of its batch late), failures reported per record."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from typing import Any

from aws_lambda_powertools.utilities.batch import (
    AsyncBatchProcessor,
    EventType,
    async_process_partial_response,
)
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from scheduler_core.adapters.queues import SqsMessageLease, queue_url_for_arn
from scheduler_core.composition import default_clients, default_run_executor
from scheduler_core.domain.messages import RunMessage
from scheduler_core.domain.outcomes import Outcome
from scheduler_core.domain.vocabulary import Priority
from scheduler_core.observability import inject_invocation, metrics, tracer
from scheduler_core.services.execution import RunExecutor, RunNotDueYet
from scheduler_core.settings import settings_from_env


@lru_cache(maxsize=1)
def record_threads() -> ThreadPoolExecutor:
    """One thread per record of the largest batch (`WORKER_BATCH_SIZE`, from the mappings'
    batch sizes): asyncio's default pool has min(32, CPUs + 4) threads, 6 on a 2-CPU worker,
    so the rest of a batch of 10 waited for a whole call — measured as HIGH's p95 start
    latency in `make bench`."""
    return ThreadPoolExecutor(max_workers=settings_from_env().worker_batch_size, thread_name_prefix="record")


def record_handler_for(executor: RunExecutor, queue_urls: list[str]) -> Any:
    async def handle_record(record: SQSRecord) -> str:
        # A malformed body raises here: reported as a failed item, it returns to the
        # queue and, after maxReceiveCount, lands on the DLQ. The batch goes on.
        message = RunMessage.model_validate_json(record.body)
        queue_url = queue_url_for_arn(record.event_source_arn, queue_urls)
        lease = SqsMessageLease(default_clients(), queue_url, record.receipt_handle) if queue_url else None
        try:
            loop = asyncio.get_running_loop()
            outcome: Outcome = await loop.run_in_executor(record_threads(), executor.execute, message, lease)
        except RunNotDueYet as early:
            # Far too early (a clock or a queue out of step): hide it until shortly before
            # its time instead of waiting out the whole visibility timeout.
            if lease is not None:
                lease.hide_for(max(0, int(early.seconds) - 1))
            raise
        return str(outcome)

    return handle_record


@inject_invocation
@metrics.log_metrics
@tracer.capture_lambda_handler
def handler(
    event: dict[str, Any], context: LambdaContext, executor: RunExecutor | None = None
) -> PartialItemFailureResponse:
    # A batch of nothing but poison messages is still reported item by item, not as a
    # function error: the redrive policy dead-letters them without tripping error alarms.
    processor = AsyncBatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
    metrics.add_metric(name="RecordsReceived", unit="Count", value=len(event.get("Records", [])))
    executor = executor or default_run_executor()
    executor.begin_invocation(context)
    settings = settings_from_env()
    queue_urls = [settings.queue_url(priority) for priority in Priority]
    return async_process_partial_response(
        event=event,
        record_handler=record_handler_for(executor, queue_urls),
        processor=processor,
        context=context,
    )
