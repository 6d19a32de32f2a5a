"""Moving the DLQ back (`make redrive`), batch by batch, through the run state machine.
What a pass does with each message is written once, in docs/operations/redrive.md; each
ends as a `RedriveOutcome`, deleted from the DLQ or kept (`KEPT`).

The DLQ holds RUN_FAILED records (`DeadLetter`, sent by `lifecycle` when a run's attempts
are spent) and raw `RunMessage`s (poison messages, moved by the queues' redrive policy after
maxReceiveCount receives). A record re-drives its run as `POST …/runs/{run_id}/retry` does
(`RunLifecycle.redrive`, conditioned on the run still FAILED at that attempt); a run message
goes back only while its run waits for that attempt (the worker's conditional start would
drop it anyway). A paused job's record is kept rather than re-driven: the worker would set
the run aside, and the resume's misfire policy could then cancel it (the API refuses such a
retry too).

SQS's StartMessageMoveTask cannot do this: it moves bodies unchanged to their source queue,
and a RUN_FAILED record has none (nor does moto have it). So a pass receives up to ten
messages, handles them, deletes what was handled, and goes on until the DLQ has nothing new.
Messages it leaves are hidden while the pass runs (so it does not read them twice) and
made visible again when it ends.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

from pydantic import ValidationError

from scheduler_core.domain import run_state
from scheduler_core.domain.entities import Job, Run
from scheduler_core.domain.messages import BATCH_SIZE, DeadLetter, RunMessage
from scheduler_core.domain.vocabulary import JobKind, JobStatus, RunStatus
from scheduler_core.domain.workflows import Phase
from scheduler_core.observability import logger
from scheduler_core.ports import (
    DeadLetterMessage,
    DeadLetterQueue,
    JobRecords,
    RunQueue,
    RunRecords,
    StoreContention,
)
from scheduler_core.services.lifecycle import RunLifecycle
from scheduler_core.services.workflow_runs import WorkflowRunner


class RedriveStore(JobRecords, RunRecords, Protocol):
    """The ports of the jobs table a re-drive reads."""


class RedriveOutcome(StrEnum):
    """What became of one DLQ message."""

    REDRIVEN = "redriven"  # a FAILED run got a new attempt; record deleted
    REQUEUED = "requeued"  # a poison run message went back to its priority queue; deleted
    STALE = "stale"  # its run moved on (no longer FAILED, or past that attempt); deleted
    GONE = "gone"  # its run or its job no longer exists; deleted
    CANCELLED = "cancelled"  # its job is cancelled, so its run is not re-driven; deleted
    PAUSED = "paused"  # its job is paused (a worker would set the run aside); kept until resumed
    UNREADABLE = "unreadable"  # neither a RUN_FAILED record nor a run message; kept
    FAILED_AGAIN = "failed_again"  # re-driven earlier in this pass and failed again; kept
    DEFERRED = "deferred"  # DynamoDB or SQS said "not now" (throttled, send failed); kept


KEPT = frozenset(
    {RedriveOutcome.PAUSED, RedriveOutcome.UNREADABLE, RedriveOutcome.FAILED_AGAIN, RedriveOutcome.DEFERRED}
)


@dataclass
class RedriveReport:
    """Counts of one pass. `deleted` < handled means some deletes failed: those messages
    come back, and the next pass finds their runs moved on (stale)."""

    outcomes: Counter[RedriveOutcome] = field(default_factory=Counter)
    received: int = 0
    deleted: int = 0

    @property
    def kept(self) -> int:
        return sum(count for outcome, count in self.outcomes.items() if outcome in KEPT)

    def as_dict(self) -> dict[str, int]:
        return {
            **{str(outcome): self.outcomes[outcome] for outcome in RedriveOutcome},
            "received": self.received,
            "deleted": self.deleted,
            "kept": self.kept,
        }


class DeadLetterRedriver:
    def __init__(
        self,
        store: RedriveStore,
        queue: RunQueue,
        lifecycle: RunLifecycle,
        dead_letters: DeadLetterQueue,
        workflows: WorkflowRunner | None = None,
    ) -> None:
        """`workflows`: a workflow task's failed run is re-driven as a retry of the task, its
        workflow run first (none: a store without workflows)."""
        self._store = store
        self._queue = queue
        self._lifecycle = lifecycle
        self._dead_letters = dead_letters
        self._workflows = workflows

    def redrive(self, limit: int | None = None) -> RedriveReport:
        """One pass over the DLQ, of at most `limit` messages (all of them if None)."""
        report = RedriveReport()
        seen: set[str] = set()
        redriven_runs: set[str] = set()
        kept: dict[str, DeadLetterMessage] = {}
        try:
            while limit is None or report.received < limit:
                wanted = BATCH_SIZE if limit is None else min(BATCH_SIZE, limit - report.received)
                batch = self._dead_letters.receive(wanted)
                fresh = [message for message in batch if message.message_id not in seen]
                # A kept message seen again (the pass outlasted its hiding): keep its new handle.
                kept |= {m.message_id: m for m in batch if m.message_id in seen}
                if not fresh:
                    break
                handled: list[DeadLetterMessage] = []
                try:
                    for message in fresh:
                        seen.add(message.message_id)
                        report.received += 1
                        outcome = self._handle(message, redriven_runs)
                        report.outcomes[outcome] += 1
                        if outcome in KEPT:
                            kept[message.message_id] = message
                        else:
                            handled.append(message)
                finally:
                    report.deleted += self._dead_letters.delete(handled) if handled else 0
        finally:
            self._dead_letters.release(list(kept.values()))
        logger.info("dead-letter queue re-driven", extra=report.as_dict())
        return report

    def _handle(self, message: DeadLetterMessage, redriven_runs: set[str]) -> RedriveOutcome:
        parsed = _parse(message.body)
        try:
            if isinstance(parsed, DeadLetter):
                outcome = self._redrive_failed_run(parsed, redriven_runs)
            elif isinstance(parsed, RunMessage):
                outcome = self._requeue(parsed)
            else:
                outcome = RedriveOutcome.UNREADABLE
        except StoreContention as error:
            logger.warning("store contended; message kept", extra={"error": str(error)})
            outcome = RedriveOutcome.DEFERRED
        if outcome is not RedriveOutcome.REDRIVEN and outcome is not RedriveOutcome.REQUEUED:
            run_id = parsed.run_id if parsed is not None else None
            logger.info(f"dead letter {outcome}", extra={"message_id": message.message_id, "run_id": run_id})
        return outcome

    def _redrive_failed_run(self, record: DeadLetter, redriven_runs: set[str]) -> RedriveOutcome:
        run = self._store.get_run(record.message.job_id, record.message.scheduled_for_ms)
        if run is None:
            return RedriveOutcome.GONE
        if run.status is not RunStatus.FAILED:
            return RedriveOutcome.STALE
        if run.run_id in redriven_runs:
            # Its new round failed before this pass ended: a new failure, for the next pass.
            return RedriveOutcome.FAILED_AGAIN
        job = self._store.get_job(run.job_id)
        if job is None:
            return RedriveOutcome.GONE
        if job.status is JobStatus.CANCELLED:
            return RedriveOutcome.CANCELLED
        if job.status is JobStatus.PAUSED:
            # Re-driven now, the run would be set aside by the worker and could be cancelled by
            # the resume (its misfire policy): its record waits.
            return RedriveOutcome.PAUSED
        if job.kind is JobKind.TASK and self._workflows is not None:
            return self._redrive_task(job, run, redriven_runs)
        if self._lifecycle.redrive(run, job) is None:
            return RedriveOutcome.STALE  # moved on between our read and the conditional update
        redriven_runs.add(run.run_id)
        return RedriveOutcome.REDRIVEN

    def _redrive_task(self, task: Job, run: Run, redriven_runs: set[str]) -> RedriveOutcome:
        """A workflow task's failed run: re-driven as a retry of the task (the workflow run's
        phases first, so its success is joined even if a worker dies), unless its workflow
        run was cancelled."""
        assert self._workflows is not None
        assert task.workflow_id is not None
        assert task.task_id is not None
        workflow_run = self._store.get_run(task.workflow_id, run.scheduled_for_ms)
        if workflow_run is not None and workflow_run.status is RunStatus.CANCELLED:
            return RedriveOutcome.CANCELLED
        state = workflow_run.workflow if workflow_run is not None else None
        phase = state.phases.get(task.task_id) if state is not None else None
        if phase is not Phase.FAILED or workflow_run is None:
            # Not recorded as failed (its end not joined yet): re-driven as any run; its end
            # is then joined as a retry (`WorkflowRunner._join`).
            redriven = self._lifecycle.redrive(run, task)
        else:
            redriven = run if self._workflows.retry_task(workflow_run, run, task) else None
        if redriven is None:
            return RedriveOutcome.STALE
        redriven_runs.add(run.run_id)
        return RedriveOutcome.REDRIVEN

    def _requeue(self, message: RunMessage) -> RedriveOutcome:
        run = self._store.get_run(message.job_id, message.scheduled_for_ms)
        if run is None:
            return RedriveOutcome.GONE
        if run.status not in run_state.WAITING or run.attempt != message.attempt:
            return RedriveOutcome.STALE
        # The run as stored makes the same message (attempt, retry time) for its own queue.
        if self._queue.send_runs([run]):
            return RedriveOutcome.DEFERRED
        return RedriveOutcome.REQUEUED


def _parse(body: str) -> DeadLetter | RunMessage | None:
    try:
        return DeadLetter.model_validate_json(body)
    except ValidationError:
        pass
    try:
        return RunMessage.model_validate_json(body)
    except ValidationError:
        return None
