"""Executing a run from its queue message (DESIGN §3, "Work"): read the job and the run
together, wait for the run's time, start the attempt (`admission`), call the target, record
the end (`lifecycle`). What this guarantees (one attempt at a time, every later write fenced
by the attempt's lease owner, the run item as its own idempotency record, a late success
kept for the next attempt) is written once, in docs/concepts/guarantees.md; how a pause, a
cancel or the job's overlap policy bears on a start, in docs/concepts/job-control.md and
overlap.md.

Why the order: a message is a pointer and the run item decides, so a duplicate or stale
message is dropped with no write. SQS delays in whole seconds and hands messages over a
little early, so the worker waits out the rest before the start: the start's conditional
write then fences the job as it is at the run's time, and a job paused, cancelled or
changed meanwhile is read again. An ALLOW start writes only the run, so its worker reads the
job once more before the call. A one-off's run kept on its job's item is started without the
read when its job is idle (`_start_unread`): its start is a write of that same item, which
can check everything the read would have decided on and return the job as it is then.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from functools import partial
from typing import Protocol

from scheduler_core.domain.clock import Clock, from_ms, to_ms
from scheduler_core.domain.entities import Job, Run
from scheduler_core.domain.messages import RunMessage
from scheduler_core.domain.outcomes import (
    ADMISSION_TRIES,
    RUN_FINISHED,
    TAKEN_OVER,
    Outcome,
    goes_on_while_paused,
    waits_for,
)
from scheduler_core.domain.vocabulary import JobKind, JobStatus, MisfirePolicy, RunStatus
from scheduler_core.observability import logger, metrics
from scheduler_core.ports import (
    Delivery,
    MessageLease,
    StoreContention,
    TargetInvoker,
)
from scheduler_core.services.admission import RunAdmission, duplicate
from scheduler_core.services.contention import through_contention
from scheduler_core.services.heartbeat import heartbeat
from scheduler_core.services.lifecycle import RunLifecycle, RunStore, is_last
from scheduler_core.services.unclaimed_sends import claimable_by_start, one_off_firing, run_claimed_by_start
from scheduler_core.services.workflow_runs import WorkflowRunner

# Pauses between the tries of a start that claims its firing that DynamoDB throttled: a burst's
# (given up, the record fails and its message comes back after the visibility timeout).
CLAIM_AT_START_PAUSES = (timedelta(milliseconds=50), timedelta(milliseconds=200))


class WorkerStore(RunStore, Protocol):
    """The ports of the jobs table the worker uses: a run's life, and the claim of a one-off's
    firing its start could not claim in its own write (`_claim_and_start`)."""

    def claim_if_unchanged(
        self, job: Job, run: Run, next_fire_at: datetime | None, now: datetime, catch_up: bool = False
    ) -> Run | None: ...


# Pauses (seconds) between the tries of a delivered attempt's end write that DynamoDB
# throttled (16 s in all): given up, the run's next attempt would call the target again.
END_WRITE_PAUSES = (0.1, 0.2, 0.5, 1.0, 2.0, 4.0, 8.0)


class RunNotDueYet(Exception):
    """The message arrived far earlier than its run's time; hide it again until then."""

    def __init__(self, run_id: str, seconds: float) -> None:
        super().__init__(f"run {run_id} is due in {seconds:.1f}s")
        self.seconds = seconds


