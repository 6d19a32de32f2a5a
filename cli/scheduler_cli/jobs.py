"""`scheduler jobs …`: one command per route of /v1/jobs (functions/api/handler.py), plus
`jobs next`, which computes the next firings here (scheduler_cli.timing) without AWS."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any
from urllib.parse import quote

import typer

from scheduler_cli import options as o
from scheduler_cli.api import all_pages, call, state_of, usage
from scheduler_cli.render import backfill_table, emit, firings_table, job_table, jobs_table, note, run_table
from scheduler_cli.specs import (
    PolicyFlags,
    ScheduleFlags,
    TargetFlags,
    json_value,
    needs_current,
    read_object,
    when,
)
from scheduler_cli.timing import next_firings_body
from scheduler_cli.waiting import exit_unless_succeeded, wait_for_end

app = typer.Typer(help="Jobs: create, list, change, pause, run and backfill them.", no_args_is_help=True)

JobId = Annotated[str, typer.Argument(help="The job's id.", show_default=False)]
Name = Annotated[str | None, typer.Option("--name", help="1–200 characters.")]
Payload = Annotated[str | None, typer.Option("--payload", help="JSON sent to the target, or @file.json.")]
Start = Annotated[str, typer.Option("--start", help="ISO-8601 with an offset, or -2h, -1d, now.")]
End = Annotated[str, typer.Option("--end", help="ISO-8601 with an offset, or -2h, now (now).")]


def job_path(job_id: str, *rest: str) -> str:
    return "/".join(["/v1/jobs", quote(job_id, safe=":@"), *(quote(part, safe=":@") for part in rest)])


def _common(body: dict[str, Any], name: str | None, payload: str | None) -> None:
    if name is not None:
        body["name"] = name
    if payload is not None:
        body["payload"] = json_value(payload, "--payload")


@app.command("create")
def create(
    ctx: typer.Context,
    file: o.FileOpt = None,
    name: Name = None,
    payload: Payload = None,
    at: o.At = None,
    cron: o.Cron = None,
    rate: o.Rate = None,
    timezone: o.Timezone = None,
    start_at: o.StartAt = None,
    end_at: o.EndAt = None,
    jitter: o.Jitter = None,
    url: o.Url = None,
    method: o.Method = None,
    header: o.Header = None,
    secret_header: o.SecretHeader = None,
    timeout: o.Timeout = None,
    queue_url: o.QueueUrl = None,
    topic_arn: o.TopicArn = None,
    function_arn: o.FunctionArn = None,
    event_bus: o.EventBus = None,
    source: o.Source = None,
    detail_type: o.DetailType = None,
    role_arn: o.RoleArn = None,
    target: o.TargetJson = None,
    priority: o.PriorityOpt = None,
    max_attempts: o.MaxAttempts = None,
    backoff: o.Backoff = None,
    max_backoff: o.MaxBackoff = None,
    overlap: o.OverlapOpt = None,
    max_running: o.MaxRunning = None,
    misfire: o.Misfire = None,
    catch_up_window: o.CatchUpWindow = None,
    idempotency_key: o.IdempotencyKey = None,
    output: o.OutputOpt = None,
) -> None:
    """Create a job from flags, or from a JSON/YAML file (`--file`), flags winning.

    Example:  scheduler jobs create --name hello --at +10s --url http://127.0.0.1:9999/hook
    """
    state = state_of(ctx, output)
    body = read_object(file)
    _common(body, name, payload)
    schedule = ScheduleFlags(at, cron, rate, timezone, start_at, end_at, jitter).merged(body.get("schedule"))
    if schedule is not None:
        body["schedule"] = schedule
    built = TargetFlags(
        url, method, header, secret_header, timeout, queue_url, topic_arn, function_arn,
        event_bus, source, detail_type, role_arn, target,
    ).build()  # fmt: skip
    if built is not None:
        body["target"] = built
    policies = PolicyFlags(
        priority, max_attempts, backoff, max_backoff, overlap, max_running, misfire, catch_up_window
    )
    body |= policies.merged(body)
    if file is None:
        missing = [flag for key, flag in _REQUIRED.items() if key not in body]
        if missing:
            usage(f"missing {', '.join(missing)} (or give them in --file)")
    headers = {"Idempotency-Key": idempotency_key} if idempotency_key else None
    emit(state, call(state, "POST", "/v1/jobs", json_body=body, headers=headers), job_table)


_REQUIRED = {
    "name": "--name",
    "schedule": "a schedule (--at, --cron or --rate)",
    "target": "a target (--url, --queue-url, --topic-arn, --function-arn, --event-bus or --target)",
}


@app.command("list")
def list_jobs(
    ctx: typer.Context,
    status: o.JobStatusOpt = None,
    name_prefix: o.NamePrefix = None,
    limit: o.Limit = None,
    cursor: o.Cursor = None,
    all_pages_: o.AllPages = False,
    output: o.OutputOpt = None,
) -> None:
    """List your jobs, newest first, with the API's filters.

    Example:  scheduler jobs list --status PAUSED --name-prefix billing- --all
    """
    state = state_of(ctx, output)
    params = {"status": status, "name_prefix": name_prefix, "limit": limit, "cursor": cursor}
    emit(state, all_pages(state, "/v1/jobs", params, all_pages_), jobs_table)


@app.command("get")
def get(ctx: typer.Context, job_id: JobId, output: o.OutputOpt = None) -> None:
    """Show one job.

    Example:  scheduler jobs get 01JD3... -o json | jq .next_fire_at
    """
    state = state_of(ctx, output)
    emit(state, call(state, "GET", job_path(job_id)), job_table)


@app.command("update")
def update(
    ctx: typer.Context,
    job_id: JobId,
    file: o.FileOpt = None,
    name: Name = None,
    payload: Payload = None,
    at: o.At = None,
    cron: o.Cron = None,
    rate: o.Rate = None,
    timezone: o.Timezone = None,
    start_at: o.StartAt = None,
    end_at: o.EndAt = None,
    jitter: o.Jitter = None,
    url: o.Url = None,
    method: o.Method = None,
    header: o.Header = None,
    secret_header: o.SecretHeader = None,
    timeout: o.Timeout = None,
    queue_url: o.QueueUrl = None,
    topic_arn: o.TopicArn = None,
    function_arn: o.FunctionArn = None,
    event_bus: o.EventBus = None,
    source: o.Source = None,
    detail_type: o.DetailType = None,
    role_arn: o.RoleArn = None,
    target: o.TargetJson = None,
    priority: o.PriorityOpt = None,
    max_attempts: o.MaxAttempts = None,
    backoff: o.Backoff = None,
    max_backoff: o.MaxBackoff = None,
    overlap: o.OverlapOpt = None,
    max_running: o.MaxRunning = None,
    misfire: o.Misfire = None,
    catch_up_window: o.CatchUpWindow = None,
    if_match: o.IfMatch = None,
    output: o.OutputOpt = None,
) -> None:
    """Change a job (PATCH). A schedule, retry or concurrency flag changes that part and
    keeps the rest of the job's; a target flag replaces the whole target.

    Example:  scheduler jobs update 01JD3... --cron '30 9 * * MON-FRI' --max-attempts 5
    """
    state = state_of(ctx, output)
    patch = read_object(file)
    _common(patch, name, payload)
    schedule_flags = ScheduleFlags(at, cron, rate, timezone, start_at, end_at, jitter)
    policies = PolicyFlags(
        priority, max_attempts, backoff, max_backoff, overlap, max_running, misfire, catch_up_window
    )
    base = patch
    if needs_current(schedule_flags, policies):
        base = call(state, "GET", job_path(job_id)) | patch
    schedule = schedule_flags.merged(base.get("schedule"))
    if schedule is not None:
        patch["schedule"] = schedule
    built = TargetFlags(
        url, method, header, secret_header, timeout, queue_url, topic_arn, function_arn,
        event_bus, source, detail_type, role_arn, target,
    ).build()  # fmt: skip
    if built is not None:
        patch["target"] = built
    patch |= policies.merged(base)
    if not patch:
        usage("nothing to change: give --file or a flag (see --help)")
    headers = {"If-Match": f'"{if_match}"'} if if_match is not None else None
    emit(state, call(state, "PATCH", job_path(job_id), json_body=patch, headers=headers), job_table)


@app.command("pause")
def pause(ctx: typer.Context, job_id: JobId, output: o.OutputOpt = None) -> None:
    """Pause a job: it fires no more until resumed.

    Example:  scheduler jobs pause 01JD3...
    """
    state = state_of(ctx, output)
    emit(state, call(state, "POST", job_path(job_id, "pause")), job_table)


@app.command("resume")
def resume(ctx: typer.Context, job_id: JobId, output: o.OutputOpt = None) -> None:
    """Resume a paused job; what it missed runs as its misfire policy says.

    Example:  scheduler jobs resume 01JD3...
    """
    state = state_of(ctx, output)
    emit(state, call(state, "POST", job_path(job_id, "resume")), job_table)


@app.command("trigger")
def trigger(
    ctx: typer.Context,
    job_id: JobId,
    wait: o.Wait = False,
    wait_timeout: o.WaitTimeout = 300,
    output: o.OutputOpt = None,
) -> None:
    """Run a job now (a MANUAL run); with --wait, until the run ends.

    Example:  scheduler jobs trigger 01JD3... --wait
    """
    state = state_of(ctx, output)
    run = call(state, "POST", job_path(job_id, "trigger"))
    if wait:
        note(f"run {run['run_id']} made")
        run = wait_for_end(
            f"run {run['run_id']}",
            lambda: call(state, "GET", job_path(job_id, "runs", run["run_id"])),
            wait_timeout,
        )
    emit(state, run, run_table)
    if wait:
        exit_unless_succeeded(f"run {run['run_id']}", run)


@app.command("delete")
def delete(ctx: typer.Context, job_id: JobId, output: o.OutputOpt = None) -> None:
    """Cancel a job (DELETE): it never fires again; its runs stay readable.

    Example:  scheduler jobs delete 01JD3...
    """
    state = state_of(ctx, output)
    emit(state, call(state, "DELETE", job_path(job_id)), job_table)


@app.command("backfill")
def backfill(
    ctx: typer.Context, job_id: JobId, start: Start, end: End = "now", output: o.OutputOpt = None
) -> None:
    """Run a job's past firings from --start to --end (each one without a run yet).

    Example:  scheduler jobs backfill 01JD3... --start 2026-11-01T00:00:00Z --end 2026-11-01T23:59:59Z
    """
    state = state_of(ctx, output)
    body = {"start": when(start, "--start"), "end": when(end, "--end")}
    emit(state, call(state, "POST", job_path(job_id, "backfill"), json_body=body), backfill_table)


@app.command("next")
def next_(ctx: typer.Context, job_id: JobId, count: o.Count = 5, output: o.OutputOpt = None) -> None:
    """The job's next firings, in its time zone and in UTC (computed here, as the poller does).

    Example:  scheduler jobs next 01JD3... --count 5
    """
    state = state_of(ctx, output)
    job = call(state, "GET", job_path(job_id))
    if job["status"] != "SCHEDULED":
        note(f"job {job_id} is {job['status']}: these are the firings its schedule has, not runs to come")
    body = next_firings_body("job_id", job_id, job["schedule"], job["created_at"], count, datetime.now(UTC))
    emit(state, body, firings_table)
