"""The `WorkflowRuns` port on the jobs table: a workflow run (a run of a WORKFLOW job) begun,
moved on when its tasks end (each change conditioned on the version it was computed from:
the join), ended; and a workflow run's task runs read together. docs/concepts/workflows.md."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from scheduler_core.adapters.dynamodb.expressions import HELD_BY_OWNER, HOLDS_SLOT, LEASE_AND_TIMER
from scheduler_core.adapters.dynamodb.transactions import TransactionalWrites
from scheduler_core.domain.clock import to_ms
from scheduler_core.domain.entities import Run
from scheduler_core.domain.vocabulary import RunStatus
from scheduler_core.domain.workflows import Phase, WorkflowState

# A workflow run at a version of its phases: the condition of every change after the begin.
_AT_VERSION = "#status = :running AND wf_version = :seen"


class WorkflowRunsTable(TransactionalWrites):
    def begin_workflow_run_if_held(
        self, run: Run, owner: str, state: WorkflowState, timer: datetime
    ) -> Run | None:
        """The attempt `owner` holds of a workflow run begins the run: its graph and phases
        recorded (version 1), its lease given up (the run now waits on its tasks, RUNNING, and
        keeps its running slot), its timer moved to `timer` (the poller looks at it then,
        `reconcile`). None if the lease was lost, or the run was begun already."""
        return self._update_run(
            run.job_id,
            run.scheduled_for_ms,
            self._codec.workflow_attributes(state) | self._codec.due_attributes(run.job_id, timer),
            f"{HELD_BY_OWNER} AND attribute_not_exists(wf_version)",
            {"running": "RUNNING", "attempt": run.attempt, "owner": owner},
            remove=("lease_until_ms", "lease_owner"),
        )

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
        """Write a begun workflow run's new `phases` if they are still at the version `run`
        was read at (`run.workflow.version`): the version moves on, its timer to `timer`.
        With `end` (SUCCEEDED, FAILED, CANCELLED), the run ends instead: its timer goes and
        the running slot it holds (if any) is given back, its job completed with
        `complete_job`, all in one transaction. False if someone else changed the run first
        (read it again and decide again)."""
        assert run.workflow is not None, "only a begun workflow run moves on"
        state = run.workflow.model_copy(update={"phases": dict(phases), "version": run.workflow.version + 1})
        sets = self._codec.workflow_attributes(state)
        remove: tuple[str, ...] = ()
        condition = _AT_VERSION
        release = end is not None and run.holds_slot
        if end is None:
            assert timer is not None, "a workflow run going on keeps a timer"
            sets |= self._codec.due_attributes(run.job_id, timer)
        else:
            sets |= {
                "status": str(end),
                "finished_at_ms": to_ms(now),
                "expires_at": self._codec.expiry(now),
            }
            remove = ("due_pk", "due_sk", "slot")
            if release:
                condition += f" AND {HOLDS_SLOT}"
        request = self._run_update(
            run.job_id,
            run.scheduled_for_ms,
            sets,
            condition,
            {"running": "RUNNING", "seen": run.workflow.version},
            remove=remove,
            elsewhere=False,
        )
        if end is None:
            return self._write_if(request)
        return self._end_run(request, run.job_id, now, complete=complete_job, release=release)

    def cancel_started_workflow_run_if_not_begun(self, run: Run, now: datetime) -> bool:
        """A workflow run a worker started but has not begun (its attempt RUNNING, no phases
        yet: the worker died, or is about to begin it) ends CANCELLED: its lease and timer go,
        its running slot is given back if it holds one. The worker's begin then finds it
        ended and releases nothing. False if it was begun, or ended, meanwhile."""
        release = run.holds_slot
        request = self._run_update(
            run.job_id,
            run.scheduled_for_ms,
            {
                "status": str(RunStatus.CANCELLED),
                "finished_at_ms": to_ms(now),
                "expires_at": self._codec.expiry(now),
                "error": "cancelled before it began",
            },
            "#status = :running AND attempt = :attempt AND attribute_not_exists(wf_version)"
            + (f" AND {HOLDS_SLOT}" if release else ""),
            {"running": "RUNNING", "attempt": run.attempt},
            remove=LEASE_AND_TIMER,
            elsewhere=False,
        )
        return self._end_run(request, run.job_id, now, release=release)

    def reopen_workflow_run_if_unchanged(
        self, run: Run, phases: Mapping[str, Phase], timer: datetime
    ) -> bool:
        """A workflow run that ended (`run.status`) runs again with `phases` (a failed task
        retried), if it is still as read (status and version): RUNNING, its end undone, its
        timer at `timer`. It takes no running slot again (its end gave its slot back). False
        if it changed meanwhile."""
        assert run.workflow is not None, "only a begun workflow run runs again"
        state = run.workflow.model_copy(update={"phases": dict(phases), "version": run.workflow.version + 1})
        request = self._run_update(
            run.job_id,
            run.scheduled_for_ms,
            self._codec.workflow_attributes(state)
            | self._codec.due_attributes(run.job_id, timer)
            | {"status": str(RunStatus.RUNNING)},
            "#status = :ended AND wf_version = :seen",
            {"ended": str(run.status), "seen": run.workflow.version},
            remove=("finished_at_ms", "expires_at"),
            elsewhere=False,
        )
        return self._write_if(request)
