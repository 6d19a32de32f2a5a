"""`scheduler runs …`: a job's runs (/v1/jobs/{job_id}/runs). A run id is
`{job_id}:{scheduled_for_ms}`, so `get` and `retry` take the run id alone."""

from __future__ import annotations

from typing import Annotated

import typer

from scheduler_cli import options as o
from scheduler_cli.api import all_pages, call, state_of, usage
from scheduler_cli.jobs import job_path
from scheduler_cli.render import emit, run_table, runs_table
from scheduler_cli.waiting import exit_unless_succeeded, wait_for_end
from scheduler_core.domain.keys import parse_run_id

app = typer.Typer(help="A job's runs: list them, show one, retry a failed one.", no_args_is_help=True)

RunId = Annotated[str, typer.Argument(help="The run's id: {job_id}:{scheduled_for_ms}.", show_default=False)]


def job_of(run_id: str) -> str:
    try:
        return parse_run_id(run_id)[0]
    except ValueError:
        usage(f"{run_id!r} is not a run id: a run id is {{job_id}}:{{scheduled_for_ms}}")


@app.command("list")
def list_runs(
    ctx: typer.Context,
    job_id: Annotated[str, typer.Argument(help="The job's id.", show_default=False)],
    status: o.RunStatusOpt = None,
    limit: o.Limit = None,
    cursor: o.Cursor = None,
    all_pages_: o.AllPages = False,
    output: o.OutputOpt = None,
) -> None:
    """List a job's runs, newest first.

    Example:  scheduler runs list 01JD3... --status FAILED
    """
    state = state_of(ctx, output)
    params = {"status": status, "limit": limit, "cursor": cursor}
    emit(state, all_pages(state, job_path(job_id, "runs"), params, all_pages_), runs_table)


@app.command("get")
def get(ctx: typer.Context, run_id: RunId, output: o.OutputOpt = None) -> None:
    """Show one run.

    Example:  scheduler runs get 01JD3...:1764151200000
    """
    state = state_of(ctx, output)
    emit(state, call(state, "GET", job_path(job_of(run_id), "runs", run_id)), run_table)


@app.command("retry")
def retry(
    ctx: typer.Context,
    run_id: RunId,
    wait: o.Wait = False,
    wait_timeout: o.WaitTimeout = 300,
    output: o.OutputOpt = None,
) -> None:
    """Retry a FAILED run: a new attempt now, with a fresh round of the job's max_attempts.

    Example:  scheduler runs retry 01JD3...:1764151200000 --wait
    """
    state = state_of(ctx, output)
    job_id = job_of(run_id)
    run = call(state, "POST", job_path(job_id, "runs", run_id, "retry"))
    if wait:
        run = wait_for_end(
            f"run {run_id}", lambda: call(state, "GET", job_path(job_id, "runs", run_id)), wait_timeout
        )
    emit(state, run, run_table)
    if wait:
        exit_unless_succeeded(f"run {run_id}", run)
