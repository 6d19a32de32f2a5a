"""The workflows API's use cases (docs/concepts/workflows.md): create a workflow (its item and
one job item per task), read and list workflows, trigger one, read its runs with each task's
state. A workflow is a job item of kind WORKFLOW: its schedule, claims, triggers and
concurrency are a job's; how its runs move on is `workflow_runs`.

Tenancy as for jobs: another tenant's workflow is a missing one (404)."""

from __future__ import annotations

import uuid
from typing import Any, Protocol

from scheduler_core.domain import keys, run_state
from scheduler_core.domain.api_shapes import Backfill, JobCreate, TaskSpec, WorkflowCreate, WorkflowPatch
from scheduler_core.domain.clock import Clock
from scheduler_core.domain.entities import Job, Run
from scheduler_core.domain.errors import (
    Conflict,
    InvalidRequest,
    NotFound,
    PreconditionFailed,
    field_error,
    fields_within,
)
from scheduler_core.domain.job_firings import first_firing
from scheduler_core.domain.policies import ConcurrencyPolicy, RetryPolicy
from scheduler_core.domain.target_spec import HttpTarget
from scheduler_core.domain.vocabulary import (
    ENDED_JOB,
    JobKind,
    JobStatus,
    Overlap,
    Priority,
    RunStatus,
    Trigger,
)
from scheduler_core.domain.workflows import Phase, graph_errors
from scheduler_core.observability import logger
from scheduler_core.ports import CreateOnce, Page, WorkflowRuns
from scheduler_core.services.create_once import created_once
from scheduler_core.services.dispatch import Dispatcher
from scheduler_core.services.job_control import JobControl, JobControlStore
from scheduler_core.services.lifecycle import RunLifecycle
from scheduler_core.services.quotas import TenantQuotas, put_counted
from scheduler_core.services.signing import SigningSecrets
from scheduler_core.services.target_check import TargetCheck
from scheduler_core.services.workflow_runs import WorkflowRunner
from scheduler_core.services.workflow_views import WorkflowRunViews, task_status_of

# How often a task's item is written again when something else changed it meanwhile.
CHANGE_TRIES = 5
# How many of a workflow's newest runs a cancel looks at for runs under way.
RUNNING_SWEEP = 100


class WorkflowServiceStore(JobControlStore, WorkflowRuns, Protocol):
    """The ports of the jobs table the workflows API uses."""


