"""Fair share between tenants: tenant A floods 300 one-off jobs due in the same second,
tenant B has 10 due then, all at the same priority (NORMAL); their HTTP targets on a
loopback receiver that answers each call only after a delay (a slow target), so the
worker's NORMAL capacity is short of the backlog; per tenant, start latency = the target
call's arrival at the receiver − the run's scheduled time.

Tenants are IAM callers: each job is created through the local API gateway with its
tenant's ARN in `X-Local-Caller` (the job's owner, hence its tenant). The jobs are created
A's all first, then B's — the worst case for B: in creation order, and so in any order that
follows it (the due index, the queue), B's 10 come after A's 300. They are due just beyond
the poller's lookahead plus the time creating them takes, so none is claimed at create and
one poll (a poller invocation per shard) claims them all. That poll claims and sends each
due time's runs round-robin by tenant (scheduler_core/domain/fairness.py), each run with
MessageGroupId = its tenant (SQS fair queues on AWS; moto keeps the group and ignores it).

The stack runs with its shipped capacity (cdk.json `queue_capacity`); the warm-ups are the
priorities part's: one starts the API's instances, one fires a full NORMAL concurrency's
worth of jobs, so the worker has about the instances the measured round needs. The goal:
B's p95 below A's p50, and every run delivered exactly once (A still progresses). Besides
the receiver's arrivals the part records the order in which the NORMAL queue's mapping
handed the runs to the worker, so a miss can be told apart: B's runs handed over late (the
poll's order, the queue's) or handed over early and still late (the worker).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.chaos import worker_host
from bench.lateness import (
    CREATE_TIME_FACTOR,
    LEAD_MARGIN_SECONDS,
    Created,
    MotoProbe,
    create_each,
    create_failures,
    create_job,
    print_probe_and_leftovers,
    queue_depths,
    wait_for_arrivals,
    warm_up,
)
from bench.priorities import (
    Watcher,
    due_second,
    group_figures,
    lookahead_of,
    print_arrivals_per_second,
    print_latency_table,
    print_run_details,
    priority_sources,
    warm_worker,
)
from bench.receiver import Arrival, ReceiverProcess, arrivals_by_run
from bench.report import distribution, format_ms
from infra.local.cloud import LocalCloud, LocalCloudOptions
from infra.local.functions import FunctionHost

TENANTS = ("A", "B")
# The local API gateway takes the caller from X-Local-Caller (the local cloud's account).
CALLERS = {
    "A": "arn:aws:iam::123456789012:user/tenant-a",
    "B": "arn:aws:iam::123456789012:user/tenant-b",
}
PRIORITY = "NORMAL"


def a_first(a_jobs: int, b_jobs: int) -> list[str]:
    """The tenant of each job in creation order: A's all first, then B's."""
    return ["A"] * a_jobs + ["B"] * b_jobs


def create_for_tenants(
    api_url: str, target_url: str, tenants: list[str], at_ms: int, name: str
) -> list[Created]:
    """A NORMAL job per entry of `tenants`, created as that tenant, all due at `at_ms`, in
    that order (CREATE_THREADS requests at a time)."""
    return create_each(
        lambda i: create_job(
            api_url,
            target_url,
            i,
            at_ms,
            name=f"{name}-{tenants[i].lower()}",
            priority=PRIORITY,
            caller=CALLERS[tenants[i]],
        ),
        len(tenants),
    )


class HandOverWatcher(Watcher):
    """The priorities part's watcher, and the run ids of every batch a queue mapping hands
    over, in the order handed over."""

    def __init__(self, host: FunctionHost, priority_of_queue: dict[str, str]) -> None:
        super().__init__(host, priority_of_queue)
        self.handed_over: list[str] = []

    def observe(self, queue_arn: str, records: list[dict[str, Any]]) -> None:
        super().observe(queue_arn, records)
        for record in records:
            try:
                self.handed_over.append(str(json.loads(record["body"])["run_id"]))
            except (ValueError, KeyError, TypeError):
                self.handed_over.append("?")


def hand_over_positions(handed_over: Sequence[str], runs: set[str]) -> dict[str, int]:
    """Each of `runs`' position (1 = first) among the first hand-overs of `runs`."""
    positions: dict[str, int] = {}
    for run_id in handed_over:
        if run_id in runs and run_id not in positions:
            positions[run_id] = len(positions) + 1
    return positions


