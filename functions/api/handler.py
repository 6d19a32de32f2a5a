"""The public API (DESIGN §7) behind API Gateway's REST proxy: typed routes validated by
Powertools, each calling one `JobService` method, and which error each failure answers.
The plumbing (strict JSON, error bodies, If-Match, body size) is `scheduler_core.api`."""

from __future__ import annotations

from http import HTTPStatus
from typing import Annotated, Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response, content_types
from aws_lambda_powertools.event_handler.exceptions import NotFoundError
from aws_lambda_powertools.event_handler.middlewares import NextMiddleware
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from aws_lambda_powertools.event_handler.openapi.params import Header, Query
from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse
from aws_lambda_powertools.utilities.typing import LambdaContext
from botocore.exceptions import ClientError
from pydantic import BaseModel, ValidationError

from scheduler_core.adapters.aws import is_throttling
from scheduler_core.api import (
    as_json,
    audit_entry,
    describe,
    error_body,
    invalid_request_message,
    refused_body,
    strict_json,
    version_of,
)
from scheduler_core.composition import default_job_service
from scheduler_core.domain.api_shapes import (
    Backfill,
    BackfillResult,
    ErrorBody,
    JobBatchCreate,
    JobBatchView,
    JobCreate,
    JobPage,
    JobPatch,
    JobView,
    RunPage,
    RunView,
    SigningSecretMade,
    SigningSecretState,
    TenantView,
    WorkflowCreate,
    WorkflowPage,
    WorkflowPatch,
    WorkflowRunPage,
    WorkflowRunView,
    WorkflowView,
)
from scheduler_core.domain.errors import InvalidCursor, SchedulerError
from scheduler_core.domain.execution_roles import external_id
from scheduler_core.domain.vocabulary import JobStatus, RunStatus
from scheduler_core.observability import inject_invocation, logger, metrics, tracer
from scheduler_core.ports import CursorNotValid, StoreContention
from scheduler_core.services.jobs import BatchPartlyMade, JobService
from scheduler_core.services.signing import SigningSecrets
from scheduler_core.services.workflow_views import workflow_view
from scheduler_core.services.workflows import WorkflowService
from scheduler_core.settings import settings_from_env

API_TITLE = "serverless-scheduler"
API_VERSION = "1.0.0"

app = APIGatewayRestResolver(enable_validation=True, json_body_deserializer=strict_json)
app.enable_swagger(path="/v1/docs", title=API_TITLE, version=API_VERSION)
MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def _audited(app: APIGatewayRestResolver, next_middleware: NextMiddleware) -> Response[Any]:
    """Every mutating call that succeeded: one line in the audit log group (docs/security.md)
    — who (tenant), what (method and route), which (the ids in its path, or the ones it
    made), the request id. (A batch that failed part-way is audited by its error's handler.)"""
    # Read before the route runs (a request it makes itself clears the context).
    service: JobService = app.context["jobs"]
    route = app.context.get("_route")
    response = next_middleware(app)
    if app.current_event.http_method in MUTATING and response.status_code < 400:
        _audit(service, route, response.status_code, response.body)
    return response


def _audit(service: JobService | None, route: Any, status: int, answer: Any) -> None:
    """The audit line of this request (`answer`: what it answered, for the ids it made). A
    line that cannot be written is logged, counted and the answer stands: the change is made."""
    event = app.current_event
    if service is None or service.audit is None:
        return
    # `route`: the one Powertools matched: its OpenAPI path, and the ids its path names
    # (never the validated arguments, which hold the body: payloads, secret headers).
    matched = route.rule.match(event.path) if route is not None else None
    entry = audit_entry(
        service.tenancy.of(event.request_context.identity.raw_event),
        event.request_context.identity.user_arn,
        event.http_method,
        route.openapi_path if route is not None else event.resource,
        matched.groupdict() if matched is not None else {},
        answer,
        event.request_context.request_id,
        status,
    )
    try:
        service.audit.record(entry)
    except Exception:
        logger.exception("audit line not written", extra={"audit": entry})
        metrics.add_metric(name="AuditLinesLost", unit="Count", value=1)


