"""What happens to a run after an attempt fails or is lost (DESIGN §3): retry it with
backoff, or fail it for good with a record on the DLQ. Shared by the worker (a target call
failed) and the poller's watchdog (a worker lost its lease, a message was lost). The rules
are written once, in docs/concepts/retries.md and guarantees.md.

Timers: every run that is not finished sits in the due index at the moment the poller must
look at it again, so nothing waits on a message that may never come (`watch` acts on it):
- a run whose message was sent: its time + `resend_after` (`sent_timer`);
- a running attempt: its lease's end (`start_timer`);
- an attempt further away than SQS can delay a message (a retry, a jittered first attempt):
  its time − `lookahead` (`send_plan`), when the poller sends it, like a job's firing;
- a run set aside because its job is paused: `PAUSED_RECHECK` later (`paused_timer`); the
  resume decides, the timer only covers a run no resume reached;
- a caught-up run waiting its turn for a running slot: `TURN_RECHECK` later (`turn_timer`);
  the end of the run before it sends it, the timer only covers a wake-up lost on the way.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from scheduler_core.domain import keys, run_state
from scheduler_core.domain.clock import Clock
from scheduler_core.domain.entities import Job, Run, iso_or_none
from scheduler_core.domain.messages import MAX_DELAY_SECONDS, DeadLetter, run_message
from scheduler_core.domain.retry import attempts_left, backoff, longest_round
from scheduler_core.domain.schedule import next_fire_after
from scheduler_core.domain.vocabulary import (
    BY_NAME,
    ENDED_JOB,
    JobKind,
    JobStatus,
    MisfirePolicy,
    Overlap,
    RunStatus,
)
from scheduler_core.domain.wallclock import NeverFires
from scheduler_core.observability import logger, metrics
from scheduler_core.ports import JobRecords, RunningSlots, RunQueue, RunRecords, RunRef, RunTransitions
from scheduler_core.services.quotas import TenantQuotas

# How long a run set aside while its job is paused waits before the poller looks at it again.
PAUSED_RECHECK = timedelta(minutes=15)
# How long a caught-up run waiting its turn for a slot waits before the poller looks again.
TURN_RECHECK = timedelta(minutes=5)


class RunStore(JobRecords, RunRecords, RunTransitions, RunningSlots, Protocol):
    """The ports of the jobs table a run's life uses: the worker's and the timers'."""


@dataclass(frozen=True)
class TimerPolicy:
    # How long a sent message may take to start its run before the poller sends it again.
    resend_after: timedelta
    # How far ahead the poller sends work (a retry beyond SQS's delay waits until then).
    lookahead: timedelta


