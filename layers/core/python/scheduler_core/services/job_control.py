"""Changing a job after its creation (DESIGN §7): pause, resume, trigger by hand, patch, and
the sweep of a cancelled job's waiting runs. `JobService` checks tenancy, then calls these.
What each does is written once, in docs/concepts/job-control.md; a resume's plan is made by
`resume.plan_resume`.

Why every change is a conditional write on the version (and status) it was read at: it
never loses or doubles a claim racing with it. A claim moves the version on, so the change
fails and is read and applied again (`CHANGE_TRIES` times; then 409), or, with `If-Match`,
is refused (412); claims check the version too, so a change that won makes the claim fail.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, Protocol

from scheduler_core.domain import keys, run_state
from scheduler_core.domain.api_shapes import JobCreate, JobPatch
from scheduler_core.domain.clock import Clock, from_ms, to_ms
from scheduler_core.domain.entities import Job, Run, iso_or_none
from scheduler_core.domain.errors import Conflict, NotFound, PreconditionFailed, Unprocessable, field_error
from scheduler_core.domain.job_firings import following_firing
from scheduler_core.domain.overlap import queues_when_caught_up
from scheduler_core.domain.resume import RESUME_WINDOW, ResumePlan, is_firing, plan_resume
from scheduler_core.domain.retry import longest_round
from scheduler_core.domain.schedule import ScheduleSpec, firings_between
from scheduler_core.domain.vocabulary import (
    ENDED_JOB,
    MAX_BACKFILL_RUNS,
    JobStatus,
    MisfirePolicy,
    Overlap,
    RunStatus,
    Trigger,
)
from scheduler_core.observability import logger, metrics
from scheduler_core.ports import JobRecords, Listing, RunRecords, RunTransitions
from scheduler_core.services.dispatch import Dispatcher
from scheduler_core.services.lifecycle import RunLifecycle

# How often a change is read and applied again when a claim (or another change) won the race.
CHANGE_TRIES = 3
# The newest runs a cancel looks at for waiting ones, cancelled at once; older ones are
# cancelled by their worker or the watchdog when their message or timer comes.
CANCEL_SWEEP = 200
# The runs at or after a new schedule's first firing a schedule change looks at (those
# already claimed: the lookahead's worth).
CLAIMED_WINDOW = 100
# How many milliseconds a new run's time may move on to find one no run or firing holds.
FREE_TIME_TRIES = 10

_ONE_MS = timedelta(milliseconds=1)
_UNFINISHED = frozenset({RunStatus.PENDING, RunStatus.RUNNING, RunStatus.RETRYING})


class JobControlStore(JobRecords, RunRecords, Listing, RunTransitions, Protocol):
    """The ports of the jobs table the API uses (its job service, and pause, resume, trigger
    and cancel)."""


class JobControl:
    def __init__(
        self,
        store: JobControlStore,
        dispatcher: Dispatcher,
        clock: Clock,
        lifecycle: RunLifecycle,
        admit_request: Callable[[JobCreate, Job], dict[str, Any]],
        first_firing: Callable[[ScheduleSpec, datetime, datetime], datetime],
    ) -> None:
        self._store = store
        self._dispatcher = dispatcher
        self._clock = clock
        self._lifecycle = lifecycle
        # The create path's own checks: the request's (e.g. no own queue as target; the job
        # fields it comes to, such as sealed secret headers, for the job as it is) and the
        # first firing of a schedule (a 422 when it has none).
        self._admit_request = admit_request
        self._first_firing = first_firing

    # --- pause / resume ------------------------------------------------------------------

    def pause(self, job: Job) -> Job:
        """SCHEDULED → PAUSED, out of the due index. Pausing a paused job changes nothing."""
        for _ in range(CHANGE_TRIES):
            if job.status is JobStatus.PAUSED:
                return job
            _refuse_ended(job, "paused")
            now = self._clock.now()
            paused = job.model_copy(
                update={
                    "status": JobStatus.PAUSED,
                    "paused_at": now,
                    "version": job.version + 1,
                    "updated_at": now,
                }
            )
            if self._store.update_job_if_unchanged(job, paused, now):
                logger.info("job paused", extra={"job_id": job.job_id})
                return paused
            job = self._read_again(job)
        raise _changed_concurrently(job)

    def resume(self, job: Job) -> Job:
        """PAUSED → SCHEDULED, as `plan_resume` plans it. Resuming a scheduled job changes nothing."""
        for _ in range(CHANGE_TRIES):
            if job.status is JobStatus.SCHEDULED:
                return job
            _refuse_ended(job, "resumed")
            now = self._clock.now()
            runs = self._store.recent_runs(job.job_id, RESUME_WINDOW)
            plan = plan_resume(job, runs, now, self._dispatcher.horizon(now))
            # Before the job is scheduled again, so a late message cannot start one of them.
            for run in plan.stopped:
                self._store.cancel_run_if_not_started(run, now)
            # Before the job too: should the resume not happen, they wait, set aside, for the
            # next resume (which finds them among the job's waiting runs).
            new_runs = self._write_missed_runs(job, plan, now)
            catch_up = self._new_run(job, Trigger.SCHEDULE, now) if plan.catch_up else None
            resumed = job.model_copy(
                update={
                    "status": plan.status,
                    "next_fire_at": plan.next_fire_at,
                    "paused_at": None,
                    "version": job.version + 1,
                    "updated_at": now,
                }
            )
            # Under CATCH_UP, the missed firings that run queue for the job's slots, oldest first.
            queues = queues_when_caught_up(job)
            caught_up = sorted({run.scheduled_for_ms for run in [*plan.kept, *new_runs]}) if queues else []
            queue = [ms for ms in caught_up if ms not in job.catch_up_queue_ms]
            if self._store.update_job_if_unchanged(job, resumed, now, catch_up, queue):
                logger.info(
                    "job resumed",
                    extra={
                        "job_id": job.job_id,
                        "misfire": str(job.misfire),
                        "catch_up_run": catch_up.run_id if catch_up else None,
                        "caught_up_runs": [run.run_id for run in [*plan.kept, *new_runs]],
                    },
                )
                if catch_up is not None:
                    self._lifecycle.send_new(catch_up)
                self._send_again(sorted(plan.kept, key=lambda run: run.starts_at), now, caught_up=queues)
                self._send_again(plan.going_on, now)
                self._dispatcher.enqueue(new_runs)
                if resumed.status is JobStatus.COMPLETED:
                    self._lifecycle.job_completed(resumed)
                if resumed.status is JobStatus.SCHEDULED:
                    resumed = self._dispatcher.claim_and_enqueue(resumed, now).job
                return resumed
            job = self._read_again(job)
        raise _changed_concurrently(job)

    def _send_again(self, runs: list[Run], now: datetime, caught_up: bool = False) -> None:
        """Send waiting runs again (the worker may have set them aside while the job was
        paused). `caught_up`: they are missed firings caught up (they queue for a slot). A
        run whose timer moved meanwhile (a worker or the watchdog setting it aside as the
        resume read it) is read again and, still waiting at the same attempt, sent anyway:
        a duplicate message is dropped by the run's conditional start."""
        for run in runs:
            if run.due_at is not None and self._lifecycle.send_again(run, now, caught_up):
                continue
            current = self._store.get_run(run.job_id, run.scheduled_for_ms)
            if current is None or current.status not in run_state.WAITING or current.attempt != run.attempt:
                continue  # it started, ended or moved on: not ours to send
            if current.due_at is None or not self._lifecycle.send_again(current, now, caught_up):
                self._lifecycle.send_new(current)

    def _write_missed_runs(self, job: Job, plan: ResumePlan, now: datetime) -> list[Run]:
        """The new runs of missed firings that run after all (SKIP, CATCH_UP), as written,
        oldest first."""
        written: list[Run] = []
        for fire_at in plan.missed:
            run = self._dispatcher.missed_run(job, fire_at, now)
            if self._store.put_run_if_absent(run, now):
                written.append(run)
        return written

    # --- trigger -------------------------------------------------------------------------

    def trigger(self, job: Job) -> Run:
        """One run now, `trigger: MANUAL` (see docs/concepts/job-control.md, "Trigger"); the
        job itself is not written."""
        _refuse_ended(job, "triggered")
        now = self._clock.now()
        for _ in range(CHANGE_TRIES):
            run = self._new_run(job, Trigger.MANUAL, now)
            if self._store.put_run_if_absent(run, now):
                logger.info("job triggered by hand", extra={"job_id": job.job_id, "run_id": run.run_id})
                metrics.add_metric(name="RunsTriggered", unit="Count", value=1)
                self._lifecycle.send_new(run)
                return run
        raise _changed_concurrently(job)

    def _new_run(self, job: Job, trigger: Trigger, now: datetime) -> Run:
        """A run of `job` due now that is no firing's: its time (and id) is now's millisecond,
        or the first one after it that neither the schedule fires at nor a run holds. A later
        claim of a firing then never finds its run's key taken."""
        when = from_ms(to_ms(now))
        for _ in range(FREE_TIME_TRIES):
            if not is_firing(job, when) and self._store.get_run(job.job_id, to_ms(when)) is None:
                break
            when += _ONE_MS
        else:
            raise _changed_concurrently(job)
        return Run(
            run_id=keys.run_id(job.job_id, to_ms(when)),
            job_id=job.job_id,
            status=RunStatus.PENDING,
            trigger=trigger,
            scheduled_for=when,
            priority=job.priority,
            # Its timer: if it has not started by then, its message is sent again.
            due_at=self._lifecycle.sent_timer(when, now),
        )

    # --- backfill ------------------------------------------------------------------------

    def backfill(self, job: Job, start: datetime, end: datetime) -> tuple[list[Run], int]:
        """One run (`trigger: BACKFILL`) per firing of the job's schedule in [`start`, `end`]
        before its next firing (`next_fire_at`: those are the schedule's own) that has no run
        yet, oldest first, each with its firing's time; under a limited
        concurrency they queue for the running slots like a catch-up backlog (never SKIPPED).
        (the runs made, how many firings had a run already). docs/concepts/job-control.md."""
        if job.status is JobStatus.CANCELLED:
            raise Conflict(f"job '{job.job_id}' is CANCELLED; it cannot be backfilled")
        if job.schedule is None:
            raise Unprocessable(
                f"'{job.job_id}' has no schedule, so no firings to backfill; trigger it instead",
                [field_error("schedule", "none: the workflow runs only when triggered")],
            )
        if job.next_fire_at is not None:
            # From its next firing on, the schedule runs its firings itself (the poller claims
            # them; missed ones go as the misfire policy says): a backfill stops before it.
            end = min(end, job.next_fire_at - _ONE_MS)
        firings = firings_between(job.schedule, job.created_at, start, end, MAX_BACKFILL_RUNS + 1)
        if len(firings) > MAX_BACKFILL_RUNS:
            raise Unprocessable(
                f"the window holds more than {MAX_BACKFILL_RUNS} firings; a backfill runs at most "
                f"{MAX_BACKFILL_RUNS}: narrow it and send the rest as another backfill",
                [field_error("end", f"more than {MAX_BACKFILL_RUNS} firings from start to end")],
            )
        now = self._clock.now()
        existing = self._store.get_runs([(job.job_id, to_ms(fire_at)) for fire_at in firings])
        queues = job.concurrency.overlap is not Overlap.ALLOW
        made = [
            run
            for fire_at, had in zip(firings, existing, strict=True)
            if had is None
            and self._store.put_run_if_absent(run := self._backfill_run(job, fire_at, queues, now), now)
        ]
        if queues and made:
            self._join_catch_up_queue(job, [run.scheduled_for_ms for run in made], now)
        if made and job.status in ENDED_JOB:
            # A completed window's backfill: the job is kept for the retention after the
            # longest its runs can take (one after another when they queue, behind those an
            # earlier backfill queued), not expired under them (docs/concepts/guarantees.md,
            # "Run history").
            rounds = len(job.catch_up_queue_ms) + len(made) if queues else 1
            self._store.keep_ended_job_until(job.job_id, now + longest_round(job.retry) * rounds)
        logger.info(
            "job backfilled",
            extra={"job_id": job.job_id, "runs": len(made), "already_run": len(firings) - len(made)},
        )
        metrics.add_metric(name="RunsBackfilled", unit="Count", value=len(made))
        self._dispatcher.enqueue(made)
        return made, len(firings) - len(made)

    def _backfill_run(self, job: Job, fire_at: datetime, queues: bool, now: datetime) -> Run:
        return Run(
            run_id=keys.run_id(job.job_id, to_ms(fire_at)),
            job_id=job.job_id,
            status=RunStatus.PENDING,
            trigger=Trigger.BACKFILL,
            scheduled_for=fire_at,
            # Due now: its lateness counts from the backfill, not from its (past) firing.
            next_attempt_at=now,
            priority=job.priority,
            caught_up=queues,
            due_at=self._lifecycle.sent_timer(now, now),
        )

    def _join_catch_up_queue(self, job: Job, runs_ms: list[int], now: datetime) -> None:
        """The backfill's runs join the end of the job's catch-up queue (oldest first)."""
        for _ in range(CHANGE_TRIES):
            queued = [ms for ms in runs_ms if ms not in job.catch_up_queue_ms]
            touched = job.model_copy(update={"version": job.version + 1, "updated_at": now})
            if self._store.update_job_if_unchanged(job, touched, now, None, queued):
                return
            job = self._read_again(job)
        raise _changed_concurrently(job)

    # --- patch ---------------------------------------------------------------------------

    def update(self, job: Job, patch: JobPatch, if_match: int | None = None) -> Job:
        """Apply `patch` to a SCHEDULED or PAUSED job, as one new version (what a change does
        to claimed runs: docs/concepts/job-control.md, "Changes"). The runs a new schedule
        leaves behind are cancelled only once the job's write has won. `if_match`: the
        version the caller read; another one is a 412."""
        changes = patch.changes()
        for _ in range(CHANGE_TRIES):
            if if_match is not None and job.version != if_match:
                raise PreconditionFailed(
                    f"job '{job.job_id}' is at version {job.version}, not {if_match}; read it again"
                )
            _refuse_ended(job, "changed")
            if not changes:
                return job
            now = self._clock.now()
            # The job as patched must be a job one could create: the same rules, field by field.
            current = {name: getattr(job, name) for name in JobCreate.model_fields}
            if changes.get("misfire", MisfirePolicy.CATCH_UP) is not MisfirePolicy.CATCH_UP:
                current["catch_up_window_seconds"] = None  # leaving CATCH_UP drops its window
            request = JobCreate.model_validate(current | changes)
            admitted = self._admit_request(request, job)
            updated = job.model_copy(
                update={name: getattr(request, name) for name in JobCreate.model_fields}
                | admitted
                | {"version": job.version + 1, "updated_at": now}
            )
            rescheduled = request.schedule != job.schedule
            stale: list[Run] = []
            if rescheduled:
                updated, stale = self.reschedule(updated, now)
            if self._store.update_job_if_unchanged(job, updated, now):
                for run in stale:
                    self._store.cancel_run_if_not_started(run, now)
                logger.info("job changed", extra={"job_id": job.job_id, "fields": sorted(changes)})
                if rescheduled and updated.status is JobStatus.SCHEDULED:
                    updated = self._dispatcher.claim_and_enqueue(updated, now).job
                return updated
            if if_match is not None:
                raise PreconditionFailed(f"job '{job.job_id}' changed meanwhile; read it again")
            job = self._read_again(job)
        raise _changed_concurrently(job)

    def reschedule(self, job: Job, now: datetime) -> tuple[Job, list[Run]]:
        """`job` with its new schedule's first firing after now that no run holds yet (one
        already claimed keeps its place), and the runs claimed for times it does not fire at."""
        first = self._first_firing(job.fires_by, job.created_at, now)
        claimed = self._store.recent_runs(job.job_id, CLAIMED_WINDOW, after=min(first, now) - _ONE_MS)
        taken = {run.scheduled_for for run in claimed}
        next_fire_at: datetime | None = first
        while next_fire_at is not None and next_fire_at in taken:
            next_fire_at = following_firing(job, next_fire_at)
        if next_fire_at is None and first in taken:
            # Its only firing is held by a run an earlier change cancelled (a run id is its
            # time, and a cancelled run is final): it could never fire again.
            raise Conflict(
                f"schedule: the firing at {iso_or_none(first)} was cancelled by an earlier change "
                "of this job; choose another time"
            )
        job = job.model_copy(update={"next_fire_at": next_fire_at})
        stale = [
            run
            for run in claimed
            if run.status is RunStatus.PENDING
            and run.trigger is Trigger.SCHEDULE
            and run.scheduled_for > now
            and not is_firing(job, run.scheduled_for)
        ]
        if job.status is JobStatus.PAUSED:
            # Runs set aside while paused are firings of the old schedule: a resume counts
            # missed firings on the new one.
            waiting = self._store.recent_runs(job.job_id, RESUME_WINDOW, statuses=run_state.WAITING)
            stale += [
                run
                for run in waiting
                if run.trigger is Trigger.SCHEDULE
                and run.scheduled_for <= now
                and not is_firing(job, run.scheduled_for)
            ]
        return job, stale

    # --- cancel --------------------------------------------------------------------------

    def cancel_waiting_runs(self, job_id: str) -> int:
        """Cancel at once the waiting (PENDING, RETRYING) runs among the job's newest
        `CANCEL_SWEEP`; returns how many. Those already started finish or are stopped by their
        worker, which reads the job before it calls the target."""
        now = self._clock.now()
        waiting = self._store.recent_runs(job_id, CANCEL_SWEEP, statuses=run_state.WAITING)
        return sum(1 for run in waiting if self._store.cancel_run_if_not_started(run, now))

    def _read_again(self, job: Job) -> Job:
        current = self._store.get_job(job.job_id)
        if current is None:  # only an ended job leaves, when its retention is up (TTL)
            raise NotFound(f"job '{job.job_id}' not found")
        return current


def _refuse_ended(job: Job, verb: str) -> None:
    if job.status in ENDED_JOB:
        raise Conflict(f"job '{job.job_id}' is {job.status}; it cannot be {verb}")


def _changed_concurrently(job: Job) -> Conflict:
    return Conflict(f"job '{job.job_id}' kept changing while this request ran; try again")