app.use(middlewares=[_audited])

# What each error status means, in the one error shape (`ErrorBody`) for every route. Its 422
# replaces the one Powertools documents, in a shape the API never answers.
_ERRORS = {
    400: "Malformed: a body that is not UTF-8 JSON, an unknown or missing field, a bad value, "
    "query parameter, header or cursor; `details` names each field.",
    403: "The request carries no IAM identity; or a target's `role_arn` names a role of the "
    "scheduler's account that does not let the scheduler assume it for the caller (FORBIDDEN, "
    "`details` naming target.role_arn). (A route that does not exist, or an unsigned request, gets "
    "API Gateway's own 403 `Missing Authentication Token` instead.)",
    404: "No such job, workflow or run (or another tenant's).",
    409: "The job or workflow is cancelled or completed, the run is not in a state this needs, "
    "or it kept changing while the request ran (try again).",
    412: "If-Match names another version than the job's or workflow's.",
    413: "The request body is over 256 KiB.",
    422: "Well-formed but impossible: a schedule that never fires, an `at` long past, a "
    "backfill of more than 1000 firings, an Idempotency-Key sent again with another body.",
    429: "A tenant quota is reached (QUOTA_EXCEEDED): `details` names the limit, its CDK context "
    "key, and what to do.",
    500: "Unexpected; the message has the request id to quote.",
    503: "AWS throttled the request, or the store was busy; try again in a few seconds.",
}


def answers(status: int, body: type[BaseModel], description: str) -> dict[int, OpenAPIResponse]:
    """A route's documented responses: its success, and the API's errors."""

    def answer(text: str, model: type[BaseModel]) -> OpenAPIResponse:
        return {"description": text, "content": {content_types.APPLICATION_JSON: {"model": model}}}

    return {status: answer(description, body)} | {
        code: answer(text, ErrorBody) for code, text in _ERRORS.items()
    }


def _error(
    status: int, code: str, message: str, details: list[dict[str, str]] | None = None
) -> Response[Any]:
    return Response(
        status_code=status,
        content_type=content_types.APPLICATION_JSON,
        body=error_body(code, message, details),
    )


def _json(status: int, body: dict[str, Any]) -> Response[Any]:
    return Response(status_code=status, content_type=content_types.APPLICATION_JSON, body=body)


@app.exception_handler(RequestValidationError)
def _invalid_request(error: RequestValidationError) -> Response[Any]:
    details = [describe(e) for e in error.errors()]
    return _error(400, "VALIDATION_ERROR", invalid_request_message(details), details)


@app.exception_handler(SchedulerError)
def _scheduler_error(error: SchedulerError) -> Response[Any]:
    return _error(error.status, error.code, error.message, error.details)


@app.exception_handler(CursorNotValid)
def _cursor_not_valid(error: CursorNotValid) -> Response[Any]:
    """A listing's cursor it did not hand out, wherever the listing lets it through."""
    refusal = InvalidCursor(error)
    return _error(refusal.status, refusal.code, refusal.message, refusal.details)


def _try_again() -> Response[Any]:
    return _error(503, "SERVICE_UNAVAILABLE", "the service is busy; try again in a few seconds")


@app.exception_handler(StoreContention)
def _store_contention(error: StoreContention) -> Response[Any]:
    logger.warning("store contention", extra={"error": str(error)})
    return _try_again()


@app.exception_handler(ClientError)
def _aws_error(error: ClientError) -> Response[Any]:
    if is_throttling(error):
        logger.warning("throttled by AWS", extra={"error": str(error)})
        return _try_again()
    return _internal_error(error)


