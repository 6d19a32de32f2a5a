"""What resuming a paused job does (`plan_resume`). Pure: `job_control` reads the job's
newest runs, plans with this, then writes the plan. What a pause leaves waiting and what a
resume runs under each misfire policy is written once, in docs/concepts/job-control.md
("Pause and resume").

Why a pure plan: it is decided on one read of the job and its runs; `job_control` writes
the job only if it is still at the version read, and plans again on a fresh read otherwise
(another resume, a change or a cancel came first).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from scheduler_core.domain import misfire, run_state
from scheduler_core.domain.entities import Job, Run
from scheduler_core.domain.job_firings import following_firing
from scheduler_core.domain.vocabulary import BY_NAME, JobStatus, MisfirePolicy, RunStatus

# The newest runs a resume looks at: runs the pause stopped, runs not finished yet.
RESUME_WINDOW = 100

_ONE_MS = timedelta(milliseconds=1)
_UNFINISHED = frozenset({RunStatus.PENDING, RunStatus.RUNNING, RunStatus.RETRYING})


@dataclass(frozen=True)
class ResumePlan:
    status: JobStatus  # SCHEDULED, or COMPLETED when nothing is left to fire or finish
    next_fire_at: datetime | None
    catch_up: bool  # FIRE_ONCE: one run now for the firings missed while paused
    stopped: list[Run]  # waiting runs due while paused: cancelled (missed, or stood for by catch_up)
    # SKIP, CATCH_UP: the missed firings that run after all, each as its own run:
    kept: list[Run] = field(default_factory=list)  # waiting runs due while paused: sent again
    missed: list[datetime] = field(default_factory=list)  # firings with no run yet: new runs
    # Waiting runs not due while paused (due before the pause, or not due yet, up to the
    # horizon): sent again as planned, since the worker may have set them aside.
    going_on: list[Run] = field(default_factory=list)


def is_firing(job: Job, when: datetime) -> bool:
    """Whether the job's schedule fires at `when` (a nominal firing: the time of its run)."""
    return following_firing(job, when - _ONE_MS) == when


def plan_resume(job: Job, runs: list[Run], now: datetime, horizon: datetime) -> ResumePlan:
    """What resuming the paused `job` at `now` does, given its newest `runs` (`horizon`: how
    far ahead the poller sends work).

    Missed: the job's firings between the pause and now (claimed or not), its next firing if
    it is past, and waiting runs (first attempts and retries) whose time came while paused.
    FIRE_ONCE: `catch_up` stands for them, their waiting runs are `stopped`. SKIP, CATCH_UP:
    those `misfire.select` keeps are `kept` (a waiting run) or `missed` (no run yet), the
    other waiting runs `stopped`. Other waiting runs up to the horizon: `going_on`. A
    workflow with no schedule has no firings: it is simply SCHEDULED again (it never
    completes; its runs were asked for by name)."""
    if job.schedule is None:
        return ResumePlan(JobStatus.SCHEDULED, None, False, [])
    paused_at = job.paused_at or job.updated_at
    unstarted = [run for run in runs if run.trigger not in BY_NAME and run.status in run_state.WAITING]
    waiting = [run for run in unstarted if paused_at < run.starts_at <= now]
    going_on = [run for run in unstarted if run.starts_at <= paused_at or now < run.starts_at <= horizon]
    first_after_pause = following_firing(job, paused_at)
    if job.next_fire_at is None or job.next_fire_at > now:
        next_fire_at = job.next_fire_at
    else:
        next_fire_at = following_firing(job, now)
    kept: list[Run] = []
    new: list[datetime] = []
    if job.misfire is MisfirePolicy.FIRE_ONCE:
        catch_up = (
            (job.next_fire_at is not None and job.next_fire_at <= now)
            or _a_firing_did_not_run(job, runs, first_after_pause, now)
            or bool(waiting)
        )
        stopped = waiting
    else:
        catch_up = False
        kept, new = _own_runs_for_missed(job, runs, waiting, first_after_pause, now)
        kept_ids = {run.run_id for run in kept}
        stopped = [run for run in waiting if run.run_id not in kept_ids]
        going_on = [run for run in going_on if run.run_id not in kept_ids]
    stopped_ids = {run.run_id for run in stopped}
    # A manual run never completes a job (its own firing does), so it does not hold one open.
    unfinished = any(
        run.status in _UNFINISHED and run.run_id not in stopped_ids and run.trigger not in BY_NAME
        for run in runs
    )
    done = next_fire_at is None and not catch_up and not new and not unfinished
    return ResumePlan(
        JobStatus.COMPLETED if done else JobStatus.SCHEDULED,
        next_fire_at,
        catch_up,
        stopped,
        kept=kept,
        missed=new,
        going_on=going_on,
    )


def _a_firing_did_not_run(job: Job, runs: list[Run], first: datetime | None, now: datetime) -> bool:
    """Whether a firing of the job's schedule from `first` to `now` has no run that went on
    (a worker started it before the pause, or a resume raced it): FIRE_ONCE's one run stands
    for those only, so a firing that ran is not run twice."""
    went_on = {
        run.scheduled_for
        for run in runs
        if run.trigger not in BY_NAME and run.status not in run_state.WAITING | {RunStatus.CANCELLED}
    }
    when = first
    for _ in range(RESUME_WINDOW):
        if when is None or when > now:
            return False
        if when not in went_on:
            return True
        when = following_firing(job, when)
    return True  # more firings than runs read: some surely did not run


def _own_runs_for_missed(
    job: Job, runs: list[Run], waiting: list[Run], first_after_pause: datetime | None, now: datetime
) -> tuple[list[Run], list[datetime]]:
    """SKIP, CATCH_UP: the firings missed while paused that the policy keeps, each its own
    run: (waiting runs to send again, firings with no run yet). A firing whose run went on
    anyway (a worker took it before the pause) is done, and a cancelled one stays cancelled."""
    starts = [when for when in (job.next_fire_at, first_after_pause) if when is not None and when <= now]
    firings: set[datetime] = set()
    if starts:
        firings.update(
            misfire.due_firings(
                job.fires_by, job.created_at, min(starts), now, job.misfire, job.catch_up_window
            )
        )
    firings.update(run.scheduled_for for run in waiting)
    chosen = misfire.select(sorted(firings), now, job.misfire, job.catch_up_window)
    by_time = {run.scheduled_for: run for run in runs if run.trigger not in BY_NAME}
    kept: list[Run] = []
    new: list[datetime] = []
    for fire_at in chosen:
        run = by_time.get(fire_at)
        if run is None:
            new.append(fire_at)
        elif run.status in run_state.WAITING:
            kept.append(run)
    return kept, new
