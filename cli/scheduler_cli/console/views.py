"""The console server's own routes, under /console/api/: what the page needs that the public
API does not give a tenant.

- `GET config`: what this console reaches (local cloud or deployed, which views work);
- `GET dlq`, `POST dlq/redrive`, `GET queues`: the operator's views (scheduler_cli.operator),
  with the user's AWS credentials, because the DLQ and the queues belong to the deployment;
- `GET metrics`: a deployed stack's CloudWatch figures for the overview (console.cloudwatch);
- `POST schedule`: a schedule in words and its next firings (console.schedule_preview).

None of them is a private route of the API: the API's own answers always come from /v1.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from botocore.exceptions import BotoCoreError, ClientError

from scheduler_cli.console.schedule_preview import PreviewRefused, preview
from scheduler_cli.operator import Operator

Reply = tuple[int, dict[str, str], bytes]


class _NoStack(Exception):
    """A view that reads the stack, in a console without one."""


MAX_DLQ_PEEK = 100


def json_reply(status: int, body: Any) -> Reply:
    return (
        status,
        {"Content-Type": "application/json", "Cache-Control": "no-store"},
        json.dumps(body).encode(),
    )


def error_reply(status: int, code: str, message: str, details: list[dict[str, str]] | None = None) -> Reply:
    """The API's error shape (docs/api.md), so the page reads every error one way."""
    return json_reply(status, {"error": {"code": code, "message": message, "details": details or []}})


@dataclass
class ConsoleApi:
    """`operator`: None when this console has no stack to look at (the DLQ and queue views say
    so). `metrics`: a deployed stack's overview from CloudWatch, None locally."""

    mode: str  # "local" (the local cloud) or "deployed"
    api_url: str
    operator: Operator | None = None
    metrics: Callable[[], dict[str, Any]] | None = None
    signed_as: str | None = None  # the AWS profile, for the page's header

    def handle(self, method: str, route: str, query: str, body: bytes) -> Reply:
        """`route`: the path after /console/api/."""
        handlers: dict[tuple[str, str], Callable[[dict[str, list[str]], bytes], Reply]] = {
            ("GET", "config"): self._config,
            ("GET", "dlq"): self._dlq,
            ("POST", "dlq/redrive"): self._redrive,
            ("GET", "queues"): self._queues,
            ("GET", "metrics"): self._metrics,
            ("POST", "schedule"): self._schedule,
        }
        handler = handlers.get((method, route))
        if handler is None:
            if any(path == route for _, path in handlers):
                return error_reply(
                    405, "METHOD_NOT_ALLOWED", f"{method} is not allowed on /console/api/{route}"
                )
            return error_reply(404, "NOT_FOUND", f"no console route /console/api/{route}")
        try:
            return handler(parse_qs(query), body)
        except _NoStack:
            return error_reply(
                404,
                "NO_STACK",
                "this console has no stack to read the DLQ and queues of: run `scheduler --stack NAME "
                "console` (your AWS credentials need to read its queues)",
            )
        except (BotoCoreError, ClientError) as error:
            return error_reply(502, "AWS_ERROR", f"AWS refused or failed: {error}")

    def _config(self, query: dict[str, list[str]], body: bytes) -> Reply:
        return json_reply(
            200,
            {
                "mode": self.mode,
                "api_url": self.api_url,
                "stack": self.operator.stack if self.operator is not None else None,
                "operator": self.operator is not None,
                "metrics": self.metrics is not None,
                "signed_as": self.signed_as,
            },
        )

    def _operator(self) -> Operator:
        if self.operator is None:
            raise _NoStack
        return self.operator

    def _dlq(self, query: dict[str, list[str]], body: bytes) -> Reply:
        operator = self._operator()
        try:
            limit = max(1, min(MAX_DLQ_PEEK, int(query.get("limit", ["50"])[-1])))
        except ValueError:
            return error_reply(
                400, "VALIDATION_ERROR", "limit must be a number", [{"field": "limit", "message": "a number"}]
            )
        letters = operator.dead_letters(limit)
        return json_reply(200, {"items": letters, "limit": limit})

    def _redrive(self, query: dict[str, list[str]], body: bytes) -> Reply:
        operator = self._operator()
        return json_reply(200, operator.redrive().as_dict())

    def _queues(self, query: dict[str, list[str]], body: bytes) -> Reply:
        operator = self._operator()
        return json_reply(200, {"queues": operator.queue_depths()})

    def _metrics(self, query: dict[str, list[str]], body: bytes) -> Reply:
        if self.metrics is None:
            return json_reply(200, {"source": None})
        return json_reply(200, self.metrics())

    def _schedule(self, query: dict[str, list[str]], body: bytes) -> Reply:
        try:
            request = json.loads(body or b"null")
        except ValueError:
            return error_reply(
                400, "VALIDATION_ERROR", "the body is not JSON", [{"field": "body", "message": "JSON"}]
            )
        try:
            return json_reply(200, preview(request))
        except PreviewRefused as refused:
            return error_reply(400, "VALIDATION_ERROR", str(refused), refused.details)
