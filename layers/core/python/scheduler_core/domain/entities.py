"""Jobs and runs as the services hold them, and as the API shows them (`to_api`). Pure."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import BaseModel, Field

from scheduler_core.domain.api_shapes import TaskSpec
from scheduler_core.domain.clock import to_ms
from scheduler_core.domain.policies import ConcurrencyPolicy, Payload, RetryPolicy
from scheduler_core.domain.schedule import ScheduleSpec
from scheduler_core.domain.target_spec import Target
from scheduler_core.domain.vocabulary import (
    DEFAULT_CATCH_UP_WINDOW_SECONDS,
    MAX_PAST_ATTEMPT_ERROR,
    MAX_PAST_ATTEMPTS,
    JobKind,
    JobStatus,
    MisfirePolicy,
    Priority,
    RunStatus,
    Trigger,
)
from scheduler_core.domain.workflows import WorkflowState


class Job(BaseModel):
    """A job as stored and as returned (the API omits `tenant`)."""

    job_id: str
    tenant: str
    name: str
    status: JobStatus
    # None only for a workflow that runs when triggered (it has no schedule) and for a task.
    schedule: ScheduleSpec | None = None
    # None only for a workflow: its tasks have the targets.
    target: Target | None = None
    payload: Payload = None
    priority: Priority
    retry: RetryPolicy
    concurrency: ConcurrencyPolicy = Field(default_factory=ConcurrencyPolicy)
    misfire: MisfirePolicy = MisfirePolicy.FIRE_ONCE
    catch_up_window_seconds: int | None = None  # CATCH_UP only
    next_fire_at: datetime | None
    created_at: datetime
    updated_at: datetime
    version: int = 1
    # When a PAUSED job was paused. Its `next_fire_at` is kept (out of the due index): the
    # first firing not yet claimed, where a resume carries on from; the API shows none.
    paused_at: datetime | None = None
    # Bookkeeping, not shown by the API (see `overlap`): the runs holding one of the job's
    # `concurrency.max_running` slots, the run waiting for one (BUFFER_ONE), and the missed
    # firings caught up (misfire CATCH_UP) still waiting their turn for one, oldest first;
    # runs by time.
    running_count: int = 0
    buffered_run_ms: int | None = None
    catch_up_queue_ms: list[int] = Field(default_factory=list)
    # The values of `target.secret_headers` (which shows each as "***"), sealed one by one
    # (services/secret_headers.py); opened only by the worker.
    sealed_headers: dict[str, str] | None = None
    # A workflow's items (docs/concepts/workflows.md): the workflow holds its tasks; each task
    # is a job item too (`TASK`), named `{workflow_id}.{task_id}`, that its runs belong to.
    kind: JobKind = JobKind.JOB
    tasks: list[TaskSpec] | None = None
    workflow_id: str | None = None
    task_id: str | None = None

    @property
    def fires_by(self) -> ScheduleSpec:
        """The schedule of a job whose firings are being worked out: every job has one but a
        workflow that runs only when triggered, and a task, which never fire."""
        assert self.schedule is not None, f"job {self.job_id} has no schedule"
        return self.schedule

    @property
    def catch_up_window(self) -> timedelta:
        """How far back a CATCH_UP job catches up missed firings."""
        return timedelta(seconds=self.catch_up_window_seconds or DEFAULT_CATCH_UP_WINDOW_SECONDS)

    def to_api(self) -> dict[str, Any]:
        body = self.model_dump(
            mode="json",
            exclude={
                "tenant",
                "running_count",
                "buffered_run_ms",
                "catch_up_queue_ms",
                "kind",
                "tasks",
                "workflow_id",
                "task_id",
                "sealed_headers",
            },
        )
        paused = self.status is JobStatus.PAUSED
        body["next_fire_at"] = None if paused else iso_or_none(self.next_fire_at)
        body["paused_at"] = iso_or_none(self.paused_at) if paused else None
        body["created_at"] = iso_or_none(self.created_at)
        body["updated_at"] = iso_or_none(self.updated_at)
        if self.schedule is not None:
            for name in ("at", "start_at", "end_at"):
                body["schedule"][name] = iso_or_none(getattr(self.schedule, name))
        return body


class Attempt(BaseModel):
    """One attempt of a run, as it ended (or, the run's current one, as it is)."""

    attempt: int
    status: RunStatus
    started_at: datetime | None = None
    finished_at: datetime | None = None
    error: str | None = None
    response_code: int | None = None

    def as_kept(self) -> Attempt:
        """The attempt as a run keeps it among its earlier ones: its error cut to
        MAX_PAST_ATTEMPT_ERROR, so that a run's item stays small however its attempts fail."""
        if self.error is None or len(self.error) <= MAX_PAST_ATTEMPT_ERROR:
            return self
        return self.model_copy(update={"error": self.error[:MAX_PAST_ATTEMPT_ERROR]})

    def to_api(self) -> dict[str, Any]:
        body = self.model_dump(mode="json")
        for name in ("started_at", "finished_at"):
            body[name] = iso_or_none(getattr(self, name))
        return body


class Run(BaseModel):
    """One firing of a job. `run_id = {job_id}:{scheduled_for_ms}` is deterministic."""

    run_id: str
    job_id: str
    status: RunStatus
    trigger: Trigger
    scheduled_for: datetime
    attempt: int = 1
    # Where the current round of attempts began: 1, or the attempt a manual re-drive started.
    first_attempt: int = 1
    priority: Priority
    # When the current attempt may start: the scheduled time, or later for a retry or a
    # jittered first attempt (`schedule.jitter_seconds`).
    next_attempt_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    lateness_ms: int | None = None
    error: str | None = None
    response_code: int | None = None
    # Bookkeeping, not shown by the API: when the poller must look at the run again (the
    # due index) and until when a started attempt belongs to its worker.
    due_at: datetime | None = None
    lease_until: datetime | None = None
    # Whether the running attempt holds one of its job's running slots (see `overlap`).
    holds_slot: bool = False
    # A missed firing caught up (misfire CATCH_UP, limited concurrency): it waits for a slot,
    # never SKIPPED, for its retries too (see `overlap`).
    caught_up: bool = False
    # An attempt's target call that succeeded after its worker had lost the lease: the
    # run's next attempt finishes with this answer instead of calling again (see `execution`).
    delivered_at: datetime | None = None
    delivered_code: int | None = None
    # Where the store keeps the run: with its job (a one-off's scheduled run, so that its
    # claim, start and end each write one item) or on its own. A hint for the store only.
    with_job: bool = False
    # Sent by a poll that did not claim it (a one-off's firing, `dispatch`): the job's
    # version as the poll read it; the run's start claims the firing in the same write
    # (`RunMessage.claim_version`). Not stored.
    claim_version: int | None = None
    # A workflow run (a run of a WORKFLOW job), once begun: its tasks' graph and phases.
    workflow: WorkflowState | None = None
    # A task's run that succeeded: what its target answered (JSON text), for the tasks after it.
    output: str | None = None
    # Whose run it is, when its sender knows (a claim): its message's group on the priority
    # queues (domain/fairness.py). Not stored.
    tenant: str | None = None
    # The attempts before the current one, oldest first, each as it ended (a failed attempt
    # retried, a lease lost, a FAILED attempt re-driven). The current attempt is the run's
    # own fields; `attempts` puts both together.
    past_attempts: list[Attempt] = Field(default_factory=list)

    @property
    def scheduled_for_ms(self) -> int:
        return to_ms(self.scheduled_for)

    @property
    def starts_at(self) -> datetime:
        """When the current attempt is due: its retry (or jittered) time, or the scheduled time."""
        return self.next_attempt_at or self.scheduled_for

    def ended_attempt(
        self,
        now: datetime,
        error: str | None = None,
        response_code: int | None = None,
    ) -> Attempt:
        """The current attempt as it ends FAILED at `now` to make way for another (for
        `past_attempts`, as `Attempt.as_kept`)."""
        return Attempt(
            attempt=self.attempt,
            status=RunStatus.FAILED,
            started_at=self.started_at,
            finished_at=now,
            error=error,
            response_code=response_code,
        )

    def past_attempts_with(self, ended: Attempt) -> list[Attempt]:
        """The earlier attempts once `ended` joins them at a re-drive: the latest
        MAX_PAST_ATTEMPTS (a run re-driven again and again forgets its oldest). A retry
        within a round only adds its attempt: a round has at most 20."""
        return [*self.past_attempts, ended.as_kept()][-MAX_PAST_ATTEMPTS:]

    @property
    def attempts(self) -> list[Attempt]:
        """Every attempt the run has made, oldest first: the earlier ones as they ended, and
        the current one once it has started (RUNNING, or as the run ended)."""
        last_ended = self.past_attempts[-1].finished_at if self.past_attempts else None
        if (
            self.started_at is None
            or self.status in (RunStatus.PENDING, RunStatus.RETRYING)
            or (last_ended is not None and self.started_at < last_ended)  # an earlier attempt's start
        ):
            return list(self.past_attempts)
        running = self.status is RunStatus.RUNNING
        return [
            *self.past_attempts,
            Attempt(
                attempt=self.attempt,
                status=self.status,
                started_at=self.started_at,
                finished_at=None if running else self.finished_at,
                # The run keeps its last failed attempt's error after a success (the API's
                # `error`): it is the current attempt's only if this one failed.
                error=self.error if self.status is RunStatus.FAILED else None,
                response_code=None if running else self.response_code,
            ),
        ]

    def to_api(self) -> dict[str, Any]:
        body = self.model_dump(
            mode="json",
            exclude={
                "past_attempts",
                "first_attempt",
                "due_at",
                "lease_until",
                "holds_slot",
                "caught_up",
                "delivered_at",
                "delivered_code",
                "with_job",
                "claim_version",
                "tenant",
                "workflow",
                "output",
            },
        )
        for name in ("scheduled_for", "started_at", "finished_at", "next_attempt_at"):
            body[name] = iso_or_none(getattr(self, name))
        body["attempts"] = [attempt.to_api() for attempt in self.attempts]
        return body


def iso_or_none(when: datetime | None) -> str | None:
    """ISO-8601 UTC with milliseconds and `Z`: the API's one time format."""
    if when is None:
        return None
    return when.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
