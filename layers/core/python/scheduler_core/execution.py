"""Executing a run from its queue message (DESIGN §3, "Work"): start it with a
conditional write, call the target, record the outcome.

A message is a pointer; the run item decides. A duplicate or stale message finds the run
already started (or finished) and is dropped; a message for a cancelled job cancels its
run instead of delivering it.
"""

from __future__ import annotations

from datetime import timedelta
from enum import StrEnum

from scheduler_core.clock import Clock, from_ms, to_ms
from scheduler_core.model import JobStatus, RunMessage, RunStatus
from scheduler_core.observability import logger, metrics
from scheduler_core.ports import JobStore, TargetInvoker


class Outcome(StrEnum):
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    DUPLICATE = "DUPLICATE"  # the run was not waiting for this attempt: acknowledged, dropped
    CANCELLED = "CANCELLED"
    JOB_GONE = "JOB_GONE"
    LEASE_LOST = "LEASE_LOST"  # another attempt owns the run now; our result is discarded


class RunNotDueYet(Exception):
    """The message arrived far earlier than its run's time; let the queue bring it back."""


class RunExecutor:
    def __init__(
        self,
        store: JobStore,
        targets: TargetInvoker,
        clock: Clock,
        lease: timedelta,
        max_early: timedelta = timedelta(seconds=10),
    ) -> None:
        self._store = store
        self._targets = targets
        self._clock = clock
        self._lease = lease
        self._max_early = max_early

    def execute(self, message: RunMessage) -> Outcome:
        context = {"job_id": message.job_id, "run_id": message.run_id, "attempt": message.attempt}
        job = self._store.get_job(message.job_id)
        if job is None:
            logger.warning("message for a job that does not exist", extra=context)
            return Outcome.JOB_GONE
        if job.status is JobStatus.CANCELLED:
            self._store.cancel_run_if_not_started(
                message.job_id, message.scheduled_for_ms, message.attempt, self._clock.now()
            )
            logger.info("run cancelled with its job", extra=context)
            return Outcome.CANCELLED

        scheduled_for = from_ms(message.scheduled_for_ms)
        now = self._clock.now()
        if scheduled_for - now > self._max_early:
            raise RunNotDueYet(f"run {message.run_id} is due in {(scheduled_for - now).total_seconds():.1f}s")
        # Take the run as soon as its message arrives (a little early, by design): the
        # conditional write happens before the run's time, not on its critical path.
        run = self._store.start_run_if_waiting(
            message.job_id, message.scheduled_for_ms, message.attempt, now, now + self._lease
        )
        if run is None:
            logger.info("duplicate or stale message dropped", extra=context)
            return Outcome.DUPLICATE

        # SQS delays in whole seconds and a little early; the rest of the wait happens here.
        self._clock.sleep_until(scheduled_for)
        # A cancel may have landed while we waited: one cheap read before calling the target.
        current = self._store.get_job(message.job_id)
        if current is None or current.status is JobStatus.CANCELLED:
            self._store.finish_run_if_running(
                message.job_id,
                message.scheduled_for_ms,
                message.attempt,
                RunStatus.CANCELLED,
                self._clock.now(),
                None,
                None,
            )
            logger.info("run cancelled with its job", extra=context)
            return Outcome.CANCELLED

        called_at = self._clock.now()
        lateness_ms = max(0, to_ms(called_at) - message.scheduled_for_ms)
        metrics.add_metric(name="FireLateness", unit="Milliseconds", value=lateness_ms)
        delivery = self._targets.deliver(current, run)  # the job as it is now, not at claim time
        finished = self._clock.now()
        status = RunStatus.SUCCEEDED if delivery.ok else RunStatus.FAILED
        if not self._store.finish_run_if_running(
            message.job_id,
            message.scheduled_for_ms,
            message.attempt,
            status,
            finished,
            delivery.error,
            delivery.status_code,
            lateness_ms=lateness_ms,
        ):
            logger.warning("run taken over by another attempt; result discarded", extra=context)
            return Outcome.LEASE_LOST
        if current.next_fire_at is None:  # its last firing (a one-off, or a schedule that ended)
            self._store.complete_job_if_done(current.job_id, finished)
        logger.info(
            "run finished",
            extra=context | {"status": str(status), "lateness_ms": lateness_ms, "error": delivery.error},
        )
        metrics.add_metric(name="RunsSucceeded" if delivery.ok else "RunsFailed", unit="Count", value=1)
        return Outcome.SUCCEEDED if delivery.ok else Outcome.FAILED
