"""What the priority queues carry and when (DESIGN §3): a run message, a pointer to one
attempt of a run, and its delay; a DLQ record; runs gathered into batches of one priority
(`Outbox`). Pure: the SQS adapter (`queues`) and the services share it."""

from __future__ import annotations

import hashlib
import math
import re
import threading
from collections.abc import Callable
from datetime import datetime
from typing import Literal

from pydantic import Field

from scheduler_core.domain.clock import to_ms
from scheduler_core.domain.entities import Run
from scheduler_core.domain.strict import StrictModel
from scheduler_core.domain.vocabulary import Priority

MAX_DELAY_SECONDS = 900  # SQS's ceiling for DelaySeconds
BATCH_SIZE = 10  # SQS's ceiling for a batch: send, receive, delete, change visibility


class RunMessage(StrictModel):
    """What a priority queue carries: a pointer to a run, never the job itself."""

    job_id: str = Field(min_length=1)
    run_id: str = Field(min_length=1)
    scheduled_for_ms: int = Field(ge=0)
    attempt: int = Field(ge=1)
    # A retry's own time (epoch ms), or a jittered first attempt's, later than the scheduled
    # time; absent for an attempt due at the scheduled time.
    not_before_ms: int | None = Field(None, ge=0)
    # The run is kept with its job (`Run.with_job`): where the worker's writes go first.
    with_job: bool = False
    # Sent by a poll without a claim: the job's version as the poll read it. The worker's
    # start claims the firing (`claim_and_start_if_unchanged`); None: the run is claimed.
    claim_version: int | None = Field(None, ge=1)

    @property
    def due_ms(self) -> int:
        return max(self.scheduled_for_ms, self.not_before_ms or 0)


class DeadLetter(StrictModel):
    """What the DLQ carries for a run whose attempts are spent (poison messages reach the
    DLQ as they are, through the queues' redrive policy)."""

    kind: Literal["RUN_FAILED"] = "RUN_FAILED"
    job_id: str
    run_id: str
    scheduled_for: str
    attempts: int
    last_error: str | None
    response_code: int | None = None
    failed_at: str
    message: RunMessage


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
        with_job=run.with_job,
        claim_version=run.claim_version,
    )


class Outbox:
    """A poll's claimed runs on their way to the queues (one per priority): whichever claim
    fills a batch of `batch` runs of one priority sends it, on its own thread, while the other
    claims go on; `flush` sends what is left once the bucket is claimed. What could not be
    sent is kept in `unsent` (their timers have a later poll send them)."""

    def __init__(self, send: Callable[[list[Run]], list[Run]], batch: int = BATCH_SIZE) -> None:
        self._send = send
        self._batch = batch
        self._lock = threading.Lock()
        self._waiting: dict[Priority, list[Run]] = {}
        self.unsent: list[Run] = []

    def add(self, runs: list[Run]) -> None:
        full: list[list[Run]] = []
        with self._lock:
            for run in runs:
                waiting = self._waiting.setdefault(run.priority, [])
                waiting.append(run)
                if len(waiting) >= self._batch:
                    full.append(waiting)
                    self._waiting[run.priority] = []
        for batch in full:
            self._sent(batch)

    def flush(self) -> None:
        with self._lock:
            left = [run for waiting in self._waiting.values() for run in waiting]
            self._waiting = {}
        if left:
            self._sent(left)

    def _sent(self, runs: list[Run]) -> None:
        unsent = self._send(runs)
        with self._lock:
            self.unsent += unsent


# SQS/SNS FIFO group and deduplication ids: 1-128 ASCII letters, digits and punctuation.
_FIFO_ID = re.compile(r"[A-Za-z0-9!-/:-@\[-`{-~]{1,128}")


def fifo_id(value: str) -> str:
    """`value` as a FIFO MessageGroupId / MessageDeduplicationId: itself when SQS and SNS
    accept it (job and run ids always are), else its SHA-256 in hex (64 characters), still
    one id per value."""
    return value if _FIFO_ID.fullmatch(value) else hashlib.sha256(value.encode()).hexdigest()
