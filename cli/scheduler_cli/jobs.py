"""`scheduler jobs …`: one command per route of /v1/jobs (functions/api/handler.py), plus
`jobs next`, which computes the next firings here (scheduler_cli.timing) without AWS."""

from __future__ import annotations

import dataclasses
import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, NoReturn
from urllib.parse import quote

import typer

from scheduler_cli import options as o
from scheduler_cli.api import ApiError, all_pages, call, state_of, usage
from scheduler_cli.render import (
    backfill_table,
    emit,
    firings_table,
    job_table,
    jobs_table,
    note,
    run_table,
    spinner,
)
from scheduler_cli.specs import (
    PolicyFlags,
    ScheduleFlags,
    TargetFlags,
    json_value,
    jsonable,
    needs_current,
    read_document,
    read_object,
    when,
)
from scheduler_cli.timing import next_firings_body
from scheduler_cli.waiting import exit_unless_succeeded, wait_for_end
from scheduler_core.domain.api_shapes import MAX_BATCH_JOBS

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


BatchFile = Annotated[
    str,
    typer.Argument(
        help="A JSON or YAML list of jobs (each the fields `jobs create --file` takes), or "
        '{"jobs": <that list>}; - reads stdin; a .jsonl or .ndjson file holds one job a line.',
        show_default=False,
    ),
]
BatchKey = Annotated[
    str | None,
    typer.Option(
        "--idempotency-key",
        help="Make running the command again safe: batch n is sent with KEY#n (from 1), so the same "
        "command on the same file makes only what is missing (fix a refused job in place).",
        show_default=False,
    ),
]
BATCH_PATH = "/v1/jobs/batch"
JSON_LINES = (".jsonl", ".ndjson")
# How the API names a job of a batch in its errors: `jobs[3].target.url`, `jobs[3]: …`.
_BATCH_ITEM = re.compile(r"\bjobs\[(\d+)\]")


@app.command("create-batch")
def create_batch(
    ctx: typer.Context, file: BatchFile, idempotency_key: BatchKey = None, output: o.OutputOpt = None
) -> None:
    """Create the jobs of FILE (POST /v1/jobs/batch) in batches of 100, sent one after the
    other; print every job made, in the file's order. A batch refused stops the command: what
    was made is printed, then the error (its jobs\\[i] counted from the file's first job, from
    0), exit 1. Without --idempotency-key, running it again after a failure makes the jobs
    made a second time.

    Example:  scheduler jobs create-batch renewals.yaml --idempotency-key renewals-2026-12
    """
    state = state_of(ctx, output)
    jobs = _jobs_in(file)
    batches = [jobs[first : first + MAX_BATCH_JOBS] for first in range(0, len(jobs), MAX_BATCH_JOBS)]
    made: list[dict[str, Any]] = []
    failed: tuple[int, ApiError] | None = None
    with spinner(f"creating {len(jobs)} jobs") as status:
        for number, batch in enumerate(batches, 1):
            status.update(f"batch {number} of {len(batches)}: {len(made)} of {len(jobs)} jobs made")
            headers = {"Idempotency-Key": f"{idempotency_key}#{number}"} if idempotency_key else None
            try:
                made += call(state, "POST", BATCH_PATH, json_body={"jobs": batch}, headers=headers)["jobs"]
            except ApiError as error:
                failed = (number, error)
                break
    if made or failed is None:
        emit(state, {"jobs": made}, lambda body: jobs_table({"items": body["jobs"]}))
    if failed is not None:
        _stopped(*failed, batches, idempotency_key)


def _jobs_in(path: str) -> list[dict[str, Any]]:
    """FILE's jobs, each an object; a usage error naming FILE otherwise."""
    if path != "-" and Path(path).suffix.lower() in JSON_LINES:
        document: Any = _json_lines(path)
    else:
        document = read_document(path, "FILE")
    if isinstance(document, dict) and list(document) == ["jobs"]:
        document = document["jobs"]
    if document is None or document == []:
        usage(f"FILE: {path} holds no jobs")
    if not isinstance(document, list):
        one_job = isinstance(document, dict) and "jobs" not in document
        hint = "; for one job: jobs create --file" if one_job else ""
        usage(f'FILE: {path} must hold a list of jobs, or {{"jobs": <a list>}}{hint}')
    for index, job in enumerate(document):
        if not isinstance(job, dict):
            usage(f"FILE: {path}: jobs[{index}] is not an object (a job's fields)")
    jobs: list[dict[str, Any]] = jsonable(document)
    return jobs


def _json_lines(path: str) -> list[Any]:
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as error:
        usage(f"FILE: cannot read {path}: {error.strerror or error}")
    jobs = []
    for number, line in enumerate(lines, 1):
        if line.strip():
            try:
                jobs.append(json.loads(line))
            except json.JSONDecodeError as error:
                usage(
                    f"FILE: {path} line {number}, column {error.colno}: {error.msg} "
                    "(JSON Lines: one job a line)"
                )
    return jobs


def _stopped(number: int, error: ApiError, batches: list[list[dict[str, Any]]], key: str | None) -> NoReturn:
    """Batch `number` failed: say what was made and what to do, then raise its error (exit 1),
    its `jobs[i]` counted from the file's first job."""
    first = (number - 1) * MAX_BATCH_JOBS
    if number > 1:
        before = "batch 1" if number == 2 else f"batches 1–{number - 1}"
        note(f"{first} jobs made, by {before} of {len(batches)} (printed)")
    last = first + len(batches[number - 1]) - 1
    refused = 400 <= error.status < 500
    outcome = "refused: none of its jobs made" if refused else "failed: some of its jobs may be made"
    later = "; no later batch sent" if number < len(batches) else ""
    note(f"batch {number} of {len(batches)} (the file's jobs[{first}]–jobs[{last}]) {outcome}{later}")
    if number > 1 or not refused:  # some jobs are, or may be, made
        if key is not None:
            note(
                "once the error is dealt with, run the same command on the same file again "
                f"(--idempotency-key {key}): no job made is made again"
            )
        else:
            note("without --idempotency-key, running the command again makes the jobs made a second time")

    def in_file(text: str) -> str:
        return _BATCH_ITEM.sub(lambda found: f"jobs[{int(found.group(1)) + first}]", text)

    raise dataclasses.replace(
        error,
        message=in_file(error.message),
        details=[{name: in_file(value) for name, value in detail.items()} for detail in error.details],
    ) from None


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
