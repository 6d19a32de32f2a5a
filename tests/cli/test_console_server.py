"""The console server (scheduler_cli.console.server): it serves the page's files and nothing
else of the disk, forwards /v1 to the API signed with the user's credentials, and acts only
for the console page (a loopback Host, its header, its Origin). Driven through `handle`, as
the local cloud mounts it, and once over a real socket, as `scheduler console` serves it."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from scheduler_cli.client import ApiClient, ApiTarget, resolve_target
from scheduler_cli.console import cloudwatch
from scheduler_cli.console.server import STATIC, ConsoleServer, console_for, http_server
from scheduler_cli.console.views import ConsoleApi
from scheduler_cli.main import app
from scheduler_cli.state import CliState
from tests.cli.loopback import JOB_ID, LoopbackApi, job_body
from tests.cli.test_signing import CREDENTIALS, SECRET, signature_holds

HOST = {"Host": "127.0.0.1:8765"}
PAGE = HOST | {"X-Scheduler-Console": "1"}


def console(client: ApiClient | None = None, operator: Any = None, static: Path = STATIC) -> ConsoleServer:
    return ConsoleServer(client, ConsoleApi("local", "http://127.0.0.1:8080", operator), static)


def body_of(reply: tuple[int, dict[str, str], bytes]) -> Any:
    return json.loads(reply[2])


# --- the page's files ---------------------------------------------------------------------------


def test_the_page_and_its_modules_are_served_with_their_types_and_a_strict_policy() -> None:
    server = console()

    status, headers, page = server.handle("GET", "/console/", HOST, b"")
    assert status == 200
    assert headers["Content-Type"] == "text/html; charset=utf-8"
    assert b'<script type="module" src="/console/js/app.js">' in page
    assert "default-src 'self'" in headers["Content-Security-Policy"]
    assert "frame-ancestors 'none'" in headers["Content-Security-Policy"]
    for path, kind in [("/console/js/app.js", "text/javascript"), ("/console/app.css", "text/css")]:
        status, headers, _ = server.handle("GET", path, HOST, b"")
        assert (status, headers["Content-Type"].split(";")[0]) == (200, kind)
    assert server.handle("HEAD", "/console/app.css", HOST, b"")[0] == 200


def test_every_module_the_page_imports_is_there() -> None:
    """A module path mistyped in an import would blank the page in the browser only."""
    modules = sorted((STATIC / "js").rglob("*.js"))
    assert modules
    for module in modules:
        for line in module.read_text().splitlines():
            if line.startswith("import ") and " from " in line:
                target = line.rsplit(" from ", 1)[1].strip(' ";')
                assert (module.parent / target).resolve().is_file(), f"{module.name} imports {target}"


@pytest.mark.parametrize(
    "path",
    [
        "/console/../server.py",
        "/console/%2e%2e/server.py",
        "/console/js/../../server.py",
        "/console/js%2f..%2f..%2fserver.py",
        "/console//etc/passwd",
        "/console/%2fetc%2fpasswd",
        "/console/..%5cserver.py",
        "/console/vendor/.built",
        "/console/nothing-here.js",
    ],
)
def test_nothing_outside_the_static_files_is_served(path: str) -> None:
    status, _, body = console().handle("GET", path, HOST, b"")
    assert status == 404
    assert json.loads(body)["error"]["code"] == "NOT_FOUND"  # an error, not a file's text


def test_a_link_out_of_the_static_folder_is_not_followed(tmp_path: Path) -> None:
    static = tmp_path / "static"
    static.mkdir()
    (static / "index.html").write_text("<!doctype html>")
    (tmp_path / "secret.txt").write_text("the key")
    (static / "linked.txt").symlink_to(tmp_path / "secret.txt")
    server = console(static=static)

    assert server.handle("GET", "/console/", HOST, b"")[2] == b"<!doctype html>"
    assert server.handle("GET", "/console/linked.txt", HOST, b"")[0] == 404


def test_files_are_read_only_and_the_bare_paths_lead_to_the_page() -> None:
    server = console()
    assert server.handle("POST", "/console/index.html", PAGE, b"x")[0] == 405
    for path in ("/console", "/"):
        status, headers, _ = server.handle("GET", path, HOST, b"")
        assert (status, headers["Location"]) == (308, "/console/")


# --- acting only for the page ----------------------------------------------------------------


def test_a_host_that_is_not_loopback_is_refused() -> None:
    """A DNS-rebinding page reaches 127.0.0.1 under a name of its own."""
    for host in ("evil.example:8765", "127.0.0.1.evil.example", ""):
        status, _, body = console().handle("GET", "/console/", {"Host": host}, b"")
        assert status == 403, host
        assert json.loads(body)["error"]["code"] == "FORBIDDEN"
    for host in ("localhost:8765", "[::1]:8765", "127.0.0.1"):
        assert console().handle("GET", "/console/", {"Host": host}, b"")[0] == 200, host


def test_what_acts_needs_the_consoles_header_and_origin(api: LoopbackApi) -> None:
    api.answer("GET", "/v1/jobs", 200, {"items": [], "next_cursor": None})
    server = console(ApiClient(ApiTarget(api.url)))

    assert server.handle("GET", "/v1/jobs", HOST, b"")[0] == 403  # a cross-site <img> or form
    assert server.handle("POST", "/console/api/dlq/redrive", HOST, b"")[0] == 403
    foreign = PAGE | {"Origin": "https://evil.example"}
    assert server.handle("GET", "/v1/jobs", foreign, b"")[0] == 403
    assert api.requests == []

    same = PAGE | {"Origin": "http://127.0.0.1:8765"}
    assert server.handle("GET", "/v1/jobs", same, b"")[0] == 200
    assert len(api.requests) == 1


@pytest.fixture
def users_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """The user's AWS credentials in the environment, as `scheduler console` finds them."""
    for name, value in CREDENTIALS.items():
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)


