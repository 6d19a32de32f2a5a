"""`scheduler schedule explain`: what a schedule means before a job gets it — its next
firings in its time zone and in UTC, and a plain reading — without AWS or an API. It is
checked by the API's own rules (scheduler_core.domain.schedule), so what it refuses the API
refuses too (exit 2, with the reason)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

import typer

from scheduler_cli import options as o
from scheduler_cli.api import state_of, usage
from scheduler_cli.render import emit, firings_table
from scheduler_cli.specs import when
from scheduler_cli.timing import NotASchedule, firings_body, next_firings, parse_spec, spec_of_expression

app = typer.Typer(help="Schedules: what an expression means and when it fires.", no_args_is_help=True)


@app.command("explain")
def explain(
    ctx: typer.Context,
    expression: Annotated[
        str, typer.Argument(help="A cron ('0 9 * * MON-FRI'), a rate ('5 minutes') or an ISO-8601 time.")
    ],
    timezone: Annotated[str, typer.Option("--timezone", "--tz", help="IANA time zone.")] = "UTC",
    start_at: o.StartAt = None,
    end_at: o.EndAt = None,
    count: o.Count = 5,
    output: o.OutputOpt = None,
) -> None:
    """The next firings of a cron or rate expression (or an `at` time), in the time zone and
    in UTC, and what it says in words. A rate counts from now, as it would from a job made now.

    Example:  scheduler schedule explain "0 9 * * MON-FRI" --timezone Europe/Berlin
    """
    state = state_of(ctx, output)
    try:
        spec = spec_of_expression(expression, timezone)
        if start_at is not None or end_at is not None:
            window = {
                "start_at": start_at and when(start_at, "--start-at"),
                "end_at": end_at and when(end_at, "--end-at"),
            }
            spec = parse_spec(spec.model_dump(mode="json") | window)
    except NotASchedule as error:
        usage(f"{error}")
    now = datetime.now(UTC)
    firings = next_firings(spec, anchor=now, after=now, count=count)
    if not firings:
        usage(f"{expression!r} never fires after now: the API would refuse it")
    emit(state, firings_body(spec, firings, expression=expression), firings_table)
