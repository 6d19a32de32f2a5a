"""What the command line sends and prints, against a stand-in API on loopback over real
HTTP: the request bodies built from flags and files, `--output json` as the API's own body,
and an API error as exit 1 with its code, message and fields on stderr."""

from __future__ import annotations

import json
import socket
from datetime import UTC, datetime, timedelta

from typer.testing import CliRunner, Result

from scheduler_cli.main import app
from tests.cli.loopback import JOB_ID, LoopbackApi, error_body, job_body
from tests.cli.printed import flat

JOB = f"/v1/jobs/{JOB_ID}"
RUN_ID = f"{JOB_ID}:1795695216983"


def run(runner: CliRunner, api: LoopbackApi, *args: str) -> Result:
    return runner.invoke(app, ["--endpoint", api.url, *args])


def test_json_output_is_the_apis_body_alone(runner: CliRunner, api: LoopbackApi) -> None:
    api.answer("GET", JOB, 200, job_body())

    result = run(runner, api, "jobs", "get", JOB_ID, "-o", "json")

    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == job_body()
    assert result.stderr == ""
    [request] = api.requests
    assert "authorization" not in request.headers  # the local cloud is not signed


def test_the_table_shows_the_job(runner: CliRunner, api: LoopbackApi) -> None:
    api.answer("GET", JOB, 200, job_body())

    result = run(runner, api, "jobs", "get", JOB_ID)

    assert result.exit_code == 0, result.output
    printed = flat(result.stdout)
    assert f"job_id {JOB_ID}" in printed
    assert "schedule cron 0 9 * * MON-FRI (Europe/Berlin) ±300s" in printed


def test_an_api_error_exits_1_with_its_code_message_and_field_on_stderr(
    runner: CliRunner, api: LoopbackApi
) -> None:
    details = [{"field": "schedule.cron", "message": "'61 * * * *' is not a valid cron expression"}]
    api.answer(
        "POST",
        "/v1/jobs",
        400,
        error_body("VALIDATION_ERROR", "invalid request: check schedule.cron", details),
    )

    result = run(
        runner,
        api,
        "-o",
        "json",
        "jobs",
        "create",
        "--name",
        "x",
        "--cron",
        "61 * * * *",
        "--url",
        "https://e.x/h",
    )

    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        "error: VALIDATION_ERROR (HTTP 400): invalid request: check schedule.cron",
        "  schedule.cron: '61 * * * *' is not a valid cron expression",
    ]


def test_api_gateways_own_refusal_is_an_error_too(runner: CliRunner, api: LoopbackApi) -> None:
    api.answer("GET", "/v1/jobs", 403, {"message": "Missing Authentication Token"})

    result = run(runner, api, "jobs", "list")

    assert result.exit_code == 1
    assert result.stderr.strip() == "error: FORBIDDEN (HTTP 403): Missing Authentication Token"


def test_an_endpoint_with_nothing_listening_exits_1(runner: CliRunner) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed again: nothing listens there

    result = runner.invoke(app, ["--endpoint", f"http://127.0.0.1:{port}", "jobs", "list"])

    assert result.exit_code == 1
    assert result.stderr.startswith(f"error: UNREACHABLE: no answer from http://127.0.0.1:{port}")


def test_create_from_flags_sends_the_job(runner: CliRunner, api: LoopbackApi) -> None:
    api.answer("POST", "/v1/jobs", 201, job_body())
    before = datetime.now(UTC)

    result = run(
        runner, api, "jobs", "create", "--name", "hello", "--at", "+10m", "--url", "https://e.x/h",
        "-H", "X-Team: a", "--header", "X-Env=prod", "--payload", '{"n": 1}', "--priority", "HIGH",
        "--max-attempts", "5", "--overlap", "ALLOW", "--idempotency-key", "order-42",
    )  # fmt: skip

    assert result.exit_code == 0, result.output
    [request] = api.sent("POST", "/v1/jobs")
    body = request.json()
    at = datetime.fromisoformat(body["schedule"].pop("at").replace("Z", "+00:00"))
    assert (
        before + timedelta(minutes=10) - timedelta(seconds=1)
        <= at
        <= datetime.now(UTC) + timedelta(minutes=10)
    )
    assert body == {
        "name": "hello",
        "schedule": {},
        "target": {"type": "HTTP", "url": "https://e.x/h", "headers": {"X-Team": "a", "X-Env": "prod"}},
        "payload": {"n": 1},
        "priority": "HIGH",
        "retry": {"max_attempts": 5},
        "concurrency": {"overlap": "ALLOW"},
    }
    assert request.headers["idempotency-key"] == "order-42"
    assert request.headers["content-type"] == "application/json"