def summarize(
    created: list[Created],
    tenants: list[str],
    due_ms: int,
    arrivals: list[Arrival],
    handed_over: Sequence[str] = (),
) -> dict[str, Any]:
    """Per tenant: start latency of each run's first delivery, missed and duplicated runs,
    arrivals per second after the due time, and the runs' positions in the order they were
    handed to the worker (`handed_over`: run ids, first handed over first)."""
    by_run = arrivals_by_run(arrivals)
    tenant_of = {c.run_id: tenants[c.index] for c in created if c.run_id}
    first_ms = {run_id: arrivals_[0].arrived_ms for run_id, arrivals_ in by_run.items()}
    position = hand_over_positions(handed_over, set(tenant_of))
    figures: dict[str, Any] = {}
    for tenant in TENANTS:
        runs = [run_id for run_id, t in tenant_of.items() if t == tenant]
        figures[tenant] = {
            "caller": CALLERS[tenant],
            **group_figures(created, tenants, tenant, due_ms, by_run),
            "hand_over_position": distribution([position[r] for r in runs if r in position], (50, 95)),
        }
    b_p95 = figures["B"]["start_latency_ms"]["p95"]
    a_p50 = figures["A"]["start_latency_ms"]["p50"]
    all_once = all(figures[t]["missed"] == 0 and figures[t]["duplicated_runs"] == 0 for t in TENANTS)
    return {
        "by_tenant": figures,
        "goal_b_p95_below_a_p50": b_p95 is not None and a_p50 is not None and b_p95 < a_p50,
        "every_run_delivered_once": all_once,
        "handed_over_runs": len(position),
        "create_failures": create_failures(created),
        "unexpected_deliveries": sum(len(a) for r, a in by_run.items() if r not in tenant_of),
        "runs": [
            {
                "run_id": run_id,
                "tenant": tenant,
                "deliveries": len(by_run.get(run_id, [])),
                "start_latency_ms": round(first_ms[run_id] - due_ms, 1) if run_id in first_ms else None,
                "hand_over_position": position.get(run_id),
            }
            for run_id, tenant in tenant_of.items()
        ],
    }


