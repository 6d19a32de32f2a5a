"""The request and response bodies of the public API (DESIGN §7). The request models double
as the API's validation: a request that does not fit gets a 400 naming the field, before any
service code runs. The response models only document what the API answers (the services
build those bodies), in the OpenAPI document the API serves."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, JsonValue, ValidationInfo, field_validator

from scheduler_core.domain.policies import ConcurrencyPolicy, Payload, RetryPolicy, catch_up_window_of
from scheduler_core.domain.schedule import ScheduleSpec
from scheduler_core.domain.strict import StrictModel
from scheduler_core.domain.target_spec import EventBridgeTarget, LambdaTarget, Target
from scheduler_core.domain.vocabulary import (
    MAX_CATCH_UP_WINDOW_SECONDS,
    MAX_WORKFLOW_TASKS,
    MIN_CATCH_UP_WINDOW_SECONDS,
    RUN_METADATA_KEY,
    TASK_ID_PATTERN,
    UPSTREAM_KEY,
    JobStatus,
    MisfirePolicy,
    Priority,
    RunStatus,
    TaskStatus,
    Trigger,
    TriggerRule,
)

# A valid request body for each model that takes one: shown in the OpenAPI document (Swagger
# UI fills it in), and what an API fuzzer starts from to make jobs and workflows it then reads,
# changes and triggers.
_HOOK: dict[str, JsonValue] = {"type": "HTTP", "url": "https://example.com/hooks/report"}


class JobCreate(StrictModel):
    """Body of `POST /v1/jobs`."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "name": "nightly-report",
                    "schedule": {"cron": "0 2 * * *", "timezone": "Europe/Berlin"},
                    "target": _HOOK,
                    "payload": {"report": "daily"},
                }
            ]
        }
    )

    name: str = Field(min_length=1, max_length=200)
    schedule: ScheduleSpec
    target: Target
    payload: Payload = None
    priority: Priority = Priority.NORMAL
    retry: RetryPolicy = Field(default_factory=RetryPolicy)
    concurrency: ConcurrencyPolicy = Field(default_factory=ConcurrencyPolicy)
    misfire: MisfirePolicy = Field(
        MisfirePolicy.FIRE_ONCE,
        description="What runs for firings missed while the scheduler was down or the job paused "
        "(more than 60 s late): FIRE_ONCE (default): one run for all of them; SKIP: none, the job "
        "carries on with its next firing; CATCH_UP: each one of the last `catch_up_window_seconds` "
        "as its own run, oldest first (at most 100).",
    )
    catch_up_window_seconds: int | None = Field(
        None,
        ge=MIN_CATCH_UP_WINDOW_SECONDS,
        le=MAX_CATCH_UP_WINDOW_SECONDS,
        validate_default=True,
        description="misfire CATCH_UP only (default 3600, from 60 to 604800): how far back, in "
        "seconds, missed firings are caught up; older ones are skipped.",
    )

    @field_validator("catch_up_window_seconds")
    @classmethod
    def _window_for_catch_up_only(cls, value: int | None, info: ValidationInfo) -> int | None:
        return catch_up_window_of(info.data.get("misfire"), value)

    @field_validator("payload")
    @classmethod
    def _payload_leaves_the_run_key_free(cls, value: JsonValue, info: ValidationInfo) -> JsonValue:
        return _leaves_run_key_free(value, info)


def _leaves_run_key_free(payload: JsonValue, info: ValidationInfo) -> JsonValue:
    """An EVENTBRIDGE or LAMBDA target's object payload gets the run's ids under
    RUN_METADATA_KEY: the key is not the payload's. (`target` is validated before `payload`,
    so it is in `info.data` when it was valid.)"""
    target = info.data.get("target")
    envelope = isinstance(target, EventBridgeTarget | LambdaTarget)
    if envelope and isinstance(payload, dict) and RUN_METADATA_KEY in payload:
        raise ValueError(f"key {RUN_METADATA_KEY!r} is where the target gets the run's ids; rename it")
    return payload


# The most jobs one `POST /v1/jobs/batch` makes (its body is also held to the API's request
# size, 256 KiB by default).
MAX_BATCH_JOBS = 100


