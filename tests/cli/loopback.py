"""A stand-in for the API on loopback: a real HTTP server that records each request and
answers what the test scripted for its method and path (the API's bodies and error shape,
docs/api.md), so the command line is driven over real HTTP without the local cloud."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass(frozen=True)
class Request:
    method: str
    path: str  # without the query
    query: dict[str, list[str]]
    headers: dict[str, str]  # names in lower case
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class LoopbackApi:
    def __init__(self) -> None:
        self.requests: list[Request] = []
        self._answers: dict[tuple[str, str], list[tuple[int, Any]]] = {}
        self._lock = threading.Lock()
        api = self

        class Handler(BaseHTTPRequestHandler):
            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                split = urlsplit(self.path)
                request = Request(
                    self.command,
                    split.path,
                    parse_qs(split.query),
                    {k.lower(): v for k, v in self.headers.items()},
                    self.rfile.read(length) if length else b"",
                )
                with api._lock:
                    api.requests.append(request)
                    queued = api._answers.get((self.command, split.path), [])
                    status, body = queued.pop(0) if len(queued) > 1 else queued[0] if queued else (404, None)
                raw = b"" if body is None else body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def do_GET(self) -> None:
                self._handle()

            def do_POST(self) -> None:
                self._handle()

            def do_PATCH(self) -> None:
                self._handle()

            def do_DELETE(self) -> None:
                self._handle()

            def log_message(self, format: str, *args: Any) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def answer(self, method: str, path: str, status: int, body: Any = None) -> None:
        """Answer `method path` with this (queued: each answer once, the last one from then on)."""
        with self._lock:
            self._answers.setdefault((method, path), []).append((status, body))

    def sent(self, method: str, path: str) -> list[Request]:
        return [r for r in self.requests if (r.method, r.path) == (method, path)]


@contextmanager
def loopback_api() -> Iterator[LoopbackApi]:
    api = LoopbackApi()
    thread = threading.Thread(target=api._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield api
    finally:
        api._server.shutdown()
        api._server.server_close()


def error_body(status_code: str, message: str, details: list[dict[str, str]]) -> dict[str, Any]:
    """The API's error shape (scheduler_core.api.error_body)."""
    return {"error": {"code": status_code, "message": message, "details": details}}


JOB_ID = "c5911ab6d55a4936bff5517cfeb909eb"


def job_body(**changes: Any) -> dict[str, Any]:
    """A job as GET /v1/jobs/{id} answers it."""
    return {
        "job_id": JOB_ID,
        "name": "standup",
        "status": "SCHEDULED",
        "schedule": {
            "at": None,
            "cron": "0 9 * * MON-FRI",
            "rate": None,
            "timezone": "Europe/Berlin",
            "start_at": None,
            "end_at": None,
            "jitter_seconds": 300,
        },
        "target": {
            "type": "HTTP",
            "url": "https://example.com/hook",
            "method": "POST",
            "headers": {},
            "secret_headers": {"Authorization": "***"},
            "timeout_seconds": 10,
        },
        "payload": {"team": "a"},
        "priority": "NORMAL",
        "retry": {"max_attempts": 3, "backoff_seconds": 10.0, "max_backoff_seconds": 3600.0},
        "concurrency": {"overlap": "SKIP", "max_running": 1},
        "misfire": "FIRE_ONCE",
        "catch_up_window_seconds": None,
        "next_fire_at": "2026-11-27T08:00:00.000Z",
        "paused_at": None,
        "created_at": "2026-11-26T12:13:30.460Z",
        "updated_at": "2026-11-26T12:13:30.460Z",
        "version": 3,
    } | changes
