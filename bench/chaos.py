"""`python -m bench.chaos` (`make chaos`): the chaos soak.

N one-off jobs spread over some minutes are created through the local cloud's API (one
whose create comes too late for its planned time is made due a little later instead:
LATE_CREATE_LEAD_MS), their HTTP targets on a loopback receiver that answers a share of
calls (20 %) with HTTP 500 at random, while a random live process of the worker function
is SIGKILLed every few seconds. The stack runs with a short worker timeout, so the run
lease (the queues' visibility timeout, six times the worker timeout) expires within the
soak and the poller's watchdog can move killed runs on. After the last fire time the soak
waits until every run is finished, or a margin that covers a lease, a re-send and the
polls that act on them.

It prints (and writes as JSON) what must not happen — runs lost (never finished), runs
that succeeded twice, target effects duplicated — and what did: deliveries, DLQ records
and why, runs by final status, the watchdog's and the workers' actions. Exits 1 if a planned
job was not made, or anything was lost, succeeded twice or duplicated (or a goal of the
workflow mix was missed), 2 if the soak could not run.

What counts as a duplicated effect. Delivery is at least once and the effect is one per run
because every attempt of a run carries the same `Idempotency-Key` (its run id). A worker
killed after its target answered 2xx and before it wrote the run's end leaves nothing that
says the call happened; the run's next attempt must call again (else a run could be lost),
same key: a *re-delivery after a crash*, reported but allowed. What is not allowed, and
fails the soak: a repeat 2xx when the attempt that got the earlier 2xx lived to log its
end (the scheduler knew and called again), or one job's target reached under two keys (two
runs for one firing).

With `--workflows N`, N one-off workflows (DAGs of HTTP tasks on the same receiver) fire
over the same spread; the soak then also fails on a workflow run stuck, a task started
twice, a trigger rule broken or a workflow run's status at odds with its tasks'
(bench/chaos_workflows.py says how each is told). Without it the soak is the jobs' alone.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import signal
import sys
import time
import traceback
from collections import Counter
from collections.abc import Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import chaos_workflows as wf
from bench.common import interrupt, positive_float, positive_int, recorded_options
from bench.lateness import (
    CREATE_THREADS,
    Created,
    create_batch,
    create_failures,
    create_job,
    not_sooner_than,
    plan,
    queue_depths,
)
from bench.periodic import Periodic
from bench.receiver import Arrival, ReceiverProcess
from bench.report import describe_machine, machine, table
from infra.local.cloud import LocalCloud, LocalCloudOptions
from infra.local.console import short_name
from infra.local.functions import FunctionHost
from scheduler_core.adapters.dynamodb.codec import ItemCodec
from scheduler_core.domain import keys
from scheduler_core.domain.outcomes import (  # how the worker's attempts end their lines
    RUN_FINISHED,
    TAKEN_OVER,
)
from scheduler_core.domain.policies import RetryPolicy
from scheduler_core.domain.retry import backoff_ceiling
from scheduler_core.services.workflow_runs import RECHECK

# What the stack does on its own (cdk.json, Settings defaults): the soak's margin is built on them.
POLL_PERIOD_SECONDS = 60  # the poller's EventBridge rule: rate(1 minute)
# A job or workflow whose planned time is nearer than this when its create is sent is made due
# this far from then instead: on a machine slower than the plan every one is made, later, and
# the soak lasts longer. (Until 2026-11-27 such creates asked for their planned time, the API
# refused those more than 60 s past, and the soak made 1,303-1,499 of its 2,000 jobs.)
LATE_CREATE_LEAD_MS = 10_000
RESEND_AFTER_SECONDS = 60  # a waiting run not started this long after its time is sent again
MARGIN_SLACK_SECONDS = 30  # for the worker's own work and moto's pauses
BATCH_BLOCK = 100  # consecutive jobs a batched create makes in one request (MAX_BATCH_JOBS)
TERMINAL = ("SUCCEEDED", "FAILED", "SKIPPED", "CANCELLED")
CHECK_SECONDS = 10  # how often the jobs table is read once every run is due
SETTLE_SECONDS = 5  # how long to keep listening for late deliveries once every run finished
# Task runs one after the other in the workflow mix's deepest shape (its margin's steps).
WORKFLOW_DEPTH = max(wf.depth(tasks) for tasks in wf.SHAPES.values())
LOG_LINE = re.compile(r"^\d\d:\d\d:\d\d\.\d{3}  (?P<function>[^ !][^:]*): (?P<json>\{.*\})$")
CONSOLE_ERROR = re.compile(r"^\d\d:\d\d:\d\d\.\d{3}  ! (?P<where>[^:]+): (?P<message>.*)$")


@dataclass(frozen=True)
class Kill:
    at: float  # epoch seconds
    pid: int | None  # None: no live worker process at that moment
    busy: bool


class ChaosMonkey(Periodic):
    """From a thread: every `every_seconds`, SIGKILL a random live process of `host`, until
    the time `stop_at` sets (epoch seconds) or stopped."""

    def __init__(self, host: FunctionHost, every_seconds: float, draw: random.Random) -> None:
        super().__init__(every_seconds, wait_first=True, name="chaos-monkey")
        self._host = host
        self._until: float | None = None  # until told: the last fire time is known once all are made
        self._draw = draw
        self.kills: list[Kill] = []

    def stop_at(self, until: float) -> None:
        self._until = until

    def tick(self) -> bool:
        if self._until is not None and time.time() >= self._until:
            return False
        live = self._host.pids()
        if not live:
            self.kills.append(Kill(time.time(), None, False))
            return True
        pid = self._draw.choice(sorted(live))
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:  # it died on its own (timed out) just now
            return True
        self.kills.append(Kill(time.time(), pid, live[pid]))
        return True


def create_jobs(
    api_url: str,
    target_url: str,
    fire_times: Sequence[int],
    retry: dict[str, float] | None,
    batched_share: float,
    block_size: int = BATCH_BLOCK,
) -> list[Created]:
    """The soak's jobs in the order of their fire times, `block_size` at a time:
    `batched_share` of the blocks, spread over the soak, made by one keyed `POST
    /v1/jobs/batch` each (their one-offs held by due listings), the others one `POST /v1/jobs`
    a job; CREATE_THREADS requests at a time. A time nearer than `LATE_CREATE_LEAD_MS` when
    its request is sent is moved that far from then."""
    units: list[tuple[bool, list[int]]] = []
    for block, first in enumerate(range(0, len(fire_times), block_size)):
        indices = list(range(first, min(first + block_size, len(fire_times))))
        if int((block + 1) * batched_share) > int(block * batched_share):
            units.append((True, indices))
        else:
            units.extend((False, [index]) for index in indices)

    def make(unit: tuple[bool, list[int]]) -> list[Created]:
        batched, indices = unit
        due = [(index, not_sooner_than(fire_times[index], LATE_CREATE_LEAD_MS)) for index in indices]
        if batched:
            return create_batch(api_url, target_url, due, name="bench-chaos", retry=retry)
        [(index, at_ms)] = due
        return [create_job(api_url, target_url, index, at_ms, name="bench-chaos", retry=retry)]

    pool = ThreadPoolExecutor(CREATE_THREADS)
    try:
        return [created for made in pool.map(make, units) for created in made]
    finally:  # interrupted: the requests not yet sent never are
        pool.shutdown(wait=True, cancel_futures=True)


def later_than_planned(made: Sequence[tuple[int, Created | wf.CreatedWorkflow]]) -> dict[str, Any]:
    """Of (planned time, create) pairs, how many were made due later than planned (their
    create sent when the planned time was nearer than LATE_CREATE_LEAD_MS), and by up to how
    many seconds; a create the API refused made nothing and is not counted."""
    shifts = [item.at_ms - planned for planned, item in made if item.at_ms > planned and _made(item)]
    return {"count": len(shifts), "max_seconds": round(max(shifts, default=0) / 1000, 1)}


def _made(item: Created | wf.CreatedWorkflow) -> bool:
    return (item.job_id if isinstance(item, Created) else item.workflow_id) is not None


def worker_host(cloud: LocalCloud) -> FunctionHost:
    """The function the priority queues feed (the stack's one queue consumer)."""
    assert cloud.aws is not None
    mappings = cloud.aws.client("lambda").list_event_source_mappings()["EventSourceMappings"]
    arns = {m["FunctionArn"] for m in mappings if m.get("EventSourceArn", "").startswith("arn:aws:sqs:")}
    if len(arns) != 1:
        raise RuntimeError(f"expected one function behind the queues, found {sorted(arns)}")
    return cloud.hosts[arns.pop()]


def recovery_for(lease_seconds: int, backoff_seconds: float) -> float:
    """The slowest recovery of a run killed: its lease runs out, a poll retries it, the
    retry's send is lost with a kill and is sent again by a later poll (`backoff_seconds`
    after the failure at most), and the retry itself runs."""
    return lease_seconds + 2 * POLL_PERIOD_SECONDS + RESEND_AFTER_SECONDS + backoff_seconds


def margin_for(lease_seconds: int, max_backoff_seconds: float) -> float:
    """Long enough after the last fire time for the slowest recovery of a run killed up to
    then (`recovery_for`)."""
    return recovery_for(lease_seconds, max_backoff_seconds) + MARGIN_SLACK_SECONDS


def workflow_margin_for(lease_seconds: int, task_retry: RetryPolicy, task_depth: int) -> float:
    """Long enough after the last fire time for a workflow run whose every step was killed
    once: its own run (begun by a worker, retried on the workflow's default policy) and each
    of `task_depth` task runs one after the other (a recovery each, with every backoff of the
    tasks' retry policy), and one task's end not joined (the worker died after it) that the
    workflow run's timer catches up: RECHECK, then the poll that finds the timer up."""
    workflow_run = recovery_for(lease_seconds, backoff_ceiling(RetryPolicy(), 1).total_seconds())
    backoffs = sum(
        backoff_ceiling(task_retry, attempt).total_seconds() for attempt in range(1, task_retry.max_attempts)
    )
    return (
        workflow_run
        + task_depth * recovery_for(lease_seconds, backoffs)
        + RECHECK.total_seconds()
        + POLL_PERIOD_SECONDS
        + MARGIN_SLACK_SECONDS
    )


# --- what the stack holds at the end -------------------------------------------------------


def read_table(cloud: LocalCloud, table_name: str) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """(run id → its status, attempt and error; job id → status) of the jobs table, read as
    the adapter's codec reads its items (a one-off's run is kept on its job's item)."""
    assert cloud.aws is not None
    dynamodb = cloud.aws.client("dynamodb")
    codec = ItemCodec(shard_count=1, retention_days=1)  # decoding only
    runs: dict[str, dict[str, Any]] = {}
    jobs: dict[str, str] = {}
    for page in dynamodb.get_paginator("scan").paginate(TableName=table_name):
        for item in page["Items"]:
            sk = item["sk"]["S"]
            run = None
            if sk == keys.JOB_SK:
                jobs[item["pk"]["S"].removeprefix("JOB#")] = item.get("status", {}).get("S", "?")
                run = codec.run_with_job_from_item(item)
            elif sk.startswith(keys.RUN_SK_PREFIX) and "run_id" in item:
                run = codec.run_from_item(item)
            if run is not None:
                runs[run.run_id] = {"status": str(run.status), "attempt": run.attempt, "error": run.error}
    return runs, jobs


def read_dead_letters(cloud: LocalCloud, dlq_url: str) -> list[dict[str, Any]]:
    """Every message on the DLQ (each received once, then hidden), with its receive count."""
    assert cloud.aws is not None
    sqs = cloud.aws.client("sqs")
    messages: list[dict[str, Any]] = []
    empty = 0
    while empty < 3:
        batch = sqs.receive_message(
            QueueUrl=dlq_url,
            MaxNumberOfMessages=10,
            VisibilityTimeout=900,
            WaitTimeSeconds=0,
            AttributeNames=["ApproximateReceiveCount"],
        ).get("Messages", [])
        empty = 0 if batch else empty + 1
        messages += batch
    return messages


def _reason(error: str | None) -> str:
    """A DLQ record's last error with what varies (the URL, the attempt) taken out."""
    text = re.sub(r" from \S+", "", error or "no error recorded")
    return re.sub(r"\battempt \d+\b", "attempt N", text)


def classify_dead_letters(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """RUN_FAILED records by reason; poison messages (raw run messages the queues' redrive
    policy moved) and anything else."""
    records: list[dict[str, Any]] = []
    poison: list[dict[str, Any]] = []
    other = 0
    for message in messages:
        try:
            body = json.loads(message["Body"])
        except ValueError:
            body = None
        if isinstance(body, dict) and body.get("kind") == "RUN_FAILED":
            records.append(body)
        elif isinstance(body, dict) and "run_id" in body:
            receives = message.get("Attributes", {}).get("ApproximateReceiveCount")
            poison.append({"run_id": body["run_id"], "attempt": body.get("attempt"), "receives": receives})
        else:
            other += 1
    return {
        "messages": len(messages),
        "run_failed": len(records),
        "run_failed_by_reason": dict(Counter(_reason(r.get("last_error")) for r in records).most_common()),
        "run_failed_by_attempts": dict(sorted(Counter(int(r.get("attempts", 0)) for r in records).items())),
        "run_failed_run_ids": sorted(str(r.get("run_id")) for r in records),
        "poison": len(poison),
        "poison_messages": poison[:20],
        "other": other,
    }


def read_log(path: Path) -> dict[str, Any]:
    """What the functions logged: the workers' and the pollers' messages, the watchdog's
    actions (and the workflow runs it caught up), runs the workers recorded SUCCEEDED, and
    the local cloud's own errors."""
    messages: dict[str, Counter[str]] = {}
    watched: Counter[str] = Counter()
    succeeded: Counter[str] = Counter()
    ended: set[tuple[str, str]] = set()
    caught_up: list[dict[str, Any]] = []
    errors: Counter[str] = Counter()
    with path.open(errors="replace") as log:
        for line in log:
            line = line.rstrip("\n")
            if found := LOG_LINE.match(line):
                try:
                    record = json.loads(found["json"])
                except ValueError:
                    continue
                message = record.get("message")
                if not isinstance(message, str):
                    continue  # metrics (EMF) lines
                messages.setdefault(short_name(found["function"]), Counter())[message] += 1
                if message == RUN_FINISHED and record.get("status") == "SUCCEEDED" and record.get("run_id"):
                    succeeded[str(record["run_id"])] += 1
                if (message == RUN_FINISHED or message.startswith(TAKEN_OVER)) and record.get("run_id"):
                    ended.add((str(record["run_id"]), str(record.get("attempt"))))
                if message == "poll finished":
                    watched.update(record.get("watched") or {})
                if message == wf.CAUGHT_UP:
                    caught_up.append({k: record.get(k) for k in ("workflow_run_id", "joined", "released")})
            elif found := CONSOLE_ERROR.match(line):
                text = re.sub(r"arn:\S+", "<arn>", found["message"])
                errors[re.sub(r"\d+(\.\d+)?s\b", "Ns", text)[:160]] += 1
    return {
        "messages": {function: dict(counts.most_common()) for function, counts in messages.items()},
        "watchdog": dict(watched.most_common()),
        "succeeded_logged": succeeded,
        "ended_attempts": ended,
        "workflow_catch_ups": caught_up,
        "local_cloud_errors": dict(errors.most_common()),
    }


# --- the soak --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    jobs: int
    spread_seconds: float
    lead_seconds: float
    fail_rate: float
    kill_every_seconds: float
    worker_timeout_seconds: int
    retry: dict[str, float]
    margin_seconds: float | None  # None: `margin_for` the deployed lease (and the workflows' depth)
    seed: int
    workflows: int = 0
    one_offs_claimed_at_start: bool = False  # context `one_offs_claimed_at_start`
    batched_share: float = 0.5  # of the jobs, made by `POST /v1/jobs/batch` (`create_jobs`)


def measure_chaos(plan_: Plan, log_path: Path, assembly_dir: Path) -> dict[str, Any]:
    """Start the local cloud with the short worker timeout, create the jobs, kill workers
    until the last fire time, wait for every run to finish (or the margin), then read the
    table, the DLQ, the receiver and the logs."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    draw = random.Random(plan_.seed)
    with (
        log_path.open("w") as log,
        ReceiverProcess(fail_rate=plan_.fail_rate, seed=draw.randrange(2**32)) as receiver,
    ):
        options = LocalCloudOptions(
            api_port=0,
            moto_port=0,
            out=log,
            verbose=True,
            assembly_dir=assembly_dir,
            context={
                "worker_timeout_seconds": plan_.worker_timeout_seconds,
                "one_offs_claimed_at_start": plan_.one_offs_claimed_at_start,
            },
        )
        started = time.monotonic()
        cloud = LocalCloud(options).start()
        try:
            cloud.describe()
            startup_seconds = time.monotonic() - started
            worker = worker_host(cloud)
            environment = worker.spec.environment
            lease_seconds = int(environment["RUN_LEASE_SECONDS"])
            margin = plan_.margin_seconds
            if margin is None:
                margin = margin_for(lease_seconds, plan_.retry["max_backoff_seconds"])
                if plan_.workflows:
                    margin = max(
                        margin, workflow_margin_for(lease_seconds, RetryPolicy(**plan_.retry), WORKFLOW_DEPTH)
                    )
            now_ms = int(time.time() * 1000)
            fire_times = plan(plan_.jobs, plan_.spread_seconds, plan_.lead_seconds, now_ms)
            workflow_times = plan(plan_.workflows, plan_.spread_seconds, plan_.lead_seconds, now_ms)
            print(
                f"  local cloud up in {startup_seconds:.0f} s; worker timeout "
                f"{worker.spec.timeout_seconds} s, run lease {lease_seconds} s; the last job is planned "
                f"to fire in {max([fire_times[-1], *workflow_times[-1:]]) / 1000 - time.time():.0f} s, "
                f"then up to {margin:.0f} s for every run to finish",
                flush=True,
            )
            with ChaosMonkey(worker, plan_.kill_every_seconds, draw) as monkey:
                creating = time.monotonic()
                # The few workflows first, so that the jobs' creation does not pass their times.
                workflows = wf.create_workflows(
                    cloud.api_url, receiver.url, workflow_times, plan_.retry, LATE_CREATE_LEAD_MS
                )
                created = create_jobs(
                    cloud.api_url, receiver.url, fire_times, plan_.retry, plan_.batched_share
                )
                create_seconds = time.monotonic() - creating
                made_at = [c.at_ms for c in created if c.job_id] + [
                    w.at_ms for w in workflows if w.workflow_id
                ]
                first_fire = min(made_at, default=fire_times[0]) / 1000
                last_fire = max(made_at, default=fire_times[-1]) / 1000
                monkey.stop_at(last_fire)
                expected = {c.run_id for c in created if c.run_id}
                workflow_runs = {w.workflow_run_id for w in workflows if w.workflow_run_id}
                print(
                    f"  {len(expected)} jobs "
                    + (f"and {len(workflow_runs)} workflows " if plan_.workflows else "")
                    + f"created in {create_seconds:.0f} s; soaking…",
                    flush=True,
                )
                finished_at = wait_for_runs(
                    cloud, environment["JOBS_TABLE_NAME"], expected | workflow_runs, last_fire, margin
                )
            answers = wf.read_workflow_runs(cloud.api_url, workflows)
            runs, jobs = read_table(cloud, environment["JOBS_TABLE_NAME"])
            queues = queue_depths(cloud)  # before the DLQ read hides its messages
            dead_letters = read_dead_letters(cloud, environment["DLQ_URL"])
        finally:
            cloud.stop()
        arrivals = receiver.arrivals()
    dead_letter_records = classify_dead_letters(dead_letters)
    logged = read_log(log_path)
    catch_ups = logged.pop("workflow_catch_ups")
    arrivals, task_arrivals = wf.split_arrivals(arrivals, {w.workflow_id for w in workflows if w.workflow_id})
    mix: dict[str, Any] | None = None
    if plan_.workflows:
        mix = wf.summarize_workflows(
            workflows,
            answers,
            task_arrivals,
            classify_repeats(task_arrivals, wf.task_job_of(workflows), logged["ended_attempts"]),
            logged["succeeded_logged"],
            catch_ups,
            dead_letter_records["run_failed_run_ids"],
            jobs,
        )
        mix["margin_seconds"] = margin
        mix["made_later_than_planned"] = later_than_planned(list(zip(workflow_times, workflows, strict=True)))
    result = summarize(
        created,
        runs,
        jobs,
        arrivals,
        dead_letter_records,
        logged,
        not_jobs=set(wf.task_job_of(workflows)) | workflow_runs,
    )
    kills = monkey.kills
    result |= {
        "jobs_planned": plan_.jobs,
        "spread_seconds": plan_.spread_seconds,
        "one_offs_claimed_at_start": plan_.one_offs_claimed_at_start,
        "batched_share": plan_.batched_share,
        "made_in_batches": sum(1 for c in created if c.job_id and c.batched),
        "lead_seconds": plan_.lead_seconds,
        "fail_rate": plan_.fail_rate,
        "retry": plan_.retry,
        "seed": plan_.seed,
        "worker_timeout_seconds": plan_.worker_timeout_seconds,
        "run_lease_seconds": lease_seconds,
        "margin_seconds": margin,
        "kill_every_seconds": plan_.kill_every_seconds,
        "kills": {
            "total": sum(1 for k in kills if k.pid is not None),
            "busy": sum(1 for k in kills if k.pid is not None and k.busy),
            "idle": sum(1 for k in kills if k.pid is not None and not k.busy),
            "no_live_process": sum(1 for k in kills if k.pid is None),
            "at": [{"seconds_after_first_fire": round(k.at - first_fire, 1)} | asdict(k) for k in kills],
        },
        "made_later_than_planned": later_than_planned(list(zip(fire_times, created, strict=True))),
        "startup_seconds": round(startup_seconds, 1),
        "create_seconds": round(create_seconds, 1),
        "all_finished_seconds_after_last_fire": None
        if finished_at is None
        else round(finished_at - last_fire, 1),
        "log": str(log_path),
        "queues_at_end": queues,
    }
    if mix is not None:
        result["workflows"] = mix
    return result


def wait_for_runs(
    cloud: LocalCloud, table_name: str, expected: set[str], last_fire: float, margin: float
) -> float | None:
    """Until every expected run is finished (then SETTLE_SECONDS more) or `margin` after the
    last fire time; the time they were all found finished, None if never."""
    deadline = last_fire + margin
    checked = 0.0
    while time.time() < deadline:
        if time.time() >= last_fire and time.time() - checked >= CHECK_SECONDS:
            checked = time.time()
            runs, _ = read_table(cloud, table_name)
            open_runs = [r for r in expected if runs.get(r, {}).get("status") not in TERMINAL]
            if not open_runs:
                time.sleep(SETTLE_SECONDS)
                return checked
            statuses = Counter(runs.get(r, {}).get("status", "no run item") for r in open_runs)
            print(
                f"  {time.time() - last_fire:+5.0f} s after the last fire time: {len(open_runs)} runs not "
                f"finished ({dict(statuses)})",
                flush=True,
            )
        time.sleep(1)
    return None


def classify_repeats(
    arrivals: list[Arrival], job_of: dict[str, str], ended_attempts: set[tuple[str, str]]
) -> dict[str, dict[str, str]]:
    """The target effects that repeated, by kind (see the module's docstring): `duplicated`
    (the soak fails) and `after_crash` (allowed), each {idempotency key or job id: why}.
    `arrivals`: every call the receiver saw, the soak's or not; `job_of`: the soak's runs'
    jobs; `ended_attempts`: the (run id, attempt) pairs whose worker logged the attempt's end."""
    duplicated: dict[str, str] = {}
    after_crash: dict[str, str] = {}
    ok = sorted((a for a in arrivals if 200 <= a.status < 300), key=lambda a: a.arrived_ms)
    earlier: dict[str, list[Arrival]] = {}
    keys_of_job: dict[str, set[str]] = {}
    for arrival in ok:
        job_id = job_of.get(arrival.run_id) or arrival.job_id
        if job_id in job_of.values():
            keys_of_job.setdefault(job_id, set()).add(arrival.idempotency_key)
        before = earlier.setdefault(arrival.idempotency_key, [])
        if before:
            ended = [a.attempt for a in before if (a.run_id, a.attempt) in ended_attempts]
            if ended:
                duplicated[arrival.idempotency_key] = (
                    f"2xx again at attempt {arrival.attempt} though attempt {ended[0]} got a 2xx "
                    "and logged its end"
                )
            else:
                after_crash.setdefault(
                    arrival.idempotency_key,
                    f"attempt {before[0].attempt} got a 2xx and its worker died before logging its "
                    f"end; attempt {arrival.attempt} called again",
                )
        before.append(arrival)
    for job_id, keys_seen in keys_of_job.items():
        if len(keys_seen) > 1:
            duplicated[job_id] = f"reached under {len(keys_seen)} Idempotency-Keys: {sorted(keys_seen)}"
    return {"duplicated": duplicated, "after_crash": after_crash}


def summarize(
    created: list[Created],
    runs: dict[str, dict[str, Any]],
    jobs: dict[str, str],
    arrivals: list[Arrival],
    dead_letters: dict[str, Any],
    logged: dict[str, Any],
    not_jobs: Collection[str] = (),
) -> dict[str, Any]:
    """The jobs' figures and checks. `arrivals`: every delivery but the workflow mix's;
    `not_jobs`: the run ids of the workflow mix (its DLQ records are not the jobs')."""
    expected = {c.run_id: c.job_id for c in created if c.run_id and c.job_id}
    ours = [a for a in arrivals if a.run_id in expected]
    reached = {a.idempotency_key for a in ours if 200 <= a.status < 300}
    # All arrivals: a second run of one of the soak's jobs has a run id nobody expected.
    repeats = classify_repeats(arrivals, expected, logged.pop("ended_attempts"))
    duplicated = repeats["duplicated"]
    status_of = {run_id: runs.get(run_id, {}).get("status", "NO_RUN_ITEM") for run_id in expected}
    lost = sorted(run_id for run_id, status in status_of.items() if status not in TERMINAL)
    succeeded_logged: Counter[str] = logged.pop("succeeded_logged")
    succeeded_twice = sorted(r for r, n in succeeded_logged.items() if n > 1 and r in expected)
    failed = {r for r, status in status_of.items() if status == "FAILED"}
    left_open = [
        {
            "job_id": job_id,
            "job_status": jobs.get(job_id, "NO_JOB_ITEM"),
            "run_id": r,
            "run_status": status_of[r],
        }
        for r, job_id in expected.items()
        if status_of[r] in TERMINAL and jobs.get(job_id) != "COMPLETED"
    ]
    dead_lettered = set(dead_letters["run_failed_run_ids"]) - set(not_jobs)
    return {
        "jobs_created": len(expected),
        "create_failures": create_failures(created),
        "runs": sum(1 for r in expected if r in runs),
        "deliveries": len(ours),
        "deliveries_by_status": dict(sorted(Counter(a.status for a in ours).items())),
        "stray_deliveries": len(arrivals) - len(ours),
        "lost": len(lost),
        "lost_runs": [{"run_id": r, "status": status_of[r]} | runs.get(r, {}) for r in lost[:20]],
        "succeeded_twice": len(succeeded_twice),
        "succeeded_twice_runs": succeeded_twice[:20],
        "duplicated_effects": len(duplicated),
        "duplicated_effect_keys": dict(list(duplicated.items())[:20]),
        "redelivered_after_crash": len(repeats["after_crash"]),
        "redelivered_after_crash_keys": dict(list(repeats["after_crash"].items())[:20]),
        "runs_by_status": dict(Counter(status_of.values()).most_common()),
        "runs_by_attempts": dict(sorted(Counter(runs[r]["attempt"] for r in expected if r in runs).items())),
        "jobs_by_status": dict(Counter(jobs.get(j, "NO_JOB_ITEM") for j in expected.values()).most_common()),
        "dead_letters": dead_letters,
        "checks": {
            "failed_without_dlq_record": len(failed - dead_lettered),
            "dlq_records_of_runs_not_failed": len(dead_lettered - failed),
            "succeeded_without_2xx": sum(
                1 for r, s in status_of.items() if s == "SUCCEEDED" and r not in reached
            ),
            "2xx_but_not_succeeded": sum(1 for r in reached if status_of.get(r) != "SUCCEEDED"),
            "finished_runs_with_job_not_completed": len(left_open),
        },
        # One-off jobs whose one run finished but that were never completed (a worker killed
        # between the run's final write and the job's).
        "jobs_left_open": left_open[:20],
        **logged,
    }


# --- output ----------------------------------------------------------------------------------


def print_chaos(result: dict[str, Any]) -> None:
    r = result
    kills = r["kills"]
    retry = json.dumps(r["retry"])
    print(
        f"Chaos soak — {r['jobs_planned']} one-off jobs over {r['spread_seconds']:.0f} s; "
        f"HTTP targets answer {r['fail_rate']:.0%} of calls with 500 at random; "
        f"a random worker process SIGKILLed every "
        f"{r['kill_every_seconds']:g} s until the last fire time"
    )
    print(
        f"  every job's retry policy: {retry}; worker timeout {r['worker_timeout_seconds']} s → run lease "
        f"(= queue visibility timeout) {r['run_lease_seconds']} s"
    )
    if "workflows" in r:
        print(
            f"  margin after the last fire time: {r['margin_seconds']:.0f} s (a workflow run's own run and "
            f"{WORKFLOW_DEPTH} task runs one after the other, each recovered once: lease + 2 polls of "
            f"{POLL_PERIOD_SECONDS} s + re-send after {RESEND_AFTER_SECONDS} s + its backoffs; + "
            f"RECHECK {RECHECK.total_seconds():.0f} s + a poll for a join caught up by the timer + "
            f"{MARGIN_SLACK_SECONDS} s, unless --margin-seconds); seed {r['seed']}"
        )
    else:
        print(
            f"  margin after the last fire time: {r['margin_seconds']:.0f} s (lease + 2 polls of "
            f"{POLL_PERIOD_SECONDS} s + re-send after {RESEND_AFTER_SECONDS} s + max backoff + "
            f"{MARGIN_SLACK_SECONDS} s, unless --margin-seconds); seed {r['seed']}"
        )
    finished = r["all_finished_seconds_after_last_fire"]
    rows = [
        [
            "jobs",
            r["jobs_created"],
            f"created of {r['jobs_planned']} planned; {_later_line(r['made_later_than_planned'])}",
        ],
        ["not made", r["jobs_planned"] - r["jobs_created"], "planned jobs the API did not make (goal 0)"],
        ["runs", r["runs"], "run items of those jobs' firings"],
        [
            "deliveries",
            r["deliveries"],
            "target calls seen: " + ", ".join(f"{n}× {s}" for s, n in r["deliveries_by_status"].items()),
        ],
        ["lost", r["lost"], "runs not finished when the margin ran out (goal 0)"],
        ["succeeded twice", r["succeeded_twice"], "runs a worker recorded SUCCEEDED more than once (goal 0)"],
        [
            "duplicated effects",
            r["duplicated_effects"],
            "a 2xx repeated after its attempt logged its end, or a job reached under two keys (goal 0)",
        ],
        [
            "re-delivered after a crash",
            r["redelivered_after_crash"],
            "a 2xx repeated, same key, because the attempt that got it was killed before its end write "
            "(at least once; the key keeps it one effect)",
        ],
        ["DLQ messages", r["dead_letters"]["messages"], _dead_letter_line(r["dead_letters"])],
        [
            "worker kills",
            kills["total"],
            f"{kills['busy']} mid-invocation, {kills['idle']} idle"
            + (
                f", {kills['no_live_process']} times no process was alive" if kills["no_live_process"] else ""
            ),
        ],
    ]
    print(table(["figure", "value", ""], rows))
    print(
        "runs by final status: "
        + ", ".join(f"{status} {n}" for status, n in r["runs_by_status"].items())
        + "   by attempts: "
        + ", ".join(f"{a}: {n}" for a, n in r["runs_by_attempts"].items())
    )
    print("jobs by final status: " + ", ".join(f"{status} {n}" for status, n in r["jobs_by_status"].items()))
    if r["dead_letters"]["run_failed_by_reason"]:
        for reason, n in r["dead_letters"]["run_failed_by_reason"].items():
            print(f"  DLQ RUN_FAILED ×{n}: {reason}")
    for poison in r["dead_letters"]["poison_messages"]:
        print(f"  DLQ poison message: {poison}")
    print(
        "watchdog (poller): " + (", ".join(f"{a} {n}" for a, n in r["watchdog"].items()) or "nothing to do")
    )
    for function, counts in r["messages"].items():
        print(f"{function} logged: " + ", ".join(f"{m!r} {n}" for m, n in counts.items()))
    for error, n in r["local_cloud_errors"].items():
        print(f"  local cloud ×{n}: {error}")
    checks = r["checks"]
    print("checks: " + ", ".join(f"{name.replace('_', ' ')} {n}" for name, n in checks.items()))
    print(
        "all runs finished "
        + (
            f"{finished:+.0f} s after the last fire time"
            if finished is not None
            else "— never, within the margin"
        )
        + f"; creation took {r['create_seconds']:.0f} s"
        + f" ({r.get('made_in_batches', 0)} jobs made in batches of up to {BATCH_BLOCK})"
    )
    for run in r["lost_runs"]:
        print(f"  lost: {run}")
    for job in r["jobs_left_open"]:
        print(f"  job not completed though its run finished: {job}")
    for run_id in r["succeeded_twice_runs"]:
        print(f"  succeeded twice: {run_id}")
    for key, why in r["duplicated_effect_keys"].items():
        print(f"  duplicated effect: {key}: {why}")
    for key, why in r["redelivered_after_crash_keys"].items():
        print(f"  re-delivered after a crash: {key}: {why}")
    for queue, depths in r["queues_at_end"].items():
        if any(depths.values()):
            print(f"  left on {queue}: {depths}")
    if "workflows" in r:
        wf.print_workflows(r["workflows"])
        print(f"workflows: {_later_line(r['workflows']['made_later_than_planned'])}")
    print(f"  local cloud log: {r['log']}")


def _later_line(later: dict[str, Any]) -> str:
    if not later["count"]:
        return "every one due at its planned time"
    return (
        f"{later['count']} due later than planned (up to {later['max_seconds']:g} s), "
        f"their create sent less than {LATE_CREATE_LEAD_MS / 1000:g} s before that time"
    )


def _dead_letter_line(dead_letters: dict[str, Any]) -> str:
    parts = [f"{dead_letters['run_failed']} RUN_FAILED records", f"{dead_letters['poison']} poison messages"]
    if dead_letters["other"]:
        parts.append(f"{dead_letters['other']} other")
    return ", ".join(parts)


def chaos_headline(result: dict[str, Any]) -> str:
    headline = (
        f"not made {result['jobs_planned'] - result['jobs_created']}, lost {result['lost']}, succeeded "
        f"twice {result['succeeded_twice']}, duplicated effects {result['duplicated_effects']} (goal 0 "
        f"each) over {result['runs']} runs; "
        f"{result['redelivered_after_crash']} re-delivered after a crash, "
        f"{result['kills']['total']} worker kills, {result['dead_letters']['messages']} on the DLQ"
    )
    if "workflows" in result:
        headline += "; " + wf.workflows_headline(result["workflows"])
    return headline


def failed_goals(result: dict[str, Any]) -> bool:
    if "workflows" in result and wf.failed_workflow_goals(result["workflows"]):
        return True
    not_made = result["jobs_planned"] - result["jobs_created"]
    return bool(not_made or result["lost"] or result["succeeded_twice"] or result["duplicated_effects"])


# --- command line ----------------------------------------------------------------------------


def share(text: str) -> float:
    value = float(text)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"a share from 0 to 1, got {text}")
    return value


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.chaos", description=__doc__)
    parser.add_argument("--jobs", type=positive_int, default=2000, help="one-off jobs (2000)")
    parser.add_argument(
        "--workflows",
        type=int,
        default=0,
        help="one-off workflows over the same spread, shapes in turn: chain, diamond, fan (0: none)",
    )
    parser.add_argument(
        "--spread-seconds", type=positive_float, default=300, help="spread of their fire times (300)"
    )
    parser.add_argument(
        "--lead-seconds", type=positive_float, default=20, help="from creation to the first fire time (20)"
    )
    parser.add_argument(
        "--fail-rate", type=float, default=0.2, help="share of target calls answered HTTP 500 (0.2)"
    )
    parser.add_argument(
        "--kill-every", type=positive_float, default=10, help="seconds between worker kills (10)"
    )
    parser.add_argument(
        "--worker-timeout-seconds",
        type=positive_int,
        default=15,
        help="CDK context worker_timeout_seconds; the run lease is six times it (15 → 90 s)",
    )
    parser.add_argument("--max-attempts", type=positive_int, default=5, help="every job's retry (5)")
    parser.add_argument("--backoff-seconds", type=positive_float, default=1, help="every job's retry (1)")
    parser.add_argument("--max-backoff-seconds", type=positive_float, default=5, help="every job's retry (5)")
    parser.add_argument(
        "--margin-seconds",
        type=positive_float,
        default=None,
        help="how long after the last fire time runs may take to finish (default: from the lease)",
    )
    parser.add_argument(
        "--one-offs-claimed-at-start",
        action="store_true",
        help="CDK context one_offs_claimed_at_start: polls send one-offs unclaimed, their start claims them",
    )
    parser.add_argument(
        "--batched-share",
        type=share,
        default=0.5,
        help="share of the jobs made 100 at a time by POST /v1/jobs/batch, the rest one by one (0.5)",
    )
    parser.add_argument("--seed", type=int, default=None, help="seed of the failures and kills (random)")
    parser.add_argument("--out", type=Path, default=Path("bench-results/chaos.json"), help="JSON figures")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    signal.signal(signal.SIGTERM, interrupt)
    if not 0 <= args.fail_rate < 1:
        print("--fail-rate must be in [0, 1)", file=sys.stderr)
        return 2
    if args.workflows < 0:
        print("--workflows must be at least 0", file=sys.stderr)
        return 2
    seed = args.seed if args.seed is not None else random.randrange(2**31)
    soak = Plan(
        jobs=args.jobs,
        spread_seconds=args.spread_seconds,
        lead_seconds=args.lead_seconds,
        fail_rate=args.fail_rate,
        kill_every_seconds=args.kill_every,
        worker_timeout_seconds=args.worker_timeout_seconds,
        retry={
            "max_attempts": args.max_attempts,
            "backoff_seconds": args.backoff_seconds,
            "max_backoff_seconds": args.max_backoff_seconds,
        },
        margin_seconds=args.margin_seconds,
        seed=seed,
        workflows=args.workflows,
        one_offs_claimed_at_start=args.one_offs_claimed_at_start,
        batched_share=args.batched_share,
    )
    info = machine()
    started_at = datetime.now(UTC).isoformat(timespec="seconds")
    print(describe_machine(info), flush=True)
    log = args.out.parent / "chaos-cloud.log"
    print(
        f"\nstarting the local cloud with worker_timeout_seconds={soak.worker_timeout_seconds} "
        f"(its output: {log}); {soak.jobs} jobs"
        + (f" and {soak.workflows} workflows" if soak.workflows else "")
        + f" over {soak.spread_seconds:.0f} s, then until every "
        f"run finished…",
        flush=True,
    )
    started = time.monotonic()
    try:
        result = measure_chaos(soak, log, args.out.parent / "cdk.out-chaos")
    except KeyboardInterrupt:
        print("\ninterrupted: everything started was stopped; no figures written", file=sys.stderr)
        return 130
    except Exception:
        traceback.print_exc()
        return 2
    result["seconds"] = round(time.monotonic() - started, 1)
    print("\n== chaos soak ==")
    print_chaos(result)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    figures = {
        "started_at": started_at,
        "machine": info,
        "options": recorded_options(args) | {"seed": seed},
        "chaos": result,
    }
    args.out.write_text(json.dumps(figures, indent=2) + "\n")
    print(f"\nchaos: {chaos_headline(result)}")
    print(f"{describe_machine(info)}\nfigures written to {args.out}")
    return 1 if failed_goals(result) else 0


if __name__ == "__main__":
    sys.exit(main())