class JobBatchCreate(StrictModel):
    """Body of `POST /v1/jobs/batch`: jobs made in one request, each as `POST /v1/jobs`
    makes one."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "jobs": [
                        {"name": "renewal-1041", "schedule": {"at": "2026-12-01T00:00:00Z"}, "target": _HOOK},
                        {"name": "renewal-1042", "schedule": {"at": "2026-12-01T00:00:00Z"}, "target": _HOOK},
                    ]
                }
            ]
        }
    )

    jobs: list[JobCreate] = Field(min_length=1, max_length=MAX_BATCH_JOBS)


class Backfill(StrictModel):
    """Body of `POST /v1/jobs/{job_id}/backfill` (and a workflow's): the window whose firings
    run, both ends included."""

    model_config = ConfigDict(
        json_schema_extra={"examples": [{"start": "2026-11-01T00:00:00Z", "end": "2026-11-01T23:59:59Z"}]}
    )

    start: AwareDatetime = Field(description="ISO-8601 with an offset, e.g. 2026-11-01T00:00:00Z.")
    end: AwareDatetime = Field(description="ISO-8601 with an offset; not before start.")

    @field_validator("end")
    @classmethod
    def _not_before_start(cls, value: datetime, info: ValidationInfo) -> datetime:
        start = info.data.get("start")
        if start is not None and value < start:
            raise ValueError("comes before start; give a window from start to end")
        return value


class JobPatch(StrictModel):
    """Body of `PATCH /v1/jobs/{job_id}`: any of the fields of `JobCreate`. Each one given
    replaces the job's value as a whole (`schedule`, `target` and `retry` too, they are not
    merged); the job as patched is then validated as a `JobCreate`, so the same rules hold."""

    name: str | None = Field(None, min_length=1, max_length=200)
    schedule: ScheduleSpec | None = None
    target: Target | None = None
    payload: Payload = None
    priority: Priority | None = None
    retry: RetryPolicy | None = None
    concurrency: ConcurrencyPolicy | None = None
    misfire: MisfirePolicy | None = None
    # null: back to the default window (of a CATCH_UP job).
    catch_up_window_seconds: int | None = Field(
        None, ge=MIN_CATCH_UP_WINDOW_SECONDS, le=MAX_CATCH_UP_WINDOW_SECONDS
    )

    @field_validator("name", "schedule", "target", "priority", "retry", "concurrency", "misfire")
    @classmethod
    def _not_null(cls, value: object) -> object:
        if value is None:
            raise ValueError("must not be null; leave the field out to keep the job's value")
        return value

    def changes(self) -> dict[str, Any]:
        """The fields the request gave, by name (a `payload` of null included)."""
        return {name: getattr(self, name) for name in self.model_fields_set}


class TaskSpec(StrictModel):
    """One task of a workflow: a job-like target, called once its `depends_on` tasks have
    ended as its `trigger_rule` asks."""

    task_id: str = Field(
        pattern=TASK_ID_PATTERN, description="1-64 of A-Z a-z 0-9 _ -, unique in the workflow."
    )
    target: Target
    payload: Payload = Field(
        None,
        description=f"An object (or none) gets {UPSTREAM_KEY!r}: its direct upstream tasks' "
        "outputs by task id.",
    )
    retry: RetryPolicy = Field(default_factory=RetryPolicy)
    priority: Priority = Priority.NORMAL
    depends_on: list[str] = Field(
        default_factory=list, max_length=MAX_WORKFLOW_TASKS - 1, description="task ids this task waits for."
    )
    trigger_rule: TriggerRule = Field(
        TriggerRule.ALL_SUCCESS,
        description="ALL_SUCCESS (default), ALL_DONE, ONE_SUCCESS, ONE_FAILED or NONE_FAILED, as in Airflow.",
    )

    @field_validator("payload")
    @classmethod
    def _payload_leaves_keys_free(cls, value: JsonValue, info: ValidationInfo) -> JsonValue:
        if isinstance(value, dict) and UPSTREAM_KEY in value:
            raise ValueError(
                f"key {UPSTREAM_KEY!r} is where the task gets its upstream tasks' outputs; rename it"
            )
        return _leaves_run_key_free(value, info)


class WorkflowCreate(StrictModel):
    """Body of `POST /v1/workflows`. The tasks' graph (unique ids, known dependencies, no
    cycle) is checked after this, by `workflows.graph_errors`, each error naming its field."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "name": "nightly-pipeline",
                    "schedule": {"cron": "0 3 * * *"},
                    "tasks": [
                        {"task_id": "extract", "target": _HOOK},
                        {"task_id": "load", "target": _HOOK, "depends_on": ["extract"]},
                    ],
                }
            ]
        }
    )

    name: str = Field(min_length=1, max_length=200)
    schedule: ScheduleSpec | None = Field(
        None, description="A job's schedule; none: the workflow runs only when triggered."
    )
    tasks: list[TaskSpec] = Field(min_length=1, max_length=MAX_WORKFLOW_TASKS)
    concurrency: ConcurrencyPolicy = Field(default_factory=ConcurrencyPolicy)
    misfire: MisfirePolicy = MisfirePolicy.FIRE_ONCE


