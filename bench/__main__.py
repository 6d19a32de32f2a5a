"""`python -m bench` (`make bench`): fire lateness on the local cloud, dispatch overhead
against a plain boto3 floor, AWS requests per run and what they cost, a worker batch's
lateness on Lambda-sized CPU shares, and start latency per priority, and per tenant, when the
worker's capacity is short. Prints a table per part and
writes every figure as JSON. A part that fails is reported and the others still run."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
import traceback
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.api_calls import measure_requests, print_requests, requests_headline
from bench.common import interrupt, positive_int, recorded_options
from bench.cost import cost_headline, cost_model, print_cost
from bench.dispatch import dispatch_headline, measure_dispatch, print_dispatch
from bench.fairness import fairness_headline, measure_fairness, print_fairness
from bench.lateness import lateness_headline, measure_lateness, print_lateness
from bench.priorities import measure_priorities, print_priorities, priorities_headline
from bench.report import describe_machine, machine
from bench.stack import BenchStack
from bench.worker_cpu import measure_worker_cpu, print_worker_cpu, worker_cpu_headline
from infra.config import HIGH_VOLUME_CONTEXT

PARTS = ("lateness", "dispatch", "requests", "worker-cpu", "priorities", "fairness")
# What of Deploy's high-volume settings changes a run's bill: the worker's batches, memory and
# lead, and one-offs claimed at their start (the other settings do not).
RUN_COST_CONTEXT = (
    "queue_capacity",
    "worker_memory_mb",
    "delivery_lead_seconds",
    "one_offs_claimed_at_start",
)
HEADLINES: dict[str, Callable[[dict[str, Any]], str]] = {
    "lateness": lateness_headline,
    "dispatch": dispatch_headline,
    "requests": requests_headline,
    "cost": cost_headline,
    "worker-cpu": worker_cpu_headline,
    "priorities": priorities_headline,
    "fairness": fairness_headline,
}


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--jobs", type=positive_int, default=600, help="fire lateness: one-off jobs (600)")
    parser.add_argument(
        "--spread-seconds", type=float, default=180, help="fire lateness: spread of their fire times (180)"
    )
    parser.add_argument(
        "--lead-seconds",
        type=float,
        default=15,
        help="fire lateness: at least this long from creation to the first fire time (15; "
        "raised when creating the jobs would take longer)",
    )
    parser.add_argument(
        "--margin-seconds",
        type=float,
        default=60,
        help="fire lateness, priorities and fairness: how long to wait for late runs after the last fire "
        "time (60)",
    )
    parser.add_argument(
        "--dispatch-jobs", type=positive_int, default=200, help="dispatch overhead: due jobs per poll (200)"
    )
    parser.add_argument(
        "--request-runs", type=positive_int, default=10, help="requests per run: one-off runs per path (10)"
    )
    parser.add_argument(
        "--low-jobs",
        type=positive_int,
        default=300,
        help="priorities: LOW one-off jobs due in the same second (300)",
    )
    parser.add_argument(
        "--high-jobs", type=positive_int, default=30, help="priorities: HIGH jobs due in that second too (30)"
    )
    parser.add_argument(
        "--tenant-a-jobs",
        type=positive_int,
        default=300,
        help="fairness: tenant A's NORMAL one-off jobs due in the same second (300)",
    )
    parser.add_argument(
        "--tenant-b-jobs",
        type=positive_int,
        default=10,
        help="fairness: tenant B's NORMAL jobs due in that second too (10)",
    )
    parser.add_argument(
        "--target-delay-seconds",
        type=float,
        default=1.0,
        help="priorities and fairness: the receiver answers each call this long after it arrived (1.0)",
    )
    parser.add_argument("--out", type=Path, default=Path("bench-results/latest.json"), help="JSON figures")
    parser.add_argument("--only", choices=PARTS, help="run one part only")
    return parser.parse_args(argv)


def run_part(
    name: str, measure: Callable[[], dict[str, Any]], printer: Callable[[dict[str, Any]], None]
) -> dict[str, Any]:
    """Measure and print one part; a failure becomes `{"error": ...}` in the figures."""
    print(f"\n== {name} ==", flush=True)
    started = time.monotonic()
    try:
        result = measure()
    except Exception as error:  # a broken part must not hide the others' figures
        traceback.print_exc()
        return {"error": f"{type(error).__name__}: {error}"}
    result["seconds"] = round(time.monotonic() - started, 1)
    print()
    printer(result)
    return result


def print_summary(results: dict[str, Any]) -> None:
    """The headline figure of every part that ran."""
    print("\n== summary ==")
    for part, headline in HEADLINES.items():
        result = results.get(part)
        if result is not None:
            print(f"{part}: " + (f"failed ({result['error']})" if "error" in result else headline(result)))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    signal.signal(signal.SIGTERM, interrupt)
    try:
        return run(args)
    except KeyboardInterrupt:
        print("\ninterrupted: everything started was stopped; no figures written", file=sys.stderr)
        return 130


def run(args: argparse.Namespace) -> int:
    """Every part asked for, then the figures as JSON; 1 if a part failed."""
    parts = [args.only] if args.only else list(PARTS)
    info = machine()
    print(describe_machine(info), flush=True)
    results: dict[str, Any] = {
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": info,
        "options": recorded_options(args),
    }
    on_moto = [part for part in ("dispatch", "requests", "worker-cpu") if part in parts]
    if on_moto:
        print(
            "\ndeploying the stack into a moto server of its own (dispatch overhead, requests per run, "
            "worker CPU)…"
        )
        try:
            # As Deploy gives it for 100,000 runs a minute, the load the cost table is for.
            with BenchStack({key: HIGH_VOLUME_CONTEXT[key] for key in RUN_COST_CONTEXT}) as stack:
                if "dispatch" in parts:
                    results["dispatch"] = run_part(
                        "dispatch overhead",
                        lambda: measure_dispatch(stack, args.dispatch_jobs),
                        print_dispatch,
                    )
                if "requests" in parts:
                    results["requests"] = run_part(
                        "requests per run", lambda: measure_requests(stack, args.request_runs), print_requests
                    )
                if "worker-cpu" in parts:
                    results["worker-cpu"] = run_part(
                        "worker batches on a Lambda-sized CPU share",
                        lambda: measure_worker_cpu(stack),
                        print_worker_cpu,
                    )
        except Exception as error:  # the stack did not deploy: the lateness part may still run
            traceback.print_exc()
            for part in on_moto:
                results.setdefault(part, {"error": f"{type(error).__name__}: {error}"})
    if "requests" in results and "error" not in results["requests"]:
        results["cost"] = run_part("cost per run", lambda: cost_model(results["requests"]), print_cost)
    if "lateness" in parts:
        log = args.out.parent / "local-cloud.log"
        print(
            f"\nstarting the local cloud (its output: {log}); this part takes about "
            f"{args.lead_seconds + args.spread_seconds:.0f} s and more…"
        )
        results["lateness"] = run_part(
            "fire lateness",
            lambda: measure_lateness(
                args.jobs, args.spread_seconds, args.lead_seconds, args.margin_seconds, log
            ),
            print_lateness,
        )
    if "priorities" in parts:
        log = args.out.parent / "local-cloud-priorities.log"
        print(
            f"\nstarting the local cloud (its output: {log}); {args.low_jobs} LOW and {args.high_jobs} HIGH "
            f"jobs due in one second, targets answering after {args.target_delay_seconds:g} s; "
            "this part takes a few minutes…"
        )
        results["priorities"] = run_part(
            "priorities under pressure",
            lambda: measure_priorities(
                args.low_jobs, args.high_jobs, args.target_delay_seconds, args.margin_seconds, log
            ),
            print_priorities,
        )
    if "fairness" in parts:
        log = args.out.parent / "local-cloud-fairness.log"
        print(
            f"\nstarting the local cloud (its output: {log}); tenant A {args.tenant_a_jobs} and tenant B "
            f"{args.tenant_b_jobs} NORMAL jobs due in one second, targets answering after "
            f"{args.target_delay_seconds:g} s; this part takes a few minutes…"
        )
        results["fairness"] = run_part(
            "fair share between tenants",
            lambda: measure_fairness(
                args.tenant_a_jobs, args.tenant_b_jobs, args.target_delay_seconds, args.margin_seconds, log
            ),
            print_fairness,
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print_summary(results)
    print(f"\n{describe_machine(info)}\nfigures written to {args.out}")
    return 1 if any(isinstance(r, dict) and "error" in r for r in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
