"""The scenarios of issue 10 §1 and what each reports.

- `validate`: the bench's own load (`make bench`'s lateness part): 600 one-off HTTP jobs
  created through the api service, due evenly over 180 s from 60 s after creation began;
  the first two minutes' worth are claimed at creation, the rest by the polls. Its
  `validation` entry compares calls, write units and lateness with the bench's figures.
- `midnight`: 1,000,000 one-off HTTP jobs due in the same second (virtual second 180, i.e.
  00:03:00 of the simulated day), created two days before (put in the table outside
  virtual time, as a job service would have left them: scheduled, in the due index).
- `burst-10m`: 10,000,000 one-off HTTP jobs due evenly over one minute from the same
  second, created like midnight's; always sampled (f = 0.00002 by default).
- `steady`: 100,000 runs a minute for 10 minutes: half from cron jobs (`* * * * *`, 50,000
  jobs, 10 firings each), half one-offs due evenly over the 10 minutes; priorities 20 %
  HIGH, 60 % NORMAL, 20 % LOW. Cron assumption: a 5-field cron fires on the minute, and
  with no `jitter_seconds` every one of the 50,000 fires at second :00 of each minute: each
  minute starts with a 50,000-run burst. Created two days before, like midnight's.

Sampling (midnight, burst-10m and steady; `sampled: true, fraction: f` in the output). The production
code runs a fraction f of the jobs (every 1/f-th); the others are shadow load, modeled where
they compete with the sampled jobs for a shared resource:
  (a) write and read units: every unit a sampled job's item takes is taken again x(1/f - 1)
      at the same time, on the same key where the key is shared by many jobs (an index key:
      the `due` index's minute#shard bucket, so its hot key sees the full burst; a tenant),
      on the table alone where it is the job's own item (other jobs' items are other keys).
      Shadow units are charged whether or not they fit (so the reported hottest-partition
      peak is the load offered, and may exceed 1,000: that excess is what AWS throttles);
      they crowd out the real writes, which then see AWS's throttling and its retries.
  (b) the poller's work: a poll reads a bucket a page at a time and claims each page
      before reading the next (`dispatch`); sampled, a page holds 1,000 x f real entries (at
      least one), each standing for 1/f. Before each real claim, (1/f - 1) modeled jobs
      take one of the poll's `claim_parallelism` slots each, doing what the real job that
      finished last in the page did (`world.modeled_work`): a claim is one drawn
      `TransactWriteItems` latency plus a tenth of a `SendMessageBatch` (`kernel.TaskRunner`;
      the poll sends runs as it claims them, 10 a batch); a one-off sent unclaimed
      (`one_offs_claimed_at_start`) the tenth of the send alone; one left in its bucket
      (sent or claimed already) nothing; the poll's one-after-the-other reads (the due
      index's 1 MB query pages, BatchGetItem of 100 keys) are likewise waited out for the
      full bucket (`aws.SimulatedAws._shadow_calls`). So a poll lasts as long as the full
      bucket's, stops before the poller's 60 s timeout when the full bucket would, and the
      last sampled claims and sends come as late as the full bucket's last.
  (c) the worker side: each real message sent stands beside (1/f - 1) left-out ones on its
      queue, receivable and due when it is; the mappings take them in batches in the order
      they became receivable, each batch holding one of the mapping's concurrent batches and
      one of the account's executions while it waits for its runs' time and does a start, a
      call and an end (`lambdas.EventSourceMapping`). Their starts' and ends' write units
      are asked of the table when they would be written (a unit each on the table, and a
      kept run's end one more on its minute's key of the due index, the left-out jobs spread
      evenly over the shards: `lambdas.LeftOutWrites`), and wait as botocore's retries would
      while the table or the key refuses them; the real runs meet them there. The report's
      `worker_capacity` is what the sampled batches alone would do.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from bench.capacity.lambdas import STANDARD_SCALED_UP
from bench.capacity.world import TARGET_URL, World, poll_summary
from bench.report import percentile
from infra.config import parse_table_capacity
from scheduler_core.composition import build_store
from scheduler_core.domain import keys
from scheduler_core.domain.api_shapes import JobCreate
from scheduler_core.domain.clock import to_ms
from scheduler_core.domain.entities import Job
from scheduler_core.domain.vocabulary import JobStatus, Priority
from scheduler_core.services.jobs import JobService

TENANT = "arn:aws:iam::123456789012:user/capacity"
CREATORS = 8  # concurrent creates, as `make bench` creates with 8 threads
SETTLE_SECONDS = 10  # after the last run arrived, how long to watch for duplicates
QUIET_SECONDS = 600  # past the last due time, no arrival for this long ends a run


@dataclass(frozen=True)
class OneOffLoad:
    """`jobs` one-off HTTP jobs created from time 0, due evenly over `spread_seconds`
    starting `lead_seconds` after creation began."""

    jobs: int
    spread_seconds: float
    lead_seconds: float

    def fire_ms(self, index: int) -> int:
        offset = self.lead_seconds + index * self.spread_seconds / self.jobs
        return round(offset * 1000)


def _create_jobs(world: World, load: OneOffLoad, creator: int, created: list[str]) -> None:
    """One creator: every CREATORS-th job, each an api invocation."""
    for index in range(creator, load.jobs, CREATORS):
        at = world.sim.start + timedelta(milliseconds=load.fire_ms(index))
        request = JobCreate.model_validate(
            {
                "name": f"capacity-{index}",
                "schedule": {"at": at.isoformat()},
                "target": {"type": "HTTP", "url": TARGET_URL},
                "payload": {"index": index},
            }
        )

        def create(container: Any, request: JobCreate = request) -> str:
            service: JobService = container.service
            return service.create(TENANT, request).job_id

        invoked, job_id = world.api.invoke(create)
        if invoked and job_id:
            created.append(job_id)


def run_one_off(world: World, load: OneOffLoad, margin_seconds: float = 180.0) -> dict[str, Any]:
    """Create the jobs, run until every run has fired (or the margin after the last is
    spent), and report."""
    wall = time.perf_counter()
    created: list[str] = []
    world.start(first_poll_minute=0.0)
    for creator in range(CREATORS):
        world.sim.spawn(_create_jobs, world, load, creator, created, name=f"creator {creator}")
    last_due = load.fire_ms(load.jobs - 1) / 1000.0
    _run_until_fired(world, load.jobs, last_due + margin_seconds, lambda: len(created) == load.jobs)
    return report(world, load.jobs, len(created), time.perf_counter() - wall)


def _run_until_fired(
    world: World,
    expected_runs: int,
    deadline: float,
    ready: Callable[[], bool] = lambda: True,
    quiet_after: float | None = None,
) -> None:
    """Advance virtual time until every expected run has arrived (and SETTLE_SECONDS more,
    to see duplicates), until `deadline` (virtual seconds), or, past `quiet_after`, once no
    run has arrived for QUIET_SECONDS (what is missing then is missed: a misfire policy
    folded it into a later run, or it failed)."""
    all_fired_at: float | None = None
    arrived, last_change = 0, 0.0
    while world.sim.env.now < deadline:
        world.sim.run(until=world.sim.env.now + 5.0)
        now = world.sim.env.now
        if len(world.arrivals.by_run) != arrived:
            arrived, last_change = len(world.arrivals.by_run), now
        if all_fired_at is None and ready() and arrived >= expected_runs:
            all_fired_at = now
        if all_fired_at is not None and now >= all_fired_at + SETTLE_SECONDS:
            break
        if quiet_after is not None and now > quiet_after and now - last_change >= QUIET_SECONDS:
            break


# What `not_fired` shows of a job whose run never arrived (its kept run's attributes: `r_`).
_STATE = ("status", "next_fire_at_ms", "due_pk", "due_sk", "version")


def _not_fired(world: World, most: int = 10) -> list[dict[str, Any]]:
    """Up to `most` jobs whose run has not arrived, as the table holds them at the end: where
    each stopped (claimed and queued, running, waiting for a poll), to tell late from lost."""
    fired = {run_id.split(":", 1)[0] for run_id in world.arrivals.by_run}
    ddb = world.aws.plain_client("dynamodb")
    found: list[dict[str, Any]] = []
    for page in ddb.get_paginator("scan").paginate(TableName=world.settings.jobs_table_name):
        for item in page["Items"]:
            job_id = item["pk"]["S"].removeprefix("JOB#")
            if item["sk"]["S"] != keys.JOB_SK or job_id in fired:
                continue
            state = {name: next(iter(value.values())) for name, value in item.items() if name in _STATE}
            state |= {
                name: next(iter(value.values())) for name, value in item.items() if name.startswith("r_")
            }
            found.append({"job_id": job_id, **state})
            if len(found) >= most:
                return found
    return found


def _latest(world: World, most: int = 5) -> list[dict[str, Any]]:
    """The `most` latest runs: how late, and whether a cron's or a one-off's (to tell which
    path a tail is on)."""
    late = sorted(
        (
            (min(times) - int(run_id.rsplit(":", 1)[1]), run_id)
            for run_id, times in world.arrivals.by_run.items()
        ),
        reverse=True,
    )[:most]
    ddb = world.aws.plain_client("dynamodb")
    found = []
    for lateness, run_id in late:
        job_id = run_id.split(":", 1)[0]
        item = ddb.get_item(
            TableName=world.settings.jobs_table_name,
            Key={"pk": {"S": keys.job_pk(job_id)}, "sk": {"S": keys.JOB_SK}},
        ).get("Item", {})
        found.append(
            {
                "run_id": run_id,
                "lateness_ms": round(lateness, 1),
                "cron": '"cron"' in item.get("spec", {}).get("S", ""),
            }
        )
    return found


def report(world: World, expected_runs: int, jobs_created: int, wall_seconds: float) -> dict[str, Any]:
    usage = world.aws.usage
    arrivals = world.arrivals
    lateness = arrivals.lateness_ms()
    fired = len(arrivals.by_run)
    runs = max(fired, 1)
    function_roles = ("api", "poller", "worker")
    table_wcu = sum(usage.table_wcu.values())
    index_wcu = sum(usage.index_wcu.values())
    writes = world.capacity.writes
    queues = world.defaults.queue_capacity
    return {
        "configuration": {
            "shards": world.shards,
            "poller_parallelism": f"{world.settings.claim_parallelism} claims at a time per shard's poll "
            "(claim_parallelism)",
            "worker_concurrency": {p.value: c.max_concurrency for p, c in queues.items()},
            "worker_batch_size": {p.value: c.batch_size for p, c in queues.items()},
            "worker_batching_window_seconds": {p.value: c.batching_window_seconds for p, c in queues.items()},
            "event_source_mapping_mode": world.mode.name,
            "account_concurrency": world.account.limit,
            "lookahead_seconds": world.defaults.lookahead_seconds,
            "one_offs_claimed_at_start": world.defaults.one_offs_claimed_at_start,
            "latency_factor": world.latency.factor,
            "table_previous_peak_wcu": world.previous_peak_wcu or None,
        },
        "sampled": world.fraction < 1.0,
        "fraction": world.fraction,
        "shadow": {
            "write_units": round(world.capacity.shadow_write_units),
            "modeled_claims": world.modeled_work["claim"],
            "modeled_unclaimed_sends": world.modeled_work["send"],
            "modeled_without_a_write": world.modeled_work["none"],
            "modeled_watched_runs": world.modeled_work["watch"],
            "modeled_poller_calls": dict(world.aws.shadow_calls),
        }
        if world.fraction < 1.0
        else None,
        "jobs_created": jobs_created,
        "runs_expected": expected_runs,
        "runs_fired": fired,
        "missed": max(0, expected_runs - fired),
        "not_fired": _not_fired(world) if fired < expected_runs else [],
        "latest": _latest(world),
        "duplicated": arrivals.duplicated(),
        "lateness_ms": {
            "p50": _round(percentile(lateness, 0.50)),
            "p99": _round(percentile(lateness, 0.99)),
            "max": _round(max(lateness) if lateness else None),
        },
        "peak_wcu_hottest_partition": {
            "units": writes.peak_key_units,
            "key": writes.peak_key,
            "note": "offered in one second, shadow load included: above 1,000 is what AWS throttles"
            if world.fraction < 1.0
            else "in one second",
        },
        "peak_wcu_per_table_second": dict(writes.peak_table_units),
        "throttles": {
            "dynamodb_by_reason": dict(world.capacity.throttles),
            "dynamodb_by_call": dict(usage.throttled),
            "lambda": dict(world.account.throttles),
        },
        "aws_requests_per_run": {
            "functions": round(usage.total_calls(function_roles) / runs, 2),
            "event_source_mapping": round(usage.total_calls(("esm",)) / runs, 2),
            "attempts_functions": round(
                sum(n for k, n in usage.attempts.items() if k.split(" ", 1)[0] in function_roles) / runs, 2
            ),
        },
        "write_units_per_run": {
            "table": round(table_wcu / runs, 2),
            "index": round(index_wcu / runs, 2),
            "total": round((table_wcu + index_wcu) / runs, 2),
        },
        "calls": dict(sorted(usage.calls.items())),
        "polls": poll_summary(world.schedule.polls),
        "lambda": {
            name: vars(function.stats) | {"containers": function.stats.cold_starts}
            for name, function in (("api", world.api), ("poller", world.poller), ("worker", world.worker))
        },
        "mappings": {
            p.value: {k: v for k, v in vars(m.stats).items() if k != "concurrency_over_time"}
            for p, m in world.mappings.items()
        },
        "log_lines": dict(world.log.messages),
        "task_failures": [
            f"{name}: {type(error).__name__}: {error}" for name, error in world.sim.failures[:20]
        ],
        "tasks_timed_out": len(world.sim.timed_out),
        "worker_capacity": worker_capacity(world),
        "virtual_seconds": round(world.sim.env.now, 1),
        "wall_seconds": round(wall_seconds, 1),
    }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def validate(scale: float = 1.0, seed: int = 1) -> dict[str, Any]:
    """The bench's own load (`make bench` lateness): 600 jobs over 180 s, times `scale`."""
    load = OneOffLoad(jobs=max(1, round(600 * scale)), spread_seconds=180.0, lead_seconds=60.0)
    world = World(seed=seed)
    with world.running():
        result = run_one_off(world, load)
    return {"scenario": "validate", "load": vars(load)} | result | {"validation": validation(result)}