def measure_fairness(
    a_jobs: int, b_jobs: int, delay_seconds: float, margin_seconds: float, log_path: Path
) -> dict[str, Any]:
    """Start the local cloud (its output to `log_path`) with a receiver that answers after
    `delay_seconds`, warm up, create A's jobs then B's, all due in one second, listen until
    every run arrived or the deadline (`margin_seconds` after their time, plus as long as
    all the runs would take one call at a time per batch), stop everything, summarize."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("w") as log, ReceiverProcess(delay_seconds=delay_seconds) as receiver:
        started = time.monotonic()
        # verbose: every function's log lines (poll summaries too) land in the log, with times.
        options = LocalCloudOptions(api_port=0, moto_port=0, out=log, verbose=True)
        cloud = LocalCloud(options).start()
        try:
            cloud.describe()
            startup_seconds = time.monotonic() - started
            host = worker_host(cloud)
            sources = priority_sources(cloud, host)
            capacity = {
                p: {"batch_size": s.batch_size, "max_concurrency": s.max_concurrency}
                for p, s in sources.items()
            }
            rate, api_warm_up_runs = warm_up(cloud.api_url, receiver)
            # The worker's instances: NORMAL at its full concurrency (the default caller's jobs).
            normal = capacity[PRIORITY]
            pool_runs = warm_worker(
                cloud.api_url,
                receiver,
                [PRIORITY] * (normal["batch_size"] * normal["max_concurrency"]),
                rate,
                margin_seconds,
                "bench-fairness-warm-up",
            )
            warm_instances = host.instances

            tenants = a_first(a_jobs, b_jobs)
            drain_seconds = len(tenants) * delay_seconds / normal["max_concurrency"]
            # Beyond the lookahead until creation is over: none claimed at create (which
            # would send B's, created last, first), all claimed by the next poll.
            lookahead_seconds = lookahead_of(host)
            due_ms = due_second(
                time.time(),
                lookahead_seconds + LEAD_MARGIN_SECONDS + CREATE_TIME_FACTOR * len(tenants) / rate,
            )
            watcher = HandOverWatcher(host, {s.queue_arn: p for p, s in sources.items()})
            cloud.observe_batches(watcher.observe)
            with MotoProbe(cloud) as probe, watcher:
                creating = time.time()
                created = create_for_tenants(cloud.api_url, receiver.url, tenants, due_ms, "bench-fairness")
                created_by_ms = time.time() * 1000
                create_seconds = created_by_ms / 1000 - creating
                expected = {c.run_id for c in created if c.run_id}
                ended = wait_for_arrivals(receiver, expected, due_ms / 1000 + margin_seconds + drain_seconds)
            queues = queue_depths(cloud)
        finally:
            cloud.stop()
        arrivals = receiver.arrivals()
    warm_up_runs = api_warm_up_runs | pool_runs
    result = summarize(
        created, tenants, due_ms, [a for a in arrivals if a.run_id not in warm_up_runs], watcher.handed_over
    )
    result |= {
        "a_jobs": a_jobs,
        "b_jobs": b_jobs,
        "priority": PRIORITY,
        "creation_order": "A's all first, then B's",
        "target_delay_seconds": delay_seconds,
        "start_latency": "target call's arrival at the receiver − the run's scheduled time",
        "queue_capacity": capacity,
        "worker_concurrency": host.spec.concurrency,
        "startup_seconds": startup_seconds,
        "warm_up_creates_per_second": rate,
        "warm_up_runs": len(warm_up_runs),
        "warm_up_deliveries": sum(1 for a in arrivals if a.run_id in warm_up_runs),
        "worker_instances_after_warm_up": warm_instances,
        "lead_seconds": due_ms / 1000 - creating,
        "lookahead_seconds": lookahead_seconds,
        "create_seconds": create_seconds,
        "creation_overlapped_firing": created_by_ms > due_ms,
        "listened_until_seconds_after_due": ended - due_ms / 1000,
        "worker": watcher.summary(),
        "log": str(log_path),
        "queues_at_end": queues,
        "moto_probe": probe.summary(since=due_ms / 1000),
    }
    return result


def _latency(figures: Mapping[str, Any], key: str) -> str:
    return format_ms(figures["start_latency_ms"][key])


def print_fairness(result: dict[str, Any]) -> None:
    capacity = result["queue_capacity"][result["priority"]]
    by_tenant = result["by_tenant"]
    print(
        f"Fair share under pressure — tenant A {result['a_jobs']} and tenant B {result['b_jobs']} "
        f"{result['priority']} one-off jobs due in the same second (created {result['creation_order']}), "
        f"HTTP targets answering after {result['target_delay_seconds']:g} s "
        f"(start latency: arrival at the receiver − scheduled time)"
    )
    print(
        f"  capacity (cdk.json queue_capacity): {result['priority']} batch {capacity['batch_size']} × "
        f"max concurrency {capacity['max_concurrency']}; worker concurrency {result['worker_concurrency']}"
    )
    print_latency_table(by_tenant, TENANTS)
    a, b = by_tenant["A"], by_tenant["B"]
    verdict = "met" if result["goal_b_p95_below_a_p50"] else "NOT met"
    print(
        f"goal B p95 < A p50: {verdict} ({_latency(b, 'p95')} vs {_latency(a, 'p50')}); "
        f"every run delivered exactly once: {'yes' if result['every_run_delivered_once'] else 'NO'}"
    )
    print_arrivals_per_second(by_tenant, TENANTS)
    positions = {t: by_tenant[t]["hand_over_position"] for t in TENANTS}
    print(
        f"  handed to the worker (position among the {result['handed_over_runs']} measured runs, "
        "1 = first): "
        + "; ".join(f"{t} p50 {p['p50']}, p95 {p['p95']}, max {p['max']}" for t, p in positions.items())
    )
    print_run_details(result, by_tenant, TENANTS)
    print_probe_and_leftovers(result, "the due time")


def fairness_headline(result: dict[str, Any]) -> str:
    a, b = result["by_tenant"]["A"], result["by_tenant"]["B"]
    verdict = "met" if result["goal_b_p95_below_a_p50"] else "NOT met"
    return (
        f"B p95 {_latency(b, 'p95')}, A p50 {_latency(a, 'p50')} (goal B p95 < A p50: {verdict}), "
        f"missed A {a['missed']} B {b['missed']}, "
        f"duplicated A {a['duplicated_runs']} B {b['duplicated_runs']}"
    )
