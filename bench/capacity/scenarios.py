"""The scenarios of issue 10 §1 and what each reports.

- `validate`: the bench's own load (`make bench`'s lateness part): 600 one-off HTTP jobs
  created through the api service, due evenly over 180 s from 60 s after creation began;
  the first two minutes' worth are claimed at creation, the rest by the polls.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from bench.capacity.world import TARGET_URL, World, poll_summary
from bench.report import percentile
from scheduler_core.jobs import JobService
from scheduler_core.model import JobCreate

TENANT = "arn:aws:iam::123456789012:user/capacity"
CREATORS = 8  # concurrent creates, as `make bench` creates with 8 threads
SETTLE_SECONDS = 10  # after the last run arrived, how long to watch for duplicates


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
    deadline = last_due + margin_seconds
    all_fired_at: float | None = None
    while world.sim.env.now < deadline:
        world.sim.run(until=world.sim.env.now + 5.0)
        if all_fired_at is None and len(created) == load.jobs and len(world.arrivals.by_run) >= load.jobs:
            all_fired_at = world.sim.env.now
        if all_fired_at is not None and world.sim.env.now >= all_fired_at + SETTLE_SECONDS:
            break
    return report(world, load.jobs, len(created), time.perf_counter() - wall)


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
    return {
        "configuration": {
            "shards": world.shards,
            "poller_parallelism": "1 (each shard's poll claims its firings one transaction at a time)",
            "worker_concurrency": {p.value: n for p, n in world.max_concurrency.items()},
            "worker_batch_size": {p.value: n for p, n in world.defaults.batch_size.items()},
            "event_source_mapping_mode": world.mode.name,
            "account_concurrency": world.account.limit,
            "lookahead_seconds": world.defaults.lookahead_seconds,
            "latency_factor": world.latency.factor,
        },
        "sampled": False,
        "jobs_created": jobs_created,
        "runs_expected": expected_runs,
        "runs_fired": fired,
        "missed": max(0, expected_runs - fired),
        "duplicated": arrivals.duplicated(),
        "lateness_ms": {
            "p50": _round(percentile(lateness, 0.50)),
            "p99": _round(percentile(lateness, 0.99)),
            "max": _round(max(lateness) if lateness else None),
        },
        "peak_wcu_hottest_partition": {"units": writes.peak_key_units, "key": writes.peak_key},
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
    return {"scenario": "validate", "load": vars(load)} | result
