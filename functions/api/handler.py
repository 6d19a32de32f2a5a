"""The public API (DESIGN §7) behind API Gateway's REST proxy: typed routes validated by
Powertools, each calling one `JobService` method. Errors use one body shape:
`{"error": {"code", "message", "details": [{"field", "message"}]}}`."""

from __future__ import annotations

import json
from http import HTTPStatus
from typing import Annotated, Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response, content_types
from aws_lambda_powertools.event_handler.exceptions import NotFoundError
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from aws_lambda_powertools.event_handler.openapi.params import Query
from aws_lambda_powertools.utilities.typing import LambdaContext

from scheduler_core.composition import default_job_service
from scheduler_core.errors import PayloadTooLarge, SchedulerError
from scheduler_core.jobs import JobService
from scheduler_core.model import JobCreate, JobStatus
from scheduler_core.observability import logger, tracer
from scheduler_core.settings import settings_from_env
from scheduler_core.tenancy import tenant_of

app = APIGatewayRestResolver(enable_validation=True)
API_TITLE = "serverless-scheduler"
API_VERSION = "1.0.0"
app.enable_swagger(path="/v1/docs", title=API_TITLE, version=API_VERSION)

# Location prefixes Powertools puts before a field, and union tags pydantic adds inside it.
_LOCATIONS = {"body", "query", "path", "header"}
_UNION_TAGS = {"HTTP", "SQS"}


def _error(
    status: int, code: str, message: str, details: list[dict[str, str]] | None = None
) -> Response[Any]:
    return Response(
        status_code=status,
        content_type=content_types.APPLICATION_JSON,
        body={"error": {"code": code, "message": message, "details": details or []}},
    )


def _json(status: int, body: dict[str, Any]) -> Response[Any]:
    return Response(status_code=status, content_type=content_types.APPLICATION_JSON, body=body)


def _field_of(location: tuple[Any, ...]) -> str:
    parts = [str(p) for p in location if str(p) not in _UNION_TAGS and not str(p).startswith("function-")]
    if parts and parts[0] in _LOCATIONS:
        parts = parts[1:]
    return ".".join(parts) or "body"


def _describe(error: dict[str, Any]) -> dict[str, str]:
    field = _field_of(tuple(error.get("loc", ())))
    kind = error.get("type", "")
    if kind == "json_invalid":
        return {"field": "body", "message": "request body is not valid JSON"}
    if kind == "extra_forbidden":
        return {"field": field, "message": "unknown field; remove it"}
    if kind == "missing":
        return {"field": field, "message": "is required"}
    if kind in ("union_tag_invalid", "union_tag_not_found"):
        return {"field": f"{field}.type", "message": f"must be one of {', '.join(sorted(_UNION_TAGS))}"}
    return {"field": field, "message": str(error.get("msg", "is invalid")).removeprefix("Value error, ")}


@app.exception_handler(RequestValidationError)
def _invalid_request(error: RequestValidationError) -> Response[Any]:
    details = [_describe(e) for e in error.errors()]
    fields = ", ".join(dict.fromkeys(d["field"] for d in details))
    return _error(400, "VALIDATION_ERROR", f"invalid request: check {fields}", details)


@app.exception_handler(SchedulerError)
def _scheduler_error(error: SchedulerError) -> Response[Any]:
    return _error(error.status, error.code, error.message, error.details)


@app.not_found
def _no_route(_: NotFoundError) -> Response[Any]:
    return _error(404, "NOT_FOUND", f"no route {app.current_event.http_method} {app.current_event.path}")


def _jobs() -> JobService:
    service: JobService = app.context["jobs"]
    return service


def _tenant() -> str:
    tenant = tenant_of(app.current_event.request_context.identity.raw_event)
    if tenant is None:
        raise SchedulerError("the request carries no IAM identity; sign it with SigV4", [], "FORBIDDEN", 403)
    return tenant