def _internal_error(error: Exception) -> Response[Any]:
    request_id = app.current_event.request_context.request_id
    logger.exception("unhandled error", exc_info=error)
    return _error(500, "INTERNAL_ERROR", f"internal error; quote request id {request_id} if you report it")


@app.exception_handler(BatchPartlyMade)
def _batch_partly_made(partly: BatchPartlyMade) -> Response[Any]:
    """A batch whose write failed after others were made: answered as that failure is, and
    audited with the jobs it made (sent again with its Idempotency-Key, it makes the rest)."""
    error = partly.error
    response: Response[Any]
    if isinstance(error, SchedulerError):
        response = _scheduler_error(error)
    elif isinstance(error, StoreContention):
        response = _store_contention(error)
    elif isinstance(error, ClientError):
        response = _aws_error(error)
    else:
        response = _internal_error(error)
    made = {"jobs": [{"job_id": job_id} for job_id in partly.job_ids]}
    _audit(app.context.get("jobs"), app.context.get("_route"), response.status_code, made)
    return response


@app.exception_handler(Exception)
def _unexpected(error: Exception) -> Response[Any]:
    """Anything else: logged with its traceback, answered in the error shape. Powertools picks
    the handler registered for the closest class in the exception's MRO, so the more specific
    handlers (validation, SchedulerError, not found, the above) still win."""
    return _internal_error(error)


@app.not_found
def _no_route(_: NotFoundError) -> Response[Any]:
    return _error(404, "NOT_FOUND", f"no route {app.current_event.http_method} {app.current_event.path}")


def _jobs() -> JobService:
    service: JobService = app.context["jobs"]
    return service


def _workflows() -> WorkflowService:
    service = _jobs().workflows
    assert service is not None, "the API's job service serves workflows"
    return service


def _tenant() -> str:
    tenant = _jobs().tenancy.of(app.current_event.request_context.identity.raw_event)
    if tenant is None:
        raise SchedulerError("the request carries no IAM identity; sign it with SigV4", [], "FORBIDDEN", 403)
    return tenant


# A create's Idempotency-Key, for a job's and a workflow's alike.
IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        min_length=1,
        max_length=255,
        description="Send a create again with the same key (within 24 hours) and get what the first "
        "one made instead of a second one. The same key with another body is a 422.",
    ),
]


@app.post(
    "/v1/jobs",
    summary="Create a job",
    responses=answers(
        HTTPStatus.CREATED,
        JobView,
        "The job made (or, for an Idempotency-Key sent again, the one the first request made).",
    ),
)
def create_job(
    job: JobCreate,
    idempotency_key: IdempotencyKey = None,
) -> Response[Any]:
    created = _jobs().create(_tenant(), job, idempotency_key)
    return _json(HTTPStatus.CREATED, created.to_api())


@app.post(
    "/v1/jobs/batch",
    summary="Create jobs in a batch",
    description="Up to 100 jobs in one request, each as `POST /v1/jobs` makes one, for a "
    "fraction of the cost per job (docs/api.md). Every job is checked before any is written: "
    "one refused refuses the batch, its error naming `jobs[i].<field>`. Send an "
    "Idempotency-Key: a batch that failed part-way, sent again with it, makes only the jobs "
    "still missing.",
    responses=answers(
        HTTPStatus.CREATED,
        JobBatchView,
        "The jobs made (or, for an Idempotency-Key sent again, the ones the first request made).",
    ),
)
def create_jobs(
    batch: JobBatchCreate,
    idempotency_key: IdempotencyKey = None,
) -> Response[Any]:
    created = _jobs().create_batch(_tenant(), batch.jobs, idempotency_key)
    return _json(HTTPStatus.CREATED, {"jobs": [job.to_api() for job in created]})


