"""The public API (DESIGN §7) behind API Gateway's REST proxy: typed routes validated by
Powertools, each calling one `JobService` method. Errors use one body shape:
`{"error": {"code", "message", "details": [{"field", "message"}]}}`, whatever went wrong."""

from __future__ import annotations

import json
import math
from http import HTTPStatus
from typing import Annotated, Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response, content_types
from aws_lambda_powertools.event_handler.exceptions import NotFoundError
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from aws_lambda_powertools.event_handler.openapi.params import Header, Query
from aws_lambda_powertools.utilities.typing import LambdaContext
from botocore.exceptions import ClientError
from pydantic import ValidationError

from scheduler_core.api_shapes import JobCreate, JobPatch
from scheduler_core.composition import default_job_service
from scheduler_core.errors import InvalidRequest, PayloadTooLarge, SchedulerError, field_error
from scheduler_core.jobs import JobService
from scheduler_core.observability import logger, metrics, tracer
from scheduler_core.ports import StoreContention
from scheduler_core.settings import settings_from_env
from scheduler_core.target_spec import TARGET_TYPES
from scheduler_core.tenancy import tenant_of
from scheduler_core.vocabulary import JobStatus, RunStatus

API_TITLE = "serverless-scheduler"
API_VERSION = "1.0.0"
# Deeper than any sensible payload, and well inside what validation (pydantic stops at 255
# levels) and Python's recursion limit cope with.
MAX_BODY_DEPTH = 100

# Location prefixes Powertools puts before a field.
_LOCATIONS = {"body", "query", "path", "header"}
# AWS error codes that mean "slow down": the request may succeed if sent again.
_THROTTLING_CODES = {"ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded"}


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON; send a number, a string or null")


def _bounded_int(text: str) -> int:
    try:
        return int(text)
    except ValueError:  # Python refuses to convert more than 4300 digits
        raise ValueError(f"a number of {len(text.lstrip('-'))} digits is too long") from None


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:20]} is out of range")
    return value


def _depth(document: Any) -> int:
    """How deep arrays and objects nest, counted without recursion."""
    deepest = 0
    pending: list[tuple[Any, int]] = [(document, 1)]
    while pending and deepest <= MAX_BODY_DEPTH:
        value, depth = pending.pop()
        if isinstance(value, dict | list):
            deepest = max(deepest, depth)
            children = value.values() if isinstance(value, dict) else value
            pending.extend((child, depth + 1) for child in children)
    return deepest


def strict_json(text: str) -> Any:
    """Parse a request body as RFC 8259 JSON, refusing what Python's `json` lets through
    (NaN, Infinity) or cannot take (huge integers, deep nesting). A refusal is a
    `JSONDecodeError`, which Powertools turns into a `json_invalid` validation error."""
    try:
        document = json.loads(
            text, parse_constant=_no_constant, parse_int=_bounded_int, parse_float=_finite_float
        )
    except json.JSONDecodeError:
        raise
    except RecursionError:
        raise json.JSONDecodeError(f"nests deeper than {MAX_BODY_DEPTH} levels", text, 0) from None
    except ValueError as exc:
        raise json.JSONDecodeError(str(exc), text, 0) from None
    if _depth(document) > MAX_BODY_DEPTH:
        raise json.JSONDecodeError(f"nests deeper than {MAX_BODY_DEPTH} levels", text, 0)
    return document


app = APIGatewayRestResolver(enable_validation=True, json_body_deserializer=strict_json)
app.enable_swagger(path="/v1/docs", title=API_TITLE, version=API_VERSION)


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
    parts = [str(p) for p in location if not str(p).startswith("function-")]
    if len(parts) > 1 and parts[0] == "header":  # Powertools lower-cases header names
        return "-".join(word.capitalize() for word in parts[1].split("-"))
    if parts and parts[0] in _LOCATIONS:
        parts = parts[1:]
    # pydantic names the member of the `target` union it tried ("target", "HTTP", "url").
    if len(parts) > 1 and parts[0] == "target" and parts[1] in TARGET_TYPES:
        del parts[1]
    # ... and marks a dict key that failed ("headers", "Host", "[key]").
    if parts and parts[-1] == "[key]":
        parts.pop()
    return ".".join(parts) or "body"


