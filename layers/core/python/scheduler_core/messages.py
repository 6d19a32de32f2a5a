"""What the priority queues carry and when (DESIGN §3): a run message, a pointer to one
attempt of a run, and its delay. Pure: the SQS adapter (`queues`) and the services share it."""

from __future__ import annotations

import math
from datetime import datetime

from scheduler_core.clock import to_ms
from scheduler_core.model import Run, RunMessage

MAX_DELAY_SECONDS = 900  # SQS's ceiling for DelaySeconds
BATCH_SIZE = 10  # SQS's ceiling for a batch: send, receive, delete, change visibility


def delay_seconds(fire_at: datetime, now: datetime, lead_seconds: int = 0) -> int:
    """Whole seconds until `lead_seconds` before `fire_at`, floored and clamped to what SQS
    accepts (0..900). The lead makes the message visible early: queue pollers notice delayed
    messages only about once a second, and the worker waits out the rest itself."""
    seconds = math.floor((fire_at - now).total_seconds()) - lead_seconds
    return max(0, min(MAX_DELAY_SECONDS, seconds))


def run_message(run: Run) -> RunMessage:
    return RunMessage(
        job_id=run.job_id,
        run_id=run.run_id,
        scheduled_for_ms=run.scheduled_for_ms,
        attempt=run.attempt,
        not_before_ms=to_ms(run.next_attempt_at) if run.next_attempt_at else None,
    )