class RunLifecycle:
    def __init__(
        self,
        store: RunStore,
        queue: RunQueue,
        clock: Clock,
        timers: TimerPolicy,
        quotas: TenantQuotas | None = None,
    ) -> None:
        """`quotas`: the tenants' counts a completed job gives back (None: not counted)."""
        self._store = store
        self._queue = queue
        self._clock = clock
        self._timers = timers
        self._quotas = quotas

    def job_completed(self, job: Job) -> None:
        """`job`'s last run ended and completed it (in the same write): its quota counts go back."""
        if self._quotas is not None:
            self._quotas.completed(job)

    @property
    def resend_after(self) -> timedelta:
        """How long after its time a run whose message was sent is looked at again."""
        return self._timers.resend_after

    def sent_timer(self, starts_at: datetime, now: datetime) -> datetime:
        """When to look again at a run whose message is (about to be) on its queue."""
        return max(starts_at, now) + self._timers.resend_after

    @staticmethod
    def start_timer(run: Run, now: datetime, lease_until: datetime) -> datetime | None:
        """Where a starting run's timer goes: it stays (None) when it comes before the lease
        ends, as its re-send timer does; the watchdog then moves it to the lease's end if the
        attempt still runs, so a run that ends in time never rewrites its index entry. A timer
        already up, or none, or one after the lease's end moves to the lease's end now."""
        if run.due_at is not None and now < run.due_at <= lease_until:
            return None
        return lease_until

    def paused_timer(self, now: datetime) -> datetime:
        """When to look again at a run set aside because its job is paused."""
        return now + PAUSED_RECHECK

    def turn_timer(self, now: datetime) -> datetime:
        """When to look again at a caught-up run waiting its turn for a running slot (the end
        of the run before it sends it; this only covers a wake-up lost on the way)."""
        return now + TURN_RECHECK

    def send_plan(self, next_attempt_at: datetime, now: datetime) -> tuple[datetime, bool]:
        """(the run's timer, whether to send its message now) for an attempt at
        `next_attempt_at`: a retry, or a first attempt that jitter put further away than SQS
        can delay a message, waits in the due index until the poller can send it."""
        if next_attempt_at - now <= timedelta(seconds=MAX_DELAY_SECONDS):
            return self.sent_timer(next_attempt_at, now), True
        return next_attempt_at - self._timers.lookahead, False

    def _send(self, run: Run) -> None:
        if self._queue.send_runs([run]):
            # Its timer stays in the due index: the poller sends it again.
            logger.warning("retry not enqueued; the poller will send it", extra=_context(run))

    # --- after a failed target call (the worker holds the lease) -----------------------

    def retry_or_fail(
        self,
        job: Job,
        run: Run,
        owner: str,
        error: str | None,
        response_code: int | None,
        retryable: bool,
        lateness_ms: int | None,
    ) -> RunStatus | None:
        """Move a failed attempt on: RETRYING (the next attempt after a backoff) when the
        failure may pass and attempts are left, FAILED (and a DLQ record) otherwise. None if
        the lease was lost meanwhile (another attempt owns the run; nothing is written)."""
        now = self._clock.now()
        if retryable and attempts_left(job.retry, run.attempt, run.first_attempt):
            next_attempt_at = now + backoff(job.retry, run.run_id, run.attempt)
            due_at, send_now = self.send_plan(next_attempt_at, now)
            ended = run.ended_attempt(now, error, response_code)
            retried = self._store.retry_run_if_held(run, owner, ended, next_attempt_at, due_at, lateness_ms)
            if retried is None:
                return None
            logger.info(
                "attempt failed; retrying",
                extra=_context(run) | {"error": error, "next_attempt_at": iso(next_attempt_at)},
            )
            metrics.add_metric(name="RunsRetried", unit="Count", value=1)
            self.wake_next_in_line(job, run)
            if send_now:
                self._send(retried)
            return RunStatus.RETRYING
        self._dead_letter(run, run.attempt, error, response_code, now)
        if not self._store.finish_run_if_held(
            run,
            owner,
            RunStatus.FAILED,
            now,
            error,
            response_code,
            lateness_ms,
            complete_job=is_last(job, run),
        ):
            return None
        if is_last(job, run):
            self.job_completed(job)
        self._failed(run, run.attempt, error)
        self.wake_next_in_line(job, run)
        return RunStatus.FAILED

    def _failed(self, run: Run, attempts: int, error: str | None) -> None:
        logger.error(
            "run failed; attempts spent or error final",
            extra=_context(run) | {"attempts": attempts, "error": error},
        )
        metrics.add_metric(name="RunsFailed", unit="Count", value=1)

    def _dead_letter(
        self, run: Run, attempts: int, error: str | None, response_code: int | None, now: datetime
    ) -> None:
        """The DLQ record of a run about to fail for good, for people and `make redrive`. Sent
        before the FAILED write, so no crash can leave a FAILED run without its record; if the
        write then loses its race (another attempt took the run over), the record describes a
        run that is not FAILED, and `make redrive` drops it."""
        record = DeadLetter(
            job_id=run.job_id,
            run_id=run.run_id,
            scheduled_for=iso(run.scheduled_for),
            attempts=attempts,
            last_error=error,
            response_code=response_code,
            failed_at=iso(now),
            message=run_message(run),
        )
        if self._queue.send_dead_letter(record):
            metrics.add_metric(name="DeadLetters", unit="Count", value=1)

    # --- a running slot given back (overlap BUFFER_ONE, catch-up queue) ---------------------

    def wake_next_in_line(self, job: Job | None, run: Run) -> None:
        """`run`'s attempt has just given its running slot back: send the message of the run
        next in line for one, so it starts now rather than at its timer: the buffered run
        (BUFFER_ONE), else the first of the catch-up queue. Only when the job (as the caller
        read it) may have one; a run that waits for a slot after a change of policy waits
        for its timer, when the poller sends it."""
        if not run.holds_slot or job is None:
            return
        buffers = job.concurrency.overlap is Overlap.BUFFER_ONE
        if not buffers and job.misfire is not MisfirePolicy.CATCH_UP and not job.catch_up_queue_ms:
            return
        try:
            current = self._store.get_job(run.job_id)
            if current is None:
                return
            waiting = None
            if current.buffered_run_ms is not None:
                waiting = self._store.get_run(run.job_id, current.buffered_run_ms)
                # One that ended without starting is forgotten by the next run to start.
            if waiting is None or waiting.status not in run_state.WAITING:
                waiting = self.first_caught_up_run(current)
        except Exception:  # throttled, unreachable: the waiting run's timer covers it
            logger.exception("waiting run not woken; the poller will send it", extra=_context(run))
            return
        if waiting is not None:
            logger.info("waiting run woken: a running slot is free", extra=_context(waiting))
            self._queue_or_log(waiting)

    def wake_first_caught_up(self, job_id: str) -> None:
        """After a run of the job started in a slot: if a slot is still free and no run is
        buffered for one, send the first waiting run of the job's catch-up queue. Read after
        the start, so a release that woke the run that just started (it was first in line)
        rather than the next one is made up for."""
        try:
            current = self._store.get_job(job_id)
            if current is None or not current.catch_up_queue_ms or not _slot_free(current):
                return
            waiting = self.first_caught_up_run(current)
        except Exception:  # throttled, unreachable: the waiting run's timer covers it
            logger.exception("caught-up run not woken; the poller will send it", extra={"job_id": job_id})
            return
        if waiting is not None:
            self._queue_or_log(waiting)

    def first_caught_up_run(self, job: Job) -> Run | None:
        """The run at the front of the job's catch-up queue (as `job` was read) that still
        waits; those before it that ended without starting (cancelled, failed) leave the queue."""
        for run_ms in job.catch_up_queue_ms:
            run = self._store.get_run(job.job_id, run_ms)
            if run is not None and run.status in run_state.WAITING:
                return run
            self._store.leave_catch_up_queue(job.job_id, run_ms)  # False: it left meanwhile
        return None

    # --- a manual re-drive ---------------------------------------------------------------

    def redrive(self, run: Run, job: Job) -> Run | None:
        """A FAILED run of `job` (as the caller read it) gets a new attempt, now, with a fresh
        round of `max_attempts`. None if the run is not FAILED (at the attempt read) any more."""
        now = self._clock.now()
        self._keep_for_new_round(run, job, now)
        redriven = self._store.redrive_run_if_failed(run, now, self.sent_timer(now, now))
        if redriven is not None:
            logger.info("failed run re-driven", extra=_context(redriven))
            metrics.add_metric(name="RunsRedriven", unit="Count", value=1)
            self._send(redriven)
        return redriven

    def _keep_for_new_round(self, run: Run, job: Job, now: datetime) -> None:
        """Before a run of an ended job (a one-off's failed run; a task of a completed
        workflow: the workflow) starts a new round, the job is kept for the retention after
        the longest that round can take, so it cannot expire under it."""
        task = keys.task_of(run.job_id)
        owner = self._store.get_job(task[0]) if task else job
        if owner is not None and owner.status in ENDED_JOB:
            self._store.keep_ended_job_until(owner.job_id, now + longest_round(job.retry))

    # --- the watchdog (the poller found a run whose timer is up) -----------------------

    def watch(self, run: Run, now: datetime) -> str:
        """Act on a run whose timer is up; returns what was done (for the poll report)."""
        if run.status is RunStatus.RUNNING:
            if run.lease_until is not None and run.lease_until > now:
                # Its re-send timer, left in place by the start: wait for the lease instead.
                return "lease_holds" if self._store.move_timer_to_lease_if_unchanged(run) else "lost_race"
            return self._lease_expired(run, now)
        return self._resend(run, now)

    def _resend(self, run: Run, now: datetime) -> str:
        """A waiting run not started by its timer: its message was lost (a poller died between
        claim and send, a send failed) or is still due (a retry beyond SQS's delay). Send it,
        same attempt: the target was never called, so no attempt is spent. A duplicate
        message is harmless: only one can start the attempt."""
        job = self._store.get_job(run.job_id)
        if job is None:
            self._store.fail_waiting_run(run, now, "its job no longer exists")
            return "failed"
        if job.status is JobStatus.CANCELLED:
            self._store.cancel_run_if_not_started(run, now)
            return "cancelled"
        if job.status is JobStatus.PAUSED and run.trigger not in BY_NAME:
            # Set aside until the resume (which decides), not sent to be set aside again.
            return "paused" if self._store.resend_if_unchanged(run, self.paused_timer(now)) else "lost_race"
        return "resent" if self.send_again(run, now) else "lost_race"

    def send_again(self, run: Run, now: datetime, caught_up: bool = False) -> bool:
        """Send a waiting run's message again, same attempt, its timer moved on as for a run
        just sent; False if the run moved meanwhile (someone else sends it, or it started).
        `caught_up`: the run is from now on a missed firing caught up (see `Run.caught_up`)."""
        if not self._store.resend_if_unchanged(run, self.sent_timer(run.starts_at, now), caught_up):
            return False
        self._queue_or_log(run)
        metrics.add_metric(name="RunsResent", unit="Count", value=1)
        return True

    def send_new(self, run: Run) -> None:
        """Send a run just created outside a claim (a manual run, a resume's catch-up run).
        If the send fails, its timer in the due index has the poller send it."""
        self._queue_or_log(run)

    def _queue_or_log(self, run: Run) -> None:
        if self._queue.send_runs([run]):
            logger.warning("run not enqueued; the poller will try again", extra=_context(run))

    def _lease_expired(self, run: Run, now: datetime) -> str:
        """A running attempt whose lease ran out: its worker died, hung or timed out. The
        attempt counts as spent (the target may have been called)."""
        job = self._store.get_job(run.job_id)
        error = f"attempt {run.attempt} lost: its worker did not finish within its lease"
        if job is None or job.status is JobStatus.CANCELLED:
            self._store.take_over_expired_lease(run, now, RunStatus.CANCELLED, error)
            return "cancelled"  # nothing of a cancelled job is woken
        if attempts_left(job.retry, run.attempt, run.first_attempt):
            next_attempt_at = now + backoff(job.retry, run.run_id, run.attempt)
            due_at, send_now = self.send_plan(next_attempt_at, now)
            retried = self._store.take_over_expired_lease(
                run, now, RunStatus.RETRYING, error, next_attempt_at, due_at
            )
            if retried is None:
                return "lost_race"
            logger.warning("lease expired; retrying", extra=_context(run))
            metrics.add_metric(name="LeasesExpired", unit="Count", value=1)
            metrics.add_metric(name="RunsRetried", unit="Count", value=1)
            self.wake_next_in_line(job, run)
            if send_now:
                self._send(retried)
            return "retried"
        self._dead_letter(run, run.attempt, error, None, now)
        if (
            self._store.take_over_expired_lease(
                run, now, RunStatus.FAILED, error, complete_job=is_last(job, run)
            )
            is None
        ):
            return "lost_race"
        if is_last(job, run):
            self.job_completed(job)
        metrics.add_metric(name="LeasesExpired", unit="Count", value=1)
        self._failed(run, run.attempt, error)
        self.wake_next_in_line(job, run)
        return "failed"


