"""`scheduler schedule explain`: the next firings of an expression in its time zone and in
UTC, and its reading in words, computed without an API; refused as the API refuses."""

from __future__ import annotations

import itertools
import json
from datetime import UTC, datetime, timedelta
from typing import Any

from typer.testing import CliRunner

from scheduler_cli.main import app
from tests.cli.printed import flat


def explain(runner: CliRunner, *args: str) -> dict[str, Any]:
    result = runner.invoke(app, ["schedule", "explain", *args, "--output", "json"])
    assert result.exit_code == 0, result.output
    body: dict[str, Any] = json.loads(result.stdout)  # one JSON document, nothing else on stdout
    return body


def test_a_weekday_cron_in_berlin_fires_at_nine_berlin_time_on_weekdays(runner: CliRunner) -> None:
    body = explain(runner, "0 9 * * MON-FRI", "--timezone", "Europe/Berlin", "--count", "7")

    assert body["description"] == "At 09:00, Monday through Friday, in Europe/Berlin"
    assert body["timezone"] == "Europe/Berlin"
    assert len(body["firings"]) == 7
    for firing in body["firings"]:
        local = datetime.fromisoformat(firing["local"])
        utc = datetime.fromisoformat(firing["fire_at"].replace("Z", "+00:00"))
        assert (local.hour, local.minute) == (9, 0)
        assert local.weekday() < 5
        assert local.utcoffset() in {timedelta(hours=1), timedelta(hours=2)}  # CET or CEST
        assert utc == local.astimezone(UTC)
        assert firing["starts_at"] == firing["fire_at"]  # no jitter
    times = [f["fire_at"] for f in body["firings"]]
    assert times == sorted(times)
    assert datetime.fromisoformat(times[0].replace("Z", "+00:00")) > datetime.now(UTC)


def test_the_table_shows_the_reading_and_both_times(runner: CliRunner) -> None:
    result = runner.invoke(app, ["schedule", "explain", "30 6 1 * *", "--tz", "America/New_York", "-n", "2"])

    assert result.exit_code == 0, result.output
    printed = flat(result.stdout)
    assert "At 06:30, on day 1 of the month, in America/New_York" in printed
    assert "LOCAL (America/New_York)" in printed
    assert "UTC" in printed
    assert printed.count("T06:30:00-0") == 2  # the local times, EST or EDT


def test_a_rate_fires_every_interval_from_now(runner: CliRunner) -> None:
    before = datetime.now(UTC)
    body = explain(runner, "90 minutes", "-n", "3")

    times = [datetime.fromisoformat(f["fire_at"].replace("Z", "+00:00")) for f in body["firings"]]
    assert [b - a for a, b in itertools.pairwise(times)] == [timedelta(minutes=90)] * 2
    assert before + timedelta(minutes=90) <= times[0] <= datetime.now(UTC) + timedelta(minutes=90)
    assert body["description"].startswith("Every 90 minutes")


def test_a_window_limits_the_firings(runner: CliRunner) -> None:
    body = explain(
        runner, "0 12 * * *", "--start-at", "2031-01-01T00:00:00Z", "--end-at", "2031-01-03T23:00:00Z"
    )

    assert [f["fire_at"] for f in body["firings"]] == [
        "2031-01-01T12:00:00.000Z",
        "2031-01-02T12:00:00.000Z",
        "2031-01-03T12:00:00.000Z",
    ]
    assert "from 2031-01-01T00:00:00.000Z, until 2031-01-03T23:00:00.000Z" in body["description"]


def test_a_one_off_time_is_read_in_its_time_zone(runner: CliRunner) -> None:
    body = explain(runner, "2031-06-01T09:00:00", "--timezone", "Europe/Berlin")

    assert [f["fire_at"] for f in body["firings"]] == ["2031-06-01T07:00:00.000Z"]


def test_what_the_api_refuses_is_a_usage_error_with_the_reason(runner: CliRunner) -> None:
    bad_cron = runner.invoke(app, ["schedule", "explain", "61 * * * *"])
    never = runner.invoke(app, ["schedule", "explain", "0 0 30 2 *"])
    bad_zone = runner.invoke(app, ["schedule", "explain", "0 9 * * *", "--timezone", "Mars/Olympus"])
    nonsense = runner.invoke(app, ["schedule", "explain", "whenever"])

    assert [r.exit_code for r in (bad_cron, never, bad_zone, nonsense)] == [2, 2, 2, 2]
    assert "'61 * * * *' is not a valid cron expression" in flat(bad_cron.stderr)
    assert "never fires" in flat(never.stderr)
    assert "unknown time zone 'Mars/Olympus'" in flat(bad_zone.stderr)
    assert "neither a 5-field cron expression" in flat(nonsense.stderr)
    assert all(r.stdout == "" for r in (bad_cron, never, bad_zone, nonsense))
