"""The start of a run's attempt under its job's concurrency policy (`overlap`): take a
running slot, wait for one (BUFFER_ONE, the catch-up queue) or be skipped, each decision
written on the condition that the job's slots are still as read."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from functools import partial

from scheduler_core.domain.clock import Clock, from_ms
from scheduler_core.domain.entities import Job, Run
from scheduler_core.domain.messages import RunMessage
from scheduler_core.domain.outcomes import ADMISSION_TRIES, RUN_FINISHED, Outcome, waits_for
from scheduler_core.domain.overlap import (
    Admission,
    admit,
    queues_for_a_slot,
    skip_reason,
    slots_as_read,
    waits_behind_another,
)
from scheduler_core.domain.run_state import WAITING
from scheduler_core.domain.vocabulary import JobStatus, MisfirePolicy, Overlap
from scheduler_core.observability import logger, metrics
from scheduler_core.ports import SlotsChanged, StoreContention
from scheduler_core.services.contention import paused
from scheduler_core.services.lifecycle import RunLifecycle, RunStore, is_last

# Pauses between the tries of a start in a running slot the store contended (its
# transaction cancelled, throttled or in a conflict with another on the job): a busy table
# throttles for about a second at a burst, such as the crons' :00 of starts and ends, and
# botocore does not retry a cancelled transaction, so tries at once would all meet the same
# second; given up, the record fails and its message comes back after the visibility
# timeout. At most 1.75 s of pauses, within the ADMISSION_TRIES tries.
START_CONTENTION_PAUSES_MS = (50, 200, 500, 1000)

# How the worker reads a run's job again: the job going on, or the outcome for a run whose
# job is gone, cancelled or paused (`RunExecutor._job_going_on`).
JobGoingOn = Callable[[RunMessage, dict[str, object], Job | None, Run | None], Job | Outcome]


def duplicate(context: dict[str, object]) -> Outcome:
    logger.info("duplicate or stale message dropped", extra=context)
    return Outcome.DUPLICATE


class RunAdmission:
    """The worker's start of an attempt (`start`), for `RunExecutor`."""

    def __init__(
        self,
        store: RunStore,
        clock: Clock,
        lease: timedelta,
        lifecycle: RunLifecycle,
        job_going_on: JobGoingOn,
    ) -> None:
        self._store = store
        self._clock = clock
        self._lease = lease
        self._lifecycle = lifecycle
        self._job_going_on = job_going_on

    def start(
        self,
        job: Job,
        message: RunMessage,
        waiting: Run,
        owner: str,
        context: dict[str, object],
        until: datetime | None = None,
    ) -> tuple[Run, Job | None] | Outcome:
        """Start the attempt (`waiting`, the run as read) under its job's concurrency policy
        (`overlap.admit`): take a running slot and return the run as started with the job
        its start fenced (None for ALLOW, whose start writes nothing to its job), or leave
        the run waiting for a slot (BUFFERED) or skip it (SKIPPED). A duplicate or stale
        message is dropped (DUPLICATE).

        Each decision is written on the condition that the job is still as read (its slots,
        and for a start its version); if it changed, the job is read again and the decision
        made again, at once, or after the next of START_CONTENTION_PAUSES_MS if the store
        contended the write. StoreContention when they are spent, or when the next would
        reach `until` (the invocation's end)."""
        me = message.scheduled_for_ms
        due = from_ms(message.due_ms)
        pauses = (timedelta(milliseconds=pause) for pause in START_CONTENTION_PAUSES_MS)
        for attempt in range(1, ADMISSION_TRIES + 1):
            now = self._clock.now()
            lease_until = now + self._lease
            timer = self._lifecycle.start_timer(waiting, now, lease_until)
            policy = job.concurrency
            if policy.overlap is Overlap.ALLOW:  # no limit: nothing is counted
                run = self._store.start_run_if_waiting(message, now, lease_until, owner, timer)
                return (run, None) if run is not None else duplicate(context)
            queue = job.catch_up_queue_ms
            # A caught-up firing out of the queue (its retry) is never skipped.
            caught_up = queues_for_a_slot(job, waiting)
            admission = admit(policy, job.running_count, job.buffered_run_ms, me, queue, caught_up)
            try:
                if admission is Admission.START:
                    slots = slots_as_read(job, me)
                    run = self._store.start_run_in_slot(waiting, slots, now, lease_until, owner, timer)
                    if run is None:
                        fresh = self._store.get_run(message.job_id, me)
                        if fresh is None or not waits_for(fresh, message):
                            return duplicate(context)
                        waiting = fresh  # changed since read (a late success recorded): again
                        continue
                    if queue or job.misfire is MisfirePolicy.CATCH_UP:
                        # Read after this start: a release that woke this run (not the next one)
                        # while a slot is still free is made up for.
                        self._lifecycle.wake_first_caught_up(job.job_id)
                    return run, job
                if waits_behind_another(policy, job.buffered_run_ms, me) and self._buffered_run_ended(job):
                    pass  # decide again without it
                elif admission is Admission.WAIT_TURN:
                    if not self._ahead_in_queue_ended(job, me):
                        return self._wait_turn(message, now, context)
                elif admission is Admission.REJOIN:
                    return self._rejoin(job, message, now, context)
                elif admission is Admission.BUFFER:
                    return self._buffer(job, message, due, now, context)
                else:
                    return self._skip(job, message, waiting, now, context)
            except SlotsChanged:
                pass
            except StoreContention:
                pause = next(pauses, None) if attempt < ADMISSION_TRIES else None
                again_after = partial(logger.info, "running slots contended; deciding again", extra=context)
                if not paused(self._clock, pause, until, again_after):
                    raise
            again = self._job_going_on(message, context, self._store.get_job(message.job_id), waiting)
            if isinstance(again, Outcome):
                return again
            job = again
        raise StoreContention(f"the running slots of job {message.job_id} kept changing")

    def _ahead_in_queue_ended(self, job: Job, me: int) -> bool:
        """Whether the runs ahead of `me` in the job's catch-up queue include one that ended
        without starting (cancelled, failed): it leaves the queue, and `me` decides again."""
        if job.catch_up_queue_ms[0] == me:
            return False  # first in line, waiting for a slot
        first = self._lifecycle.first_caught_up_run(job)
        return first is None or first.scheduled_for_ms != job.catch_up_queue_ms[0]

    def _wait_turn(self, message: RunMessage, now: datetime, context: dict[str, object]) -> Outcome:
        # Acknowledged: the end of the run before it in the queue sends its message again.
        if not self._store.wait_turn_if_waiting(message, self._lifecycle.turn_timer(now)):
            return duplicate(context)
        logger.info("caught-up run waits its turn for a running slot", extra=context)
        return Outcome.WAITING_TURN

    def _rejoin(self, job: Job, message: RunMessage, now: datetime, context: dict[str, object]) -> Outcome:
        slots = slots_as_read(job, message.scheduled_for_ms)
        if not self._store.rejoin_catch_up_queue(message, slots, self._lifecycle.turn_timer(now)):
            return duplicate(context)
        logger.info("caught-up run back at the front of the catch-up queue", extra=context)
        return Outcome.WAITING_TURN

    def _buffered_run_ended(self, job: Job) -> bool:
        """Whether the job's buffered run ended without starting (cancelled, failed, its job
        changed policy...): then it is forgotten, so the runs behind it go on."""
        assert job.buffered_run_ms is not None
        waiting = self._store.get_run(job.job_id, job.buffered_run_ms)
        if waiting is not None and waiting.status in WAITING:
            return False
        self._store.clear_buffered_run(job.job_id, job.buffered_run_ms)
        return True

    def _buffer(
        self, job: Job, message: RunMessage, due: datetime, now: datetime, context: dict[str, object]
    ) -> Outcome:
        # Its timer: if no slot's release sends its message first, the poller does then.
        slots = slots_as_read(job, message.scheduled_for_ms)
        if not self._store.buffer_run_if_waiting(message, slots, self._lifecycle.sent_timer(due, now)):
            return duplicate(context)
        logger.info("run waits for a running slot (overlap BUFFER_ONE)", extra=context)
        metrics.add_metric(name="RunsBuffered", unit="Count", value=1)
        return Outcome.BUFFERED

    def _skip(
        self, job: Job, message: RunMessage, run: Run, now: datetime, context: dict[str, object]
    ) -> Outcome:
        reason = skip_reason(
            job.concurrency, job.running_count, job.buffered_run_ms, message.scheduled_for_ms
        )
        # Perhaps the job's last run: then skipping it completes the job.
        complete = job.status is JobStatus.SCHEDULED and job.next_fire_at is None and is_last(job, run)
        slots = slots_as_read(job, message.scheduled_for_ms)
        if not self._store.skip_run_if_waiting(message, slots, now, reason, complete):
            return duplicate(context)
        if complete:
            self._lifecycle.job_completed(job)
        logger.info(RUN_FINISHED, extra=context | {"status": "SKIPPED", "error": reason})
        metrics.add_metric(name="RunsSkipped", unit="Count", value=1)
        return Outcome.SKIPPED