@app.get(
    "/v1/jobs",
    summary="List your jobs, newest first",
    responses=answers(200, JobPage, "A page of jobs."),
)
def list_jobs(
    limit: Annotated[int, Query(ge=1, le=100)] = 50,
    cursor: Annotated[str | None, Query()] = None,
    status: Annotated[JobStatus | None, Query()] = None,
    name_prefix: Annotated[
        str | None, Query(min_length=1, max_length=200, description="Only jobs whose name starts with this.")
    ] = None,
) -> Response[Any]:
    page = _jobs().list(_tenant(), limit, cursor, status, name_prefix)
    return _json(200, {"items": [job.to_api() for job in page.items], "next_cursor": page.next_cursor})


@app.get(
    "/v1/jobs/<job_id>",
    summary="Get a job",
    responses=answers(200, JobView, "The job."),
)
def get_job(job_id: str) -> Response[Any]:
    return _json(200, _jobs().get(_tenant(), job_id).to_api())


@app.patch(
    "/v1/jobs/<job_id>",
    summary="Change a job",
    description="Any of the create fields; each one given replaces the job's. 409 for a cancelled or "
    "completed job; with If-Match (the job's version), 412 if the job is at another version.",
    responses=answers(200, JobView, "The job as changed."),
)
def update_job(
    job_id: str,
    patch: JobPatch,
    if_match: Annotated[
        str | None, Header(alias="If-Match", description="The version of the job as read, for example 3.")
    ] = None,
) -> Response[Any]:
    version = version_of(if_match)
    try:
        job = _jobs().update(_tenant(), job_id, patch, version)
    except ValidationError as exc:  # the job as patched breaks a rule across fields
        raise RequestValidationError(exc.errors()) from exc
    return _json(200, job.to_api())


@app.delete(
    "/v1/jobs/<job_id>",
    summary="Cancel a job",
    responses=answers(200, JobView, "The job, cancelled."),
)
def cancel_job(job_id: str) -> Response[Any]:
    return _json(200, _jobs().cancel(_tenant(), job_id).to_api())


@app.post(
    "/v1/jobs/<job_id>/pause",
    summary="Pause a job",
    description="It fires no more until resumed; pausing a paused job changes nothing. 409 for a "
    "cancelled or completed job.",
    responses=answers(200, JobView, "The job, paused."),
)
def pause_job(job_id: str) -> Response[Any]:
    return _json(200, _jobs().pause(_tenant(), job_id).to_api())


@app.post(
    "/v1/jobs/<job_id>/resume",
    summary="Resume a paused job",
    description="Firings missed while paused run once, now; then the schedule carries on. Resuming a "
    "scheduled job changes nothing. 409 for a cancelled or completed job.",
    responses=answers(200, JobView, "The job, resumed."),
)
def resume_job(job_id: str) -> Response[Any]:
    return _json(200, _jobs().resume(_tenant(), job_id).to_api())


@app.post(
    "/v1/jobs/<job_id>/trigger",
    summary="Run a job now",
    description="One run now (trigger MANUAL), also for a paused job; the schedule is unchanged. "
    "409 for a cancelled or completed job.",
    responses=answers(HTTPStatus.ACCEPTED, RunView, "The run made."),
)
def trigger_job(job_id: str) -> Response[Any]:
    return _json(202, _jobs().trigger(_tenant(), job_id).to_api())


_BACKFILL = (
    "One run (trigger BACKFILL) per firing of the schedule from start to end (both included) that "
    "has no run yet, oldest first, each with its firing's scheduled_for; under a limited concurrency "
    "they wait for the running slots in turn, never SKIPPED. At most 1000 firings (more is a 422). "
    "Answers how many runs were made and how many firings had a run already."
)


@app.post(
    "/v1/jobs/<job_id>/backfill",
    summary="Run a job's past firings",
    description=_BACKFILL,
    responses=answers(HTTPStatus.ACCEPTED, BackfillResult, "How many runs were made."),
)
def backfill_job(job_id: str, backfill: Backfill) -> Response[Any]:
    return _json(202, _jobs().backfill(_tenant(), job_id, backfill))