# What `make bench` measured on moto on this machine, 2026-11-26, after issue 14 (a one-off
# due soon created claimed, a kept run started without a read): its requests part (per run,
# near path = claimed at create, far path = claimed by a poll) and its lateness part (600 jobs
# / 3 min, clean-path lateness: runs whose path saw no moto stall).
BENCH_FIGURES: dict[str, Any] = {
    # Calls by the services the simulation runs: the bench's single-create paths less the api
    # handler's audit line (one PutLogEvents a create), which the simulation does not run.
    "measured": "2026-11-26, make bench (requests, lateness), moto here; calls less the audit line",
    "requests_per_run": {
        "near": {"functions": 5.0, "event_source_mapping": 0.2},
        "far": {"functions": 5.9},
    },
    "write_units_per_run": {"near": {"table": 4.0, "index": 3.0, "total": 7.0}, "far": {"total": 8.0}},
    "lateness_ms": {"p50": 10.85, "p99": 48.58},
}


def validation(result: dict[str, Any]) -> dict[str, Any]:
    """The simulation's figures over the bench's (1.0: the same). The validate load mixes
    both paths (the first two minutes' jobs are claimed at create, the rest by polls), so
    its calls and write units are compared with each path's figure. The bench's lateness is
    moto's on this machine; the simulation's is AWS's published latencies (`latency`):
    agreement there says the model of the path is right, not that moto is AWS."""

    def factor(simulated: float | None, measured: float) -> float | None:
        return None if simulated is None else round(simulated / measured, 2)

    calls = result["aws_requests_per_run"]
    units = result["write_units_per_run"]
    lateness = result["lateness_ms"]
    bench = BENCH_FIGURES
    factors = {
        "function_calls_vs_near": factor(calls["functions"], bench["requests_per_run"]["near"]["functions"]),
        "function_calls_vs_far": factor(calls["functions"], bench["requests_per_run"]["far"]["functions"]),
        "event_source_mapping_calls_vs_near": factor(
            calls["event_source_mapping"], bench["requests_per_run"]["near"]["event_source_mapping"]
        ),
        "write_units_vs_near": factor(units["total"], bench["write_units_per_run"]["near"]["total"]),
        "write_units_vs_far": factor(units["total"], bench["write_units_per_run"]["far"]["total"]),
        "table_write_units_vs_near": factor(units["table"], bench["write_units_per_run"]["near"]["table"]),
        "index_write_units_vs_near": factor(units["index"], bench["write_units_per_run"]["near"]["index"]),
        "lateness_p50": factor(lateness["p50"], bench["lateness_ms"]["p50"]),
        "lateness_p99": factor(lateness["p99"], bench["lateness_ms"]["p99"]),
    }

    def within(names: list[str]) -> float | None:
        spread = [max(v, 1 / v) for k in names if (v := factors[k])]
        return round(max(spread), 2) if spread else None

    counted = [k for k in factors if not k.startswith(("lateness", "event_source"))]
    return {
        "bench": bench,
        "factors": factors,
        "agreement": {
            "function_calls_and_write_units_within_factor": within(counted),
            "lateness_within_factor": within(["lateness_p50", "lateness_p99"]),
            "event_source_mapping_calls_factor": factors["event_source_mapping_calls_vs_near"],
        },
    }