def _describe(error: dict[str, Any]) -> dict[str, str]:
    field = _field_of(tuple(error.get("loc", ())))
    kind = error.get("type", "")
    if kind == "json_invalid":
        reason = (error.get("ctx") or {}).get("error")
        message = "request body is not valid JSON"
        return {"field": "body", "message": f"{message}: {reason}" if reason else message}
    if kind == "extra_forbidden":
        return {"field": field, "message": "unknown field; remove it"}
    if kind == "missing":
        return {"field": field, "message": "is required"}
    if kind in ("union_tag_invalid", "union_tag_not_found"):
        return {"field": f"{field}.type", "message": f"must be one of {', '.join(TARGET_TYPES)}"}
    return {"field": field, "message": str(error.get("msg", "is invalid")).removeprefix("Value error, ")}


@app.exception_handler(RequestValidationError)
def _invalid_request(error: RequestValidationError) -> Response[Any]:
    details = [_describe(e) for e in error.errors()]
    fields = ", ".join(dict.fromkeys(d["field"] for d in details))
    return _error(400, "VALIDATION_ERROR", f"invalid request: check {fields}", details)


@app.exception_handler(SchedulerError)
def _scheduler_error(error: SchedulerError) -> Response[Any]:
    return _error(error.status, error.code, error.message, error.details)


def _try_again() -> Response[Any]:
    return _error(503, "SERVICE_UNAVAILABLE", "the service is busy; try again in a few seconds")


@app.exception_handler(StoreContention)
def _store_contention(error: StoreContention) -> Response[Any]:
    logger.warning("store contention", extra={"error": str(error)})
    return _try_again()


@app.exception_handler(ClientError)
def _aws_error(error: ClientError) -> Response[Any]:
    if error.response.get("Error", {}).get("Code") in _THROTTLING_CODES:
        logger.warning("throttled by AWS", extra={"error": str(error)})
        return _try_again()
    return _internal_error(error)


def _internal_error(error: Exception) -> Response[Any]:
    request_id = app.current_event.request_context.request_id
    logger.exception("unhandled error", exc_info=error)
    return _error(500, "INTERNAL_ERROR", f"internal error; quote request id {request_id} if you report it")


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


def _tenant() -> str:
    tenant = tenant_of(app.current_event.request_context.identity.raw_event)
    if tenant is None:
        raise SchedulerError("the request carries no IAM identity; sign it with SigV4", [], "FORBIDDEN", 403)
    return tenant


@app.post("/v1/jobs", summary="Create a job")
def create_job(
    job: JobCreate,
    idempotency_key: Annotated[
        str | None,
        Header(
            alias="Idempotency-Key",
            min_length=1,
            max_length=255,
            description="Send a create again with the same key (within 24 hours) and get the job the "
            "first one made instead of a second job. The same key with another body is a 422.",
        ),
    ] = None,
) -> Response[Any]:
    created = _jobs().create(_tenant(), job, idempotency_key)
    return _json(HTTPStatus.CREATED, created.to_api())


@app.get("/v1/jobs", summary="List your jobs, newest first")
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


@app.get("/v1/jobs/<job_id>", summary="Get a job")
def get_job(job_id: str) -> Response[Any]:
    return _json(200, _jobs().get(_tenant(), job_id).to_api())