# --- forwarding /v1 --------------------------------------------------------------------------


@pytest.mark.usefixtures("users_credentials")
def test_v1_is_forwarded_signed_with_the_users_credentials(api: LoopbackApi) -> None:
    api.answer("PATCH", f"/prod/v1/jobs/{JOB_ID}", 200, job_body(version=4))
    client = ApiClient(resolve_target(api_url=f"{api.url}/prod", region="eu-west-1"))
    server = console(client)
    sent = PAGE | {
        "Content-Type": "application/json",
        "If-Match": '"3"',
        "Cookie": "session=browser-only",
        "Authorization": "Bearer from-the-browser",
        "X-Local-Caller": "someone-else",
    }

    status, headers, body = server.handle("PATCH", f"/v1/jobs/{JOB_ID}?x=1", sent, b'{"name": "renamed"}')

    assert status == 200
    assert headers["content-type"] == "application/json"
    assert json.loads(body)["version"] == 4
    [request] = api.sent("PATCH", f"/prod/v1/jobs/{JOB_ID}")
    assert request.query == {"x": ["1"]}
    assert request.body == b'{"name": "renamed"}'
    assert request.headers["if-match"] == '"3"'
    for dropped in ("cookie", "x-local-caller", "x-scheduler-console"):
        assert dropped not in request.headers
    parts = signature_holds(
        "PATCH", f"{api.url}/prod/v1/jobs/{JOB_ID}?x=1", request.headers, request.body, SECRET
    )
    assert (parts["service"], parts["region"]) == ("execute-api", "eu-west-1")


def test_the_apis_errors_come_back_as_they_are_and_a_dead_api_is_a_502(api: LoopbackApi) -> None:
    details = [{"field": "schedule.cron", "message": "'61 * * * *' is not a valid cron expression"}]
    error = {"error": {"code": "VALIDATION_ERROR", "message": "check schedule.cron", "details": details}}
    api.answer("POST", "/v1/jobs", 400, error)
    server = console(ApiClient(ApiTarget(api.url)))

    assert body_of(server.handle("POST", "/v1/jobs", PAGE, b"{}")) == error
    assert server.handle("POST", "/v1/jobs", PAGE | {"X-Local-Caller": "bob"}, b"{}")[0] == 400
    assert api.requests[-1].headers["x-local-caller"] == "bob"  # unsigned: the local cloud's header

    gone = console(ApiClient(ApiTarget("http://127.0.0.1:9")))  # the discard port: nothing listens
    status, _, body = gone.handle("GET", "/v1/jobs", PAGE, b"")
    assert status == 502
    assert json.loads(body)["error"]["code"] == "CONSOLE_UPSTREAM"


def test_a_mounted_console_does_not_serve_the_api_itself() -> None:
    assert console(None).handle("GET", "/v1/jobs", PAGE, b"")[0] == 404


# --- the console's own routes ----------------------------------------------------------------


class FakeOperator:
    stack = "ServerlessScheduler"

    def dead_letters(self, limit: int = 50) -> list[dict[str, Any]]:
        return [{"message_id": "m1", "kind": "RUN_FAILED", "run_id": "j:1"}][:limit]

    def queue_depths(self) -> dict[str, dict[str, int]]:
        return {"high": {"visible": 2, "delayed": 0, "in_flight": 1}}


