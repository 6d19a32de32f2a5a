"""Executing a run from its queue message (DESIGN §3, "Work"): start the attempt with a
conditional write, call the target, record the outcome.

The run item is also the run's idempotency record: the start marks the attempt in progress
(leased to one worker, so no second attempt starts while the lease holds; a long call renews
it) and the finish records the answer, so a duplicate message finds the run SUCCEEDED and
never calls again. The one window left is a worker that dies between the target's answer and
the finish write: the next attempt calls again with the same `Idempotency-Key`. A call that
succeeds after its worker lost the lease is recorded on the run, and the next attempt that
has not called yet finishes with it.

A message is a pointer; the run item decides. The worker reads the job and the run together
(one BatchGetItem), waits for the run's time (SQS delivers a little early), then starts it.
A duplicate or stale message finds the run already started (or finished, or at another
attempt) and is dropped, with no write. Every write after the
start is fenced by the attempt and this worker's lease owner token: a worker that lost its
lease (slow, paused, timed out, and the watchdog moved the run on) cannot finish, retry or
fail the run. A message for a job cancelled before the call cancels its run. A message for
a job paused before the call sets its run aside, still waiting, same attempt, for the resume
to decide (the job's misfire policy); a manual run goes on: it was asked for by name.

The start honours the job's concurrency policy (`overlap`): the attempt takes one of the
job's running slots in the same transaction, conditioned on the job's version as read (so a
pause, cancel or change since is read again before any call), or the run waits for one
(BUFFER_ONE) or is skipped. Every write that ends the attempt gives the slot back. An ALLOW
run's start writes only the run, so its worker reads the job once more before the call.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from enum import StrEnum

from scheduler_core.clock import Clock, from_ms, to_ms
from scheduler_core.contention import through_contention
from scheduler_core.entities import Job, Run
from scheduler_core.heartbeat import heartbeat
from scheduler_core.lifecycle import RunLifecycle, RunStore, is_last
from scheduler_core.messages import RunMessage
from scheduler_core.observability import logger, metrics
from scheduler_core.overlap import (
    Admission,
    admit,
    queues_when_caught_up,
    skip_reason,
    slots_as_read,
    waits_behind_another,
)
from scheduler_core.ports import (
    Delivery,
    MessageLease,
    SlotsChanged,
    StoreContention,
    TargetInvoker,
)
from scheduler_core.run_state import WAITING
from scheduler_core.vocabulary import JobStatus, MisfirePolicy, Overlap, RunStatus, Trigger

# Pauses (seconds) between the tries of a delivered attempt's end write that DynamoDB
# throttled (16 s in all): given up, the run's next attempt would call the target again.
END_WRITE_PAUSES = (0.1, 0.2, 0.5, 1.0, 2.0, 4.0, 8.0)
RUN_FINISHED = "run finished"  # the log message of every attempt's outcome
TAKEN_OVER = "run taken over by another attempt"  # how an attempt that lost its lease ends its line
# How often a start is decided again when the job's running slots changed meanwhile.
ADMISSION_TRIES = 5


def _duplicate(context: dict[str, object]) -> Outcome:
    logger.info("duplicate or stale message dropped", extra=context)
    return Outcome.DUPLICATE


def _waits_for(run: Run, message: RunMessage) -> bool:
    """Whether `run` (as read) waits for the attempt `message` carries."""
    return run.attempt == message.attempt and run.status in WAITING


def _goes_on_while_paused(job: Job, run: Run) -> bool:
    """A paused job stops its scheduled runs, not a manual one: that was asked for by name."""
    return job.status is JobStatus.PAUSED and run.trigger is Trigger.MANUAL


class Outcome(StrEnum):
    SUCCEEDED = "SUCCEEDED"
    RETRYING = "RETRYING"  # the attempt failed; the next one is scheduled
    FAILED = "FAILED"
    DUPLICATE = "DUPLICATE"  # the run was not waiting for this attempt: acknowledged, dropped
    CANCELLED = "CANCELLED"
    SET_ASIDE = "SET_ASIDE"  # its job is paused: the run waits for the resume; acknowledged
    WAITING_TURN = "WAITING_TURN"  # a caught-up run waits its turn for a running slot; acknowledged
    JOB_GONE = "JOB_GONE"
    LEASE_LOST = "LEASE_LOST"  # another attempt owns the run now; our result is discarded
    SKIPPED = "SKIPPED"  # the job's running slots were taken (overlap): the target was not called
    BUFFERED = "BUFFERED"  # waits for a running slot (overlap BUFFER_ONE); acknowledged


class RunNotDueYet(Exception):
    """The message arrived far earlier than its run's time; hide it again until then."""

    def __init__(self, run_id: str, seconds: float) -> None:
        super().__init__(f"run {run_id} is due in {seconds:.1f}s")
        self.seconds = seconds