class WorkflowPatch(StrictModel):
    """Body of `PATCH /v1/workflows/{workflow_id}`: any of `WorkflowCreate`'s fields, each one
    given replacing the workflow's as a whole (`tasks` too); `schedule: null` leaves it to run
    only when triggered. The workflow as patched is checked as a create is."""

    name: str | None = Field(None, min_length=1, max_length=200)
    schedule: ScheduleSpec | None = None
    tasks: list[TaskSpec] | None = Field(None, min_length=1, max_length=MAX_WORKFLOW_TASKS)
    concurrency: ConcurrencyPolicy | None = None
    misfire: MisfirePolicy | None = None

    @field_validator("name", "tasks", "concurrency", "misfire")
    @classmethod
    def _not_null(cls, value: object) -> object:
        if value is None:
            raise ValueError("must not be null; leave the field out to keep the workflow's value")
        return value

    def changes(self) -> dict[str, Any]:
        """The fields the request gave, by name (a `schedule` of null included)."""
        return {name: getattr(self, name) for name in self.model_fields_set}


# --- response bodies: what the OpenAPI document says each answer holds -----------------------


class ResponseBody(BaseModel):
    """A response body as documented: exactly these fields (`additionalProperties: false`), so
    a field the API answers but the document misses fails the API fuzz test."""

    model_config = ConfigDict(extra="forbid")


class ErrorDetail(ResponseBody):
    field: str = Field(
        description="What to fix: a body field (`schedule.cron`, `tasks[2].target.url`), the body "
        "as a whole (`body`), a query parameter (`cursor`) or a header (`If-Match`)."
    )
    message: str


class ErrorInfo(ResponseBody):
    code: str = Field(
        description="VALIDATION_ERROR (400), FORBIDDEN (403), NOT_FOUND (404), CONFLICT (409), "
        "PRECONDITION_FAILED (412), PAYLOAD_TOO_LARGE (413), UNPROCESSABLE (422), QUOTA_EXCEEDED (429: "
        "`details` names the limit), INTERNAL_ERROR (500) or SERVICE_UNAVAILABLE (503)."
    )
    message: str
    details: list[ErrorDetail]


class ErrorBody(ResponseBody):
    """Every error the API answers itself."""

    error: ErrorInfo


class JobView(ResponseBody):
    """A job (`POST`, `GET`, `PATCH`, `DELETE /v1/jobs/{job_id}` and its pause, resume)."""

    job_id: str
    name: str
    status: JobStatus
    schedule: ScheduleSpec
    target: Target
    payload: Payload
    priority: Priority
    retry: RetryPolicy
    concurrency: ConcurrencyPolicy
    misfire: MisfirePolicy
    catch_up_window_seconds: int | None = Field(description="null unless misfire is CATCH_UP.")
    next_fire_at: datetime | None = Field(description="null when nothing is due, and while paused.")
    paused_at: datetime | None = Field(description="When a PAUSED job was paused; else null.")
    created_at: datetime
    updated_at: datetime
    version: int = Field(description="Goes up with every change of the job, the scheduler's own included.")