def test_config_says_what_this_console_reaches() -> None:
    config = body_of(console(operator=FakeOperator()).handle("GET", "/console/api/config", PAGE, b""))
    assert config == {
        "mode": "local",
        "api_url": "http://127.0.0.1:8080",
        "stack": "ServerlessScheduler",
        "operator": True,
        "metrics": False,
        "signed_as": None,
    }


def test_the_dlq_and_queues_come_from_the_operator_or_say_a_stack_is_needed() -> None:
    server = console(operator=FakeOperator())
    assert body_of(server.handle("GET", "/console/api/dlq?limit=1", PAGE, b""))["items"][0]["run_id"] == "j:1"
    assert body_of(server.handle("GET", "/console/api/queues", PAGE, b""))["queues"]["high"]["visible"] == 2
    assert server.handle("GET", "/console/api/dlq?limit=many", PAGE, b"")[0] == 400
    assert server.handle("GET", "/console/api/dlq/redrive", PAGE, b"")[0] == 405
    assert server.handle("GET", "/console/api/nothing", PAGE, b"")[0] == 404

    status, _, body = console().handle("GET", "/console/api/dlq", PAGE, b"")
    assert status == 404
    assert json.loads(body)["error"]["code"] == "NO_STACK"
    assert body_of(console().handle("GET", "/console/api/metrics", PAGE, b"")) == {"source": None}


def test_a_schedule_is_previewed_in_words_or_refused_field_by_field() -> None:
    server = console()
    ask = {"schedule": {"cron": "0 9 * * MON-FRI", "timezone": "Europe/Berlin"}, "count": 3, "job_id": "j"}
    preview = body_of(server.handle("POST", "/console/api/schedule", PAGE, json.dumps(ask).encode()))
    assert preview["words"].startswith("At 09:00, Monday through Friday")
    assert len(preview["firings"]) == 3
    assert all(
        f["local"].startswith(f["local"][:10]) and "T09:00:00" in f["local"] for f in preview["firings"]
    )

    bad = {"schedule": {"cron": "61 * * * *", "timezone": "Nowhere/Special"}}
    status, _, body = server.handle("POST", "/console/api/schedule", PAGE, json.dumps(bad).encode())
    assert status == 400
    fields = [d["field"] for d in json.loads(body)["error"]["details"]]
    assert fields == ["schedule.cron", "schedule.timezone"]
    assert server.handle("POST", "/console/api/schedule", PAGE, b"{not json")[0] == 400


def test_the_overview_reads_the_metrics_the_functions_publish() -> None:
    from infra.function import METRICS_NAMESPACE

    assert cloudwatch.NAMESPACE == METRICS_NAMESPACE
    expressions = " ".join(str(q.get("Expression", "")) for q in cloudwatch.overview_queries())
    for metric in (*cloudwatch.RUN_COUNTS.values(), cloudwatch.LATENESS):
        assert f'MetricName="{metric}"' in expressions


# --- over a socket ---------------------------------------------------------------------------


@pytest.fixture
def served() -> Iterator[str]:
    server = http_server(console().handle, 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_scheduler_console_serves_the_page_on_loopback(served: str) -> None:
    page = httpx.get(f"{served}/console/")
    assert page.status_code == 200
    assert "serverless-scheduler console" in page.text
    assert httpx.get(f"{served}/console/js/../../server.py").status_code == 404
    assert httpx.request("TRACE", f"{served}/console/").status_code == 405


# --- `scheduler console` ---------------------------------------------------------------------


@pytest.mark.usefixtures("users_credentials")
def test_a_deployed_console_signs_and_offers_cloudwatch_but_the_dlq_needs_a_stack() -> None:
    state = CliState(api_url="https://abc123.execute-api.eu-west-1.amazonaws.com/prod")

    config = body_of(console_for(state).handle("GET", "/console/api/config", PAGE, b""))

    assert config["mode"] == "deployed"
    assert config["api_url"] == "https://abc123.execute-api.eu-west-1.amazonaws.com/prod"
    assert (config["operator"], config["metrics"]) == (False, True)
    assert config["signed_as"] == "your default AWS credentials"


def test_the_command_says_why_it_cannot_start(runner: CliRunner) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = runner.invoke(
            app, ["--endpoint", "http://127.0.0.1:9", "console", "--port", str(port), "--no-open"]
        )
    assert result.exit_code == 2
    assert f"cannot listen on 127.0.0.1:{port}" in result.output

    result = runner.invoke(app, ["console", "--no-open"])  # no API named
    assert result.exit_code == 2
    assert "no API to talk to" in result.output
