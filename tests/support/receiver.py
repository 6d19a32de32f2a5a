"""A real HTTP server on loopback standing in for a webhook receiver: it records every
request and answers with the statuses it is told to, after the holds it is told to."""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    received_at: datetime
    raw: bytes = b""  # the body as sent (a signature covers these bytes)


class WebhookReceiver:
    def __init__(self) -> None:
        self.requests: list[Received] = []
        self._statuses: deque[int] = deque()
        self._holds: deque[float] = deque()
        self._gates: deque[threading.Event] = deque()
        self._lock = threading.Lock()
        self.hold_seconds = 0.0  # how long each request is held before the answer
        # By path: the JSON body a 2xx answer carries, and statuses to answer there first.
        self._bodies: dict[str, Any] = {}
        self._path_statuses: dict[str, deque[int]] = {}
        self.in_flight = 0
        self.max_in_flight = 0
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                with receiver._lock:
                    receiver.in_flight += 1
                    receiver.max_in_flight = max(receiver.max_in_flight, receiver.in_flight)
                    hold = receiver._holds.popleft() if receiver._holds else receiver.hold_seconds
                    gate = receiver._gates.popleft() if receiver._gates else None
                if hold:
                    time.sleep(hold)
                if gate is not None:
                    gate.wait(timeout=30)
                with receiver._lock:
                    receiver.in_flight -= 1
                    receiver.requests.append(
                        Received(
                            method=self.command,
                            path=self.path,
                            headers={k.lower(): v for k, v in self.headers.items()},
                            body=json.loads(raw) if raw else None,
                            raw=raw,
                            received_at=datetime.now(UTC),
                        )
                    )
                    path = self.path.split("?")[0]
                    own = receiver._path_statuses.get(path)
                    if own:
                        status = own.popleft()
                    else:
                        status = receiver._statuses.popleft() if receiver._statuses else 200
                    answer = b""
                    if 200 <= status < 300 and path in receiver._bodies:
                        answer = json.dumps(receiver._bodies[path]).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def do_GET(self) -> None:
                self._handle()

            def do_POST(self) -> None:
                self._handle()

            def do_PUT(self) -> None:
                self._handle()

            def do_PATCH(self) -> None:
                self._handle()

            def do_DELETE(self) -> None:
                self._handle()

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/hook"

    def respond_with(self, *statuses: int) -> None:
        """Answer the next requests with these statuses, then 200 again."""
        with self._lock:
            self._statuses.extend(statuses)

    def answer_on(self, path: str, body: Any = None, statuses: tuple[int, ...] = ()) -> str:
        """At `path` (under `url`): answer the next requests with `statuses`, then 200; a 2xx
        answer carries `body` as JSON. The path's URL."""
        full = f"/hook/{path}"
        with self._lock:
            if body is not None:
                self._bodies[full] = body
            self._path_statuses.setdefault(full, deque()).extend(statuses)
        return f"{self.url}/{path}"

    def at(self, path: str) -> list[Received]:
        """The requests made to `path` (under `url`)."""
        return [request for request in self.requests if request.path.split("?")[0] == f"/hook/{path}"]

    def hold_next(self, *seconds: float) -> None:
        """Hold the next requests this long each (real seconds) before answering, then
        `hold_seconds` again: a target that hangs past the caller's timeout."""
        with self._lock:
            self._holds.extend(seconds)

    def hold_until_released(self) -> threading.Event:
        """Hold the next request (one per call) until the returned event is set, then answer
        as usual: a target call that stays in flight for as long as a test needs."""
        gate = threading.Event()
        with self._lock:
            self._gates.append(gate)
        return gate

    def wait_in_flight(self, count: int, timeout: float = 10.0) -> None:
        """Return once `count` requests are being held (counted, not timed: the clock may be frozen)."""
        for _ in range(int(timeout / 0.01)):
            if self.in_flight >= count:
                return
            time.sleep(0.01)
        raise AssertionError(f"{self.in_flight} requests in flight, not {count}")

    def wait_for(self, count: int, timeout: float = 5.0) -> list[Received]:
        """The requests once `count` have been recorded (a held request is recorded when its
        hold ends, which may be after its caller gave up on it)."""
        for _ in range(int(timeout / 0.01)):  # counted, not timed: tests may freeze the clock
            if len(self.requests) >= count:
                break
            time.sleep(0.01)
        return list(self.requests)

    def by_run(self) -> dict[str, list[Received]]:
        grouped: dict[str, list[Received]] = {}
        for request in self.requests:
            grouped.setdefault(request.headers.get("x-scheduler-run-id", ""), []).append(request)
        return grouped

    def __enter__(self) -> WebhookReceiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