@app.post("/v1/jobs", summary="Create a job")
def create_job(job: JobCreate) -> Response[Any]:
    created = _jobs().create(_tenant(), job)
    return _json(HTTPStatus.CREATED, created.to_api())


@app.get("/v1/jobs", summary="List your jobs, newest first")
def list_jobs(
    limit: Annotated[int, Query(ge=1, le=100)] = 50,
    cursor: Annotated[str | None, Query()] = None,
    status: Annotated[JobStatus | None, Query()] = None,
) -> Response[Any]:
    page = _jobs().list(_tenant(), limit, cursor, status)
    return _json(200, {"items": [job.to_api() for job in page.items], "next_cursor": page.next_cursor})


@app.get("/v1/jobs/<job_id>", summary="Get a job")
def get_job(job_id: str) -> Response[Any]:
    return _json(200, _jobs().get(_tenant(), job_id).to_api())


@app.delete("/v1/jobs/<job_id>", summary="Cancel a job")
def cancel_job(job_id: str) -> Response[Any]:
    return _json(200, _jobs().cancel(_tenant(), job_id).to_api())


@app.get("/v1/jobs/<job_id>/runs", summary="List a job's runs, newest first")
def list_runs(
    job_id: str,
    limit: Annotated[int, Query(ge=1, le=100)] = 50,
    cursor: Annotated[str | None, Query()] = None,
) -> Response[Any]:
    page = _jobs().list_runs(_tenant(), job_id, limit, cursor)
    return _json(200, {"items": [run.to_api() for run in page.items], "next_cursor": page.next_cursor})


@app.get("/v1/jobs/<job_id>/runs/<run_id>", summary="Get one run")
def get_run(job_id: str, run_id: str) -> Response[Any]:
    return _json(200, _jobs().get_run(_tenant(), job_id, run_id).to_api())


@app.get("/v1/openapi.json", summary="This API's OpenAPI document", include_in_schema=False)
def openapi_document() -> Response[Any]:
    return Response(
        status_code=200,
        content_type=content_types.APPLICATION_JSON,
        body=app.get_openapi_json_schema(title=API_TITLE, version=API_VERSION),
    )


def _oversized(event: dict[str, Any], limit: int) -> dict[str, Any] | None:
    """Bodies over the limit are refused before validation (which would parse them)."""
    body = event.get("body") or ""
    if len(body.encode()) <= limit:
        return None
    error = PayloadTooLarge(f"request body is over {limit // 1024} KiB; keep jobs and their payloads smaller")
    details = [{"field": "body", "message": f"larger than {limit} bytes"}]
    return {
        "statusCode": error.status,
        "headers": {"Content-Type": content_types.APPLICATION_JSON},
        "body": json.dumps({"error": {"code": error.code, "message": error.message, "details": details}}),
        "isBase64Encoded": False,
    }


def _as_json(event: dict[str, Any]) -> dict[str, Any]:
    """The API speaks only JSON: a body is parsed as JSON whatever its Content-Type says
    (`curl -d` sends form-urlencoded), so a non-JSON body is a 400 "not valid JSON"."""
    if not event.get("body"):
        return event
    headers = {k: v for k, v in (event.get("headers") or {}).items() if k.lower() != "content-type"}
    multi = {k: v for k, v in (event.get("multiValueHeaders") or {}).items() if k.lower() != "content-type"}
    headers["Content-Type"] = content_types.APPLICATION_JSON
    multi["Content-Type"] = [content_types.APPLICATION_JSON]
    return event | {"headers": headers, "multiValueHeaders": multi}


@logger.inject_lambda_context(correlation_id_path="requestContext.requestId")
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: LambdaContext, jobs: JobService | None = None) -> dict[str, Any]:
    """`jobs` lets tests pass a service wired to their own clock and clients."""
    too_large = _oversized(event, settings_from_env().max_request_bytes)
    if too_large is not None:
        return too_large
    app.append_context(jobs=jobs or default_job_service())
    return app.resolve(_as_json(event), context)