class JobPage(ResponseBody):
    items: list[JobView]
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; null on the last.")


class JobBatchView(ResponseBody):
    jobs: list[JobView] = Field(description="The jobs made, in the order the request gave them.")


class AttemptView(ResponseBody):
    """One attempt of a run."""

    attempt: int
    status: RunStatus = Field(
        description="RUNNING for the attempt under way; else how it ended (an attempt that was "
        "retried, lost its lease or was re-driven ended FAILED)."
    )
    started_at: datetime | None
    finished_at: datetime | None
    error: str | None = Field(description="Why it failed (an earlier attempt's: its first 500 characters).")
    response_code: int | None = Field(description="The target's answer, when it answered.")


class RunView(ResponseBody):
    """One run of a job."""

    run_id: str = Field(description="{job_id}:{scheduled_for in epoch ms}.")
    job_id: str
    status: RunStatus
    trigger: Trigger
    scheduled_for: datetime
    attempt: int
    priority: Priority
    next_attempt_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    lateness_ms: int | None
    error: str | None
    response_code: int | None
    attempts: list[AttemptView] = Field(
        description="Every attempt made, oldest first (a re-drive keeps the latest 40 before it)."
    )


class RunPage(ResponseBody):
    items: list[RunView]
    next_cursor: str | None


class SigningSecretMade(ResponseBody):
    """The tenant's new webhook signing secret: shown this once (docs/security.md)."""

    secret: str = Field(description="whsec_ and 32 random bytes in base64: keep it where receivers verify.")
    created_at: datetime
    previous_expires_at: datetime | None = Field(
        description="Until when the previous secret signs too (24 hours); null when there was none "
        "that anyone had been shown."
    )


class SigningSecretState(ResponseBody):
    """What may be shown of the tenant's signing secret: never the secret."""

    created_at: datetime | None = Field(description="When the current secret was made; null: none yet.")
    previous_expires_at: datetime | None = Field(
        description="Until when the previous secret signs too; null when it no longer does."
    )


class TenantView(ResponseBody):
    """Who the API takes the caller for (docs/security.md, "Tenants")."""

    tenant: str = Field(
        description="The tenant that owns your jobs: your unique principal id (a role's, without the "
        "session, unless the deployment makes this role's sessions tenants each)."
    )
    principal_arn: str = Field(description="The ARN you signed the request as.")
    external_id: str = Field(
        description="The sts:ExternalId your execution roles' trust policies must require."
    )


class BackfillResult(ResponseBody):
    runs: int = Field(description="Runs made, one per firing that had none.")
    already_run: int = Field(description="Firings in the window that had a run already.")


class WorkflowView(ResponseBody):
    """A workflow."""

    workflow_id: str
    name: str
    status: JobStatus
    schedule: ScheduleSpec | None = Field(description="null: it runs only when triggered.")
    tasks: list[TaskSpec]
    concurrency: ConcurrencyPolicy
    misfire: MisfirePolicy
    next_fire_at: datetime | None
    paused_at: datetime | None
    created_at: datetime
    updated_at: datetime
    version: int


class WorkflowPage(ResponseBody):
    items: list[WorkflowView]
    next_cursor: str | None


class TaskRunView(ResponseBody):
    """A task of a workflow run, with its run's details once it has one."""

    status: TaskStatus
    run_id: str | None
    attempt: int | None
    started_at: datetime | None
    finished_at: datetime | None
    error: str | None
    response_code: int | None


class WorkflowRunView(ResponseBody):
    """A workflow run, task by task."""

    workflow_run_id: str
    workflow_id: str
    status: RunStatus
    trigger: Trigger
    scheduled_for: datetime
    started_at: datetime | None
    finished_at: datetime | None
    tasks: dict[str, TaskRunView] = Field(description="Each task by its task_id.")


class WorkflowRunPage(ResponseBody):
    items: list[WorkflowRunView]
    next_cursor: str | None
