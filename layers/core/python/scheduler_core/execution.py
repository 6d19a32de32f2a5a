"""Executing a run from its queue message (DESIGN §3, "Work"): start the attempt with a
conditional write, call the target, record the outcome.

A message is a pointer; the run item decides. A duplicate or stale message finds the run
already started (or finished, or at another attempt) and is dropped. Every write after the
start is fenced by the attempt and this worker's lease owner token: a worker that lost its
lease (slow, paused, timed out, and the watchdog moved the run on) cannot finish, retry or
fail the run. A message for a job cancelled or paused before the call cancels its run
(a manual run excepted: a paused job still runs what was triggered by hand).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from enum import StrEnum

from scheduler_core.clock import Clock, from_ms, to_ms
from scheduler_core.lifecycle import RunLifecycle, is_last
from scheduler_core.model import Job, JobStatus, Run, RunMessage, RunStatus, Trigger
from scheduler_core.observability import logger, metrics
from scheduler_core.ports import Delivery, JobStore, MessageLease, TargetInvoker

_STOPPED = (JobStatus.CANCELLED, JobStatus.PAUSED)
RUN_FINISHED = "run finished"  # the log message of every attempt's outcome


def _goes_on_while_paused(job: Job, run: Run) -> bool:
    """A paused job stops its scheduled runs, not a manual one: that was asked for by name."""
    return job.status is JobStatus.PAUSED and run.trigger is Trigger.MANUAL


class Outcome(StrEnum):
    SUCCEEDED = "SUCCEEDED"
    RETRYING = "RETRYING"  # the attempt failed; the next one is scheduled
    FAILED = "FAILED"
    DUPLICATE = "DUPLICATE"  # the run was not waiting for this attempt: acknowledged, dropped
    CANCELLED = "CANCELLED"
    JOB_GONE = "JOB_GONE"
    LEASE_LOST = "LEASE_LOST"  # another attempt owns the run now; our result is discarded


class RunNotDueYet(Exception):
    """The message arrived far earlier than its run's time; hide it again until then."""

    def __init__(self, run_id: str, seconds: float) -> None:
        super().__init__(f"run {run_id} is due in {seconds:.1f}s")
        self.seconds = seconds


