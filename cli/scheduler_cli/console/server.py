"""The console's server: one object that answers `(method, path, headers, body)` with
`(status, headers, body)`, so the same code serves the page in the local cloud (mounted in
its API Gateway under /console/) and behind `scheduler console` (a ThreadingHTTPServer on
127.0.0.1 for a deployed stack, as `kubectl proxy` is for Kubernetes).

- GET /console/...: the page's files (static/; /console/ is index.html). Nothing outside
  static/ is served, nor any dotfile.
- /v1/...: forwarded to the API through the CLI's ApiClient, signed with SigV4 for a deployed
  stack: the browser never holds an AWS key, and the page speaks only the public API.
- /console/api/...: the console's own routes (console.views): DLQ, queues, CloudWatch,
  schedule previews.

A server on loopback that signs whatever reaches it must not sign for other web pages open in
the same browser. So every request needs a loopback Host (a DNS-rebinding page has its own
name there), and the requests it forwards or acts on also need the `X-Scheduler-Console`
header (a cross-site form or <img> cannot send one; a script on another origin would need
a CORS preflight, which this server never grants) and, when the browser says where they come
from, an Origin of this server.
"""

from __future__ import annotations

from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import boto3
import httpx
from botocore.exceptions import BotoCoreError, ClientError

from scheduler_cli.client import ApiClient, TargetNotFound
from scheduler_cli.console import cloudwatch
from scheduler_cli.console.views import ConsoleApi, Reply, error_reply
from scheduler_cli.operator import Operator, StackNotReady
from scheduler_cli.state import CliState

STATIC = Path(__file__).parent / "static"
PREFIX = "/console/"
API_PREFIX = "/console/api/"
CONSOLE_HEADER = "x-scheduler-console"
LOCAL_REGION = "us-east-1"  # the local cloud's (infra/local/deployment.py REGION)
LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})
_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".json": "application/json",
    ".LICENSE": "text/plain; charset=utf-8",
}
# What the page may say to the API; nothing else of the browser's (cookies, its own
# Authorization) goes on, and the signature is added here.
_REQUEST_HEADERS = frozenset({"content-type", "accept", "if-match", "idempotency-key"})
_LOCAL_CALLER = "x-local-caller"  # the local cloud's "act as" header: unsigned targets only
_RESPONSE_HEADERS = frozenset({"content-type", "etag", "retry-after", "x-amzn-errortype", "x-amzn-requestid"})
_PAGE_HEADERS = {
    "Cache-Control": "no-cache",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
}


class ConsoleUnavailable(Exception):
    """`scheduler console` cannot start: the message says why and what to pass."""


class ConsoleServer:
    """`client`: where /v1 goes (None where the mount's owner serves /v1 itself, as the local
    cloud's gateway does); `api`: the /console/api routes."""

    def __init__(self, client: ApiClient | None, api: ConsoleApi, static_dir: Path = STATIC) -> None:
        self._client = client
        self._api = api
        self._static = static_dir.resolve()

    def handle(self, method: str, raw_path: str, headers: dict[str, str], body: bytes) -> Reply:
        url = urlsplit(raw_path)
        path = url.path
        lowered = {name.lower(): value for name, value in headers.items()}
        if not _loopback_host(lowered.get("host", "")):
            return error_reply(403, "FORBIDDEN", "the console answers only to 127.0.0.1 or localhost")
        if path in ("/", "/console"):
            return 308, {"Location": PREFIX, "Content-Length": "0"}, b""
        acts = path.startswith(API_PREFIX) or path == "/v1" or path.startswith("/v1/")
        if acts:
            refused = _cross_site(lowered)
            if refused is not None:
                return error_reply(403, "FORBIDDEN", refused)
        if path.startswith(API_PREFIX):
            return self._api.handle(method, path[len(API_PREFIX) :], url.query, body)
        if path.startswith(PREFIX):
            return self._file(method, path[len(PREFIX) :])
        if acts:
            return self._forward(method, path + (f"?{url.query}" if url.query else ""), lowered, body)
        return error_reply(404, "NOT_FOUND", f"nothing at {path}: the console is at {PREFIX}")

    # --- the page's files -------------------------------------------------------------------

    def _file(self, method: str, relative: str) -> Reply:
        if method not in ("GET", "HEAD"):
            return error_reply(405, "METHOD_NOT_ALLOWED", "the console's files are read-only")
        found = self._resolve(unquote(relative) or "index.html")
        if found is None:
            return error_reply(404, "NOT_FOUND", f"no console file {relative!r}")
        kind = _TYPES.get(found.suffix, "application/octet-stream")
        return 200, {"Content-Type": kind, **_PAGE_HEADERS}, found.read_bytes()

    def _resolve(self, relative: str) -> Path | None:
        """The file of static/ at `relative`; None for anything else (`..`, dotfiles, absolute
        paths, backslashes, a symlink out of static/)."""
        parts = relative.split("/")
        if "\\" in relative or "\x00" in relative or any(not p or p.startswith(".") for p in parts):
            return None
        found = (self._static / relative).resolve()
        if not found.is_relative_to(self._static) or not found.is_file():
            return None
        return found

    # --- the API -------------------------------------------------------------------------

    def _forward(self, method: str, path: str, headers: dict[str, str], body: bytes) -> Reply:
        if self._client is None:
            return error_reply(404, "NOT_FOUND", "this console server does not serve the API")
        sent = {name: value for name, value in headers.items() if name in _REQUEST_HEADERS}
        if _LOCAL_CALLER in headers and not self._client.target.signed:
            sent[_LOCAL_CALLER] = headers[_LOCAL_CALLER]
        try:
            answer = self._client.send(method, path, body=body or None, headers=sent)
        except TargetNotFound as error:
            return error_reply(502, "CONSOLE_CREDENTIALS", str(error))
        except httpx.HTTPError as error:
            return error_reply(502, "CONSOLE_UPSTREAM", f"the API at {self._client.target.base_url}: {error}")
        out = {name: value for name, value in answer.headers.items() if name.lower() in _RESPONSE_HEADERS}
        return answer.status_code, out | {"Cache-Control": "no-store"}, answer.content


