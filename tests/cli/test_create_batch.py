"""`scheduler jobs create-batch FILE`, against the stand-in API on loopback: a file of jobs
sent as consecutive batches of 100 (`POST /v1/jobs/batch`), batch n with the key `KEY#n`; a
batch that fails stops the command, printing what was made and the error with the file's
job numbers; a file that holds no list of jobs is a usage error before any request."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner, Result

from scheduler_cli.main import app
from tests.cli.loopback import LoopbackApi, error_body, job_body
from tests.cli.printed import flat

BATCH = "/v1/jobs/batch"
HOOK = {"type": "HTTP", "url": "https://example.com/hooks/renewal"}


def jobs_asked(count: int) -> list[dict[str, Any]]:
    """`count` job bodies, as a file gives them."""
    return [
        {"name": f"renewal-{n}", "schedule": {"at": "2026-12-01T00:00:00Z"}, "target": HOOK}
        for n in range(count)
    ]


def made(asked: list[dict[str, Any]], first: int = 0) -> dict[str, Any]:
    """The API's answer to a batch of `asked`, the file's jobs from `first` on."""
    return {"jobs": [job_body(job_id=f"{first + n:032x}", name=job["name"]) for n, job in enumerate(asked)]}


def run(runner: CliRunner, api: LoopbackApi, *args: str, stdin: str | None = None) -> Result:
    return runner.invoke(app, ["--endpoint", api.url, *args], input=stdin)


def test_more_than_100_jobs_go_in_batches_of_100_each_with_its_own_key(
    runner: CliRunner, api: LoopbackApi, tmp_path: Path
) -> None:
    asked = jobs_asked(150)
    api.answer("POST", BATCH, 201, made(asked[:100]))
    api.answer("POST", BATCH, 201, made(asked[100:], first=100))
    spec = tmp_path / "renewals.json"
    spec.write_text(json.dumps(asked))

    result = run(runner, api, "jobs", "create-batch", str(spec), "--idempotency-key", "dec", "-o", "json")

    assert result.exit_code == 0, result.output
    first, second = api.sent("POST", BATCH)
    assert (first.json(), second.json()) == ({"jobs": asked[:100]}, {"jobs": asked[100:]})
    assert (first.headers["idempotency-key"], second.headers["idempotency-key"]) == ("dec#1", "dec#2")
    # One document in the API's shape: every job made, in the file's order.
    assert json.loads(result.stdout) == {"jobs": made(asked[:100])["jobs"] + made(asked[100:], 100)["jobs"]}
    assert result.stderr == ""


def test_without_a_key_no_key_is_sent_and_the_table_lists_the_jobs(
    runner: CliRunner, api: LoopbackApi, tmp_path: Path
) -> None:
    asked = jobs_asked(3)
    api.answer("POST", BATCH, 201, made(asked))
    spec = tmp_path / "renewals.yaml"
    spec.write_text(yaml.safe_dump({"jobs": asked}))

    result = run(runner, api, "jobs", "create-batch", str(spec))

    assert result.exit_code == 0, result.output
    [request] = api.sent("POST", BATCH)
    assert "idempotency-key" not in request.headers
    assert request.json() == {"jobs": asked}
    printed = flat(result.stdout)
    assert printed.startswith("JOB ID NAME STATUS SCHEDULE TARGET PRIORITY NEXT FIRE")
    for n in range(3):
        assert f"{n:032x} renewal-{n} SCHEDULED" in printed


def test_yaml_times_stdin_and_json_lines(runner: CliRunner, api: LoopbackApi, tmp_path: Path) -> None:
    api.answer("POST", BATCH, 201, made(jobs_asked(2)))
    listed = "- name: a\n  schedule: {at: 2026-12-01T09:00:00}\n  target: {type: SQS, queue_url: q}\n"
    lines = tmp_path / "renewals.jsonl"
    lines.write_text("\n".join(json.dumps(job) for job in jobs_asked(2)) + "\n\n")

    from_stdin = run(runner, api, "jobs", "create-batch", "-", "-o", "json", stdin=listed)
    from_lines = run(runner, api, "jobs", "create-batch", str(lines), "-o", "json")

    assert from_stdin.exit_code == 0, from_stdin.output
    assert from_lines.exit_code == 0, from_lines.output
    sent = [request.json() for request in api.sent("POST", BATCH)]
    assert sent == [
        {
            "jobs": [
                {
                    "name": "a",
                    "schedule": {"at": "2026-12-01T09:00:00"},
                    "target": {"type": "SQS", "queue_url": "q"},
                }
            ]
        },
        {"jobs": jobs_asked(2)},
    ]


def test_a_refused_batch_stops_the_command_with_what_was_made_and_the_files_job_named(
    runner: CliRunner, api: LoopbackApi, tmp_path: Path
) -> None:
    asked = jobs_asked(250)
    api.answer("POST", BATCH, 201, made(asked[:100]))
    details = [{"field": "jobs[7].target.url", "message": "must be https"}]
    api.answer("POST", BATCH, 400, error_body("VALIDATION_ERROR", "jobs[7]: invalid target", details))
    spec = tmp_path / "renewals.json"
    spec.write_text(json.dumps(asked))

    result = run(runner, api, "jobs", "create-batch", str(spec), "--idempotency-key", "dec", "-o", "json")

    assert result.exit_code == 1
    assert len(api.sent("POST", BATCH)) == 2  # the third batch is not sent
    assert json.loads(result.stdout) == made(asked[:100])  # what was made, for scripts
    assert result.stderr.splitlines() == [
        "100 jobs made, by batch 1 of 3 (printed)",
        "batch 2 of 3 (the file's jobs[100]–jobs[199]) refused: none of its jobs made; no later batch sent",
        "once the error is dealt with, run the same command on the same file again "
        "(--idempotency-key dec): no job made is made again",
        "error: VALIDATION_ERROR (HTTP 400): jobs[107]: invalid target",
        "  jobs[107].target.url: must be https",
    ]


def test_a_failed_first_batch_without_a_key_warns_that_running_again_may_duplicate(
    runner: CliRunner, api: LoopbackApi, tmp_path: Path
) -> None:
    api.answer("POST", BATCH, 503, {"message": "Service Unavailable"})
    spec = tmp_path / "renewals.json"
    spec.write_text(json.dumps(jobs_asked(2)))

    result = run(runner, api, "jobs", "create-batch", str(spec))

    assert result.exit_code == 1
    assert result.stdout == ""  # nothing known to be made
    assert result.stderr.splitlines() == [
        "batch 1 of 1 (the file's jobs[0]–jobs[1]) failed: some of its jobs may be made",
        "without --idempotency-key, running the command again makes the jobs made a second time",
        "error: SERVICE_UNAVAILABLE (HTTP 503): Service Unavailable",
    ]


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ("", "holds no jobs"),
        ("[]", "holds no jobs"),
        ('{"jobs": []}', "holds no jobs"),
        ('{"name": "one job"}', "must hold a list of jobs"),
        ("just words", "must hold a list of jobs"),
        ("[1, 2]", "jobs[0] is not an object"),
        ("[{]", "is neither JSON nor YAML"),
    ],
)
def test_a_file_that_holds_no_list_of_jobs_is_a_usage_error_naming_it(
    runner: CliRunner,
    api: LoopbackApi,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    content: str,
    says: str,
) -> None:
    monkeypatch.chdir(tmp_path)  # a short name: the error's panel wraps long ones
    Path("renewals.yaml").write_text(content)

    result = run(runner, api, "jobs", "create-batch", "renewals.yaml")

    assert result.exit_code == 2, result.output
    assert "FILE: renewals.yaml" in flat(result.stderr)
    assert says in flat(result.stderr)
    assert api.requests == []


def test_bad_json_lines_and_a_missing_file_are_usage_errors(
    runner: CliRunner, api: LoopbackApi, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("renewals.jsonl").write_text('{"name": "a"}\n{"name": \n')

    bad = run(runner, api, "jobs", "create-batch", "renewals.jsonl")
    missing = run(runner, api, "jobs", "create-batch", "none.yaml")

    assert (bad.exit_code, missing.exit_code) == (2, 2)
    assert "FILE: renewals.jsonl line 2, column 10: Expecting value" in flat(bad.stderr)
    assert "FILE: cannot read none.yaml" in flat(missing.stderr)
    assert api.requests == []
