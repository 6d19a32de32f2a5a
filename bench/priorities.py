"""Priorities under pressure: many LOW and a few HIGH one-off jobs due in the same second,
their HTTP targets on a loopback receiver that answers each call only after a delay (a slow
target), so the worker's LOW capacity is short; per priority, start latency = the target
call's arrival at the receiver − the run's scheduled time.

The stack runs with its shipped capacity (cdk.json `queue_capacity`: each priority's queue
mapping has a batch size and a maximum concurrency; the local cloud honours both). The
jobs are created interleaved, HIGH spread evenly among LOW, due just beyond the poller's
lookahead, so one poll claims them all and sends them to their queues, delayed until shortly
before their time: neither the order of creation nor the order of sending favours a
priority. Two warm-up rounds come first: one starts the API's instances (as the lateness
part's), one fires the HIGH count and a full LOW concurrency's worth of jobs together, so
the worker has about the instances the measured round needs and the HIGH runs are not
timed on cold starts. The goal: HIGH's p95 below LOW's p50, and every run delivered
exactly once (LOW still progresses).
"""

from __future__ import annotations

import math
import time
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from datetime import datetime
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
from bench.periodic import Periodic
from bench.receiver import Arrival, ReceiverProcess, arrivals_by_run
from bench.report import distribution, format_ms, table
from infra.config import PRIORITIES
from infra.local.cloud import LocalCloud, LocalCloudOptions
from infra.local.event_sources import SqsEventSource
from infra.local.functions import FunctionHost
from scheduler_core.domain.clock import to_ms

MEASURED = ("HIGH", "LOW")
DEFAULT_LOOKAHEAD_SECONDS = 120  # the functions' Settings default
SAMPLE_SECONDS = 0.25  # how often the worker's busy instances are counted
HISTOGRAM_SECONDS = 40  # arrivals per second are printed for this long after the due time


def interleave(low: int, high: int) -> list[str]:
    """`low` LOWs and `high` HIGHs, the HIGHs spread evenly among the LOWs."""
    positions = [((k + 0.5) / low, "LOW") for k in range(low)]
    positions += [((k + 0.5) / high, "HIGH") for k in range(high)]
    return [priority for _, priority in sorted(positions)]


def create_mix(api_url: str, target_url: str, priorities: list[str], at_ms: int, name: str) -> list[Created]:
    """A job per entry of `priorities`, all due at `at_ms`, CREATE_THREADS requests at a time."""
    return create_each(
        lambda i: create_job(
            api_url, target_url, i, at_ms, name=f"{name}-{priorities[i].lower()}", priority=priorities[i]
        ),
        len(priorities),
    )


def warm_worker(
    api_url: str, receiver: ReceiverProcess, mix: list[str], rate: float, margin_seconds: float, name: str
) -> set[str]:
    """A job per entry of `mix` (priorities), all due in one second as soon as creating them
    at `rate` (the warm-up's creates per second) allows, delivered before this returns (or
    `margin_seconds` after their time): the worker then has about the instances that many
    runs at once need. Returns their run ids."""
    due_ms = due_second(time.time(), LEAD_MARGIN_SECONDS + CREATE_TIME_FACTOR * len(mix) / rate)
    created = create_mix(api_url, receiver.url, mix, due_ms, name)
    runs = {c.run_id for c in created if c.run_id}
    wait_for_arrivals(receiver, runs, due_ms / 1000 + margin_seconds, settle_seconds=1)
    return runs


def lookahead_of(host: FunctionHost) -> int:
    """The poller's lookahead (seconds) as the deployed functions have it."""
    return int(host.spec.environment.get("LOOKAHEAD_SECONDS", DEFAULT_LOOKAHEAD_SECONDS))


def priority_sources(cloud: LocalCloud, host: FunctionHost) -> dict[str, SqsEventSource]:
    """Priority → the mapping of its queue, as the local cloud runs it (the worker's
    QUEUE_URL_<PRIORITY> tells which queue is which)."""
    by_name = {
        host.spec.environment.get(f"QUEUE_URL_{priority}", "").rsplit("/", 1)[-1]: priority
        for priority in PRIORITIES
    }
    sources = {}
    for source in cloud.event_sources:
        priority = by_name.get(source.queue_arn.rsplit(":", 1)[-1])
        if priority is not None:
            sources[priority] = source
    if set(sources) != set(PRIORITIES):
        raise RuntimeError(f"expected a queue mapping per priority, found {sorted(sources)}")
    return sources


