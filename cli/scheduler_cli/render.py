"""What commands print. `--output json` prints the API's own body as one JSON document on
stdout, nothing else, so `jq` and scripts can read it; `--output table` draws it with Rich
for people. Everything else (progress, spinners, hints, errors) goes to stderr.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.status import Status
from rich.table import Table
from rich.text import Text

from scheduler_cli.state import CliState, Output

# Wide enough for ids and times when stdout is a pipe or a file (Rich's default is 80).
PIPE_WIDTH = 160
STATUS_STYLES = {
    "SUCCEEDED": "green",
    "SCHEDULED": "green",
    "COMPLETED": "blue",
    "FAILED": "red",
    "UPSTREAM_FAILED": "red",
    "CANCELLED": "bright_black",
    "SKIPPED": "bright_black",
    "PAUSED": "yellow",
    "RUNNING": "cyan",
    "RETRYING": "yellow",
    "PENDING": "white",
}


def stdout() -> Console:
    """A console on the current stdout (CliRunner swaps sys.stdout per invocation)."""
    terminal = sys.stdout.isatty()
    return Console(file=sys.stdout, width=None if terminal else PIPE_WIDTH, highlight=False)


def stderr() -> Console:
    return Console(file=sys.stderr, highlight=False, soft_wrap=True)


def note(message: str) -> None:
    """A line for the person at the terminal, on stderr."""
    stderr().print(message, markup=False, highlight=False)


def emit(state: CliState, body: Any, table: Callable[[Any], RenderableType | None]) -> None:
    """The API's body as JSON, or `table(body)` drawn."""
    if state.output == Output.json:
        sys.stdout.write(json.dumps(body, indent=2, ensure_ascii=False) + "\n")
        sys.stdout.flush()
        return
    drawn = table(body)
    if drawn is not None:
        stdout().print(drawn)


@contextmanager
def spinner(message: str) -> Iterator[Status]:
    """A spinner on stderr while something long runs (drawn only on a terminal)."""
    with stderr().status(message) as status:
        yield status


def styled(status: str | None) -> Text:
    return Text(status or "-", style=STATUS_STYLES.get(status or "", ""))


def text(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def new_table(*columns: str, title: str | None = None) -> Table:
    """A plain table; ids are never wrapped (they are copied), other cells fold."""
    table = Table(*columns, title=title, title_justify="left", header_style="bold", box=None, pad_edge=False)
    for column in table.columns:
        if str(column.header).endswith("ID"):
            column.no_wrap = True
        else:
            column.overflow = "fold"
    return table


def fields_table(rows: Iterable[tuple[str, Any]], title: str | None = None) -> Table:
    """One object, a field per line."""
    table = new_table("field", "value", title=title)
    table.show_header = False
    for name, value in rows:
        table.add_row(Text(name, style="bold"), value if isinstance(value, Text) else text(value))
    return table


# --- jobs and workflows ----------------------------------------------------------------


def schedule_text(schedule: Mapping[str, Any] | None) -> str:
    if not schedule:
        return "on trigger only"
    if schedule.get("cron"):
        shown = f"cron {schedule['cron']}"
    elif schedule.get("rate"):
        shown = f"rate {schedule['rate']}"
    else:
        shown = f"at {schedule.get('at')}"
    zone = schedule.get("timezone")
    if zone and zone != "UTC":
        shown += f" ({zone})"
    if schedule.get("jitter_seconds"):
        shown += f" ±{schedule['jitter_seconds']}s"
    return shown


def target_text(target: Mapping[str, Any]) -> str:
    kind = str(target.get("type", "?"))
    where = next(
        (
            target[key]
            for key in ("url", "queue_url", "topic_arn", "function_arn", "event_bus_name")
            if target.get(key)
        ),
        "",
    )
    return f"{kind} {where}".strip()


def jobs_table(page: Mapping[str, Any]) -> Table:
    table = new_table("JOB ID", "NAME", "STATUS", "SCHEDULE", "TARGET", "PRIORITY", "NEXT FIRE")
    for job in page["items"]:
        table.add_row(
            job["job_id"],
            job["name"],
            styled(job["status"]),
            schedule_text(job.get("schedule")),
            target_text(job.get("target") or {}),
            job.get("priority"),
            text(job.get("next_fire_at")),
        )
    _more(page)
    return table


def job_table(job: Mapping[str, Any]) -> Table:
    return fields_table(
        [
            ("job_id", job["job_id"]),
            ("name", job["name"]),
            ("status", styled(job["status"])),
            ("schedule", schedule_text(job.get("schedule"))),
            ("target", target_text(job.get("target") or {})),
            ("payload", job.get("payload")),
            ("priority", job.get("priority")),
            ("retry", job.get("retry")),
            ("concurrency", job.get("concurrency")),
            ("misfire", job.get("misfire")),
            ("next_fire_at", job.get("next_fire_at")),
            ("paused_at", job.get("paused_at")),
            ("created_at", job.get("created_at")),
            ("updated_at", job.get("updated_at")),
            ("version", job.get("version")),
        ]
    )


def runs_table(page: Mapping[str, Any]) -> Table:
    table = new_table("RUN ID", "STATUS", "TRIGGER", "SCHEDULED FOR", "ATTEMPT", "LATENESS", "CODE", "ERROR")
    for run in page["items"]:
        table.add_row(*_run_row(run))
    _more(page)
    return table


def run_table(run: Mapping[str, Any]) -> RenderableType:
    """A run's fields, then every attempt it made with how it ended and its error."""
    fields = fields_table(
        (key, styled(value) if key == "status" else value) for key, value in run.items() if key != "attempts"
    )
    attempts = new_table("ATTEMPT", "OUTCOME", "STARTED", "FINISHED", "CODE", "ERROR", title="attempts")
    for attempt in run.get("attempts") or []:
        attempts.add_row(
            text(attempt["attempt"]),
            styled(attempt["status"]),
            text(attempt.get("started_at")),
            text(attempt.get("finished_at")),
            text(attempt.get("response_code")),
            text(attempt.get("error")),
        )
    if not attempts.row_count:
        return fields
    return Group(fields, Text(""), attempts)


def _run_row(run: Mapping[str, Any]) -> list[Any]:
    lateness = run.get("lateness_ms")
    return [
        run["run_id"],
        styled(run["status"]),
        run.get("trigger"),
        text(run.get("scheduled_for")),
        text(run.get("attempt")),
        "-" if lateness is None else f"{lateness} ms",
        text(run.get("response_code")),
        text(run.get("error")),
    ]


def backfill_table(result: Mapping[str, Any]) -> Table:
    return fields_table([("runs made", result.get("runs")), ("already run", result.get("already_run"))])


def _more(page: Mapping[str, Any]) -> None:
    if page.get("next_cursor"):
        note(f"more: --cursor {page['next_cursor']} (or --all)")


def firings_table(body: Mapping[str, Any]) -> Table:
    """`jobs next`, `schedule explain`: each firing in the schedule's time zone and in UTC."""
    firings = body["firings"]
    jittered = any(f["starts_at"] != f["fire_at"] for f in firings)
    columns = ["#", f"LOCAL ({body['timezone']})", "UTC"] + (["STARTS (JITTER)"] if jittered else [])
    table = new_table(*columns, title=body["description"])
    for index, firing in enumerate(firings, 1):
        row = [str(index), firing["local"], firing["fire_at"]] + ([firing["starts_at"]] if jittered else [])
        table.add_row(*row)
    if not firings:
        note("no firing to come")
    return table