def _loopback_host(host: str) -> bool:
    name = host.rsplit(":", 1)[0] if not host.startswith("[") else host[1:].split("]", 1)[0]
    return name.lower() in LOOPBACK


def _cross_site(headers: dict[str, str]) -> str | None:
    """Why a request that acts is refused, or None: it must carry the console's header, and an
    Origin (when the browser sends one) of this very server."""
    if headers.get(CONSOLE_HEADER) != "1":
        return f"a console request carries the header '{CONSOLE_HEADER}: 1' (the console page sends it)"
    origin = headers.get("origin")
    if origin is not None and origin != f"http://{headers.get('host', '')}":
        return f"a request from {origin} is not the console's"
    return None


# --- `scheduler console` ---------------------------------------------------------------------


# (method, path with its query, headers, body) → (status, headers, body)
Answer = Callable[[str, str, dict[str, str], bytes], tuple[int, dict[str, str], bytes]]


def http_server(answer: Answer, port: int, host: str = "127.0.0.1") -> ThreadingHTTPServer:
    """A stdlib HTTP/1.1 server on `host:port` (0: any free port) where `answer` answers every
    request, whatever its method (http.server would answer 501 for a method it has no
    `do_<METHOD>` for). The console's, and the local cloud's API Gateway."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _handle(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            status, headers, payload = answer(self.command, self.path, dict(self.headers), body)
            self.send_response(status)
            for name, value in headers.items():
                if name.lower() not in ("content-length", "connection", "transfer-encoding"):
                    self.send_header(name, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(payload)

        def __getattr__(self, name: str) -> Any:
            if name.startswith("do_"):
                return self._handle
            raise AttributeError(name)

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    return server


def console_for(state: CliState) -> ConsoleServer:
    """The console of the API `state` names: signed with the user's credentials for a deployed
    stack, with the operator's views when --stack names it."""
    try:
        client = state.client()
    except TargetNotFound as error:
        raise ConsoleUnavailable(str(error)) from error
    target = client.target
    operator = None
    metrics: Callable[[], dict[str, Any]] | None = None
    session = target.session
    if session is not None:
        metrics = lambda: cloudwatch.stack_overview(session)  # noqa: E731
        if state.stack:
            try:
                operator = Operator.for_stack(session, state.stack)
            except (StackNotReady, BotoCoreError, ClientError) as error:
                raise ConsoleUnavailable(f"stack {state.stack!r}: {error}") from error
    mode = "deployed" if target.signed else "local"
    signed_as = (state.profile or "your default AWS credentials") if target.signed else None
    return ConsoleServer(client, ConsoleApi(mode, target.base_url, operator, metrics, signed_as))


def serve_console(
    state: CliState,
    *,
    port: int,
    open_browser: bool,
    announce: Callable[[str], Any],
    opener: Callable[[str], Any],
) -> None:
    """Serve until Ctrl-C (or the server is shut down), printing the URL first."""
    console = console_for(state)
    try:
        server = http_server(console.handle, port)
    except OSError as error:
        raise ConsoleUnavailable(f"cannot listen on 127.0.0.1:{port}: {error} (try --port 0)") from error
    url = f"http://127.0.0.1:{server.server_address[1]}{PREFIX}"
    target = state.client().target
    announce(f"The console: {url}")
    announce(f"  API {target.base_url}" + ("  (signed with your AWS credentials)" if target.signed else ""))
    if target.signed and not state.stack:
        announce("  DLQ and queues: pass --stack NAME to see them")
    if not target.signed:
        announce(
            f"  the local cloud serves this console with its DLQ and queues at {target.base_url}{PREFIX}"
        )
    announce("Ctrl-C stops it.")
    if open_browser:
        opener(url)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


def local_cloud_console(api_url: str, endpoint_url: str, stack: str) -> ConsoleServer:
    """The console the local cloud mounts at /console/ of its API Gateway (which serves /v1
    itself): its DLQ and queue views read the stack on moto, with moto's fake credentials."""
    session = boto3.session.Session(
        aws_access_key_id="local", aws_secret_access_key="local", region_name=LOCAL_REGION
    )
    operator = Operator.for_stack(session, stack, endpoint_url=endpoint_url)
    return ConsoleServer(None, ConsoleApi("local", api_url, operator))