class RunExecutor:
    def __init__(
        self,
        store: JobStore,
        targets: TargetInvoker,
        clock: Clock,
        lease: timedelta,
        lifecycle: RunLifecycle,
        max_early: timedelta = timedelta(seconds=10),
        heartbeat_every: timedelta | None = None,
    ) -> None:
        self._store = store
        self._targets = targets
        self._clock = clock
        self._lease = lease
        self._lifecycle = lifecycle
        self._max_early = max_early
        # A long target call renews the lease (and its message's visibility) this often.
        self._heartbeat_every = heartbeat_every or lease / 3

    def begin_invocation(self, context: object) -> None:
        self._targets.begin_invocation(context)

    def execute(self, message: RunMessage, lease: MessageLease | None = None) -> Outcome:
        context = {"job_id": message.job_id, "run_id": message.run_id, "attempt": message.attempt}
        job = self._store.get_job(message.job_id)
        if job is None:
            logger.warning("message for a job that does not exist", extra=context)
            return Outcome.JOB_GONE
        if job.status in _STOPPED and not self._manual_while_paused(job, message):
            self._store.cancel_run_if_not_started(message, self._clock.now())
            logger.info(f"run cancelled: its job is {job.status}", extra=context)
            return Outcome.CANCELLED

        due = from_ms(message.due_ms)
        now = self._clock.now()
        if due - now > self._max_early:
            raise RunNotDueYet(message.run_id, (due - now).total_seconds())
        # Take the run as soon as its message arrives (a little early, by design): the
        # conditional write happens before the run's time, not on its critical path.
        owner = uuid.uuid4().hex
        run = self._store.start_run_if_waiting(message, now, now + self._lease, owner)
        if run is None:
            logger.info("duplicate or stale message dropped", extra=context)
            return Outcome.DUPLICATE

        # SQS delays in whole seconds and a little early; the rest of the wait happens here.
        self._clock.sleep_until(due)
        # A cancel or pause may have landed while we waited: one read before the call.
        current = self._store.get_job(message.job_id)
        if current is None or (current.status in _STOPPED and not _goes_on_while_paused(current, run)):
            self._store.finish_run_if_held(run, owner, RunStatus.CANCELLED, self._clock.now())
            logger.info(
                RUN_FINISHED, extra=context | {"status": "CANCELLED", "error": "its job was cancelled"}
            )
            return Outcome.CANCELLED

        called_at = self._clock.now()
        # Lateness is the run's: how late its first call was, not its retries', measured from
        # when the first attempt was due (the scheduled time, or later by the job's jitter).
        lateness_ms = max(0, to_ms(called_at) - message.due_ms) if run.attempt == 1 else None
        if lateness_ms is not None:
            metrics.add_metric(name="FireLateness", unit="Milliseconds", value=lateness_ms)
        with self._heartbeat(run, owner, lease):
            delivery = self._targets.deliver(current, run)  # the job as it is now, not at claim time
        return self._record(current, run, owner, delivery, lateness_ms, context)

    def _manual_while_paused(self, job: Job, message: RunMessage) -> bool:
        """Whether the message is a manual run's and its job is paused (one more read, only
        for a paused job): a manual run goes on while its job is paused."""
        if job.status is not JobStatus.PAUSED:
            return False
        run = self._store.get_run(message.job_id, message.scheduled_for_ms)
        return run is not None and _goes_on_while_paused(job, run)

    def _record(
        self,
        job: Job,
        run: Run,
        owner: str,
        delivery: Delivery,
        lateness_ms: int | None,
        context: dict[str, object],
    ) -> Outcome:
        if delivery.ok:
            now = self._clock.now()
            if not self._store.finish_run_if_held(
                run,
                owner,
                RunStatus.SUCCEEDED,
                now,
                None,
                delivery.status_code,
                lateness_ms,
                complete_job=is_last(job, run),
            ):
                logger.warning("run taken over by another attempt; result discarded", extra=context)
                return Outcome.LEASE_LOST
            metrics.add_metric(name="RunsSucceeded", unit="Count", value=1)
            status: RunStatus | None = RunStatus.SUCCEEDED
        else:
            status = self._lifecycle.retry_or_fail(
                job, run, owner, delivery.error, delivery.status_code, delivery.retryable, lateness_ms
            )
        if status is None:
            logger.warning("run taken over by another attempt; result discarded", extra=context)
            return Outcome.LEASE_LOST
        # One line per attempt, whatever its outcome (`make run` prints these).
        logger.info(
            RUN_FINISHED,
            extra=context | {"status": str(status), "lateness_ms": lateness_ms, "error": delivery.error},
        )
        return Outcome(str(status))

    @contextmanager
    def _heartbeat(self, run: Run, owner: str, lease: MessageLease | None) -> Iterator[None]:
        """While the target call runs, renew the run's lease and its message's visibility
        every `heartbeat_every`, so a long call is not taken for a dead worker. Stops when the
        call returns, or when the lease is lost (another attempt owns the run)."""
        stop = threading.Event()

        def beat() -> None:
            while not stop.wait(self._heartbeat_every.total_seconds()):
                lease_until = self._clock.now() + self._lease
                try:
                    held = self._store.extend_lease_if_held(run, owner, lease_until)
                except Exception:  # throttled, unreachable: try again at the next beat
                    logger.exception("lease not renewed", extra={"run_id": run.run_id})
                    continue
                if not held:
                    logger.warning("lease lost during the call", extra={"run_id": run.run_id})
                    return
                if lease is not None:
                    lease.hide_for(int(self._lease.total_seconds()))
                metrics.add_metric(name="LeaseRenewals", unit="Count", value=1)

        beater = threading.Thread(target=beat, name=f"heartbeat-{run.run_id}", daemon=True)
        beater.start()
        try:
            yield
        finally:
            stop.set()
            beater.join()