@app.patch(
    "/v1/jobs/<job_id>",
    summary="Change a job",
    description="Any of the create fields; each one given replaces the job's. 409 for a cancelled or "
    "completed job; with If-Match (the job's version), 412 if the job is at another version.",
)
def update_job(
    job_id: str,
    patch: JobPatch,
    if_match: Annotated[
        str | None, Header(alias="If-Match", description="The version of the job as read, for example 3.")
    ] = None,
) -> Response[Any]:
    version = _version_of(if_match)
    try:
        job = _jobs().update(_tenant(), job_id, patch, version)
    except ValidationError as exc:  # the job as patched breaks a rule across fields
        raise RequestValidationError(exc.errors()) from exc
    return _json(200, job.to_api())


def _version_of(if_match: str | None) -> int | None:
    """`If-Match: "3"` (or 3, W/"3") → 3; absent or `*` → None (any version)."""
    if if_match is None or if_match.strip() == "*":
        return None
    tag = if_match.strip().removeprefix("W/").strip('"')
    if not tag.isdecimal() or len(tag) > 18:
        raise InvalidRequest(
            'If-Match must be the version of the job as read, e.g. "3" (or 3)',
            [field_error("If-Match", "is not a job version")],
        )
    return int(tag)


@app.delete("/v1/jobs/<job_id>", summary="Cancel a job")
def cancel_job(job_id: str) -> Response[Any]:
    return _json(200, _jobs().cancel(_tenant(), job_id).to_api())


@app.post(
    "/v1/jobs/<job_id>/pause",
    summary="Pause a job",
    description="It fires no more until resumed; pausing a paused job changes nothing. 409 for a "
    "cancelled or completed job.",
)
def pause_job(job_id: str) -> Response[Any]:
    return _json(200, _jobs().pause(_tenant(), job_id).to_api())


@app.post(
    "/v1/jobs/<job_id>/resume",
    summary="Resume a paused job",
    description="Firings missed while paused run once, now; then the schedule carries on. Resuming a "
    "scheduled job changes nothing. 409 for a cancelled or completed job.",
)
def resume_job(job_id: str) -> Response[Any]:
    return _json(200, _jobs().resume(_tenant(), job_id).to_api())


@app.post(
    "/v1/jobs/<job_id>/trigger",
    summary="Run a job now",
    description="One run now (trigger MANUAL), also for a paused job; the schedule is unchanged. "
    "409 for a cancelled or completed job.",
)
def trigger_job(job_id: str) -> Response[Any]:
    return _json(202, _jobs().trigger(_tenant(), job_id).to_api())


@app.get("/v1/jobs/<job_id>/runs", summary="List a job's runs, newest first")
def list_runs(
    job_id: str,
    limit: Annotated[int, Query(ge=1, le=100)] = 50,
    cursor: Annotated[str | None, Query()] = None,
    status: Annotated[RunStatus | None, Query()] = None,
) -> Response[Any]:
    page = _jobs().list_runs(_tenant(), job_id, limit, cursor, status)
    return _json(200, {"items": [run.to_api() for run in page.items], "next_cursor": page.next_cursor})


@app.get("/v1/jobs/<job_id>/runs/<run_id>", summary="Get one run")
def get_run(job_id: str, run_id: str) -> Response[Any]:
    return _json(200, _jobs().get_run(_tenant(), job_id, run_id).to_api())


@app.post(
    "/v1/jobs/<job_id>/runs/<run_id>/retry",
    summary="Retry a failed run",
    description="A new attempt now, with a fresh round of the job's max_attempts; 409 unless FAILED.",
)
def retry_run(job_id: str, run_id: str) -> Response[Any]:
    return _json(202, _jobs().retry_run(_tenant(), job_id, run_id).to_api())


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
    service = jobs or default_job_service()
    service.begin_invocation(context)
    app.append_context(jobs=service)
    try:
        return app.resolve(_as_json(event), context)
    finally:
        # What the services counted (RunsTriggered, ...); most requests count nothing, and
        # Powertools' `log_metrics` would warn about each of those.
        if metrics.metric_set:
            try:
                metrics.flush_metrics()
            except Exception:  # the request's effects stand: its response must too
                logger.exception("metrics not flushed")