def due_second(now: float, lead_seconds: float) -> int:
    """Epoch ms of the first whole second at least `lead_seconds` from `now` (epoch seconds)."""
    return math.ceil(now + lead_seconds) * 1000


class Watcher(Periodic):
    """From a thread, every SAMPLE_SECONDS: the worker's live and busy instances. And every
    batch a queue mapping hands over: when, from which priority's queue, how many runs."""

    def __init__(self, host: FunctionHost, priority_of_queue: dict[str, str]) -> None:
        super().__init__(SAMPLE_SECONDS)
        self._host = host
        self._priority_of_queue = priority_of_queue
        self.samples: list[tuple[float, int, int]] = []  # (epoch seconds, live, busy)
        self.batches: list[tuple[float, str, int]] = []  # (epoch seconds, priority, size)

    def observe(self, queue_arn: str, records: list[dict[str, Any]]) -> None:
        self.batches.append((time.time(), self._priority_of_queue.get(queue_arn, "?"), len(records)))

    def tick(self) -> None:
        pids = self._host.pids()
        self.samples.append((time.time(), len(pids), sum(pids.values())))

    def summary(self) -> dict[str, Any]:
        """The most live and busy worker instances, and the batches handed over per priority
        by size, since the watch began."""
        samples = [(live, busy) for _, live, busy in self.samples]
        sizes: dict[str, Counter[int]] = defaultdict(Counter)
        for _, priority, size in self.batches:
            sizes[priority][size] += 1
        return {
            "max_live_instances": max((live for live, _ in samples), default=0),
            "max_busy_instances": max((busy for _, busy in samples), default=0),
            "batches": {p: sum(c.values()) for p, c in sorted(sizes.items())},
            "batch_sizes": {p: dict(sorted(c.items())) for p, c in sorted(sizes.items())},
        }