class WorkflowService:
    def __init__(
        self,
        store: WorkflowServiceStore,
        runner: WorkflowRunner,
        dispatcher: Dispatcher,
        clock: Clock,
        lifecycle: RunLifecycle,
        targets: TargetCheck,
        creates: CreateOnce | None = None,
        signing: SigningSecrets | None = None,
        quotas: TenantQuotas | None = None,
    ) -> None:
        """`creates`: the idempotency records of creates sent with an `Idempotency-Key` (none:
        the header is not honoured); `signing`: the tenants' webhook signing secrets."""
        self._creates = creates
        self._signing = signing
        self._quotas = quotas  # a workflow counts as a recurring job (None: not counted)
        self._store = store
        self._views = WorkflowRunViews(store)
        self._runner = runner
        self._dispatcher = dispatcher
        self._clock = clock
        self._targets = targets
        # A workflow is a job item: pause, resume and trigger are a job's (a workflow is never
        # changed through JobControl's update, so it has no job request to check).
        self._control = JobControl(store, dispatcher, clock, lifecycle, _no_job_request, first_firing)

    # --- create, read, list ---------------------------------------------------------------

    def create(self, tenant: str, request: WorkflowCreate, idempotency_key: str | None = None) -> Job:
        """A new workflow; or, for an `idempotency_key` this tenant sent before with the same
        request, the workflow that request made, as it is now (`created_once`)."""
        if idempotency_key is None or self._creates is None:
            return self._create(tenant, request)
        return created_once(
            self._creates,
            tenant,
            idempotency_key,
            request.model_dump(mode="json"),
            lambda workflow_id: self._create(tenant, request, workflow_id),
            lambda workflow_id: self.get(tenant, workflow_id),
            kind="workflow",
        )

    def _create(self, tenant: str, request: WorkflowCreate, workflow_id: str | None = None) -> Job:
        """A new workflow: its tasks checked as a graph (each error naming its field) and
        their targets as a job's, its task items written, then the workflow's (the write that
        makes it exist); claimed at once when it fires within the lookahead. `workflow_id`:
        the id an idempotency key gives it; if that workflow exists, it is the one returned."""
        self._check(tenant, request)
        now = self._clock.now()
        keyed = workflow_id is not None
        workflow_id = workflow_id or uuid.uuid4().hex
        first = first_firing(request.schedule, now, now) if request.schedule is not None else None
        workflow = Job(
            job_id=workflow_id,
            tenant=tenant,
            name=request.name,
            status=JobStatus.SCHEDULED,
            schedule=request.schedule,
            target=None,
            priority=Priority.HIGH,
            retry=RetryPolicy(),
            concurrency=request.concurrency,
            misfire=request.misfire,
            next_fire_at=first,
            created_at=now,
            updated_at=now,
            kind=JobKind.WORKFLOW,
            tasks=request.tasks,
        )
        if not put_counted(self._quotas, workflow, lambda: self._put_items(workflow, request.tasks, keyed)):
            if not keyed:
                raise RuntimeError(f"workflow id {workflow_id} clashed with an existing job")
            return self.get(tenant, workflow_id)
        logger.info("workflow created", extra={"workflow_id": workflow_id, "tasks": len(request.tasks)})
        if first is None:
            return workflow
        try:
            return self._dispatcher.claim_and_enqueue(workflow, now).job
        except Exception:
            logger.exception(
                "claim at create failed; the poller claims it", extra={"workflow_id": workflow_id}
            )
            return workflow

    def _put_items(self, workflow: Job, tasks: list[TaskSpec], keyed: bool) -> bool:
        """The task items, then the workflow's (the write that makes it exist); False when the
        workflow's item is there already."""
        for task in tasks:
            # An item there already: a keyed create sent again after the first one failed.
            if not self._store.put_job_if_absent(self._task_job(workflow, task)) and not keyed:
                raise RuntimeError(
                    f"task item {keys.task_job_id(workflow.job_id, task.task_id)} exists already"
                )
        return self._store.put_job_if_absent(workflow)

    def _check(self, tenant: str, request: WorkflowCreate) -> None:
        """What a workflow's fields cannot say alone: its tasks form a DAG, each target is one
        the worker may reach; each error names its field."""
        if self._quotas is not None:
            self._quotas.check_schedule(request.schedule)
        errors = graph_errors(request.tasks)
        if errors:
            raise InvalidRequest(errors[0]["message"], errors)
        for index, task in enumerate(request.tasks):
            self._check_target(tenant, index, task)

    def _check_target(self, tenant: str, index: int, task: TaskSpec) -> None:
        """A task's target checked as a job's, its error's fields named within the task."""
        with fields_within(f"tasks[{index}]"):
            self._targets.check(tenant, task.target)
            if isinstance(task.target, HttpTarget) and task.target.secret_headers:
                reason = "is not kept for workflow tasks yet (only for jobs); send the header in headers"
                raise InvalidRequest(
                    f"target.secret_headers {reason}", [field_error("target.secret_headers", reason)]
                )
            if isinstance(task.target, HttpTarget) and self._signing is not None:
                self._signing.ensure(tenant)

    @staticmethod
    def _task_job(workflow: Job, task: TaskSpec) -> Job:
        """The job item a task's runs belong to: its target, payload, retry and priority; no
        schedule (its workflow runs release it), no limit on runs at once (one per workflow
        run, whose concurrency is the workflow's)."""
        return Job(
            job_id=keys.task_job_id(workflow.job_id, task.task_id),
            tenant=workflow.tenant,
            name=f"{workflow.name} / {task.task_id}",
            status=JobStatus.SCHEDULED,
            schedule=None,
            target=task.target,
            payload=task.payload,
            priority=task.priority,
            retry=task.retry,
            concurrency=ConcurrencyPolicy(overlap=Overlap.ALLOW),
            next_fire_at=None,
            created_at=workflow.created_at,
            updated_at=workflow.updated_at,
            kind=JobKind.TASK,
            workflow_id=workflow.job_id,
            task_id=task.task_id,
        )

    def get(self, tenant: str, workflow_id: str) -> Job:
        job = self._store.get_job(workflow_id)
        if job is None or job.tenant != tenant or job.kind is not JobKind.WORKFLOW:
            raise NotFound(f"workflow '{workflow_id}' not found")
        return job

    def list_workflows(
        self, tenant: str, limit: int, cursor: str | None, status: JobStatus | None, name_prefix: str | None
    ) -> Page:
        return self._store.list_jobs(keys.workflows_of(tenant), limit, cursor, status, name_prefix)

    # --- change ---------------------------------------------------------------------------------

    def update(self, tenant: str, workflow_id: str, patch: WorkflowPatch, if_match: int | None) -> Job:
        """Apply `patch` as one new version (docs/concepts/workflows.md, "Changes"): the
        workflow as patched is checked as a create is; a new schedule counts from now (a
        workflow run already claimed keeps its time); tasks take their new targets, payloads,
        retries and priorities for task runs not started yet; a workflow run under way keeps
        its graph; a task taken out is cancelled where it has not started. 409 for a
        cancelled or completed workflow; with If-Match, 412 at another version."""
        workflow = self.get(tenant, workflow_id)
        if workflow.status in ENDED_JOB:
            raise Conflict(f"workflow '{workflow_id}' is {workflow.status}; it cannot be changed")
        if if_match is not None and if_match != workflow.version:
            raise PreconditionFailed(
                f"workflow '{workflow_id}' is at version {workflow.version}, not {if_match}; read it again",
                [field_error("If-Match", f"the workflow is at version {workflow.version}")],
            )
        changes = patch.changes()
        current = {
            "name": workflow.name,
            "schedule": workflow.schedule,
            "tasks": workflow.tasks,
            "concurrency": workflow.concurrency,
            "misfire": workflow.misfire,
        }
        request = WorkflowCreate.model_validate(current | changes)
        self._check(workflow.tenant, request)
        now = self._clock.now()
        after = workflow.model_copy(
            update={
                "name": request.name,
                "schedule": request.schedule,
                "tasks": request.tasks,
                "concurrency": request.concurrency,
                "misfire": request.misfire,
                "version": workflow.version + 1,
                "updated_at": now,
            }
        )
        stale: list[Run] = []
        if request.schedule != workflow.schedule:
            # As a job's (`JobControl.reschedule`): its first firing after now that no run
            # holds yet; runs claimed for times it no longer fires at are cancelled.
            if request.schedule is not None:
                after, stale = self._control.reschedule(after, now)
            else:
                after = after.model_copy(update={"next_fire_at": None})
                claimed = self._store.recent_runs(
                    workflow_id, RUNNING_SWEEP, after=now, statuses=run_state.WAITING
                )
                stale = [run for run in claimed if run.trigger is Trigger.SCHEDULE]
        next_fire_at = after.next_fire_at
        if not self._store.update_job_if_unchanged(workflow, after, now):
            raise PreconditionFailed(
                f"workflow '{workflow_id}' changed while this request ran; read it again",
                [field_error("If-Match", "the workflow changed meanwhile")],
            )
        for run in stale:
            self._store.cancel_run_if_not_started(run, now)
        self._write_tasks(after, workflow.tasks or [])
        latest = self._store.get_job(workflow_id)
        if latest is not None and latest.status is JobStatus.CANCELLED:
            # A cancel landed between the workflow's write and its tasks': they stay cancelled.
            for task in after.tasks or []:
                self._store.cancel_job_if_active(keys.task_job_id(workflow_id, task.task_id), now)
            return latest
        logger.info("workflow changed", extra={"workflow_id": workflow_id, "fields": sorted(changes)})
        if after.status is JobStatus.SCHEDULED and next_fire_at is not None:
            try:
                return self._dispatcher.claim_and_enqueue(after, now).job
            except Exception:
                logger.exception("claim after a change failed; the poller claims it", extra=_ids(after))
        return after

    def _write_tasks(self, workflow: Job, before: list[TaskSpec]) -> None:
        """Each task's item as the workflow now has it; a task taken out is cancelled (a late
        message of its run is then cancelled by the worker)."""
        now = self._clock.now()
        for task in workflow.tasks or []:
            wanted = self._task_job(workflow, task)
            for _ in range(CHANGE_TRIES):
                existing = self._store.get_job(wanted.job_id)
                if existing is None:
                    if self._store.put_job_if_absent(wanted):
                        break
                    continue
                replaced = wanted.model_copy(
                    update={
                        "version": existing.version + 1,
                        "created_at": existing.created_at,
                        "updated_at": now,
                    }
                )
                if self._store.update_job_if_unchanged(existing, replaced, now):
                    break
            else:
                raise Conflict(f"task '{task.task_id}' kept changing; send the change again")
        kept = {task.task_id for task in workflow.tasks or []}
        for task in before:
            if task.task_id not in kept:
                self._store.cancel_job_if_active(keys.task_job_id(workflow.job_id, task.task_id), now)

    # --- pause, resume, cancel ----------------------------------------------------------------

    def pause(self, tenant: str, workflow_id: str) -> Job:
        """No workflow run starts until resumed (its firings as a job's: docs/concepts/
        job-control.md); workflow runs under way go on to their end."""
        return self._control.pause(self.get(tenant, workflow_id))

    def resume(self, tenant: str, workflow_id: str) -> Job:
        """Firings missed while paused go as the workflow's misfire policy says, as a job's."""
        return self._control.resume(self.get(tenant, workflow_id))

    def cancel(self, tenant: str, workflow_id: str) -> Job:
        """The workflow and its tasks are CANCELLED: no workflow run starts any more; those
        waiting are cancelled, and those under way stop what has not started (`cancel_run`).
        A cancelled workflow stays readable, with its runs, for the run retention (then it
        and its tasks expire, as an ended job does)."""
        workflow = self.get(tenant, workflow_id)
        if workflow.status is JobStatus.COMPLETED:
            raise Conflict(f"workflow '{workflow_id}' already completed; there is nothing left to cancel")
        now = self._clock.now()
        if workflow.status is not JobStatus.CANCELLED:
            self._store.cancel_job_if_active(workflow_id, now)
        if self._quotas is not None:
            self._quotas.ended(workflow_id)
        for task in workflow.tasks or []:
            self._store.cancel_job_if_active(keys.task_job_id(workflow_id, task.task_id), now)
        self._control.cancel_waiting_runs(workflow_id)
        for run in self._store.recent_runs(workflow_id, RUNNING_SWEEP, statuses=[RunStatus.RUNNING]):
            self._runner.cancel(run)
        logger.info("workflow cancelled", extra={"workflow_id": workflow_id})
        return self.get(tenant, workflow_id)

    # --- runs -------------------------------------------------------------------------------

    def trigger(self, tenant: str, workflow_id: str) -> dict[str, Any]:
        """A workflow run now (`trigger: MANUAL`), also for a paused workflow; the schedule is
        unchanged."""
        workflow = self.get(tenant, workflow_id)
        return self._views.one(workflow, self._control.trigger(workflow))

    def backfill(self, tenant: str, workflow_id: str, request: Backfill) -> dict[str, int]:
        """A workflow run per firing from `start` to `end` that has none yet, queued for the
        workflow's running slots (`JobControl.backfill`)."""
        workflow = self.get(tenant, workflow_id)
        made, already = self._control.backfill(workflow, request.start, request.end)
        return {"runs": len(made), "already_run": already}

    def list_runs(
        self, tenant: str, workflow_id: str, limit: int, cursor: str | None, status: RunStatus | None
    ) -> tuple[list[dict[str, Any]], str | None]:
        workflow = self.get(tenant, workflow_id)
        page = self._store.list_runs(workflow_id, limit, cursor, status)
        return [self._views.one(workflow, run) for run in page.items], page.next_cursor

    def get_run(self, tenant: str, workflow_id: str, workflow_run_id: str) -> dict[str, Any]:
        workflow = self.get(tenant, workflow_id)
        return self._views.one(workflow, self._workflow_run(workflow, workflow_run_id))

    def _workflow_run(self, workflow: Job, workflow_run_id: str) -> Run:
        scheduled_ms = keys.run_time_of(workflow.job_id, workflow_run_id)
        run = self._store.get_run(workflow.job_id, scheduled_ms) if scheduled_ms is not None else None
        if run is None:
            raise NotFound(f"workflow run '{workflow_run_id}' not found for workflow '{workflow.job_id}'")
        return run

    def cancel_run(self, tenant: str, workflow_id: str, workflow_run_id: str) -> dict[str, Any]:
        """Cancel what has not started of a workflow run; 409 once it has ended."""
        workflow = self.get(tenant, workflow_id)
        run = self._workflow_run(workflow, workflow_run_id)
        if not self._runner.cancel(run):
            current = self._workflow_run(workflow, workflow_run_id)
            raise Conflict(
                f"workflow run '{workflow_run_id}' is {current.status}; there is nothing to cancel"
            )
        return self._views.one(workflow, self._workflow_run(workflow, workflow_run_id))

    def retry_task(self, tenant: str, workflow_id: str, workflow_run_id: str, task_id: str) -> dict[str, Any]:
        """Re-run a FAILED task of a workflow run and decide again what its failure decided
        below it (UPSTREAM_FAILED and SKIPPED tasks wait again); 409 unless it FAILED."""
        workflow = self.get(tenant, workflow_id)
        run = self._workflow_run(workflow, workflow_run_id)
        if run.workflow is None:
            if any(task.task_id == task_id for task in workflow.tasks or []):
                raise Conflict(f"workflow run '{workflow_run_id}' is {run.status}; none of its tasks has run")
            raise NotFound(f"task '{task_id}' not found in workflow run '{workflow_run_id}'")
        phase = run.workflow.phases.get(task_id)
        if phase is None:
            raise NotFound(f"task '{task_id}' not found in workflow run '{workflow_run_id}'")
        if run.status is RunStatus.CANCELLED or run.workflow.cancelled:
            raise Conflict(f"workflow run '{workflow_run_id}' was cancelled; its tasks are not retried")
        task_run = self._store.get_run(keys.task_job_id(workflow_id, task_id), run.scheduled_for_ms)
        if phase is not Phase.FAILED or task_run is None or task_run.status is not RunStatus.FAILED:
            raise Conflict(
                f"task '{task_id}' is {task_status_of(phase, task_run)}; only a FAILED task can be retried"
            )
        task_job = self._store.get_job(keys.task_job_id(workflow_id, task_id))
        if task_job is None or task_job.status is JobStatus.CANCELLED:
            raise Conflict(f"workflow '{workflow_id}' is cancelled or no longer has task '{task_id}'")
        if not self._runner.retry_task(run, task_run, task_job):
            raise Conflict(
                f"workflow run '{workflow_run_id}' changed while the task was being retried; try again"
            )
        return self._views.one(workflow, self._workflow_run(workflow, workflow_run_id))


def _ids(workflow: Job) -> dict[str, object]:
    return {"workflow_id": workflow.job_id}


def _no_job_request(_: JobCreate, __: Job) -> dict[str, Any]:
    raise AssertionError("a workflow is not changed as a job")