def worker_capacity(world: World) -> dict[str, Any]:
    """What the event source mappings can do at their maximum concurrency, with the
    invocation time measured here: the bound the worker side puts on a full (unsampled)
    load, which the sample does not meet (see the module docstring). A batch received
    before its runs' time waits out the delivery lead inside the invocation; a backlog's
    batches are late and do not, hence the second figure."""
    worker = world.worker.stats
    batches = sum(m.stats.batches for m in world.mappings.values())
    records = sum(m.stats.records for m in world.mappings.values())
    if not worker.invocations or not batches:
        return {}
    seconds = worker.busy_seconds / worker.invocations
    per_batch = records / batches
    queues = world.defaults.queue_capacity.values()
    concurrent = sum(min(c.max_concurrency, world.mode.ceiling) for c in queues)
    lead = world.defaults.delivery_lead_seconds
    no_wait = seconds - lead if seconds > lead + 0.05 else seconds  # late batches waited for nothing
    return {
        "max_concurrent_batches": concurrent,
        "records_per_batch": round(per_batch, 1),
        "invocation_seconds_mean": round(seconds, 3),
        "runs_per_second": round(concurrent * per_batch / seconds),
        "runs_per_second_without_lead_wait": round(concurrent * per_batch / no_wait),
        # A full load fills its batches (their records run side by side in one invocation):
        # the figure for it, with the invocation time measured here (sampled batches are small).
        "runs_per_second_full_batches_without_lead_wait": round(
            sum(min(c.max_concurrency, world.mode.ceiling) * c.batch_size for c in queues) / no_wait
        ),
    }