def test_create_from_a_yaml_file_with_flags_winning(runner: CliRunner, api: LoopbackApi, tmp_path) -> None:
    api.answer("POST", "/v1/jobs", 201, job_body())
    job = tmp_path / "job.yaml"
    job.write_text(
        "name: from-file\n"
        "schedule: {cron: '0 9 * * MON-FRI', timezone: Europe/Berlin, jitter_seconds: 60}\n"
        "target: {type: SQS, queue_url: 'https://sqs.eu-west-1.amazonaws.com/123456789012/q'}\n"
        "payload: {when: 2026-01-01}\n"
    )

    result = run(runner, api, "jobs", "create", "-f", str(job), "--cron", "0 10 * * *", "--name", "flagged")

    assert result.exit_code == 0, result.output
    assert api.sent("POST", "/v1/jobs")[0].json() == {
        "name": "flagged",
        "schedule": {"cron": "0 10 * * *", "timezone": "Europe/Berlin", "jitter_seconds": 60},
        "target": {"type": "SQS", "queue_url": "https://sqs.eu-west-1.amazonaws.com/123456789012/q"},
        "payload": {"when": "2026-01-01"},
    }


def test_update_changes_part_of_the_schedule_and_keeps_the_rest(runner: CliRunner, api: LoopbackApi) -> None:
    api.answer("GET", JOB, 200, job_body())
    api.answer("PATCH", JOB, 200, job_body())

    result = run(
        runner, api, "jobs", "update", JOB_ID, "--cron", "30 9 * * *", "--backoff", "5", "--if-match", "3"
    )

    assert result.exit_code == 0, result.output
    [patch] = api.sent("PATCH", JOB)
    assert patch.json() == {
        "schedule": {"cron": "30 9 * * *", "timezone": "Europe/Berlin", "jitter_seconds": 300},
        "retry": {"max_attempts": 3, "backoff_seconds": 5, "max_backoff_seconds": 3600.0},
    }
    assert patch.headers["if-match"] == '"3"'


def test_update_to_another_kind_of_schedule_drops_the_old_one(runner: CliRunner, api: LoopbackApi) -> None:
    api.answer("GET", JOB, 200, job_body())
    api.answer("PATCH", JOB, 200, job_body())

    result = run(runner, api, "jobs", "update", JOB_ID, "--at", "2031-01-01T09:00:00")

    assert result.exit_code == 0, result.output
    assert api.sent("PATCH", JOB)[0].json() == {
        "schedule": {"at": "2031-01-01T09:00:00", "timezone": "Europe/Berlin", "jitter_seconds": 300}
    }


def test_a_target_flag_replaces_the_whole_target_without_reading_the_job(
    runner: CliRunner, api: LoopbackApi
) -> None:
    api.answer("PATCH", JOB, 200, job_body())

    result = run(runner, api, "jobs", "update", JOB_ID, "--url", "https://e.x/new", "--name", "renamed")

    assert result.exit_code == 0, result.output
    assert api.sent("GET", JOB) == []  # secret headers read back as ***: never merged
    assert api.sent("PATCH", JOB)[0].json() == {
        "name": "renamed",
        "target": {"type": "HTTP", "url": "https://e.x/new"},
    }


def test_list_sends_the_filters_and_all_follows_the_cursor(runner: CliRunner, api: LoopbackApi) -> None:
    first, second = job_body(job_id="a" * 32), job_body(job_id="b" * 32)
    api.answer("GET", "/v1/jobs", 200, {"items": [first], "next_cursor": "page-2"})
    api.answer("GET", "/v1/jobs", 200, {"items": [second], "next_cursor": None})

    result = run(
        runner, api, "-o", "json", "jobs", "list", "--status", "PAUSED", "--name-prefix", "bill", "--all"
    )

    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"items": [first, second], "next_cursor": None}
    queries = [r.query for r in api.sent("GET", "/v1/jobs")]
    assert queries == [
        {"status": ["PAUSED"], "name_prefix": ["bill"]},
        {"status": ["PAUSED"], "name_prefix": ["bill"], "cursor": ["page-2"]},
    ]


