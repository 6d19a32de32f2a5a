"""`scheduler workflows …`: one command per route of /v1/workflows (the same verbs as jobs),
and `workflows runs …` for their runs, `runs get` drawing the DAG's task states as a tree.
A workflow's tasks come from `--file` (JSON or YAML) or `--task` (JSON, repeated)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Annotated, Any
from urllib.parse import quote

import typer

from scheduler_cli import options as o
from scheduler_cli.api import ApiError, all_pages, call, state_of, usage
from scheduler_cli.dag import workflow_run_view, workflow_runs_table, workflow_table, workflows_table
from scheduler_cli.render import backfill_table, emit, firings_table, note
from scheduler_cli.specs import PolicyFlags, ScheduleFlags, json_value, needs_current, read_object, when
from scheduler_cli.state import CliState
from scheduler_cli.timing import next_firings_body
from scheduler_cli.waiting import exit_unless_succeeded, wait_for_end
from scheduler_core.domain.keys import parse_run_id

app = typer.Typer(help="Workflows: DAGs of tasks; the same verbs as jobs.", no_args_is_help=True)
runs_app = typer.Typer(
    help="A workflow's runs: list, show as a tree, cancel, retry a task.", no_args_is_help=True
)
app.add_typer(runs_app, name="runs")

WorkflowId = Annotated[str, typer.Argument(help="The workflow's id.", show_default=False)]
WorkflowRunId = Annotated[
    str, typer.Argument(help="The workflow run's id: {workflow_id}:{scheduled_for_ms}.", show_default=False)
]
Name = Annotated[str | None, typer.Option("--name", help="1–200 characters.")]
Task = Annotated[
    list[str] | None,
    typer.Option("--task", help="A task as JSON (task_id, target, depends_on, ...) or @file; repeat."),
]
Start = Annotated[str, typer.Option("--start", help="ISO-8601 with an offset, or -2h, -1d, now.")]
End = Annotated[str, typer.Option("--end", help="ISO-8601 with an offset, or -2h, now (now).")]


def workflow_path(workflow_id: str, *rest: str) -> str:
    return "/".join(["/v1/workflows", quote(workflow_id, safe=":@"), *(quote(p, safe=":@") for p in rest)])


def _body(
    state: CliState,
    workflow_id: str | None,
    file: str | None,
    name: str | None,
    tasks: list[str] | None,
    schedule_flags: ScheduleFlags,
    policies: PolicyFlags,
) -> dict[str, Any]:
    """A create's body (`workflow_id` None) or a patch, from the file and the flags."""
    body = read_object(file)
    if name is not None:
        body["name"] = name
    if tasks:
        body["tasks"] = [json_value(task, "--task") for task in tasks]
    base = body
    if workflow_id is not None and needs_current(schedule_flags, policies):
        base = call(state, "GET", workflow_path(workflow_id)) | body
    schedule = schedule_flags.merged(base.get("schedule"))
    if schedule is not None:
        body["schedule"] = schedule
    return body | policies.merged(base, with_retry=False)


@app.command("create")
def create(
    ctx: typer.Context,
    file: o.FileOpt = None,
    name: Name = None,
    task: Task = None,
    at: o.At = None,
    cron: o.Cron = None,
    rate: o.Rate = None,
    timezone: o.Timezone = None,
    start_at: o.StartAt = None,
    end_at: o.EndAt = None,
    jitter: o.Jitter = None,
    overlap: o.OverlapOpt = None,
    max_running: o.MaxRunning = None,
    misfire: o.Misfire = None,
    idempotency_key: o.IdempotencyKey = None,
    output: o.OutputOpt = None,
) -> None:
    """Create a workflow from a JSON/YAML file (`--file`) or flags; without a schedule it
    runs only when triggered.

    Example:  scheduler workflows create -f etl.yaml --cron '0 2 * * *' --tz Europe/Berlin
    """
    state = state_of(ctx, output)
    schedule = ScheduleFlags(at, cron, rate, timezone, start_at, end_at, jitter)
    policies = PolicyFlags(overlap=overlap, max_running=max_running, misfire=misfire)
    body = _body(state, None, file, name, task, schedule, policies)
    if file is None and not ({"name", "tasks"} <= body.keys()):
        usage("missing --name and --task (or give them in --file)")
    headers = {"Idempotency-Key": idempotency_key} if idempotency_key else None
    emit(state, call(state, "POST", "/v1/workflows", json_body=body, headers=headers), workflow_table)


