"""Usage errors exit 2 with a message saying what to pass; every command's --help carries an
example; shell completion is Typer's own."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from scheduler_cli.main import app
from tests.cli.loopback import JOB_ID, LoopbackApi
from tests.cli.printed import flat


def command_paths(group: object, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command and group of the app, as the words that name it."""
    found = [prefix]
    for name, command in (getattr(group, "commands", None) or {}).items():
        found += command_paths(command, (*prefix, name))
    return found


# `console` is the console's own (scheduler_cli.console, tested with it).
NOT_OURS = {("console",)}


def all_commands() -> list[tuple[str, ...]]:
    import typer.main

    return [path for path in command_paths(typer.main.get_command(app)) if path not in NOT_OURS]


def test_the_app_has_every_command_the_issue_names() -> None:
    names = {" ".join(path) for path in all_commands()}
    expected = {
        *(f"jobs {verb}" for verb in
          ("create", "list", "get", "update", "pause", "resume", "trigger", "delete", "backfill", "next")),
        "runs list", "runs get", "runs retry",
        *(f"workflows {verb}" for verb in
          ("create", "list", "get", "update", "pause", "resume", "trigger", "delete", "backfill", "next")),
        "workflows runs list", "workflows runs get",
        "dlq list", "dlq redrive",
        "schedule explain",
    }  # fmt: skip
    assert expected <= names, expected - names


@pytest.mark.parametrize("path", all_commands(), ids=lambda path: " ".join(path) or "scheduler")
def test_every_help_shows_an_example(runner: CliRunner, path: tuple[str, ...]) -> None:
    result = runner.invoke(app, [*path, "--help"])

    assert result.exit_code == 0, result.output
    groups = {"", "jobs", "runs", "workflows", "workflows runs", "dlq", "schedule"}
    if " ".join(path) in groups:
        assert "Usage:" in result.stdout  # a group lists its commands, each with its example
    else:
        assert "Example:" in result.stdout, result.stdout
        assert f"scheduler {' '.join(path)}" in result.stdout.replace("\n", " ")


def test_no_endpoint_configured_is_a_usage_error_that_says_what_to_pass(runner: CliRunner) -> None:
    result = runner.invoke(app, ["jobs", "list"])

    assert result.exit_code == 2
    assert result.stdout == ""
    for option in ("--endpoint", "SCHEDULER_ENDPOINT", "--stack", "--api-url"):
        assert option in result.stderr


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["jobs", "create", "--at", "+1h", "--url", "https://example.com/h"], "--name"),
        (["jobs", "create", "--name", "x", "--url", "https://example.com/h"], "a schedule"),
        (["jobs", "create", "--name", "x", "--at", "+1h"], "a target"),
        (["jobs", "create", "--name", "x", "--at", "+1h", "--cron", "* * * * *", "--url", "u"], "one of"),
        (["jobs", "create", "--name", "x", "--at", "tomorrow", "--url", "u"], "not an ISO-8601 time"),
        (["jobs", "create", "--name", "x", "--at", "+1h", "--url", "u", "--queue-url", "q"], "one target"),
        (["jobs", "create", "--name", "x", "--at", "+1h", "--url", "u", "--payload", "{nope"], "not JSON"),
        (["jobs", "create", "--name", "x", "--at", "+1h", "--url", "u", "-H", "novalue"], "Name: value"),
        (["jobs", "create", "--file", "/no/such/file.yaml"], "cannot read"),
        (["jobs", "list", "--status", "SLEEPING"], "SLEEPING"),
        (["jobs", "list", "--limit", "0"], "--limit"),
        (["jobs", "update", JOB_ID], "nothing to change"),
        (["runs", "get", "not-a-run-id"], "not a run id"),
        (["workflows", "runs", "get", "nope"], "not a workflow run id"),
        (["jobs", "nosuchverb"], "nosuchverb"),
        (["--output", "xml", "jobs", "list"], "xml"),
    ],
)
def test_usage_errors_exit_2_before_any_request(
    runner: CliRunner, api: LoopbackApi, args: list[str], says: str
) -> None:
    result = runner.invoke(app, ["--endpoint", api.url, *args])

    assert result.exit_code == 2, result.output
    assert says in flat(result.stderr)
    assert api.requests == []


def test_a_file_that_is_not_an_object_is_a_usage_error(runner: CliRunner, api: LoopbackApi, tmp_path) -> None:
    listed = tmp_path / "job.yaml"
    listed.write_text("- just\n- a list\n")

    result = runner.invoke(app, ["--endpoint", api.url, "jobs", "create", "--file", str(listed)])

    assert result.exit_code == 2
    assert "must hold one object" in flat(result.stderr)


def test_shell_completion_is_offered(runner: CliRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    # Typer otherwise detects the shell that started the tests (a `sh -c` has no completion
    # script) and takes "bash" for an argument: the option then takes the shell's name.
    monkeypatch.setenv("_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION", "1")
    result = runner.invoke(app, ["--show-completion", "bash"])

    assert result.exit_code == 0, result.output
    assert "_SCHEDULER_COMPLETE" in result.stdout or "complete" in result.stdout