@app.get(
    "/v1/jobs/<job_id>/runs",
    summary="List a job's runs, newest first",
    responses=answers(200, RunPage, "A page of the job's runs."),
)
def list_runs(
    job_id: str,
    limit: Annotated[int, Query(ge=1, le=100)] = 50,
    cursor: Annotated[str | None, Query()] = None,
    status: Annotated[RunStatus | None, Query()] = None,
) -> Response[Any]:
    page = _jobs().list_runs(_tenant(), job_id, limit, cursor, status)
    return _json(200, {"items": [run.to_api() for run in page.items], "next_cursor": page.next_cursor})


@app.get(
    "/v1/jobs/<job_id>/runs/<run_id>",
    summary="Get one run",
    responses=answers(200, RunView, "The run."),
)
def get_run(job_id: str, run_id: str) -> Response[Any]:
    return _json(200, _jobs().get_run(_tenant(), job_id, run_id).to_api())


@app.post(
    "/v1/jobs/<job_id>/runs/<run_id>/retry",
    summary="Retry a failed run",
    description="A new attempt now, with a fresh round of the job's max_attempts; 409 unless FAILED.",
    responses=answers(HTTPStatus.ACCEPTED, RunView, "The run, retrying."),
)
def retry_run(job_id: str, run_id: str) -> Response[Any]:
    return _json(202, _jobs().retry_run(_tenant(), job_id, run_id).to_api())


# --- workflows (docs/concepts/workflows.md) ----------------------------------------------


@app.post(
    "/v1/workflows",
    summary="Create a workflow",
    description="Tasks that depend on tasks (a DAG), each with a job's target, payload, retry and "
    "priority. A cycle, an unknown or repeated dependency or task id is a 400 naming the field. "
    "Without a schedule, it runs only when triggered.",
    responses=answers(
        HTTPStatus.CREATED,
        WorkflowView,
        "The workflow made (or, for an Idempotency-Key sent again, the one the first request made).",
    ),
)
def create_workflow(
    workflow: WorkflowCreate,
    idempotency_key: IdempotencyKey = None,
) -> Response[Any]:
    created = _workflows().create(_tenant(), workflow, idempotency_key)
    return _json(HTTPStatus.CREATED, workflow_view(created))


@app.get(
    "/v1/workflows",
    summary="List your workflows, newest first",
    responses=answers(200, WorkflowPage, "A page of workflows."),
)
def list_workflows(
    limit: Annotated[int, Query(ge=1, le=100)] = 50,
    cursor: Annotated[str | None, Query()] = None,
    status: Annotated[JobStatus | None, Query()] = None,
    name_prefix: Annotated[
        str | None,
        Query(min_length=1, max_length=200, description="Only workflows whose name starts with this."),
    ] = None,
) -> Response[Any]:
    page = _workflows().list_workflows(_tenant(), limit, cursor, status, name_prefix)
    return _json(200, {"items": [workflow_view(job) for job in page.items], "next_cursor": page.next_cursor})


@app.get(
    "/v1/workflows/<workflow_id>",
    summary="Get a workflow",
    responses=answers(200, WorkflowView, "The workflow."),
)
def get_workflow(workflow_id: str) -> Response[Any]:
    return _json(200, workflow_view(_workflows().get(_tenant(), workflow_id)))


@app.patch(
    "/v1/workflows/<workflow_id>",
    summary="Change a workflow",
    description="Any of the create fields; each one given replaces the workflow's (tasks as a "
    "whole; schedule null: it runs only when triggered). Workflow runs under way keep their graph. "
    "409 for a cancelled or completed workflow; with If-Match (its version), 412 at another version.",
    responses=answers(200, WorkflowView, "The workflow as changed."),
)
def update_workflow(
    workflow_id: str,
    patch: WorkflowPatch,
    if_match: Annotated[
        str | None, Header(alias="If-Match", description="The version of the workflow as read, e.g. 3.")
    ] = None,
) -> Response[Any]:
    try:
        workflow = _workflows().update(_tenant(), workflow_id, patch, version_of(if_match))
    except ValidationError as exc:  # the workflow as patched breaks a rule across fields
        raise RequestValidationError(exc.errors()) from exc
    return _json(200, workflow_view(workflow))


