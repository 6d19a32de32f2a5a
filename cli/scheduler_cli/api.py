"""How a command calls the API and what a failure becomes: one `call` that returns the
parsed body of a 2xx answer, or raises `ApiError` with the API's own `code`, `message` and
`details` (docs/api.md: every error has this shape); main.py turns it into exit 1 with the
error on stderr. Usage errors (exit 2) are Typer's own, raised from here as `usage`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any, NoReturn

import httpx
import typer

from scheduler_cli.state import CliState, Output


@dataclass
class ApiError(Exception):
    """A non-2xx answer (or no answer at all: `status` 0)."""

    status: int
    code: str
    message: str
    details: list[dict[str, str]] = field(default_factory=list)

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"

    def lines(self) -> list[str]:
        """What stderr shows: the code, the status, the message, then each field named."""
        status = f" (HTTP {self.status})" if self.status else ""
        shown = [f"error: {self.code}{status}: {self.message}"]
        shown += [f"  {d.get('field') or '-'}: {d.get('message', '')}" for d in self.details]
        return shown


def usage(message: str) -> NoReturn:
    """A usage error: Typer prints it and exits 2."""
    raise typer.BadParameter(message)


def state_of(ctx: typer.Context, output: Output | None = None) -> CliState:
    """The global options; a command's own `--output` wins over the global one."""
    state = ctx.find_root().obj
    if not isinstance(state, CliState):  # a command invoked without the root callback
        state = CliState()
        ctx.find_root().obj = state
    if output is not None:
        state.output = output
    return state


def error_of(response: httpx.Response) -> ApiError:
    """The API's error body (`{"error": {"code", "message", "details"}}`), or what stands in
    for it when another layer answered (API Gateway's `{"message": ...}`, a proxy's HTML)."""
    try:
        body: Any = response.json()
    except ValueError:
        body = None
    reason = _reason(response.status_code)
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        error = body["error"]
        details = [d for d in error.get("details") or [] if isinstance(d, dict)]
        return ApiError(
            response.status_code,
            str(error.get("code") or reason),
            str(error.get("message") or ""),
            [{"field": str(d.get("field", "")), "message": str(d.get("message", ""))} for d in details],
        )
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        return ApiError(response.status_code, reason, body["message"])
    text = response.text.strip()
    return ApiError(response.status_code, reason, text[:500] or "no message")


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).name
    except ValueError:
        return f"HTTP_{status}"


def call(
    state: CliState,
    method: str,
    path: str,
    *,
    params: Mapping[str, Any] | None = None,
    json_body: Any = None,
    headers: Mapping[str, str] | None = None,
) -> Any:
    """The parsed JSON body of a 2xx answer (None when it has none); ApiError otherwise."""
    client = state.client()
    try:
        response = client.send(method, path, params=params, json_body=json_body, headers=headers)
    except httpx.HTTPError as error:
        raise ApiError(
            0, "UNREACHABLE", f"no answer from {client.target.base_url}: {error or type(error).__name__}"
        ) from error
    if response.status_code >= 400:
        raise error_of(response)
    if not response.content:
        return None
    try:
        return response.json()
    except ValueError as error:
        raise ApiError(
            response.status_code, "NOT_JSON", f"the answer is not JSON: {response.text[:200]}"
        ) from error


def all_pages(state: CliState, path: str, params: Mapping[str, Any], follow: bool) -> dict[str, Any]:
    """A listing's page, or (`follow`) every page from there on, as one page of the API's own
    shape: {"items": [...], "next_cursor": null}."""
    page: dict[str, Any] = call(state, "GET", path, params=params)
    if not follow:
        return page
    items = list(page["items"])
    while page.get("next_cursor"):
        page = call(state, "GET", path, params={**params, "cursor": page["next_cursor"]})
        items += page["items"]
    return {"items": items, "next_cursor": None}