def _slot_free(job: Job) -> bool:
    """Whether a run of the job could start now: a running slot free, none buffered for one."""
    policy = job.concurrency
    if policy.overlap is Overlap.ALLOW or policy.max_running is None:
        return True
    buffered = policy.overlap is Overlap.BUFFER_ONE and job.buffered_run_ms is not None
    return job.running_count < policy.max_running and not buffered


def is_last(job: Job, run: Run | None = None) -> bool:
    """Whether the run being finished is the job's last, whose end completes the job: the run
    of a one-off's firing or of a schedule's last one, never a manual run nor an earlier
    firing's (see docs/concepts/schedules.md, "Windows", and job-control.md, "Trigger")."""
    if job.next_fire_at is not None or (run is not None and run.trigger in BY_NAME):
        return False
    if job.kind is JobKind.TASK or job.schedule is None:
        return False  # a task never completes; nor a workflow that runs only when triggered
    return run is None or _no_firing_after(job, run)


def _no_firing_after(job: Job, run: Run) -> bool:
    try:
        return next_fire_after(job.fires_by, job.created_at, run.scheduled_for) is None
    except NeverFires:
        return True


def iso(when: datetime) -> str:
    return iso_or_none(when) or ""


def _context(run: RunRef | Run) -> dict[str, object]:
    return {"job_id": run.job_id, "run_id": getattr(run, "run_id", None), "attempt": run.attempt}