@app.delete(
    "/v1/workflows/<workflow_id>",
    summary="Cancel a workflow",
    responses=answers(200, WorkflowView, "The workflow, cancelled."),
)
def cancel_workflow(workflow_id: str) -> Response[Any]:
    return _json(200, workflow_view(_workflows().cancel(_tenant(), workflow_id)))


@app.post(
    "/v1/workflows/<workflow_id>/pause",
    summary="Pause a workflow",
    description="No workflow run starts until it is resumed; runs under way go on. 409 for a "
    "cancelled or completed workflow.",
    responses=answers(200, WorkflowView, "The workflow, paused."),
)
def pause_workflow(workflow_id: str) -> Response[Any]:
    return _json(200, workflow_view(_workflows().pause(_tenant(), workflow_id)))


@app.post(
    "/v1/workflows/<workflow_id>/resume",
    summary="Resume a paused workflow",
    description="Firings missed while paused go as its misfire policy says; then the schedule carries on.",
    responses=answers(200, WorkflowView, "The workflow, resumed."),
)
def resume_workflow(workflow_id: str) -> Response[Any]:
    return _json(200, workflow_view(_workflows().resume(_tenant(), workflow_id)))


@app.post(
    "/v1/workflows/<workflow_id>/trigger",
    summary="Run a workflow now",
    description="One workflow run now (trigger MANUAL); the schedule is unchanged.",
    responses=answers(HTTPStatus.ACCEPTED, WorkflowRunView, "The workflow run made."),
)
def trigger_workflow(workflow_id: str) -> Response[Any]:
    return _json(202, _workflows().trigger(_tenant(), workflow_id))


@app.post(
    "/v1/workflows/<workflow_id>/backfill",
    summary="Run a workflow's past firings",
    description=_BACKFILL,
    responses=answers(HTTPStatus.ACCEPTED, BackfillResult, "How many workflow runs were made."),
)
def backfill_workflow(workflow_id: str, backfill: Backfill) -> Response[Any]:
    return _json(202, _workflows().backfill(_tenant(), workflow_id, backfill))


@app.get(
    "/v1/workflows/<workflow_id>/runs",
    summary="List a workflow's runs, newest first",
    responses=answers(200, WorkflowRunPage, "A page of the workflow's runs."),
)
def list_workflow_runs(
    workflow_id: str,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    cursor: Annotated[str | None, Query()] = None,
    status: Annotated[RunStatus | None, Query()] = None,
) -> Response[Any]:
    items, next_cursor = _workflows().list_runs(_tenant(), workflow_id, limit, cursor, status)
    return _json(200, {"items": items, "next_cursor": next_cursor})


@app.get(
    "/v1/workflows/<workflow_id>/runs/<workflow_run_id>",
    summary="Get one workflow run, with each task's state",
    responses=answers(200, WorkflowRunView, "The workflow run."),
)
def get_workflow_run(workflow_id: str, workflow_run_id: str) -> Response[Any]:
    return _json(200, _workflows().get_run(_tenant(), workflow_id, workflow_run_id))


@app.post(
    "/v1/workflows/<workflow_id>/runs/<workflow_run_id>/cancel",
    summary="Cancel a workflow run",
    description="Cancels what has not started: waiting tasks, and released tasks whose runs have "
    "not started. Tasks under way end as they end. 409 once the workflow run has ended.",
    responses=answers(
        HTTPStatus.ACCEPTED, WorkflowRunView, "The workflow run, what had not started cancelled."
    ),
)
def cancel_workflow_run(workflow_id: str, workflow_run_id: str) -> Response[Any]:
    return _json(202, _workflows().cancel_run(_tenant(), workflow_id, workflow_run_id))


