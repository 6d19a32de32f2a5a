"""`python -m bench.capacity` (`make capacity`): the capacity simulation's scenarios; prints
a table and writes bench-results/capacity.json."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

from bench.capacity.scenarios import burst_10m, midnight, steady, validate
from bench.report import describe_machine, machine, table
from infra.config import HIGH_VOLUME_CONTEXT, MILLION_A_SECOND_CONTEXT

# The settings docs/operations/deploy.md gives for these volumes (HIGH_VOLUME_CONTEXT), run
# beside the defaults: more shards (more polls side by side, more due-index keys), the most
# claims at a time, the queue mappings' batches of 100 and their concurrency, the delivery
# lead their window needs. Sampled at the default fraction (0.0002: 200 jobs run for real).
TUNED: dict[str, Any] = {"context": HIGH_VOLUME_CONTEXT}
SCENARIOS: dict[str, Callable[..., dict[str, Any]]] = {
    "validate": validate,
    "midnight": midnight,
    # Deploy's high-volume settings on a table that has served 20,000 write units a second
    # (PREVIOUS_PEAK_WCU) and no more than a new table's reads: what a midnight meets unprepared.
    "midnight-tuned": partial(midnight, **TUNED),
    # What Deploy tells a user to set before a million one-offs due in one second: the
    # high-volume settings and the table pre-warmed (MILLION_A_SECOND_CONTEXT).
    "midnight-warm": partial(midnight, context=HIGH_VOLUME_CONTEXT | MILLION_A_SECOND_CONTEXT),
    "steady": steady,
    "steady-tuned": partial(steady, **TUNED),
    # What 10,000,000 in a minute takes: run with the tuned settings only (the defaults are
    # already short of midnight's tenth of that).
    "burst-10m-tuned": partial(burst_10m, **TUNED | {"fraction": 0.00002}),
}
# `--scenario all`: every scenario but burst-10m, which alone takes about 8 minutes here (14
# of virtual time with the table throttling its writes): `make capacity-burst` runs it.
EXTRA = ("burst-10m-tuned",)
ALL = [name for name in SCENARIOS if name not in EXTRA]
# Run side by side, the longest first (wall seconds here: 100-140, 80-100, 60-70).
LONGEST_FIRST = ("steady-tuned", "midnight-tuned", "midnight", "midnight-warm", "validate", "steady")
OUTPUT = Path("bench-results/capacity.json")
CHECKOUT = Path(__file__).resolve().parents[2]  # where `python -m bench.capacity` runs a scenario


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.capacity", description=__doc__)
    parser.add_argument(
        "--scenario",
        choices=[*SCENARIOS, "all"],
        default="all",
        help="which scenario to run (default: all, which leaves out burst-10m-tuned, about 8 minutes alone)",
    )
    parser.add_argument("--scale", type=float, default=1.0, help="multiply the scenario's job count (1.0)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the latency draws (1)")
    parser.add_argument(
        "--fraction",
        type=float,
        default=None,
        help="sampled scenarios: the share of jobs run by the production code "
        "(midnight, steady: 0.0002; burst-10m: 0.00002)",
    )
    parser.add_argument("--output", type=Path, default=OUTPUT, help=f"where to write the JSON ({OUTPUT})")
    parser.add_argument(
        "--jobs",
        type=int,
        default=min(2, os.cpu_count() or 1),
        help="scenarios run side by side, each in a process of its own (default: 2, or 1 on one CPU); "
        "virtual time keeps their figures the same, their wall seconds grow",
    )
    return parser.parse_args(argv)


def scenario_argv(name: str, args: argparse.Namespace, output: Path) -> list[str]:
    """The command line that runs one scenario of `args` alone, writing `output`."""
    argv = ["--scenario", name, "--scale", str(args.scale), "--seed", str(args.seed), "--output", str(output)]
    return argv + (["--fraction", str(args.fraction)] if args.fraction else [])


def run_side_by_side(names: list[str], args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """Each scenario in a process of its own (`python -m bench.capacity --scenario NAME`,
    from this checkout), `args.jobs` at a time, the longest first; their results, in
    `names`' order. The first that fails prints its output and stops the run: the others
    are stopped, or not begun."""
    order = sorted(names, key=lambda name: LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(names))
    running: dict[str, subprocess.Popen[str]] = {}
    stopping = threading.Event()
    with tempfile.TemporaryDirectory(prefix="capacity-") as scratch:

        def run(name: str) -> dict[str, Any]:
            if stopping.is_set():
                raise RuntimeError(f"scenario {name} not begun: another failed")
            output = Path(scratch) / f"{name}.json"
            command = [sys.executable, "-m", "bench.capacity", *scenario_argv(name, args, output)]
            with subprocess.Popen(
                command, cwd=CHECKOUT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
            ) as child:
                running[name] = child
                printed, _ = child.communicate()
            if child.returncode != 0:
                if not stopping.is_set():
                    print(printed, flush=True)
                raise RuntimeError(f"scenario {name} failed (exit {child.returncode}): {' '.join(command)}")
            result: dict[str, Any] = json.loads(output.read_text())["scenarios"][name]
            print(f"  {name}: {result['wall_seconds']} s wall", flush=True)
            return result

        print(f"running {', '.join(order)} (scale {args.scale}), {args.jobs} at a time ...", flush=True)
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            futures = {pool.submit(run, name): name for name in order}
            results: dict[str, dict[str, Any]] = {}
            for future in as_completed(futures):
                try:
                    results[futures[future]] = future.result()
                except BaseException:
                    stopping.set()
                    for child in list(running.values()):  # a thread may be adding one
                        child.kill()
                    raise
            return {name: results[name] for name in names}


def summary_rows(results: dict[str, dict[str, Any]]) -> list[list[Any]]:
    rows = []
    for name, result in results.items():
        configuration = result["configuration"]
        lateness = result["lateness_ms"]
        throttles = sum(result["throttles"]["dynamodb_by_reason"].values()) + sum(
            result["throttles"]["lambda"].values()
        )
        rows.append(
            [
                name + (f" (sampled f={result['fraction']:.4g})" if result["sampled"] else ""),
                configuration["shards"],
                sum(configuration["worker_concurrency"].values()),
                result["runs_fired"],
                result["missed"],
                result["duplicated"],
                lateness["p50"],
                lateness["p99"],
                lateness["max"],
                result["peak_wcu_hottest_partition"]["units"],
                throttles,
                result["aws_requests_per_run"]["functions"],
                result["write_units_per_run"]["total"],
                result["wall_seconds"],
            ]
        )
    return rows


HEADERS = [
    "scenario",
    "shards",
    "worker conc.",
    "fired",
    "missed",
    "dup.",
    "late p50 ms",
    "p99 ms",
    "max ms",
    "hot WCU/s",
    "throttles",
    "calls/run",
    "WU/run",
    "wall s",
]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    names = ALL if args.scenario == "all" else [args.scenario]
    info = machine()
    print(describe_machine(info), flush=True)
    results: dict[str, dict[str, Any]] = {}
    if len(names) > 1 and args.jobs > 1:
        results = run_side_by_side(names, args)
    for name in (name for name in names if name not in results):
        print(f"running {name} (scale {args.scale}) ...", flush=True)
        extra = {"fraction": args.fraction} if args.fraction and name != "validate" else {}
        results[name] = SCENARIOS[name](scale=args.scale, seed=args.seed, **extra)
        print(f"  {name}: {results[name]['wall_seconds']} s wall", flush=True)
    print()
    print(table(HEADERS, summary_rows(results)))
    for name, result in results.items():
        if "validation" in result:
            print(f"{name}: agreement with make bench: {result['validation']['agreement']}")
        if result.get("worker_capacity"):
            print(f"{name}: worker side (not sampled): {result['worker_capacity']}")
        if result["task_failures"]:
            print(f"{name}: tasks that raised: {result['task_failures']}")
    args.output.parent.mkdir(parents=True, exist_ok=True)
    document = {
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": "python -m bench.capacity " + " ".join(sys.argv[1:] if argv is None else argv),
        "machine": info,
        "scenarios": results,
    }
    args.output.write_text(json.dumps(document, indent=2, default=str) + "\n")
    print(f"written: {args.output}")
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # Leave without tearing down the simulated clouds: freeing their millions of objects took
    # about 30 s after the JSON was written, and there is nothing left to save or close.
    os._exit(code)
