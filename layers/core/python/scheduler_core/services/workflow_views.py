"""What the workflows API shows: a workflow, and a workflow run task by task, with the task
runs it reads (a page of workflow runs' read together)."""

from __future__ import annotations

from typing import Any

from scheduler_core.domain import keys
from scheduler_core.domain.entities import Job, Run, iso_or_none
from scheduler_core.domain.vocabulary import RunStatus, TaskStatus
from scheduler_core.domain.workflows import Phase, task_status
from scheduler_core.ports import RunRecords

# A task run's statuses as a task's: its run's.
_TASK_RUN_STATUSES = {status: TaskStatus(status.value) for status in RunStatus}
# What a workflow run that ended without beginning shows for its tasks (they never ran).
_NEVER_BEGUN = {
    RunStatus.SKIPPED: Phase.SKIPPED,
    RunStatus.CANCELLED: Phase.CANCELLED,
    RunStatus.FAILED: Phase.CANCELLED,
}


def workflow_view(workflow: Job) -> dict[str, Any]:
    """A workflow as the API shows it (its schedule's times as a job's: `Job.to_api`)."""
    job = workflow.to_api()
    return {
        "workflow_id": workflow.job_id,
        "tasks": [task.model_dump(mode="json") for task in workflow.tasks or []],
        **{
            name: job[name]
            for name in (
                "name",
                "status",
                "schedule",
                "concurrency",
                "misfire",
                "next_fire_at",
                "paused_at",
                "created_at",
                "updated_at",
                "version",
            )
        },
    }


def task_status_of(phase: Phase, task_run: Run | None) -> TaskStatus:
    """A task's status: its phase, or its run's status once it has one."""
    return task_status(phase, _TASK_RUN_STATUSES.get(task_run.status) if task_run else None)


class WorkflowRunViews:
    def __init__(self, store: RunRecords) -> None:
        self._store = store

    def one(self, workflow: Job, run: Run) -> dict[str, Any]:
        return self.many(workflow, [run])[0]

    def many(self, workflow: Job, runs: list[Run]) -> list[dict[str, Any]]:
        """Workflow runs as the API shows them: each one's own fields, and each task's status
        with its run's details; every task run they need read in one `get_runs`."""
        phases = [self._phases(workflow, run) for run in runs]
        refs = [
            (keys.task_job_id(workflow.job_id, task), run.scheduled_for_ms)
            for run, run_phases in zip(runs, phases, strict=True)
            if run.workflow is not None
            for task, phase in run_phases.items()
            if phase is not Phase.WAITING
        ]
        found = dict(zip(refs, self._store.get_runs(refs), strict=True)) if refs else {}
        return [
            self._view(workflow, run, run_phases, found) for run, run_phases in zip(runs, phases, strict=True)
        ]

    @staticmethod
    def _phases(workflow: Job, run: Run) -> dict[str, Phase]:
        """A begun run's phases; a run not begun shows the workflow's tasks as they are now,
        waiting, or never run if it ended."""
        if run.workflow is not None:
            return dict(run.workflow.phases)
        never = _NEVER_BEGUN.get(run.status, Phase.WAITING)
        return {task.task_id: never for task in workflow.tasks or []}

    @staticmethod
    def _view(
        workflow: Job, run: Run, phases: dict[str, Phase], found: dict[tuple[str, int], Run | None]
    ) -> dict[str, Any]:
        tasks: dict[str, Any] = {}
        for task, phase in phases.items():
            task_run = found.get((keys.task_job_id(workflow.job_id, task), run.scheduled_for_ms))
            tasks[task] = {
                "status": str(task_status_of(phase, task_run)),
                "run_id": task_run.run_id if task_run else None,
                "attempt": task_run.attempt if task_run else None,
                "started_at": iso_or_none(task_run.started_at) if task_run else None,
                "finished_at": iso_or_none(task_run.finished_at) if task_run else None,
                "error": task_run.error if task_run else None,
                "response_code": task_run.response_code if task_run else None,
            }
        return {
            "workflow_run_id": run.run_id,
            "workflow_id": workflow.job_id,
            "status": str(run.status),
            "trigger": str(run.trigger),
            "scheduled_for": iso_or_none(run.scheduled_for),
            "started_at": iso_or_none(run.started_at),
            "finished_at": iso_or_none(run.finished_at),
            "tasks": tasks,
        }