# --- jobs put outside virtual time ------------------------------------------------------

CREATED_BEFORE = timedelta(days=2)


def put_jobs(world: World, specs: list[tuple[dict[str, Any], Priority, datetime]]) -> list[Job]:
    """Jobs as the job service leaves them, created `CREATED_BEFORE` the start: scheduled,
    their next firing in the due index. Each spec: (schedule, priority, next firing). Put
    outside any task: no virtual time, not counted."""
    store = build_store(world.settings, world.aws.clients("setup"))
    created = world.sim.start - CREATED_BEFORE
    jobs = []
    for index, (schedule, priority, first) in enumerate(specs):
        request = JobCreate.model_validate(
            {
                "name": f"capacity-{index}",
                "schedule": schedule,
                "target": {"type": "HTTP", "url": TARGET_URL},
                "payload": {"index": index},
                "priority": priority.value,
            }
        )
        job = Job(
            job_id=world.new_job_id(),
            tenant=TENANT,
            name=request.name,
            status=JobStatus.SCHEDULED,
            schedule=request.schedule,
            target=request.target,
            payload=request.payload,
            priority=request.priority,
            retry=request.retry,
            concurrency=request.concurrency,
            misfire=request.misfire,
            catch_up_window_seconds=request.catch_up_window_seconds,
            next_fire_at=first,
            created_at=created,
            updated_at=created,
            version=1,
        )
        store.put_job_if_absent(job)
        jobs.append(job)
    # A stack that has run for days: each shard's watermark is where its last polls left it
    # (not a first poll's 15-minute look back).
    for shard in range(world.shards):
        store.advance_watermark(shard, keys.bucket_of(to_ms(world.sim.start)) - 2 * 60_000)
    return jobs