def test_trigger_wait_polls_the_run_until_it_ends(runner: CliRunner, api: LoopbackApi) -> None:
    running = {"run_id": RUN_ID, "job_id": JOB_ID, "status": "PENDING", "error": None}
    api.answer("POST", f"{JOB}/trigger", 202, running)
    api.answer("GET", f"{JOB}/runs/{RUN_ID}", 200, running | {"status": "RUNNING"})
    api.answer("GET", f"{JOB}/runs/{RUN_ID}", 200, running | {"status": "SUCCEEDED"})

    result = run(runner, api, "jobs", "trigger", JOB_ID, "--wait", "-o", "json")

    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["status"] == "SUCCEEDED"
    assert len(api.sent("GET", f"{JOB}/runs/{RUN_ID}")) == 2


def test_trigger_wait_exits_1_when_the_run_fails(runner: CliRunner, api: LoopbackApi) -> None:
    pending = {"run_id": RUN_ID, "job_id": JOB_ID, "status": "PENDING", "error": None}
    api.answer("POST", f"{JOB}/trigger", 202, pending)
    api.answer(
        "GET", f"{JOB}/runs/{RUN_ID}", 200, pending | {"status": "FAILED", "error": "HTTP 404 from e.x"}
    )

    result = run(runner, api, "jobs", "trigger", JOB_ID, "--wait", "-o", "json")

    assert result.exit_code == 1
    assert json.loads(result.stdout)["status"] == "FAILED"  # the run as it ended, still on stdout
    assert f"error: run {RUN_ID} ended FAILED: HTTP 404 from e.x" in result.stderr


def test_a_run_id_names_its_job(runner: CliRunner, api: LoopbackApi) -> None:
    api.answer("POST", f"{JOB}/runs/{RUN_ID}/retry", 202, {"run_id": RUN_ID, "status": "RETRYING"})

    result = run(runner, api, "runs", "retry", RUN_ID, "-o", "json")

    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"run_id": RUN_ID, "status": "RETRYING"}


def test_a_workflow_from_flags(runner: CliRunner, api: LoopbackApi) -> None:
    api.answer("POST", "/v1/workflows", 201, {"workflow_id": "w1", "name": "etl", "status": "SCHEDULED"})
    extract = '{"task_id": "extract", "target": {"type": "HTTP", "url": "https://e.x/1"}}'
    load = (
        '{"task_id": "load", "depends_on": ["extract"], "target": {"type": "HTTP", "url": "https://e.x/2"}}'
    )

    result = run(
        runner, api, "-o", "json", "workflows", "create", "--name", "etl", "--task", extract, "--task", load,
        "--cron", "0 2 * * *", "--tz", "Europe/Berlin", "--misfire", "SKIP",
    )  # fmt: skip

    assert result.exit_code == 0, result.output
    assert api.sent("POST", "/v1/workflows")[0].json() == {
        "name": "etl",
        "tasks": [json.loads(extract), json.loads(load)],
        "schedule": {"cron": "0 2 * * *", "timezone": "Europe/Berlin"},
        "misfire": "SKIP",
    }


def test_tenant_shows_the_external_id_roles_must_require(runner: CliRunner, api: LoopbackApi) -> None:
    body = {
        "tenant": "AIDAEXAMPLEUSERID123",
        "principal_arn": "arn:aws:iam::123456789012:user/alice",
        "external_id": "AIDAEXAMPLEUSERID123",
    }
    api.answer("GET", "/v1/tenant", 200, body)

    table = run(runner, api, "tenant")
    as_json = run(runner, api, "tenant", "-o", "json")

    assert table.exit_code == 0, table.output
    assert "external id AIDAEXAMPLEUSERID123" in flat(table.stdout)
    assert json.loads(as_json.stdout) == body
