"""The in-memory fake's run transitions, running slots and workflow runs
(`fake_store.InMemoryJobStore`): each write's condition as its port (`RunTransitions`,
`RunningSlots`, `WorkflowRuns`) states it."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from scheduler_core.domain import run_state
from scheduler_core.domain.entities import Attempt, Job, Run
from scheduler_core.domain.overlap import SlotsAsRead
from scheduler_core.domain.vocabulary import MAX_RUN_ERROR, JobStatus, RunStatus, Trigger
from scheduler_core.domain.workflows import Phase, WorkflowState
from scheduler_core.ports import RunRef, SlotsChanged
from tests.support.fake_table import (
    ENDED_FOR_GOOD,
    FakeTable,
    holds_a_slot,
    kept_error,
    may_complete,
    run_ended,
)


class FakeRunTransitions(FakeTable):
    # --- RunTransitions: the worker's ---------------------------------------------------

    def start_run_if_waiting(
        self, run: RunRef, now: datetime, lease_until: datetime, owner: str, timer: datetime | None = None
    ) -> Run | None:
        with self._lock:
            stored = self._waiting(run, run_state.sources_of(RunStatus.RUNNING))
            if stored is None:
                return None
            return self._started(stored, now, lease_until, owner, timer, slot=False)

    def extend_lease_if_held(self, run: RunRef, owner: str, lease_until: datetime) -> bool:
        with self._lock:
            stored = self._held(run, owner)
            if stored is None:
                return False
            self._runs[self._key(run)] = stored.model_copy(
                update={"lease_until": lease_until, "due_at": lease_until}
            )
            return True

    def finish_run_if_held(
        self,
        run: RunRef,
        owner: str,
        status: RunStatus,
        now: datetime,
        error: str | None = None,
        response_code: int | None = None,
        lateness_ms: int | None = None,
        complete_job: bool = False,
        output: str | None = None,
    ) -> bool:
        with self._lock:
            stored = self._held(run, owner, slot=holds_a_slot(run))
            if stored is None:
                return False
            changes: dict[str, Any] = {"status": status, "finished_at": now, "error": kept_error(error)}
            changes |= {"response_code": response_code, "lateness_ms": lateness_ms, "output": output}
            # An attempt that got no answer leaves no earlier attempt's code behind.
            stored = stored.model_copy(update={"response_code": None})
            self._end(stored, changes, now, complete_job, release=holds_a_slot(run))
            return True

    def record_late_success_if_may_run_again(
        self, run: RunRef, response_code: int | None, now: datetime
    ) -> bool:
        with self._lock:
            stored = self._runs.get(self._key(run))
            if stored is None or stored.status in ENDED_FOR_GOOD:
                return False
            self._runs[self._key(run)] = stored.model_copy(
                update={"delivered_at": now, "delivered_code": response_code}
            )
            return True

    def retry_run_if_held(
        self,
        run: RunRef,
        owner: str,
        ended: Attempt,
        next_attempt_at: datetime,
        due_at: datetime,
        lateness_ms: int | None = None,
    ) -> Run | None:
        with self._lock:
            stored = self._held(run, owner)
            if stored is None:
                return None
            return self._to_retry(
                stored, next_attempt_at, due_at, ended, lateness_ms, release=holds_a_slot(run)
            )

    # --- RunTransitions: the timers', the API's -----------------------------------------

    def move_timer_to_lease_if_unchanged(self, run: Run) -> bool:
        with self._lock:
            stored = self._runs.get(self._key(run))
            if not self._running_as_read(stored, run):
                return False
            assert stored is not None
            self._runs[self._key(run)] = stored.model_copy(update={"due_at": stored.lease_until})
            return True

    def take_over_expired_lease(
        self,
        run: Run,
        now: datetime,
        status: RunStatus,
        error: str,
        next_attempt_at: datetime | None = None,
        due_at: datetime | None = None,
        complete_job: bool = False,
    ) -> Run | None:
        with self._lock:
            stored = self._runs.get(self._key(run))
            if not self._running_as_read(stored, run) or run.lease_until is None or run.lease_until > now:
                return None
            assert stored is not None
            if run.holds_slot and not stored.holds_slot:
                return None
            if status is RunStatus.RETRYING:
                assert next_attempt_at is not None
                assert due_at is not None
                ended = stored.ended_attempt(now, error)
                return self._to_retry(stored, next_attempt_at, due_at, ended, None, run.holds_slot, keep=True)
            changes = {"status": status, "error": kept_error(error), "finished_at": now}
            stored = stored.model_copy(update={"response_code": None})  # the lost attempt got none
            return self._end(stored, changes, now, complete_job, release=run.holds_slot)

    def resend_if_unchanged(self, run: Run, due_at: datetime, caught_up: bool = False) -> bool:
        with self._lock:
            stored = self._waiting(run, run_state.WAITING)
            if stored is None or stored.due_at != run.due_at:
                return False
            self._runs[self._key(run)] = stored.model_copy(
                update={"due_at": due_at, "caught_up": stored.caught_up or caught_up}
            )
            return True

    def fail_waiting_run(self, run: Run, now: datetime, error: str) -> bool:
        return self._end_waiting(run, RunStatus.FAILED, now, kept_error(error))

    def cancel_run_if_not_started(self, run: RunRef, now: datetime) -> bool:
        return self._end_waiting(run, RunStatus.CANCELLED, now, None)

    def redrive_run_if_failed(self, run: Run, now: datetime, due_at: datetime) -> Run | None:
        with self._lock:
            stored = self._runs.get(self._key(run))
            if stored is None or stored.status is not RunStatus.FAILED or stored.attempt != run.attempt:
                return None
            redriven = stored.model_copy(
                update={
                    "status": RunStatus.RETRYING,
                    "trigger": Trigger.RETRY,
                    "attempt": stored.attempt + 1,
                    "first_attempt": stored.attempt + 1,
                    "past_attempts": stored.past_attempts_with(
                        stored.ended_attempt(stored.finished_at or now, stored.error, stored.response_code)
                    ),
                    "next_attempt_at": now,
                    "due_at": due_at,
                    "finished_at": None,
                }
            )
            self._runs[self._key(run)] = redriven
            return redriven

    def wait_turn_if_waiting(self, run: RunRef, due_at: datetime) -> bool:
        with self._lock:
            stored = self._waiting(run, run_state.WAITING)
            if stored is None:
                return False
            self._runs[self._key(run)] = stored.model_copy(update={"due_at": due_at})
            return True

    def set_aside_while_paused(self, run: RunRef, due_at: datetime) -> bool | None:
        with self._lock:
            stored = self._waiting(run, run_state.WAITING)
            if stored is None:
                return False
            if not self._paused(run.job_id):
                return None
            self._runs[self._key(run)] = stored.model_copy(update={"due_at": due_at})
            return True

    def set_aside_if_held(self, run: Run, owner: str, due_at: datetime) -> bool | None:
        with self._lock:
            stored = self._held(run, owner, slot=run.holds_slot)
            if stored is None:
                return False
            job = self._jobs.get(run.job_id)
            if (
                job is None
                or job.status is not JobStatus.PAUSED
                or (run.holds_slot and job.running_count < 1)
            ):
                return None
            status = RunStatus.RETRYING if stored.attempt > stored.first_attempt else RunStatus.PENDING
            self._release(run.job_id, run.holds_slot)
            self._runs[self._key(run)] = stored.model_copy(
                update={
                    "status": status,
                    "due_at": due_at,
                    "lease_until": None,
                    "started_at": None,
                    "holds_slot": False,
                }
            )
            self._owners.pop(self._key(run), None)
            return True


class FakeRunningSlots(FakeTable):
    # --- RunningSlots -------------------------------------------------------------------

    def start_run_in_slot(
        self,
        run: Run,
        slots: SlotsAsRead,
        now: datetime,
        lease_until: datetime,
        owner: str,
        timer: datetime | None = None,
    ) -> Run | None:
        me = run.scheduled_for_ms
        with self._lock:
            stored = self._waiting(run, run_state.sources_of(RunStatus.RUNNING))
            if stored is None or (run.delivered_at is None and stored.delivered_at is not None):
                return None
            job = self._jobs.get(run.job_id)
            if (
                job is None
                or job.version != slots.version
                or job.running_count >= slots.max_running
                or (slots.buffered_run_ms == me and job.buffered_run_ms != me)
                or (
                    slots.buffered_run_ms != me
                    and slots.buffered_goes_first
                    and job.buffered_run_ms is not None
                )
                or (slots.catch_up_front_ms == me and job.catch_up_queue_ms[:1] != [me])
            ):
                raise SlotsChanged(f"running slots of job {run.job_id} changed")
            queue = job.catch_up_queue_ms[1:] if slots.catch_up_front_ms == me else job.catch_up_queue_ms
            self._jobs[run.job_id] = job.model_copy(
                update={
                    "running_count": job.running_count + 1,
                    "buffered_run_ms": None if slots.buffered_run_ms == me else job.buffered_run_ms,
                    "catch_up_queue_ms": queue,
                }
            )
            return self._started(stored, now, lease_until, owner, timer, slot=True)

    def start_kept_run_if_job_idle(
        self, run: RunRef, now: datetime, lease_until: datetime, owner: str
    ) -> tuple[Job, Run] | None:
        with self._lock:
            stored = self._waiting(run, run_state.sources_of(RunStatus.RUNNING))
            job = self._jobs.get(run.job_id)
            if (
                stored is None
                or stored.delivered_at is not None
                or stored.caught_up
                or stored.due_at is None
                or not now < stored.due_at <= lease_until
                or job is None
                or job.status is not JobStatus.SCHEDULED
                or job.running_count
                or job.buffered_run_ms is not None
                or job.catch_up_queue_ms
            ):
                return None
            job = job.model_copy(update={"running_count": 1})
            self._jobs[run.job_id] = job
            return job, self._started(stored, now, lease_until, owner, None, slot=True)

    def claim_and_start_if_unchanged(
        self, run: Run, seen_version: int, now: datetime, lease_until: datetime, owner: str
    ) -> tuple[Job, Run] | None:
        with self._lock:
            job = self._jobs.get(run.job_id)
            if (
                job is None
                or job.version != seen_version
                or job.status is not JobStatus.SCHEDULED
                or job.next_fire_at != run.scheduled_for
                or self._key(run) in self._runs
                or job.running_count
                or job.buffered_run_ms is not None
                or job.catch_up_queue_ms
            ):
                return None
            job = job.model_copy(
                update={
                    "version": job.version + 1,
                    "updated_at": now,
                    "next_fire_at": None,
                    "running_count": 1,
                }
            )
            self._jobs[run.job_id] = job
            claimed = run.model_copy(update={"priority": job.priority, "claim_version": None})
            self._runs[self._key(run)] = claimed
            return job, self._started(claimed, now, lease_until, owner, None, slot=True)

    def buffer_run_if_waiting(self, run: RunRef, slots: SlotsAsRead, due_at: datetime) -> bool:
        me = run.scheduled_for_ms
        with self._lock:
            stored = self._waiting(run, run_state.WAITING)
            if stored is None:
                return False
            job = self._jobs.get(run.job_id)
            if job is None or job.running_count < slots.max_running or job.buffered_run_ms not in (None, me):
                raise SlotsChanged(f"running slots of job {run.job_id} changed")
            self._jobs[run.job_id] = job.model_copy(update={"buffered_run_ms": me})
            self._runs[self._key(run)] = stored.model_copy(update={"due_at": due_at})
            return True

    def skip_run_if_waiting(
        self, run: RunRef, slots: SlotsAsRead, now: datetime, reason: str, complete_job: bool = False
    ) -> bool:
        me = run.scheduled_for_ms
        with self._lock:
            stored = self._waiting(run, run_state.sources_of(RunStatus.SKIPPED))
            if stored is None:
                return False
            job = self._jobs.get(run.job_id)
            if slots.waits_behind is not None:
                holds = job is not None and job.buffered_run_ms == slots.waits_behind
            else:
                holds = job is not None and job.running_count >= slots.max_running
                holds = holds and (
                    slots.buffered_run_ms != me or (job is not None and job.buffered_run_ms == me)
                )
            if complete_job:
                holds = holds and job is not None and may_complete(job)
            if not holds or job is None:
                raise SlotsChanged(f"running slots of job {run.job_id} changed")
            update: dict[str, Any] = {}
            if slots.waits_behind is None and slots.buffered_run_ms == me:
                update["buffered_run_ms"] = None
            if complete_job:
                update |= {"status": JobStatus.COMPLETED, "version": job.version + 1, "updated_at": now}
            self._jobs[run.job_id] = job.model_copy(update=update)
            self._runs[self._key(run)] = run_ended(
                stored, {"status": RunStatus.SKIPPED, "finished_at": now, "error": reason[:MAX_RUN_ERROR]}
            )
            return True

    def rejoin_catch_up_queue(self, run: RunRef, slots: SlotsAsRead, due_at: datetime) -> bool:
        me = run.scheduled_for_ms
        with self._lock:
            stored = self._waiting(run, run_state.WAITING)
            if stored is None:
                return False
            job = self._jobs.get(run.job_id)
            if slots.running >= slots.max_running:
                holds = job is not None and job.running_count >= slots.max_running
            else:
                holds = job is not None and job.buffered_run_ms == slots.buffered_run_ms
            if not holds or job is None:
                raise SlotsChanged(f"running slots of job {run.job_id} changed")
            self._jobs[run.job_id] = job.model_copy(
                update={"catch_up_queue_ms": [me, *job.catch_up_queue_ms]}
            )
            self._runs[self._key(run)] = stored.model_copy(update={"due_at": due_at})
            return True

    def leave_catch_up_queue(self, job_id: str, run_ms: int) -> bool:
        with self._lock:
            job = self._jobs.get(job_id)
            if job is None or job.catch_up_queue_ms[:1] != [run_ms]:
                return False
            self._jobs[job_id] = job.model_copy(update={"catch_up_queue_ms": job.catch_up_queue_ms[1:]})
            return True

    def clear_buffered_run(self, job_id: str, run_ms: int) -> bool:
        with self._lock:
            job = self._jobs.get(job_id)
            if job is None or job.buffered_run_ms != run_ms:
                return False
            self._jobs[job_id] = job.model_copy(update={"buffered_run_ms": None})
            return True


class FakeWorkflowRuns(FakeTable):
    # --- WorkflowRuns -------------------------------------------------------------------

    def begin_workflow_run_if_held(
        self, run: Run, owner: str, state: WorkflowState, timer: datetime
    ) -> Run | None:
        with self._lock:
            stored = self._held(run, owner)
            if stored is None or stored.workflow is not None:
                return None
            begun = stored.model_copy(
                update={"workflow": state.model_copy(deep=True), "due_at": timer, "lease_until": None}
            )
            self._runs[self._key(run)] = begun
            self._owners.pop(self._key(run), None)  # the lease is given up: nobody holds it
            return begun

    def advance_workflow_run_if_unchanged(
        self,
        run: Run,
        phases: Mapping[str, Phase],
        now: datetime,
        *,
        timer: datetime | None = None,
        end: RunStatus | None = None,
        complete_job: bool = False,
    ) -> bool:
        state = _moved_on(run, phases)
        release = end is not None and run.holds_slot
        with self._lock:
            stored = self._at_version(run, RunStatus.RUNNING)
            if stored is None or (release and not stored.holds_slot):
                return False
            if end is None:
                assert timer is not None, "a workflow run going on keeps a timer"
                self._runs[self._key(run)] = stored.model_copy(update={"workflow": state, "due_at": timer})
                return True
            # Its timer and slot go (`run_ended`); the adapter leaves what else it had as it was.
            kept = {"lease_until": stored.lease_until, "next_attempt_at": stored.next_attempt_at}
            changes: dict[str, Any] = {"workflow": state, "status": end, "finished_at": now, **kept}
            self._end(stored, changes, now, complete_job, release)
            return True

    def cancel_started_workflow_run_if_not_begun(self, run: Run, now: datetime) -> bool:
        release = run.holds_slot
        with self._lock:
            stored = self._runs.get(self._key(run))
            if (
                stored is None
                or stored.status is not RunStatus.RUNNING
                or stored.attempt != run.attempt
                or stored.workflow is not None
                or (release and not stored.holds_slot)
            ):
                return False
            changes: dict[str, Any] = {
                "status": RunStatus.CANCELLED,
                "finished_at": now,
                "error": "cancelled before it began",
                "lease_until": None,
                "next_attempt_at": None,
            }
            self._end(stored, changes, now, False, release)
            return True

    def reopen_workflow_run_if_unchanged(
        self, run: Run, phases: Mapping[str, Phase], timer: datetime
    ) -> bool:
        state = _moved_on(run, phases)
        with self._lock:
            stored = self._at_version(run, run.status)
            if stored is None:
                return False
            self._runs[self._key(run)] = stored.model_copy(
                update={"workflow": state, "status": RunStatus.RUNNING, "finished_at": None, "due_at": timer}
            )
            return True

    def _at_version(self, run: Run, status: RunStatus) -> Run | None:
        """The stored workflow run if it is `status` at the version `run` was read at."""
        assert run.workflow is not None, "only a begun workflow run moves on"
        stored = self._runs.get(self._key(run))
        if (
            stored is None
            or stored.status is not status
            or stored.workflow is None
            or stored.workflow.version != run.workflow.version
        ):
            return None
        return stored


def _moved_on(run: Run, phases: Mapping[str, Phase]) -> WorkflowState:
    """`run`'s workflow state (its graph as read) with `phases`, at the next version."""
    assert run.workflow is not None, "only a begun workflow run moves on"
    return run.workflow.model_copy(
        update={"phases": dict(phases), "version": run.workflow.version + 1}, deep=True
    )