def _priority(index: int) -> Priority:
    """20 % HIGH, 60 % NORMAL, 20 % LOW."""
    return (Priority.HIGH, Priority.NORMAL, Priority.NORMAL, Priority.NORMAL, Priority.LOW)[index % 5]


def _sampled_count(total: int, fraction: float) -> int:
    return max(1, round(total * fraction))


# --- midnight -----------------------------------------------------------------------------

MIDNIGHT_JOBS = 1_000_000
MIDNIGHT_DUE_SECOND = 180  # virtual seconds: 00:03:00 of the simulated day
MIDNIGHT_FRACTION = 0.0002  # 200 of the 1,000,000 run for real
# The on-demand table's (and each index's) previous peak, an assumption: a table that has
# served ~1,700 runs a second spread evenly (~12 write units each) has peaked near 20,000
# WCU/s, more than 30 minutes ago, and so serves 40,000 at once; a peak the scenario makes
# raises that only 30 minutes on (`partitions`). A new table serves 4,000. (The steady
# scenario's load, its crons all at :00, peaks higher: STEADY_PREVIOUS_PEAK_WCU.)
PREVIOUS_PEAK_WCU = 20_000.0
MIDNIGHT_MARGIN_SECONDS = 3_600.0
BURST_JOBS = 10_000_000
BURST_SPREAD_SECONDS = 60.0
BURST_FRACTION = 0.00002  # 200 of the 10,000,000 run for real