@app.command("list")
def list_workflows(
    ctx: typer.Context,
    status: o.JobStatusOpt = None,
    name_prefix: o.NamePrefix = None,
    limit: o.Limit = None,
    cursor: o.Cursor = None,
    all_pages_: o.AllPages = False,
    output: o.OutputOpt = None,
) -> None:
    """List your workflows, newest first.

    Example:  scheduler workflows list --name-prefix etl-
    """
    state = state_of(ctx, output)
    params = {"status": status, "name_prefix": name_prefix, "limit": limit, "cursor": cursor}
    emit(state, all_pages(state, "/v1/workflows", params, all_pages_), workflows_table)


@app.command("get")
def get(ctx: typer.Context, workflow_id: WorkflowId, output: o.OutputOpt = None) -> None:
    """Show one workflow and its tasks.

    Example:  scheduler workflows get 01JD4...
    """
    state = state_of(ctx, output)
    emit(state, call(state, "GET", workflow_path(workflow_id)), workflow_table)


@app.command("update")
def update(
    ctx: typer.Context,
    workflow_id: WorkflowId,
    file: o.FileOpt = None,
    name: Name = None,
    task: Task = None,
    at: o.At = None,
    cron: o.Cron = None,
    rate: o.Rate = None,
    timezone: o.Timezone = None,
    start_at: o.StartAt = None,
    end_at: o.EndAt = None,
    jitter: o.Jitter = None,
    overlap: o.OverlapOpt = None,
    max_running: o.MaxRunning = None,
    misfire: o.Misfire = None,
    if_match: o.IfMatch = None,
    output: o.OutputOpt = None,
) -> None:
    """Change a workflow (PATCH); --task replaces all its tasks. Runs under way keep their graph.

    Example:  scheduler workflows update 01JD4... --cron '0 3 * * *'
    """
    state = state_of(ctx, output)
    schedule = ScheduleFlags(at, cron, rate, timezone, start_at, end_at, jitter)
    policies = PolicyFlags(overlap=overlap, max_running=max_running, misfire=misfire)
    patch = _body(state, workflow_id, file, name, task, schedule, policies)
    if not patch:
        usage("nothing to change: give --file or a flag (see --help)")
    headers = {"If-Match": f'"{if_match}"'} if if_match is not None else None
    emit(
        state,
        call(state, "PATCH", workflow_path(workflow_id), json_body=patch, headers=headers),
        workflow_table,
    )


def _simple(verb: str, summary: str) -> None:
    """pause, resume, delete: a POST (or DELETE) that answers the workflow."""

    def command(ctx: typer.Context, workflow_id: WorkflowId, output: o.OutputOpt = None) -> None:
        state = state_of(ctx, output)
        if verb == "delete":
            emit(state, call(state, "DELETE", workflow_path(workflow_id)), workflow_table)
        else:
            emit(state, call(state, "POST", workflow_path(workflow_id, verb)), workflow_table)

    command.__doc__ = f"{summary}\n\nExample:  scheduler workflows {verb} 01JD4..."
    app.command(verb)(command)


_simple("pause", "Pause a workflow: no workflow run starts until it is resumed.")
_simple("resume", "Resume a paused workflow; what it missed goes as its misfire policy says.")
_simple("delete", "Cancel a workflow: it never runs again; its runs stay readable.")


@app.command("trigger")
def trigger(
    ctx: typer.Context,
    workflow_id: WorkflowId,
    wait: o.Wait = False,
    wait_timeout: o.WaitTimeout = 600,
    output: o.OutputOpt = None,
) -> None:
    """Run a workflow now (a MANUAL workflow run); with --wait, until it ends.

    Example:  scheduler workflows trigger 01JD4... --wait
    """
    state = state_of(ctx, output)
    run = call(state, "POST", workflow_path(workflow_id, "trigger"))
    run_id = run["workflow_run_id"]
    if wait:
        note(f"workflow run {run_id} made")
        run = wait_for_end(
            f"workflow run {run_id}",
            lambda: call(state, "GET", workflow_path(workflow_id, "runs", run_id)),
            wait_timeout,
        )
    emit(state, run, lambda body: workflow_run_view(body, _tasks(state, workflow_id)))
    if wait:
        exit_unless_succeeded(f"workflow run {run_id}", run)


