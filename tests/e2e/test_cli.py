"""`scheduler`, the command line, against the local cloud: every command run for real (Typer's
CliRunner in this process, and once `.venv/bin/scheduler` as a subprocess), its API calls
going over HTTP to the local API Gateway, `dlq` talking to the local cloud's moto.

Each test's targets are paths of their own on the suite's receiver. The failures made here
are re-driven or dropped before the last test ends: the DLQ is left empty, as later tests
expect it."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from infra.local.cloud import LocalCloud
from scheduler_cli.main import app
from tests.e2e.api_client import ApiClient, unique_name
from tests.e2e.polling import API_POLL_INTERVAL_SECONDS, wait_for
from tests.support.receiver import WebhookReceiver

pytestmark = pytest.mark.e2e

MARGIN_SECONDS = 30  # a deadline for a failure message, not a measure
WAIT = ("--wait", "--wait-timeout", str(MARGIN_SECONDS))
SCHEDULER = Path(sys.executable).with_name("scheduler")
# What the shell running the tests has set must not point the command line elsewhere.
UNSET: dict[str, str | None] = {
    name: None
    for name in (
        "SCHEDULER_ENDPOINT",
        "SCHEDULER_API_URL",
        "SCHEDULER_STACK",
        "SCHEDULER_OUTPUT",
        "AWS_ENDPOINT_URL",
    )
}


class Cli:
    """`scheduler --endpoint <the local cloud> --aws-endpoint-url <its moto> ...` in process."""

    def __init__(self, cloud: LocalCloud) -> None:
        self.cloud = cloud
        self.runner = CliRunner(env=UNSET | {"SCHEDULER_AWS_ENDPOINT_URL": cloud.moto_url})

    def run(self, *args: str, code: int = 0) -> Result:
        result = self.runner.invoke(app, ["--endpoint", self.cloud.api_url, *args])
        assert result.exit_code == code, f"exit {result.exit_code}: {result.output}"
        return result

    def json(self, *args: str, code: int = 0) -> Any:
        return json.loads(self.run(*args, "--output", "json", code=code).stdout)


@pytest.fixture
def cli(local_cloud: LocalCloud) -> Cli:
    return Cli(local_cloud)


def five_minute_mark_before(moment: datetime) -> datetime:
    return moment.replace(minute=moment.minute - moment.minute % 5, second=0, microsecond=0)


def test_a_job_from_flags_through_every_verb(cli: Cli, receiver: WebhookReceiver) -> None:
    name = unique_name("cli-job")
    url = receiver.answer_on(name)
    job = cli.json(
        "jobs", "create", "--name", name, "--cron", "0 9 * * MON-FRI", "--tz", "Europe/Berlin",
        "--url", url, "--payload", '{"from": "cli"}', "--priority", "HIGH", "--max-attempts", "2",
    )  # fmt: skip
    job_id = job["job_id"]
    assert (job["status"], job["priority"], job["payload"]) == ("SCHEDULED", "HIGH", {"from": "cli"})
    assert job["schedule"]["cron"] == "0 9 * * MON-FRI"
    assert job["schedule"]["timezone"] == "Europe/Berlin"
    assert job["retry"]["max_attempts"] == 2

    # The next firings, computed by the command line, start where the scheduler's does.
    firings = cli.json("jobs", "next", job_id, "--count", "3")["firings"]
    assert firings[0]["fire_at"] == job["next_fire_at"]
    assert all(f["local"][11:19] == "09:00:00" for f in firings)

    listed = cli.json("jobs", "list", "--name-prefix", name, "--status", "SCHEDULED")
    assert [item["job_id"] for item in listed["items"]] == [job_id]
    assert cli.json("jobs", "list", "--name-prefix", name, "--status", "PAUSED")["items"] == []
    assert cli.json("jobs", "get", job_id)["name"] == name
    assert job_id in cli.run("jobs", "list", "--name-prefix", name).stdout  # the table

    # A schedule flag changes the cron and keeps the time zone.
    updated_at = datetime.now(UTC)
    updated = cli.json("jobs", "update", job_id, "--cron", "*/5 * * * *")
    assert (updated["schedule"]["cron"], updated["schedule"]["timezone"]) == ("*/5 * * * *", "Europe/Berlin")

    assert cli.json("jobs", "pause", job_id)["status"] == "PAUSED"
    listed = cli.json("jobs", "list", "--name-prefix", name, "--status", "PAUSED")
    assert [item["job_id"] for item in listed["items"]] == [job_id]
    assert cli.json("jobs", "resume", job_id)["status"] == "SCHEDULED"

    run = cli.json("jobs", "trigger", job_id, *WAIT)
    assert (run["status"], run["trigger"], run["response_code"]) == ("SUCCEEDED", "MANUAL", 200)
    assert [r.body for r in receiver.at(name) if r.headers["x-scheduler-run-id"] == run["run_id"]] == [
        {"from": "cli"}
    ]
    runs = cli.json("runs", "list", job_id, "--status", "SUCCEEDED")["items"]
    assert run["run_id"] in [r["run_id"] for r in runs]
    assert cli.json("runs", "get", run["run_id"]) == run

    # Three five-minute marks before the change, none of which had a run.
    end = five_minute_mark_before(updated_at)
    backfill = ("--start", (end - timedelta(minutes=10)).isoformat(), "--end", end.isoformat())
    assert cli.json("jobs", "backfill", job_id, *backfill) == {"runs": 3, "already_run": 0}

    assert cli.json("jobs", "delete", job_id)["status"] == "CANCELLED"
    refused = cli.run("jobs", "pause", job_id, code=1)
    assert refused.stderr.startswith("error: CONFLICT (HTTP 409): ")


def test_a_job_from_a_yaml_file(cli: Cli, receiver: WebhookReceiver, tmp_path: Path) -> None:
    name = unique_name("cli-yaml")
    at = (datetime.now(UTC) + timedelta(hours=2)).replace(microsecond=0)
    spec = tmp_path / "job.yaml"
    spec.write_text(
        f"name: placeholder\n"
        f"schedule:\n  at: {at.isoformat()}\n"
        f"target:\n  type: HTTP\n  url: {receiver.answer_on(name)}\n  headers: {{X-Source: yaml}}\n"
        f"payload:\n  rows: [1, 2]\n"
        f"misfire: SKIP\n"
    )

    job = cli.json("jobs", "create", "--file", str(spec), "--name", name)

    assert job["name"] == name  # the flag wins over the file
    assert job["schedule"]["at"] == at.isoformat().replace("+00:00", ".000Z")
    assert job["target"]["headers"] == {"X-Source": "yaml"}
    assert (job["payload"], job["misfire"]) == ({"rows": [1, 2]}, "SKIP")
    assert cli.json("jobs", "delete", job["job_id"])["status"] == "CANCELLED"


def test_jobs_from_a_yaml_file_in_a_batch_made_once_however_often_sent(
    cli: Cli, receiver: WebhookReceiver, tmp_path: Path
) -> None:
    name = unique_name("cli-batch")
    url = receiver.answer_on(name)
    at = (datetime.now(UTC) + timedelta(hours=2)).replace(microsecond=0)
    spec = tmp_path / "jobs.yaml"
    spec.write_text(
        f"- {{name: {name}-at, schedule: {{at: {at.isoformat()}}}, target: {{type: HTTP, url: '{url}'}}}}\n"
        f"- name: {name}-cron\n"
        f"  schedule: {{cron: '0 9 * * MON-FRI', timezone: Europe/Berlin}}\n"
        f"  target: {{type: HTTP, url: '{url}'}}\n"
        f"- {{name: {name}-rate, schedule: {{rate: 5 minutes}}, target: {{type: HTTP, url: '{url}'}}}}\n"
    )
    key = ("--idempotency-key", name)

    made = cli.json("jobs", "create-batch", str(spec), *key)["jobs"]
    again = cli.json("jobs", "create-batch", str(spec), *key)["jobs"]  # a re-run makes nothing

    assert [job["name"] for job in made] == [f"{name}-at", f"{name}-cron", f"{name}-rate"]
    assert made[0]["schedule"]["at"] == at.isoformat().replace("+00:00", ".000Z")
    assert made[1]["schedule"]["timezone"] == "Europe/Berlin"
    assert [job["job_id"] for job in again] == [job["job_id"] for job in made]
    listed = cli.json("jobs", "list", "--name-prefix", name, "--all")["items"]
    assert sorted(job["job_id"] for job in listed) == sorted(job["job_id"] for job in made)
    table = cli.run("jobs", "create-batch", str(spec), *key).stdout
    assert all(job["job_id"] in table for job in made)

    # One job refused refuses the whole batch, the error naming it.
    spec.write_text(spec.read_text().replace(name, f"{name}-x").replace("0 9 * * MON-FRI", "61 * * * *"))
    refused = cli.run("jobs", "create-batch", str(spec), code=1)
    assert "jobs[1].schedule.cron" in refused.stderr
    assert cli.json("jobs", "list", "--name-prefix", f"{name}-x")["items"] == []
    for job in made:
        assert cli.json("jobs", "delete", job["job_id"])["status"] == "CANCELLED"


def test_failed_runs_are_retried_and_the_dlq_listed_and_redriven(
    cli: Cli, api: ApiClient, receiver: WebhookReceiver
) -> None:
    """Two jobs whose targets answer 404 once, then 200: one's failed run is retried over
    the API, the other's re-driven from the DLQ (which drops the first one's record too)."""
    ids = {}
    for purpose in ("retried", "redriven"):
        name = unique_name(f"cli-{purpose}")
        url = receiver.answer_on(name, statuses=(404,))
        ids[purpose] = cli.json(
            "jobs", "create", "--name", name, "--at", "+2h", "--url", url, "--max-attempts", "1"
        )["job_id"]  # fmt: skip
    failed = {}
    for purpose, job_id in ids.items():
        result = cli.run("jobs", "trigger", job_id, *WAIT, "--output", "json", code=1)
        failed[purpose] = json.loads(result.stdout)
        assert failed[purpose]["status"] == "FAILED"
        assert f"ended FAILED: {failed[purpose]['error']}" in result.stderr

    retried = cli.json("runs", "retry", failed["retried"]["run_id"], *WAIT)
    assert (retried["status"], retried["trigger"], retried["attempt"]) == ("SUCCEEDED", "RETRY", 2)
    shown = cli.run("runs", "get", retried["run_id"]).stdout  # the table: every attempt, its error
    attempt_lines = shown[shown.index("attempts") :].splitlines()
    [first] = [line for line in attempt_lines if line.strip().startswith("1 ")]
    [second] = [line for line in attempt_lines if line.strip().startswith("2 ")]
    assert "FAILED" in first
    assert "HTTP 404" in first
    assert "SUCCEEDED" in second
    assert "200" in second

    failed_runs = {run["run_id"] for run in failed.values()}

    def both_records() -> list[dict[str, Any]] | None:
        letters = cli.json("dlq", "list")["items"]
        return letters if failed_runs <= {letter["run_id"] for letter in letters} else None

    letters = wait_for(both_records, 10, "the DLQ records of both failed runs", API_POLL_INTERVAL_SECONDS)
    mine = [letter for letter in letters if letter["run_id"] in failed_runs]
    assert {(letter["kind"], letter["attempts"], letter["response_code"]) for letter in mine} == {
        ("RUN_FAILED", 1, 404)
    }
    assert all(letter["reason"].startswith("failed after 1 attempt(s): HTTP 404") for letter in mine)
    assert failed_runs <= {letter["run_id"] for letter in cli.json("dlq", "list")["items"]}  # still there

    report = cli.json("dlq", "redrive")
    assert report["redriven"] >= 1
    assert report["stale"] >= 1  # the retried run's record: it had moved on

    redriven = wait_for(
        lambda: api.run_in_status(ids["redriven"], "SUCCEEDED"),
        MARGIN_SECONDS,
        "the re-driven run to succeed",
        API_POLL_INTERVAL_SECONDS,
    )
    assert (redriven["trigger"], redriven["attempt"]) == ("RETRY", 2)
    depths = cli.json("dlq", "depths")
    assert set(depths) == {"high", "normal", "low", "dlq"}
    assert depths["dlq"]["visible"] + depths["dlq"]["in_flight"] == 0
    for job_id in ids.values():
        assert cli.json("jobs", "get", job_id)["status"] == "SCHEDULED"  # a one-off in two hours
        cli.json("jobs", "delete", job_id)


def test_a_workflow_from_a_file_runs_and_its_run_is_drawn_as_a_tree(
    cli: Cli, receiver: WebhookReceiver, tmp_path: Path
) -> None:
    name = unique_name("cli-workflow")
    urls = {task: receiver.answer_on(f"{name}/{task}") for task in ("extract", "load", "report")}
    spec = tmp_path / "etl.json"
    spec.write_text(
        json.dumps(
            {
                "name": name,
                "tasks": [
                    {"task_id": "extract", "target": {"type": "HTTP", "url": urls["extract"]}},
                    {
                        "task_id": "load",
                        "depends_on": ["extract"],
                        "target": {"type": "HTTP", "url": urls["load"]},
                    },
                    {
                        "task_id": "report",
                        "depends_on": ["load"],
                        "target": {"type": "HTTP", "url": urls["report"]},
                    },
                ],
            }
        )
    )

    workflow = cli.json("workflows", "create", "-f", str(spec))
    workflow_id = workflow["workflow_id"]
    listed = cli.json("workflows", "list", "--name-prefix", name)
    assert [item["workflow_id"] for item in listed["items"]] == [workflow_id]

    run = cli.json("workflows", "trigger", workflow_id, *WAIT)
    assert run["status"] == "SUCCEEDED"
    assert {task: state["status"] for task, state in run["tasks"].items()} == dict.fromkeys(urls, "SUCCEEDED")
    run_id = run["workflow_run_id"]
    assert [
        item["workflow_run_id"] for item in cli.json("workflows", "runs", "list", workflow_id)["items"]
    ] == [run_id]
    assert cli.json("workflows", "runs", "get", run_id) == run

    tree = [line.rstrip() for line in cli.run("workflows", "runs", "get", run_id).stdout.splitlines()]
    assert tree[0].startswith(f"workflow run {run_id}  SUCCEEDED  MANUAL")
    assert tree[1].startswith("└── extract  SUCCEEDED  attempt 1  HTTP 200")
    assert tree[2].startswith("    └── load  SUCCEEDED  attempt 1  HTTP 200")
    assert tree[3].startswith("        └── report  SUCCEEDED  attempt 1  HTTP 200")
    assert cli.json("workflows", "delete", workflow_id)["status"] == "CANCELLED"


def test_the_installed_command_takes_the_line_make_run_prints(
    local_cloud: LocalCloud, cloud_output: io.StringIO
) -> None:
    local_cloud.describe()  # what `make run` prints at start-up
    printed = cloud_output.getvalue().splitlines()
    [line] = [line for line in printed if "export SCHEDULER_ENDPOINT=" in line][-1:]
    exported = dict(word.split("=", 1) for word in line.split("export", 1)[1].split())
    assert exported == {
        "SCHEDULER_ENDPOINT": local_cloud.api_url,
        "SCHEDULER_AWS_ENDPOINT_URL": local_cloud.moto_url,
    }
    env = {k: v for k, v in os.environ.items() if k not in UNSET} | exported

    def scheduler(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(SCHEDULER), *args], env=env, capture_output=True, text=True, timeout=60, check=False
        )

    listed = scheduler("jobs", "list", "--limit", "1", "-o", "json")
    depths = scheduler("dlq", "depths", "-o", "json")
    missing = scheduler("jobs", "get", "no-such-job")

    assert listed.returncode == 0, listed.stderr
    assert set(json.loads(listed.stdout)) == {"items", "next_cursor"}
    assert depths.returncode == 0, depths.stderr
    assert set(json.loads(depths.stdout)) == {"high", "normal", "low", "dlq"}
    assert missing.returncode == 1
    assert missing.stdout == ""
    assert missing.stderr.startswith("error: NOT_FOUND (HTTP 404): ")