def group_figures(
    created: list[Created],
    groups: list[str],
    group: str,
    due_ms: int,
    by_run: Mapping[str, list[Arrival]],
) -> dict[str, Any]:
    """One group's runs (those created for the entries of `groups` equal to `group`; a
    priority, a tenant), all due at `due_ms`: start latency of each run's first delivery,
    missed and duplicated runs, first deliveries per second after the due time."""
    runs = {c.run_id for c in created if c.run_id and groups[c.index] == group}
    latency: list[float] = []
    wrong_scheduled_for = 0
    per_second: Counter[int] = Counter()
    for run_id in runs:
        if run_id not in by_run:
            continue
        first = by_run[run_id][0]
        scheduled_ms = to_ms(datetime.fromisoformat(first.scheduled_for))
        wrong_scheduled_for += scheduled_ms != due_ms
        latency.append(first.arrived_ms - scheduled_ms)
        per_second[max(0, int((first.arrived_ms - due_ms) // 1000))] += 1
    last_second = max(per_second, default=-1)
    return {
        "jobs_planned": sum(1 for g in groups if g == group),
        "jobs_created": len(runs),
        "start_latency_ms": distribution(latency, (50, 95)),
        "missed": sum(1 for r in runs if r not in by_run),
        "duplicated_runs": sum(1 for r in runs if len(by_run.get(r, [])) > 1),
        "extra_deliveries": sum(max(0, len(by_run.get(r, [])) - 1) for r in runs),
        "early": sum(1 for v in latency if v < 0),
        "wrong_scheduled_for": wrong_scheduled_for,
        "claimed_at_create": sum(1 for c in created if c.run_id in runs and c.claimed_at_create),
        "arrivals_per_second": [per_second[s] for s in range(last_second + 1)],
    }


def summarize(
    created: list[Created], priorities: list[str], due_ms: int, arrivals: list[Arrival]
) -> dict[str, Any]:
    """Per priority: start latency of each run's first delivery, missed and duplicated runs;
    arrivals per second after the due time."""
    by_run = arrivals_by_run(arrivals)
    priority_of = {c.run_id: priorities[c.index] for c in created if c.run_id}
    first_ms = {run_id: arrivals_[0].arrived_ms for run_id, arrivals_ in by_run.items()}
    figures = {p: group_figures(created, priorities, p, due_ms, by_run) for p in MEASURED}
    high_p95 = figures["HIGH"]["start_latency_ms"]["p95"]
    low_p50 = figures["LOW"]["start_latency_ms"]["p50"]
    all_once = all(figures[p]["missed"] == 0 and figures[p]["duplicated_runs"] == 0 for p in MEASURED)
    return {
        "by_priority": figures,
        "goal_high_p95_below_low_p50": high_p95 is not None and low_p50 is not None and high_p95 < low_p50,
        "every_run_delivered_once": all_once,
        "create_failures": create_failures(created),
        "unexpected_deliveries": sum(len(a) for r, a in by_run.items() if r not in priority_of),
        "runs": [
            {
                "run_id": run_id,
                "priority": priority,
                "deliveries": len(by_run.get(run_id, [])),
                "start_latency_ms": round(first_ms[run_id] - due_ms, 1) if run_id in first_ms else None,
            }
            for run_id, priority in priority_of.items()
        ],
    }


def measure_priorities(
    low_jobs: int, high_jobs: int, delay_seconds: float, margin_seconds: float, log_path: Path
) -> dict[str, Any]:
    """Start the local cloud (its output to `log_path`) with a receiver that answers after
    `delay_seconds`, warm up, create the jobs all due in one second, listen until every run
    arrived or the deadline (`margin_seconds` after their time, plus as long as LOW's runs
    would take one call at a time per batch), stop everything, summarize."""
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

            # The worker's instances: HIGH as measured, LOW at its full concurrency, together.
            low_warm_up = capacity["LOW"]["batch_size"] * capacity["LOW"]["max_concurrency"]
            pool_runs = warm_worker(
                cloud.api_url,
                receiver,
                interleave(low_warm_up, high_jobs),
                rate,
                margin_seconds,
                "bench-priorities-warm-up",
            )
            warm_instances = host.instances

            mix = interleave(low_jobs, high_jobs)
            drain_seconds = low_jobs * delay_seconds / capacity["LOW"]["max_concurrency"]
            # Beyond the lookahead: created without a claim (fast), claimed by the next poll.
            lookahead_seconds = lookahead_of(host)
            due_ms = due_second(time.time(), lookahead_seconds + LEAD_MARGIN_SECONDS)
            watcher = Watcher(host, {s.queue_arn: p for p, s in sources.items()})
            cloud.observe_batches(watcher.observe)
            with MotoProbe(cloud) as probe, watcher:
                creating = time.time()
                created = create_mix(cloud.api_url, receiver.url, mix, due_ms, "bench-priorities")
                created_by_ms = time.time() * 1000
                create_seconds = created_by_ms / 1000 - creating
                expected = {c.run_id for c in created if c.run_id}
                ended = wait_for_arrivals(receiver, expected, due_ms / 1000 + margin_seconds + drain_seconds)
            queues = queue_depths(cloud)
        finally:
            cloud.stop()
        arrivals = receiver.arrivals()
    warm_up_runs = api_warm_up_runs | pool_runs
    result = summarize(created, mix, due_ms, [a for a in arrivals if a.run_id not in warm_up_runs])
    result |= {
        "low_jobs": low_jobs,
        "high_jobs": high_jobs,
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


def print_priorities(result: dict[str, Any]) -> None:
    capacity = result["queue_capacity"]
    print(
        f"Priorities under pressure — {result['low_jobs']} LOW and {result['high_jobs']} HIGH one-off jobs "
        f"due in the same second, HTTP targets answering after {result['target_delay_seconds']:g} s "
        f"(start latency: arrival at the receiver − scheduled time)"
    )
    print(
        "  capacity (cdk.json queue_capacity): "
        + ", ".join(
            f"{p} batch {capacity[p]['batch_size']} × max concurrency {capacity[p]['max_concurrency']}"
            for p in PRIORITIES
        )
        + f"; worker concurrency {result['worker_concurrency']}"
    )
    print_latency_table(result["by_priority"], MEASURED)
    high, low = result["by_priority"]["HIGH"], result["by_priority"]["LOW"]
    verdict = "met" if result["goal_high_p95_below_low_p50"] else "NOT met"
    print(
        f"goal HIGH p95 < LOW p50: {verdict} ({format_ms(high['start_latency_ms']['p95'])} vs "
        f"{format_ms(low['start_latency_ms']['p50'])}); every run delivered exactly once: "
        f"{'yes' if result['every_run_delivered_once'] else 'NO'}"
    )
    print_arrivals_per_second(result["by_priority"], MEASURED)
    print_run_details(result, result["by_priority"], MEASURED)
    print_probe_and_leftovers(result, "the due time")


def print_latency_table(by_group: Mapping[str, Mapping[str, Any]], groups: tuple[str, ...]) -> None:
    """A row per group (`group_figures`): its start latency, missed and duplicated runs."""
    rows = []
    for group in groups:
        figures = by_group[group]
        stats = figures["start_latency_ms"]
        rows.append(
            [
                group,
                f"{stats['count']}/{figures['jobs_planned']}",
                stats["p50"],
                stats["p95"],
                stats["max"],
                stats["min"],
                figures["missed"],
                figures["duplicated_runs"],
            ]
        )
    print(table(["start latency ms", "runs", "p50", "p95", "max", "min", "missed", "duplicated"], rows))


def print_arrivals_per_second(by_group: Mapping[str, Mapping[str, Any]], groups: tuple[str, ...]) -> None:
    """Each group's first deliveries per second after the due time (`group_figures`)."""
    print("  first deliveries per second after the due time:")
    for group in groups:
        counts = by_group[group]["arrivals_per_second"]
        shown = " ".join(str(n) for n in counts[:HISTOGRAM_SECONDS])
        print(f"    {group:<4} {shown}{' …' if len(counts) > HISTOGRAM_SECONDS else ''}")


def priorities_headline(result: dict[str, Any]) -> str:
    high = result["by_priority"]["HIGH"]["start_latency_ms"]
    low = result["by_priority"]["LOW"]["start_latency_ms"]
    missed = sum(result["by_priority"][p]["missed"] for p in MEASURED)
    duplicated = sum(result["by_priority"][p]["duplicated_runs"] for p in MEASURED)
    verdict = "met" if result["goal_high_p95_below_low_p50"] else "NOT met"
    return (
        f"HIGH p95 {format_ms(high['p95'])}, LOW p50 {format_ms(low['p50'])} "
        f"(goal HIGH p95 < LOW p50: {verdict}), missed {missed}, duplicated {duplicated}"
    )


def print_run_details(result: dict[str, Any], figures: dict[str, Any], groups: Sequence[str]) -> None:
    """The lines under a latency table: the worker's instances and batches, the creation,
    and the checks; `figures` by group (priority, tenant), `groups` in print order."""
    worker = result["worker"]
    sizes = "; ".join(
        f"{p} {n} ({', '.join(f'{k}×{size}' for size, k in worker['batch_sizes'][p].items())})"
        for p, n in worker["batches"].items()
    )
    print(
        f"  worker: {result['worker_instances_after_warm_up']} instances after the warm-up, at most "
        f"{worker['max_live_instances']} live and {worker['max_busy_instances']} busy; batches "
        f"(count×runs): {sizes or 'none seen'}"
    )
    r = result
    print(
        f"  creation: {sum(figures[g]['jobs_created'] for g in groups)} jobs in "
        f"{r['create_seconds']:.1f} s, due {r['lead_seconds']:.0f} s after creation began "
        f"(lookahead {r['lookahead_seconds']} s); claimed at create (the others by a poll): "
        + ", ".join(f"{g} {figures[g]['claimed_at_create']}" for g in groups)
    )
    if result["creation_overlapped_firing"]:
        print("  warning: creation was still going on when the jobs were due")
    print(
        f"  checks: warm-up runs delivered {r['warm_up_deliveries']}/{r['warm_up_runs']}, "
        f"stray deliveries {r['unexpected_deliveries']}, early "
        f"{sum(figures[g]['early'] for g in groups)}, wrong X-Scheduler-Scheduled-For "
        f"{sum(figures[g]['wrong_scheduled_for'] for g in groups)}, create failures "
        f"{len(r['create_failures'])}"
    )