def midnight(
    scale: float = 1.0,
    seed: int = 1,
    fraction: float | None = None,
    shards: int | None = None,
    claim_parallelism: int | None = None,
    context: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """1,000,000 one-offs (times `scale`) due in the same second, a fraction f run for real.
    `context`: a deploy's context over cdk.json's (shards, claims, the mappings' batches...);
    with `table_capacity.warm`, the table and its indexes pre-warmed to serve that many
    write (read) units a second at once, else they serve double PREVIOUS_PEAK_WCU and the
    12,000 read units of a new table."""
    total = max(1, round(MIDNIGHT_JOBS * scale))
    f = fraction if fraction is not None else MIDNIGHT_FRACTION
    warm_wcu = warm_rcu = None
    if context and "table_capacity" in context:
        capacity = parse_table_capacity(context["table_capacity"])
        warm_wcu, warm_rcu = capacity.warm_write, capacity.warm_read
    burst = _one_off_burst(
        "midnight", total, 0.0, f, seed, shards, claim_parallelism, warm_wcu, context, warm_rcu
    )
    return burst | {"goal": {"fired_within_seconds": 60, "runs_per_second_needed": round(total / 60.0)}}


def burst_10m(
    scale: float = 1.0,
    seed: int = 1,
    fraction: float | None = None,
    shards: int | None = None,
    claim_parallelism: int | None = None,
    context: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """10,000,000 one-offs (times `scale`) due evenly over one minute, a fraction f run for
    real (the issue asks what this takes and how late the last fires: no goal of its own)."""
    total = max(1, round(BURST_JOBS * scale))
    f = fraction if fraction is not None else BURST_FRACTION
    burst = _one_off_burst(
        "burst-10m", total, BURST_SPREAD_SECONDS, f, seed, shards, claim_parallelism, None, context
    )
    return burst | {"goal": {"runs_per_second_needed": round(total / BURST_SPREAD_SECONDS)}}


def _one_off_burst(
    name: str,
    total: int,
    spread_seconds: float,
    fraction: float,
    seed: int,
    shards: int | None,
    claim_parallelism: int | None,
    warm_wcu: float | None = None,
    context: Mapping[str, Any] | None = None,
    warm_rcu: float | None = None,
) -> dict[str, Any]:
    """`total` one-offs due evenly over `spread_seconds` from virtual second
    MIDNIGHT_DUE_SECOND (all in that second when 0), created days before."""
    sampled = _sampled_count(total, fraction)
    f = sampled / total
    wall = time.perf_counter()
    # Warm throughput is what a table serves at once: the limit a peak of half of it gives.
    previous_peak = max(PREVIOUS_PEAK_WCU, warm_wcu / 2) if warm_wcu else PREVIOUS_PEAK_WCU
    world = World(
        seed=seed,
        shards=shards,
        claim_parallelism=claim_parallelism,
        fraction=f,
        previous_peak_wcu=previous_peak,
        previous_peak_rcu=warm_rcu / 2 if warm_rcu else 0.0,
        context=context,
    )
    due = world.sim.start + timedelta(seconds=MIDNIGHT_DUE_SECOND)
    step = timedelta(seconds=spread_seconds / sampled)
    with world.running():
        put_jobs(
            world,
            [({"at": (due + i * step).isoformat()}, _priority(i), due + i * step) for i in range(sampled)],
        )
        world.start(first_poll_minute=0.0)
        _run_until_fired(
            world,
            sampled,
            MIDNIGHT_DUE_SECOND + spread_seconds + MIDNIGHT_MARGIN_SECONDS,
            quiet_after=MIDNIGHT_DUE_SECOND + spread_seconds,
        )
        result = report(world, sampled, sampled, time.perf_counter() - wall)
    return {
        "scenario": name,
        "load": {
            "jobs": total,
            "due_at": due.isoformat(),
            "due_over_seconds": spread_seconds,
            "sampled_jobs": sampled,
            "created": f"{CREATED_BEFORE.days} days before, put outside virtual time",
        },
        "assumptions": {
            "table_previous_peak_wcu": previous_peak,
            "table_warm_wcu": warm_wcu,
            "table_warm_rcu": warm_rcu,
            "why": "on-demand serves double its previous peak at once; 20,000 WCU/s is a table "
            "that has run the steady scenario's load (a new table: 4,000); pre-warmed, it serves "
            "its warm throughput",
        },
    } | result


# --- steady -------------------------------------------------------------------------------

STEADY_RUNS_PER_MINUTE = 100_000
STEADY_MINUTES = 10
STEADY_FIRST_SECOND = 120  # virtual seconds: the first minute of the load
STEADY_FRACTION = 0.0002
# The on-demand table's (and each index's) previous peak under the steady load, an
# assumption: a table that has run this load for more than half an hour has served its
# seconds at :00, when the 50,000 cron runs start and end and the next minute's claims land:
# about 52,000 WCU/s offered on the table in this simulation (2026-11-27, before this
# assumption; with PREVIOUS_PEAK_WCU it was throttled at 40,000 and its runs were up to 89 s
# late). It serves double: 60,000 assumed (120,000 a second). A new table, or one that has
# served only this load's average (~20,000), is throttled at :00 for its first hour; warm
# throughput (context `table_capacity.warm.write`) is the setting for that.
STEADY_PREVIOUS_PEAK_WCU = 60_000.0


def steady(
    scale: float = 1.0,
    seed: int = 1,
    fraction: float | None = None,
    shards: int | None = None,
    claim_parallelism: int | None = None,
    context: Mapping[str, Any] | None = None,
    previous_peak_wcu: float = STEADY_PREVIOUS_PEAK_WCU,
) -> dict[str, Any]:
    """100,000 runs a minute (times `scale`) for 10 minutes: half cron, half one-off. The
    queue mappings start scaled up to their ceiling, and the table serves the load's peak
    seconds (STEADY_PREVIOUS_PEAK_WCU), as a steady load leaves them."""
    per_minute = max(2, round(STEADY_RUNS_PER_MINUTE * scale))
    f = fraction if fraction is not None else STEADY_FRACTION
    crons = _sampled_count(per_minute // 2, f)
    one_offs = _sampled_count(per_minute // 2 * STEADY_MINUTES, f)
    f = (crons * STEADY_MINUTES + one_offs) / (per_minute * STEADY_MINUTES)
    wall = time.perf_counter()
    world = World(
        seed=seed,
        shards=shards,
        claim_parallelism=claim_parallelism,
        fraction=f,
        previous_peak_wcu=previous_peak_wcu,
        context=context,
        mode=STANDARD_SCALED_UP,
    )
    first = world.sim.start + timedelta(seconds=STEADY_FIRST_SECOND)
    last_cron = first + timedelta(minutes=STEADY_MINUTES - 1)
    span = STEADY_MINUTES * 60.0
    specs: list[tuple[dict[str, Any], Priority, datetime]] = [
        ({"cron": "* * * * *", "end_at": last_cron.isoformat()}, _priority(i), first) for i in range(crons)
    ]
    for i in range(one_offs):
        # Half a step in: each sampled one-off stands for 1/f due at its instant (5,000 at the
        # default fraction), and on the minute every fifth of them, all HIGH (`_priority`),
        # landed on the crons' :00 second, 5,000 HIGH runs there where the real load has 167.
        at = first + timedelta(milliseconds=round((i + 0.5) * span * 1000 / one_offs))
        specs.append(({"at": at.isoformat()}, _priority(i), at))
    expected = crons * STEADY_MINUTES + one_offs
    with world.running():
        put_jobs(world, specs)
        world.start(first_poll_minute=0.0)
        _run_until_fired(
            world,
            expected,
            STEADY_FIRST_SECOND + span + MIDNIGHT_MARGIN_SECONDS,
            quiet_after=STEADY_FIRST_SECOND + span,
        )
        result = report(world, expected, len(specs), time.perf_counter() - wall)
    return {
        "scenario": "steady",
        "load": {
            "runs_per_minute": per_minute,
            "minutes": STEADY_MINUTES,
            "cron_jobs": per_minute // 2,
            "one_off_jobs": per_minute // 2 * STEADY_MINUTES,
            "sampled_cron_jobs": crons,
            "sampled_one_off_jobs": one_offs,
            "priorities": "20 % HIGH, 60 % NORMAL, 20 % LOW",
            "cron_alignment": "`* * * * *` fires at :00 of each minute, no jitter: 50,000 runs in the "
            "same second every minute; one-offs evenly spread, each sampled one half a step off the minute",
        },
        "assumptions": {
            "table_previous_peak_wcu": previous_peak_wcu,
            "why": "a table that has run this load for more than 30 minutes has served its peak "
            "seconds (the crons' :00) and serves double: STEADY_PREVIOUS_PEAK_WCU",
        },
        "goal": {"lateness_p99_ms": 1000, "runs_per_second_needed": round(per_minute / 60.0)},
    } | result
