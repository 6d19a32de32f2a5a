"""Workflow runs on the scheduler's own machinery (docs/concepts/workflows.md): a workflow run
is a run of its WORKFLOW job, claimed, queued, started and counted against the workflow's
concurrency like any run; once started, the worker begins it (its first tasks released)
instead of calling a target. Each task's run is a run of the task's own job item, delivered,
retried, dead-lettered and fenced like any run. When a task's run ends, the workflow run's
phases move on by a write conditioned on the version they were read at (the join), and the
tasks that change released get their runs. The workflow run's timer has the poller look at
it (`reconcile`) every RECHECK while it runs, so a worker that died between a task's end and
the join, or between the join and a release, leaves nothing stuck.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Protocol

from scheduler_core.domain import keys
from scheduler_core.domain.clock import Clock
from scheduler_core.domain.entities import Job, Run
from scheduler_core.domain.outcomes import Outcome
from scheduler_core.domain.vocabulary import UPSTREAM_KEY, JobKind, RunStatus, WorkflowRunStatus
from scheduler_core.domain.workflows import (
    Graph,
    Phase,
    Step,
    TaskNode,
    WorkflowState,
    begin,
    cancelled,
    retried,
    run_status,
    settle,
    task_ended,
)
from scheduler_core.observability import logger, metrics
from scheduler_core.ports import (
    JobRecords,
    RunQueue,
    RunRecords,
    RunTransitions,
    StoreContention,
    WorkflowRuns,
)
from scheduler_core.services.lifecycle import RunLifecycle, is_last

# How often the poller looks at a workflow run that is still running (see the module's doc).
RECHECK = timedelta(minutes=2)
# How often a join is computed again when another one changed the workflow run first.
JOIN_TRIES = 25
# What a task's run ends as, as its workflow run records it.
_OUTCOMES = {
    RunStatus.SUCCEEDED: Phase.SUCCEEDED,
    RunStatus.FAILED: Phase.FAILED,
    RunStatus.CANCELLED: Phase.CANCELLED,
    RunStatus.SKIPPED: Phase.CANCELLED,  # a task's job never skips for overlap: only if told to
}


class WorkflowStore(JobRecords, RunRecords, RunTransitions, WorkflowRuns, Protocol):
    """The ports of the jobs table the workflow runs use."""


def graph_of(state: WorkflowState) -> Graph:
    return Graph.of(state.graph)


class WorkflowRunner:
    def __init__(self, store: WorkflowStore, queue: RunQueue, clock: Clock, lifecycle: RunLifecycle) -> None:
        self._store = store
        self._queue = queue
        self._clock = clock
        self._lifecycle = lifecycle

    # --- the worker: a workflow run starts ------------------------------------------------

    def begin(self, workflow: Job, run: Run, owner: str) -> Outcome:
        """The worker started a workflow run's attempt (`owner`): record its graph and
        phases, give its lease up, release its first tasks."""
        assert workflow.tasks, "a workflow has tasks"
        nodes = [
            TaskNode(
                task_id=task.task_id,
                depends_on=task.depends_on,
                trigger_rule=task.trigger_rule,
                priority=task.priority,
            )
            for task in workflow.tasks
        ]
        step = begin(Graph.of(nodes))
        now = self._clock.now()
        begun = self._store.begin_workflow_run_if_held(
            run, owner, WorkflowState(graph=nodes, phases=dict(step.phases)), now + RECHECK
        )
        if begun is None:
            return Outcome.LEASE_LOST
        logger.info("workflow run begun", extra=_context(begun) | {"released": list(step.released)})
        metrics.add_metric(name="WorkflowRunsBegun", unit="Count", value=1)
        self._release(begun, step.released, now)
        return Outcome.BEGUN

    # --- the worker: a task's run ended -------------------------------------------------

    def task_run_ended(self, task: Job, run: Run, status: RunStatus) -> None:
        """A task's run ended as `status`: its workflow run moves on (the join). Told twice, or
        after the poller's `reconcile` told it, it changes nothing."""
        outcome = _OUTCOMES.get(status)
        if outcome is not None and task.workflow_id is not None and task.task_id is not None:
            self._join_or_leave(task.workflow_id, task.task_id, run, outcome)

    def watched_run_ended(self, run: Run) -> None:
        """The watchdog may have ended a run (its lease expired with no attempt left, its job
        gone or cancelled): if it is a workflow task's and it has ended (read again: the
        watchdog's write may have lost to a worker that started it), its workflow run moves
        on now rather than at its timer. Any other run: nothing."""
        ref = keys.task_of(run.job_id)
        if ref is None:
            return
        current = self._store.get_run(run.job_id, run.scheduled_for_ms)
        if current is not None and current.status in _OUTCOMES:
            self._join_or_leave(*ref, run, _OUTCOMES[current.status])

    def _join_or_leave(self, workflow_id: str, task_id: str, run: Run, outcome: Phase) -> None:
        """The join of one task's end; one that keeps losing to others, or fails, is left to
        the workflow run's timer (logged)."""
        try:
            self._join(workflow_id, run.scheduled_for_ms, {task_id: outcome})
        except Exception:
            logger.exception(
                "join failed; the workflow run's timer picks it up",
                extra={"workflow_id": workflow_id, "task_id": task_id, "run_id": run.run_id},
            )

    def _join(self, workflow_id: str, scheduled_ms: int, ended: dict[str, Phase]) -> None:
        """Record tasks' ends on their workflow run, read again until one write holds. The
        end of a task its workflow run has as FAILED (its run re-driven from the DLQ, not
        through the workflow) counts as a retry of that task: what its failure decided is
        decided again, and an ended workflow run runs again."""
        for _ in range(JOIN_TRIES):
            workflow_run = self._store.get_run(workflow_id, scheduled_ms)
            if workflow_run is None or workflow_run.workflow is None:
                return  # gone (TTL) or never begun: nothing waits on it
            state = workflow_run.workflow
            graph = graph_of(state)
            step = Step(dict(state.phases))
            for task_id, outcome in ended.items():
                if state.phases.get(task_id) is Phase.FAILED and outcome is not Phase.FAILED:
                    step = step.then(retried(graph, step.phases, task_id))
            if workflow_run.status is not RunStatus.RUNNING:
                if not step.changed:
                    return  # ended, and nothing here changes that
                if self._store.reopen_workflow_run_if_unchanged(
                    workflow_run, step.phases, self._clock.now() + RECHECK
                ):
                    logger.info(
                        "workflow run goes on: a failed task's run went on", extra=_context(workflow_run)
                    )
                continue  # the ends are joined on the run as it is now
            for task_id, outcome in ended.items():
                step = step.then(task_ended(graph, step.phases, task_id, outcome))
            if not step.changed:
                return
            if self._advance(workflow_run, step):
                return
        raise StoreContention(f"workflow run {keys.run_id(workflow_id, scheduled_ms)} kept changing")

    def _advance(self, workflow_run: Run, step: Step) -> bool:
        """Write the workflow run's phases after `step` (conditioned on the version read),
        then give the released tasks their runs; the run ends when nothing is left to run.
        False if someone else changed it first."""
        now = self._clock.now()
        assert workflow_run.workflow is not None
        status = run_status(step.phases, workflow_run.workflow.cancelled)
        if status is WorkflowRunStatus.RUNNING:
            if not self._store.advance_workflow_run_if_unchanged(
                workflow_run, step.phases, now, timer=now + RECHECK
            ):
                return False
        else:
            workflow = self._store.get_job(workflow_run.job_id)
            completes = workflow is not None and is_last(workflow, workflow_run)
            if not self._store.advance_workflow_run_if_unchanged(
                workflow_run, step.phases, now, end=RunStatus(status), complete_job=completes
            ):
                return False
            if completes and workflow is not None:
                self._lifecycle.job_completed(workflow)
            logger.info(
                "workflow run finished",
                extra=_context(workflow_run) | {"status": str(status), "phases": dict(step.phases)},
            )
            metrics.add_metric(name=f"WorkflowRuns{status.title()}", unit="Count", value=1)
            self._lifecycle.wake_next_in_line(workflow, workflow_run)
        if step.decided:
            logger.info(
                "workflow tasks decided",
                extra=_context(workflow_run) | {"decided": {t: str(p) for t, p in step.decided.items()}},
            )
        self._release(workflow_run, step.released, now)
        return True

    def _release(self, workflow_run: Run, task_ids: Sequence[str], now: datetime) -> None:
        """Give each released task its run (if it has none yet) and send it. A send that fails
        leaves the run's timer to the poller; a run not made (a crash before) is made by the
        workflow run's `reconcile`."""
        if not task_ids:
            return
        made: list[Run] = []
        for task_id in task_ids:
            run = self._task_run(workflow_run, task_id, now)
            if self._store.put_run_if_absent(run, now):
                made.append(run)
        if made:
            self._queue.send_runs(made)

    def _task_run(self, workflow_run: Run, task_id: str, now: datetime) -> Run:
        """The run of a released task, on the queue of the priority its graph gives it."""
        assert workflow_run.workflow is not None
        node = next(node for node in workflow_run.workflow.graph if node.task_id == task_id)
        job_id = keys.task_job_id(workflow_run.job_id, task_id)
        return Run(
            run_id=keys.run_id(job_id, workflow_run.scheduled_for_ms),
            job_id=job_id,
            status=RunStatus.PENDING,
            trigger=workflow_run.trigger,
            scheduled_for=workflow_run.scheduled_for,
            # Due when released: its lateness counts from then, not from the workflow run's time.
            next_attempt_at=now if now != workflow_run.scheduled_for else None,
            priority=node.priority,
            due_at=self._lifecycle.sent_timer(now, now),
        )

    # --- the poller: a workflow run's timer is up -----------------------------------------

    def reconcile(self, workflow_run: Run, now: datetime) -> str:
        """The watchdog of a begun workflow run: the ends of released tasks not joined yet are
        joined, released tasks with no run get one, and the timer moves on RECHECK (or the
        run ends). What was done, for the poll report."""
        state = workflow_run.workflow
        assert state is not None, "only a begun workflow run is reconciled"
        graph = graph_of(state)
        released = [task for task, phase in state.phases.items() if phase is Phase.RELEASED]
        runs = self._store.get_runs(
            [
                (keys.task_job_id(workflow_run.job_id, task), workflow_run.scheduled_for_ms)
                for task in released
            ]
        )
        step = settle(graph, state.phases)  # a rule nobody applied yet (none, but cheap to be sure)
        missing: list[str] = []
        for task, run in zip(released, runs, strict=True):
            if run is None:
                missing.append(task)
            elif run.status in _OUTCOMES:
                step = step.then(task_ended(graph, step.phases, task, _OUTCOMES[run.status]))
        if step.changed:
            found = "joined"
        elif missing:
            found = "released"
        else:
            found = "running"
        if not self._advance(workflow_run, step):
            return "lost_race"
        self._release(workflow_run, tuple(missing), now)
        if found != "running":
            logger.warning(
                "workflow run caught up by its timer",
                extra=_context(workflow_run) | {"joined": dict(step.decided), "released": missing},
            )
        return f"workflow_{found}"

    # --- the API: a workflow run cancelled, a failed task retried ----------------------------

    def cancel(self, workflow_run: Run) -> bool:
        """Cancel what has not started (docs/concepts/workflows.md, "Cancel"): a workflow run
        not begun yet is cancelled whole; a begun one's waiting tasks are CANCELLED, and its
        released tasks whose runs have not started are cancelled (a task run under way ends
        as it ends). False if the workflow run had ended (or began or ended meanwhile)."""
        now = self._clock.now()
        if workflow_run.workflow is None:
            if workflow_run.status is RunStatus.RUNNING:  # started, not begun: its worker died
                return self._store.cancel_started_workflow_run_if_not_begun(workflow_run, now)
            if workflow_run.status not in (RunStatus.PENDING, RunStatus.RETRYING):
                return False
            return self._store.cancel_run_if_not_started(workflow_run, now)
        current: Run | None = workflow_run
        for _ in range(JOIN_TRIES):
            if current is None or current.workflow is None or current.status is not RunStatus.RUNNING:
                return False
            marked = current.workflow.model_copy(update={"cancelled": True})
            if self._advance(
                current.model_copy(update={"workflow": marked}), cancelled(current.workflow.phases)
            ):
                break
            current = self._store.get_run(workflow_run.job_id, workflow_run.scheduled_for_ms)
        else:
            raise StoreContention(f"workflow run {workflow_run.run_id} kept changing")
        assert current is not None
        assert current.workflow is not None
        released = [task for task, phase in current.workflow.phases.items() if phase is Phase.RELEASED]
        ms = current.scheduled_for_ms
        runs = self._store.get_runs([(keys.task_job_id(current.job_id, task), ms) for task in released])
        stopped: dict[str, Phase] = {}
        for task, run in zip(released, runs, strict=True):
            if run is None:
                # Not made yet: a cancelled one takes its place, so a release under way makes none.
                stand_in = self._task_run(current, task, now).model_copy(
                    update={"status": RunStatus.CANCELLED, "due_at": None, "finished_at": now}
                )
                if self._store.put_run_if_absent(stand_in, now):
                    stopped[task] = Phase.CANCELLED
                    continue
                run = self._store.get_run(stand_in.job_id, ms)
            waiting = run is not None and run.status in (RunStatus.PENDING, RunStatus.RETRYING)
            if waiting and run is not None and self._store.cancel_run_if_not_started(run, now):
                stopped[task] = Phase.CANCELLED
        if stopped:
            self._join(current.job_id, ms, stopped)
        logger.info("workflow run cancelled", extra=_context(current) | {"stopped": sorted(stopped)})
        return True

    def retry_task(self, workflow_run: Run, task_run: Run, task: Job) -> bool:
        """Run a FAILED task again (Airflow's "clear"): its workflow run's phases first (the
        task released, what its failure decided waiting again; an ended workflow run runs
        again, without a running slot), then the task's run re-driven. False if the workflow
        run or the task's run changed meanwhile (read again)."""
        state = workflow_run.workflow
        assert state is not None, "only a begun workflow run's task is retried"
        assert task.task_id is not None, "a task's job names its task"
        task_id = task.task_id
        now = self._clock.now()
        step = retried(graph_of(state), state.phases, task_id)
        if workflow_run.status is RunStatus.RUNNING:
            if not self._advance(workflow_run, step):
                return False
        else:
            if not self._store.reopen_workflow_run_if_unchanged(workflow_run, step.phases, now + RECHECK):
                return False
            self._release(workflow_run, [task for task in step.released if task != task_id], now)
        logger.info("workflow task retried", extra=_context(workflow_run) | {"task_id": task_id})
        # None: the run moved meanwhile; the workflow run's timer then finds it as it is.
        return self._lifecycle.redrive(task_run, task) is not None

    # --- the worker: a task's delivery ------------------------------------------------------

    def for_delivery(self, task: Job, run: Run) -> Job | None:
        """The job as its run delivers it: any job as it is; a workflow task with an object
        payload (or none) gets `upstream`, its direct upstream tasks' outputs by task id
        (null where a task has none), as this workflow run's graph has them. None: the
        task's workflow run was cancelled, so no attempt of it calls its target any more."""
        if task.kind is not JobKind.TASK or task.workflow_id is None or task.task_id is None:
            return task
        workflow_run = self._store.get_run(task.workflow_id, run.scheduled_for_ms)
        if workflow_run is not None and (
            workflow_run.status is RunStatus.CANCELLED
            or (workflow_run.workflow is not None and workflow_run.workflow.cancelled)
        ):
            return None
        if task.payload is not None and not isinstance(task.payload, dict):
            return task
        nodes = workflow_run.workflow.graph if workflow_run and workflow_run.workflow else []
        parents = next((node.depends_on for node in nodes if node.task_id == task.task_id), [])
        upstream_runs = self._store.get_runs(
            [(keys.task_job_id(task.workflow_id, parent), run.scheduled_for_ms) for parent in parents]
        )
        outputs = {
            parent: json.loads(upstream.output) if upstream is not None and upstream.output else None
            for parent, upstream in zip(parents, upstream_runs, strict=True)
        }
        return task.model_copy(update={"payload": {**(task.payload or {}), UPSTREAM_KEY: outputs}})


def _context(run: Run) -> dict[str, object]:
    return {"workflow_id": run.job_id, "workflow_run_id": run.run_id}