@app.command("backfill")
def backfill(
    ctx: typer.Context, workflow_id: WorkflowId, start: Start, end: End = "now", output: o.OutputOpt = None
) -> None:
    """Run a workflow's past firings from --start to --end.

    Example:  scheduler workflows backfill 01JD4... --start -1d
    """
    state = state_of(ctx, output)
    body = {"start": when(start, "--start"), "end": when(end, "--end")}
    emit(state, call(state, "POST", workflow_path(workflow_id, "backfill"), json_body=body), backfill_table)


@app.command("next")
def next_(
    ctx: typer.Context, workflow_id: WorkflowId, count: o.Count = 5, output: o.OutputOpt = None
) -> None:
    """The workflow's next firings, in its time zone and in UTC.

    Example:  scheduler workflows next 01JD4... -n 3
    """
    state = state_of(ctx, output)
    workflow = call(state, "GET", workflow_path(workflow_id))
    if not workflow.get("schedule"):
        usage(f"workflow {workflow_id} has no schedule: it runs only when triggered")
    now = datetime.now(UTC)
    body = next_firings_body(
        "workflow_id", workflow_id, workflow["schedule"], workflow["created_at"], count, now
    )
    emit(state, body, firings_table)


# --- workflow runs ----------------------------------------------------------------------


def _workflow_of(run_id: str) -> str:
    try:
        return parse_run_id(run_id)[0]
    except ValueError:
        usage(f"{run_id!r} is not a workflow run id: it is {{workflow_id}}:{{scheduled_for_ms}}")


def _tasks(state: CliState, workflow_id: str) -> list[Mapping[str, Any]] | None:
    """The workflow's tasks (who depends on whom), for the tree; None if it cannot be read."""
    try:
        tasks: list[Mapping[str, Any]] = call(state, "GET", workflow_path(workflow_id))["tasks"]
    except ApiError:
        return None
    return tasks


@runs_app.command("list")
def list_runs(
    ctx: typer.Context,
    workflow_id: WorkflowId,
    status: o.RunStatusOpt = None,
    limit: o.Limit = None,
    cursor: o.Cursor = None,
    all_pages_: o.AllPages = False,
    output: o.OutputOpt = None,
) -> None:
    """List a workflow's runs, newest first, with their tasks' states counted.

    Example:  scheduler workflows runs list 01JD4... --status FAILED
    """
    state = state_of(ctx, output)
    params = {"status": status, "limit": limit, "cursor": cursor}
    emit(state, all_pages(state, workflow_path(workflow_id, "runs"), params, all_pages_), workflow_runs_table)


@runs_app.command("get")
def get_run(ctx: typer.Context, workflow_run_id: WorkflowRunId, output: o.OutputOpt = None) -> None:
    """Show a workflow run: its DAG as a tree, each task's state.

    Example:  scheduler workflows runs get 01JD4...:1764151200000
    """
    state = state_of(ctx, output)
    workflow_id = _workflow_of(workflow_run_id)
    run = call(state, "GET", workflow_path(workflow_id, "runs", workflow_run_id))
    emit(state, run, lambda body: workflow_run_view(body, _tasks(state, workflow_id)))


@runs_app.command("cancel")
def cancel_run(ctx: typer.Context, workflow_run_id: WorkflowRunId, output: o.OutputOpt = None) -> None:
    """Cancel what has not started of a workflow run; tasks under way end as they end.

    Example:  scheduler workflows runs cancel 01JD4...:1764151200000
    """
    state = state_of(ctx, output)
    workflow_id = _workflow_of(workflow_run_id)
    run = call(state, "POST", workflow_path(workflow_id, "runs", workflow_run_id, "cancel"))
    emit(state, run, lambda body: workflow_run_view(body, _tasks(state, workflow_id)))


@runs_app.command("retry-task")
def retry_task(
    ctx: typer.Context,
    workflow_run_id: WorkflowRunId,
    task_id: Annotated[str, typer.Argument(help="The FAILED task's id.", show_default=False)],
    output: o.OutputOpt = None,
) -> None:
    """Run a FAILED task of a workflow run again; what its failure decided below it waits again.

    Example:  scheduler workflows runs retry-task 01JD4...:1764151200000 load
    """
    state = state_of(ctx, output)
    workflow_id = _workflow_of(workflow_run_id)
    path = workflow_path(workflow_id, "runs", workflow_run_id, "tasks", task_id, "retry")
    emit(state, call(state, "POST", path), lambda body: workflow_run_view(body, _tasks(state, workflow_id)))