class RunExecutor:
    def __init__(
        self,
        store: WorkerStore,
        targets: TargetInvoker,
        clock: Clock,
        lease: timedelta,
        lifecycle: RunLifecycle,
        max_early: timedelta = timedelta(seconds=10),
        heartbeat_every: timedelta | None = None,
        workflows: WorkflowRunner | None = None,
    ) -> None:
        """`workflows`: how a workflow run begins and a task's end moves its workflow run on
        (none: this worker runs jobs only)."""
        self._store = store
        self._workflows = workflows
        self._targets = targets
        self._clock = clock
        self._lease = lease
        self._lifecycle = lifecycle
        self._max_early = max_early
        # A long target call renews the lease (and its message's visibility) this often.
        self._heartbeat_every = heartbeat_every or lease / 3
        self._invocation_ends: datetime | None = None  # see `begin_invocation`
        self._admission = RunAdmission(store, clock, lease, lifecycle, self._job_going_on)

    def begin_invocation(self, context: object) -> None:
        """An invocation starts: its deadline is noted (the Lambda context's remaining time,
        when it has one) so that waits such as END_WRITE_PAUSES end before it."""
        self._targets.begin_invocation(context)
        remaining = getattr(context, "get_remaining_time_in_millis", None)
        left_ms = remaining() if callable(remaining) else 0
        self._invocation_ends = self._clock.now() + timedelta(milliseconds=left_ms) if left_ms > 0 else None

    def execute(self, message: RunMessage, lease: MessageLease | None = None) -> Outcome:
        context = {"job_id": message.job_id, "run_id": message.run_id, "attempt": message.attempt}
        if message.claim_version is not None:
            unread = self._claim_and_start(message)
        else:
            unread = self._start_unread(message) if message.with_job else None
        if unread is not None:
            return self._attempt(*unread, message, lease, context)
        read_job, waiting = self._store.get_job_and_run(message.job_id, message.scheduled_for_ms)
        job = self._job_going_on(message, context, read_job, waiting)
        if isinstance(job, Outcome):
            return job
        if waiting is None or not waits_for(waiting, message):
            return duplicate(context)  # started, finished or moved on: nothing to write

        due = from_ms(message.due_ms)
        now = self._clock.now()
        if due - now > self._max_early:
            raise RunNotDueYet(message.run_id, (due - now).total_seconds())
        # SQS delays in whole seconds and a little early; the rest of the wait happens here,
        # before the start, so that the start's conditional write fences the job as it is at
        # the run's time: one paused, cancelled or changed meanwhile is read again.
        self._clock.sleep_until(due)
        owner = uuid.uuid4().hex
        started = self._admission.start(job, message, waiting, owner, context, self._invocation_ends)
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
        return self._attempt(current, run, owner, message, lease, context)

    def _claim_and_start(self, message: RunMessage) -> tuple[Job, Run, str] | None:
        """A one-off's firing a poll sent unclaimed (`unclaimed_sends`): claimed and started
        at the run's time in one write (`claim_and_start_if_unchanged`) if its job is as the
        poll read it, or, changed since but with the firing still its next, as it is now. The
        job and the run as started, and the attempt's owner; None: read and decide as usual
        (claimed since: by a change of the job, by a poll because it had not started in
        time, by a duplicate message's start, or here, as a poll would, because a run holds
        a slot and the overlap policy must decide; or the job paused, cancelled or moved on)."""
        due = from_ms(message.due_ms)
        early = due - self._clock.now()
        if early > self._max_early:
            raise RunNotDueYet(message.run_id, early.total_seconds())
        self._clock.sleep_until(due)  # as below: the start fences the job at the run's time
        version = message.claim_version
        for _ in range(ADMISSION_TRIES):
            assert version is not None
            owner = uuid.uuid4().hex
            now = self._clock.now()
            lease_until = now + self._lease
            run = run_claimed_by_start(message, min(self._lifecycle.sent_timer(due, now), lease_until))
            write = partial(self._store.claim_and_start_if_unchanged, run, version, now, lease_until, owner)
            # Throttled (a burst's), tried again now, not when the message comes back.
            started = through_contention(write, self._clock, CLAIM_AT_START_PAUSES)
            if started is not None:
                return *started, owner
            job = self._store.get_job(message.job_id)
            if job is None or job.next_fire_at != run.scheduled_for or not one_off_firing(job):
                return None
            if not claimable_by_start(job) or job.version == version:
                # A run holds a slot (a manual one, say), or the item keeps another's run:
                # claimed as a poll claims it, then admitted as any claimed run.
                claimed = run.model_copy(update={"priority": job.priority})
                self._store.claim_if_unchanged(job, claimed, None, now)
                return None
            version = job.version
        return None

    def _start_unread(self, message: RunMessage) -> tuple[Job, Run, str] | None:
        """A run kept on its job's item (a one-off's) starts without being read first when
        its job is idle: one write where a read and a write would be
        (`start_kept_run_if_job_idle`: what it checks is what the read would have decided
        on). The job and the run as started, and the attempt's owner; None when the run or
        its job is not so (or the message is early): read and decide as usual."""
        due = from_ms(message.due_ms)
        if due - self._clock.now() > self._max_early:
            return None
        self._clock.sleep_until(due)  # as below: the start fences the job at the run's time
        owner = uuid.uuid4().hex
        now = self._clock.now()
        started = self._store.start_kept_run_if_job_idle(message, now, now + self._lease, owner)
        if started is None:
            return None
        job, run = started
        if job.misfire is MisfirePolicy.CATCH_UP:
            # As after any start in a slot of such a job (`admission`): a release that woke
            # this run while a slot is still free is made up for.
            self._lifecycle.wake_first_caught_up(job.job_id)
        return job, run, owner

    def _attempt(
        self,
        current: Job | None,
        run: Run,
        owner: str,
        message: RunMessage,
        lease: MessageLease | None,
        context: dict[str, object],
    ) -> Outcome:
        """The started attempt: call the target with the job as it is now (`current`), and
        record the end."""
        if current is None or current.status is JobStatus.CANCELLED:
            if self._store.finish_run_if_held(run, owner, RunStatus.CANCELLED, self._clock.now()):
                self._task_ended(current, run, RunStatus.CANCELLED)
            logger.info(
                RUN_FINISHED, extra=context | {"status": "CANCELLED", "error": "its job was cancelled"}
            )
            return Outcome.CANCELLED
        if current.kind is JobKind.WORKFLOW:
            assert self._workflows is not None, "a worker that gets workflow runs begins them"
            return self._workflows.begin(current, run, owner)

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
            delivered = self._workflows.for_delivery(current, run) if self._workflows else current
            if delivered is None:  # a task of a cancelled workflow run: no call any more
                if self._store.finish_run_if_held(run, owner, RunStatus.CANCELLED, self._clock.now()):
                    self._task_ended(current, run, RunStatus.CANCELLED)
                logger.info(
                    RUN_FINISHED,
                    extra=context | {"status": "CANCELLED", "error": "its workflow run was cancelled"},
                )
                return Outcome.CANCELLED
            with heartbeat(self._store, self._clock, run, owner, self._lease, self._heartbeat_every, lease):
                delivery = self._targets.deliver(delivered, run)  # the job as it is now, not at claim time
        outcome = self._record(current, run, owner, delivery, lateness_ms, context)
        if outcome in (Outcome.SUCCEEDED, Outcome.FAILED):
            self._task_ended(current, run, RunStatus(outcome))
        return outcome

    def _task_ended(self, job: Job | None, run: Run, status: RunStatus) -> None:
        """A workflow task's run ended: its workflow run moves on (the join)."""
        if job is not None and job.kind is JobKind.TASK and self._workflows is not None:
            self._workflows.task_run_ended(job, run, status)

    def _unless_paused(
        self, current: Job | None, run: Run, owner: str, context: dict[str, object]
    ) -> Job | Outcome | None:
        """The job as read just before the call, unless it is paused: then the started run is
        set aside (waiting again, its slot given back) on the condition that the job is still
        paused; if a resume came meanwhile, the job is read again and the run goes on."""
        for _ in range(ADMISSION_TRIES):
            if current is None or current.status is not JobStatus.PAUSED:
                return current
            if goes_on_while_paused(current, run):
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
                if self._store.cancel_run_if_not_started(message, self._clock.now()) and run is not None:
                    self._task_ended(job, run, RunStatus.CANCELLED)
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
                return duplicate(context)
            logger.info("run set aside: its job is PAUSED", extra=context)
            return Outcome.SET_ASIDE
        raise StoreContention(f"job {message.job_id} kept being paused and resumed")

    @staticmethod
    def _manual_while_paused(job: Job, message: RunMessage, run: Run | None) -> bool:
        """Whether the message is a manual run's (`run`, as read with its job) and its job is
        paused: a manual run goes on while its job is paused."""
        return job.status is JobStatus.PAUSED and run is not None and goes_on_while_paused(job, run)

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
                    output=delivery.output if job.kind is JobKind.TASK else None,
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
            if is_last(job, run):
                self._lifecycle.job_completed(job)
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