@app.post(
    "/v1/workflows/<workflow_id>/runs/<workflow_run_id>/tasks/<task_id>/retry",
    summary="Retry a failed task of a workflow run",
    description="Runs the FAILED task again (a fresh round of its max_attempts) and decides again "
    "what its failure decided below it: UPSTREAM_FAILED and SKIPPED tasks wait again. Tasks below "
    "it that ran keep their result. 409 unless the task FAILED.",
    responses=answers(HTTPStatus.ACCEPTED, WorkflowRunView, "The workflow run, the task running again."),
)
def retry_workflow_task(workflow_id: str, workflow_run_id: str, task_id: str) -> Response[Any]:
    return _json(202, _workflows().retry_task(_tenant(), workflow_id, workflow_run_id, task_id))


def _signing() -> SigningSecrets:
    signing = _jobs().signing
    if signing is None:
        raise SchedulerError(
            "this deployment keeps no signing secrets (no secrets key)", [], "NOT_FOUND", 404
        )
    return signing


@app.post(
    "/v1/signing-secrets",
    summary="Make or rotate the webhook signing secret",
    description="A new secret that signs your HTTP deliveries (Standard Webhooks `webhook-signature`), "
    "returned this once. Calling it again rotates: the previous secret signs too for 24 hours.",
    responses=answers(HTTPStatus.CREATED, SigningSecretMade, "The new secret, shown this once."),
)
def rotate_signing_secret() -> Response[Any]:
    return _json(HTTPStatus.CREATED, _signing().rotate(_tenant()))


@app.get(
    "/v1/signing-secrets",
    summary="When the signing secret was made",
    responses=answers(HTTPStatus.OK, SigningSecretState, "When it was made; never the secret."),
)
def get_signing_secret() -> Response[Any]:
    return _json(HTTPStatus.OK, _signing().describe(_tenant()))


@app.get(
    "/v1/tenant",
    summary="Who you are to the scheduler",
    description="Your tenant (the owner of your jobs) and the external id your execution roles' "
    "trust policies require.",
    responses=answers(HTTPStatus.OK, TenantView, "Your tenant."),
)
def get_tenant() -> Response[Any]:
    tenant = _tenant()
    identity = app.current_event.request_context.identity.raw_event
    return _json(
        HTTPStatus.OK,
        {"tenant": tenant, "principal_arn": str(identity.get("userArn")), "external_id": external_id(tenant)},
    )


@app.get("/v1/openapi.json", summary="This API's OpenAPI document", include_in_schema=False)
def openapi_document() -> Response[Any]:
    return Response(
        status_code=200,
        content_type=content_types.APPLICATION_JSON,
        body=app.get_openapi_json_schema(title=API_TITLE, version=API_VERSION),
    )


@inject_invocation(correlation_id_path="requestContext.requestId")
# Not the response: it holds jobs (payloads, target URLs), which X-Ray must not keep.
@tracer.capture_lambda_handler(capture_response=False)
def handler(event: dict[str, Any], context: LambdaContext, jobs: JobService | None = None) -> dict[str, Any]:
    """`jobs` lets tests pass a service wired to their own clock and clients."""
    refused = refused_body(event, settings_from_env().max_request_bytes)
    if refused is not None:
        return refused
    service = jobs or default_job_service()
    service.begin_invocation(context)
    app.append_context(jobs=service)
    try:
        return app.resolve(as_json(event), context)
    finally:
        # What the services counted (RunsTriggered, ...); most requests count nothing, and
        # Powertools' `log_metrics` would warn about each of those.
        if metrics.metric_set:
            try:
                metrics.flush_metrics()
            except Exception:  # the request's effects stand: its response must too
                logger.exception("metrics not flushed")