class RunExecutor:
    def __init__(
        self,
        store: RunStore,
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
        self._invocation_ends: datetime | None = None  # see `begin_invocation`

    def begin_invocation(self, context: object) -> None:
        """An invocation starts: its deadline is noted (the Lambda context's remaining time,
        when it has one) so that waits such as END_WRITE_PAUSES end before it."""
        self._targets.begin_invocation(context)
        remaining = getattr(context, "get_remaining_time_in_millis", None)
        left_ms = remaining() if callable(remaining) else 0
        self._invocation_ends = self._clock.now() + timedelta(milliseconds=left_ms) if left_ms > 0 else None

    def execute(self, message: RunMessage, lease: MessageLease | None = None) -> Outcome:
        context = {"job_id": message.job_id, "run_id": message.run_id, "attempt": message.attempt}
        read_job, waiting = self._store.get_job_and_run(message.job_id, message.scheduled_for_ms)
        job = self._job_going_on(message, context, read_job, waiting)
        if isinstance(job, Outcome):
            return job
        if waiting is None or not _waits_for(waiting, message):
            return _duplicate(context)  # started, finished or moved on: nothing to write

        due = from_ms(message.due_ms)
        now = self._clock.now()
        if due - now > self._max_early:
            raise RunNotDueYet(message.run_id, (due - now).total_seconds())
        # SQS delays in whole seconds and a little early; the rest of the wait happens here,
        # before the start, so that the start's conditional write fences the job as it is at
        # the run's time: one paused, cancelled or changed meanwhile is read again.
        self._clock.sleep_until(due)
        owner = uuid.uuid4().hex
        started = self._start(job, message, waiting, owner, context)
        if isinstance(started, Outcome):
            return started
        run, fenced = started
        if fenced is None:
            # Started without a write to its job (ALLOW): a cancel or pause may have landed
            # since the job was read; one read before the call.
            current = self._unless_paused(self._store.get_job(message.job_id), run, owner, context)
            if isinstance(current, Outcome):
                return current
        else:
            current = fenced
        if current is None or current.status is JobStatus.CANCELLED:
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
        if run.delivered_at is not None:
            # An earlier attempt reached the target after losing its lease: its answer stands.
            logger.info("success of an earlier attempt reused; target not called again", extra=context)
            delivery = Delivery(ok=True, status_code=run.delivered_code)
        else:
            with heartbeat(self._store, self._clock, run, owner, self._lease, self._heartbeat_every, lease):
                delivery = self._targets.deliver(current, run)  # the job as it is now, not at claim time
        return self._record(current, run, owner, delivery, lateness_ms, context)

    def _unless_paused(
        self, current: Job | None, run: Run, owner: str, context: dict[str, object]
    ) -> Job | Outcome | None:
        """The job as read just before the call, unless it is paused: then the started run is
        set aside (waiting again, its slot given back) on the condition that the job is still
        paused; if a resume came meanwhile, the job is read again and the run goes on."""
        for _ in range(ADMISSION_TRIES):
            if current is None or current.status is not JobStatus.PAUSED:
                return current
            if _goes_on_while_paused(current, run):
                return current
            timer = self._lifecycle.paused_timer(self._clock.now())
            aside = self._store.set_aside_if_held(run, owner, timer)
            if aside is None:  # resumed since we read it
                current = self._store.get_job(run.job_id)
                continue
            if not aside:
                logger.warning(f"{TAKEN_OVER}; result discarded", extra=context)
                return Outcome.LEASE_LOST
            self._lifecycle.wake_next_in_line(current, run)
            logger.info("run set aside: its job was paused", extra=context)
            return Outcome.SET_ASIDE
        raise StoreContention(f"job {run.job_id} kept being paused and resumed")

    def _job_going_on(
        self,
        message: RunMessage,
        context: dict[str, object],
        job: Job | None,
        run: Run | None = None,
    ) -> Job | Outcome:
        """The run's job (`job`, as just read); or the outcome for a run whose
        job is gone, cancelled (the run is cancelled) or paused (the run is set aside, on the
        condition that the job is still paused: a manual one excepted). `run`: the run as
        read, if it was."""
        for _ in range(ADMISSION_TRIES):
            if job is None:
                logger.warning("message for a job that does not exist", extra=context)
                return Outcome.JOB_GONE
            if job.status is JobStatus.CANCELLED:
                self._store.cancel_run_if_not_started(message, self._clock.now())
                logger.info("run cancelled: its job is CANCELLED", extra=context)
                return Outcome.CANCELLED
            if job.status is not JobStatus.PAUSED or self._manual_while_paused(job, message, run):
                return job
            timer = self._lifecycle.paused_timer(self._clock.now())
            aside = self._store.set_aside_while_paused(message, timer)
            if aside is None:  # resumed since we read it: read it again
                job = self._store.get_job(message.job_id)
                continue
            if not aside:
                return _duplicate(context)
            logger.info("run set aside: its job is PAUSED", extra=context)
            return Outcome.SET_ASIDE
        raise StoreContention(f"job {message.job_id} kept being paused and resumed")

    def _start(
        self, job: Job, message: RunMessage, waiting: Run, owner: str, context: dict[str, object]
    ) -> tuple[Run, Job | None] | Outcome:
        """Start the attempt (`waiting`, the run as read) under its job's concurrency policy
        (`overlap.admit`): take a running slot and return the run as started with the job
        its start fenced (None for ALLOW, whose start writes nothing to its job), or leave
        the run waiting for a slot (BUFFERED) or skip it (SKIPPED). A duplicate or stale
        message is dropped (DUPLICATE).

        Each decision is written on the condition that the job is still as read (its slots,
        and for a start its version); if it changed, the job is read again and the decision
        made again."""
        me = message.scheduled_for_ms
        due = from_ms(message.due_ms)
        for _ in range(ADMISSION_TRIES):
            now = self._clock.now()
            lease_until = now + self._lease
            timer = self._lifecycle.start_timer(waiting, now, lease_until)
            policy = job.concurrency
            if policy.overlap is Overlap.ALLOW:  # no limit: nothing is counted
                run = self._store.start_run_if_waiting(message, now, lease_until, owner, timer)
                return (run, None) if run is not None else _duplicate(context)
            queue = job.catch_up_queue_ms
            # A caught-up firing out of the queue (its retry) is never skipped.
            caught_up = waiting.caught_up and queues_when_caught_up(job)
            admission = admit(policy, job.running_count, job.buffered_run_ms, me, queue, caught_up)
            try:
                if admission is Admission.START:
                    slots = slots_as_read(job, me)
                    run = self._store.start_run_in_slot(waiting, slots, now, lease_until, owner, timer)
                    if run is None:
                        fresh = self._store.get_run(message.job_id, me)
                        if fresh is None or not _waits_for(fresh, message):
                            return _duplicate(context)
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
                logger.info("running slots contended; deciding again", extra=context)
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
            return _duplicate(context)
        logger.info("caught-up run waits its turn for a running slot", extra=context)
        return Outcome.WAITING_TURN

    def _rejoin(self, job: Job, message: RunMessage, now: datetime, context: dict[str, object]) -> Outcome:
        slots = slots_as_read(job, message.scheduled_for_ms)
        if not self._store.rejoin_catch_up_queue(message, slots, self._lifecycle.turn_timer(now)):
            return _duplicate(context)
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
            return _duplicate(context)
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
            return _duplicate(context)
        logger.info(RUN_FINISHED, extra=context | {"status": "SKIPPED", "error": reason})
        metrics.add_metric(name="RunsSkipped", unit="Count", value=1)
        return Outcome.SKIPPED

    @staticmethod
    def _manual_while_paused(job: Job, message: RunMessage, run: Run | None) -> bool:
        """Whether the message is a manual run's (`run`, as read with its job) and its job is
        paused: a manual run goes on while its job is paused."""
        return job.status is JobStatus.PAUSED and run is not None and _goes_on_while_paused(job, run)

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
            if not self._through_throttling(
                lambda: self._store.finish_run_if_held(
                    run,
                    owner,
                    RunStatus.SUCCEEDED,
                    now,
                    None,
                    delivery.status_code,
                    lateness_ms,
                    complete_job=is_last(job, run),
                ),
                context,
            ):
                # Another attempt owns the run now; if it has not called yet, it reuses this.
                recorded = self._through_throttling(
                    lambda: self._store.record_late_success_if_may_run_again(run, delivery.status_code, now),
                    context,
                )
                logger.warning(
                    f"{TAKEN_OVER}; its success recorded for the next attempt"
                    if recorded
                    else f"{TAKEN_OVER}; result discarded",
                    extra=context,
                )
                return Outcome.LEASE_LOST
            metrics.add_metric(name="RunsSucceeded", unit="Count", value=1)
            self._lifecycle.wake_next_in_line(job, run)
            status: RunStatus | None = RunStatus.SUCCEEDED
        else:
            status = self._lifecycle.retry_or_fail(
                job, run, owner, delivery.error, delivery.status_code, delivery.retryable, lateness_ms
            )
        if status is None:
            logger.warning(f"{TAKEN_OVER}; result discarded", extra=context)
            return Outcome.LEASE_LOST
        # One line per attempt, whatever its outcome (`make run` prints these).
        logger.info(
            RUN_FINISHED,
            extra=context | {"status": str(status), "lateness_ms": lateness_ms, "error": delivery.error},
        )
        return Outcome(str(status))

    def _through_throttling(self, write: Callable[[], bool], context: dict[str, object]) -> bool:
        """A delivered attempt's end write, tried again while DynamoDB throttles it (the
        target has answered: a write given up on would have the next attempt call it again);
        StoreContention once END_WRITE_PAUSES are spent, or when the next pause would reach the
        invocation's end (the message comes back, the at least once window)."""
        return through_contention(
            write,
            self._clock,
            [timedelta(seconds=pause) for pause in END_WRITE_PAUSES],
            until=self._invocation_ends,
            on_retry=lambda: logger.warning(
                "end of a delivered attempt throttled; trying again", extra=context
            ),
        )
