"""The public API's plumbing, beside the routes of `functions/api/handler.py`: request bodies
parsed as strict JSON, validation errors described field by field, `If-Match` read as a job
version, oversized or undecodable bodies refused before they are parsed, and the one error
body shape: `{"error": {"code", "message", "details": [{"field", "message"}]}}`."""

from __future__ import annotations

import base64
import json
import math
from typing import Any

from scheduler_core.domain.errors import InvalidRequest, PayloadTooLarge, SchedulerError, field_error
from scheduler_core.domain.target_spec import TARGET_TYPES

# Deeper than any sensible payload, and well inside what validation (pydantic stops at 255
# levels) and Python's recursion limit cope with.
MAX_BODY_DEPTH = 100
JSON = "application/json"
# Location prefixes Powertools puts before a field.
_LOCATIONS = {"body", "query", "path", "header"}


def error_body(code: str, message: str, details: list[dict[str, str]] | None = None) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "details": details or []}}


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


def _field_of(location: tuple[Any, ...]) -> str:
    """A pydantic error's location as the field a client wrote: `schedule.at`,
    `tasks[2].target.url` (a list's member by its index)."""
    parts = [p for p in location if not str(p).startswith("function-")]
    if len(parts) > 1 and parts[0] == "header":  # Powertools lower-cases header names
        return "-".join(word.capitalize() for word in str(parts[1]).split("-"))
    if parts and parts[0] in _LOCATIONS:
        parts = parts[1:]
    # pydantic names the member of a `target` union it tried ("target", "HTTP", "url").
    parts = [p for n, p in enumerate(parts) if not (n and parts[n - 1] == "target" and p in TARGET_TYPES)]
    # ... and marks a dict key that failed ("headers", "Host", "[key]").
    if parts and parts[-1] == "[key]":
        parts.pop()
    field = ""
    for part in parts:
        field += f"[{part}]" if isinstance(part, int) else f".{part}"
    return field.lstrip(".") or "body"


def describe(error: dict[str, Any]) -> dict[str, str]:
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


def invalid_request_message(details: list[dict[str, str]]) -> str:
    """The message of a 400 for `details`: which fields to check."""
    return "invalid request: check " + ", ".join(dict.fromkeys(d["field"] for d in details))


def version_of(if_match: str | None) -> int | None:
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


def _body_bytes(event: dict[str, Any]) -> bytes:
    """The request body as sent: API Gateway base64-encodes a body it does not pass as text."""
    body = event.get("body") or ""
    return base64.b64decode(body) if event.get("isBase64Encoded") else body.encode(errors="surrogatepass")


def refused_body(event: dict[str, Any], limit: int) -> dict[str, Any] | None:
    """The answer to a body refused before validation parses it, or None: over the limit
    (413), or not UTF-8 (400; JSON is UTF-8, RFC 8259 §8.1)."""
    raw = _body_bytes(event)
    if len(raw) > limit:
        too_large = PayloadTooLarge(
            f"request body is over {limit // 1024} KiB; keep jobs and their payloads smaller"
        )
        return _refusal(too_large, [field_error("body", f"larger than {limit} bytes")])
    try:
        raw.decode()
    except UnicodeDecodeError as exc:
        byte = raw[exc.start : exc.start + 1].hex()
        details = [
            field_error(
                "body", f"must be JSON encoded as UTF-8; the byte 0x{byte} at offset {exc.start} is not UTF-8"
            )
        ]
        return _refusal(InvalidRequest(invalid_request_message(details)), details)
    return None


def _refusal(error: SchedulerError, details: list[dict[str, str]]) -> dict[str, Any]:
    return {
        "statusCode": error.status,
        "headers": {"Content-Type": JSON},
        "body": json.dumps(error_body(error.code, error.message, details)),
        "isBase64Encoded": False,
    }


def as_json(event: dict[str, Any]) -> dict[str, Any]:
    """The API speaks only JSON: a body is parsed as JSON whatever its Content-Type says
    (`curl -d` sends form-urlencoded), so a non-JSON body is a 400 "not valid JSON". A body
    API Gateway base64-encoded is passed on as its text (`refused_body` found it UTF-8)."""
    if not event.get("body"):
        return event
    headers = {k: v for k, v in (event.get("headers") or {}).items() if k.lower() != "content-type"}
    multi = {k: v for k, v in (event.get("multiValueHeaders") or {}).items() if k.lower() != "content-type"}
    headers["Content-Type"] = JSON
    multi["Content-Type"] = [JSON]
    text = _body_bytes(event).decode() if event.get("isBase64Encoded") else event["body"]
    return event | {"headers": headers, "multiValueHeaders": multi, "body": text, "isBase64Encoded": False}


# Ids a mutating call's answer names what it made or changed by (a create: the new one's).
_ANSWER_IDS = ("job_id", "workflow_id", "run_id", "workflow_run_id")


def audit_entry(
    tenant: str | None,
    principal_arn: str | None,
    method: str,
    route: str,
    path_ids: dict[str, str],
    answer: Any,
    request_id: str,
    status: int,
) -> dict[str, Any]:
    """The audit line of one mutating call: who (the tenant, and the ARN it signed as: a
    tenant is an id, which a reader cannot tell apart), what, which, the request and its
    status. Never the body: it may hold payloads and secrets."""
    if isinstance(answer, str | bytes):
        try:
            answer = json.loads(answer)
        except ValueError:
            answer = None
    ids: dict[str, Any] = dict(path_ids)
    if isinstance(answer, dict):
        ids |= {name: str(answer[name]) for name in _ANSWER_IDS if name not in ids and answer.get(name)}
        if isinstance(answer.get("jobs"), list):  # a batch's
            ids["job_ids"] = [
                str(job["job_id"]) for job in answer["jobs"] if isinstance(job, dict) and job.get("job_id")
            ]
    return {
        "tenant": tenant,
        "principal_arn": principal_arn,
        "action": f"{method} {route}",
        "ids": ids,
        "request_id": request_id,
        "status": status,
    }
