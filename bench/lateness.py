"""Fire lateness: N one-off jobs spread over the next minutes, created through the local
cloud's API with HTTP targets on a loopback receiver; per run, arrival − scheduled time.

The receiver runs in a process of its own and takes the arrival time as soon as a
request's headers are read. The scheduled time is the run's `X-Scheduler-Scheduled-For`
header (checked against the `at` the job was created with). A warm-up round of jobs due
in a few seconds starts the API's and the worker's instances and paces creation, so the
first measured firing comes after creation is over; its runs are left out of the figures.
Meanwhile a probe times a trivial call to moto, to tell moto's own stalls from the
scheduler's delays: beside the lateness of every run, the figures give the probe's own
call times while the runs fired, and the lateness of only the runs whose path (due time
to arrival) overlapped no probe call slower than CLEAN_PATH_STALL_MS.
"""

from __future__ import annotations

import contextlib
import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from bench.periodic import Periodic
from bench.receiver import Arrival, ReceiverProcess, arrivals_by_run
from bench.report import distribution, format_ms, table
from infra.local.api_gateway import CALLER_HEADER
from infra.local.cloud import LocalCloud, LocalCloudOptions
from scheduler_core.domain import keys
from scheduler_core.domain.clock import from_ms, to_ms
from scheduler_core.domain.entities import iso_or_none

CREATE_THREADS = 8
CREATE_TIMEOUT_SECONDS = 30
SETTLE_SECONDS = 5  # how long to keep listening for duplicates once every run has arrived
POLL_SECONDS = 0.5
LEAD_MARGIN_SECONDS = 5
PROBE_SECONDS = 0.2
STALL_MS = 250  # a probe slower than this is reported as a moto stall
# A probe call slower than this marks the local cloud stalled for as long as the call took,
# and a run whose path overlaps it is not "clean". The call takes 5–20 ms when moto keeps
# up; 100 ms is far above that and a fifth of the p99 goal. (The probe's client shares this
# process's GIL with the local cloud's queue mappings and API, so a slow call may be either;
# both stand in for AWS, neither is the scheduler's code.)
CLEAN_PATH_STALL_MS = 100
CREATE_TIME_FACTOR = 3  # creating N jobs vs the warm-up's pace: the table grows, claims slow down
WARM_UP_FIRES_AFTER_MS = 3_000
WARM_UP_WAIT_SECONDS = 10  # after the warm-up runs are due


@dataclass(frozen=True)
class Created:
    index: int
    at_ms: int
    status: int
    job_id: str | None
    claimed_at_create: bool  # the job came back with nothing left due: its run is already queued
    error: str | None
    seconds: float
    batched: bool = False  # made by `POST /v1/jobs/batch`

    @property
    def run_id(self) -> str | None:
        return keys.run_id(self.job_id, self.at_ms) if self.job_id else None


def plan(jobs: int, spread_seconds: float, lead_seconds: float, now_ms: int) -> list[int]:
    """Fire times (epoch ms) evenly spread over `spread_seconds`, the first `lead_seconds` from now."""
    first = now_ms + round(lead_seconds * 1000)
    return [first + round(i * spread_seconds * 1000 / jobs) for i in range(jobs)]


def not_sooner_than(at_ms: int, lead_ms: int | None) -> int:
    """`at_ms`, or `lead_ms` from now if that is later (None: `at_ms` whatever the time)."""
    return at_ms if lead_ms is None else max(at_ms, int(time.time() * 1000) + lead_ms)


def create_job(
    api_url: str,
    target_url: str,
    index: int,
    at_ms: int,
    name: str = "bench-lateness",
    retry: dict[str, float] | None = None,
    priority: str | None = None,
    caller: str | None = None,
) -> Created:
    """Create one one-off job due at `at_ms` calling `target_url`. `caller`: the IAM identity
    to create it as (the local API gateway's `X-Local-Caller`; the job's tenant), else the
    local cloud's default caller."""
    body = _one_off(target_url, index, at_ms, name, retry)
    if priority is not None:
        body["priority"] = priority
    headers = {"Content-Type": "application/json"}
    if caller is not None:
        headers[CALLER_HEADER] = caller
    request = urllib.request.Request(
        f"{api_url}/v1/jobs", data=json.dumps(body).encode(), headers=headers, method="POST"
    )
    started = time.monotonic()
    try:
        with urllib.request.urlopen(request, timeout=CREATE_TIMEOUT_SECONDS) as response:
            reply = json.load(response)
            return Created(
                index,
                at_ms,
                response.status,
                reply["job_id"],
                reply.get("next_fire_at") is None,
                None,
                time.monotonic() - started,
            )
    except urllib.error.HTTPError as error:
        text = error.read()[:300].decode(errors="replace")
        return Created(index, at_ms, error.code, None, False, text, time.monotonic() - started)
    except OSError as error:
        return Created(index, at_ms, 0, None, False, str(error), time.monotonic() - started)


def _one_off(
    target_url: str, index: int, at_ms: int, name: str, retry: dict[str, float] | None
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": f"{name}-{index}",
        "schedule": {"at": iso_or_none(from_ms(at_ms))},
        "target": {"type": "HTTP", "url": target_url},
        "payload": {"index": index},
    }
    if retry is not None:
        body["retry"] = retry
    return body


def create_batch(
    api_url: str,
    target_url: str,
    due: Sequence[tuple[int, int]],
    name: str = "bench-lateness",
    retry: dict[str, float] | None = None,
    tries: int = 3,
) -> list[Created]:
    """Create a one-off job per (index, fire time) of `due` in one `POST /v1/jobs/batch`, with
    an Idempotency-Key, sent again (up to `tries` in all) after a 5xx or a lost answer, as
    docs/api.md tells a batch's sender: a Created each, in order."""
    body = json.dumps({"jobs": [_one_off(target_url, i, at_ms, name, retry) for i, at_ms in due]}).encode()
    headers = {"Content-Type": "application/json", "Idempotency-Key": f"{name}-{due[0][0]}-{time.time_ns()}"}
    started = time.monotonic()
    status, error = 0, ""
    url = f"{api_url}/v1/jobs/batch"
    for _ in range(tries):
        request = urllib.request.Request(url, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=CREATE_TIMEOUT_SECONDS) as response:
                jobs = json.load(response)["jobs"]
                seconds = time.monotonic() - started
                made = response.status
                return [
                    Created(i, at, made, job["job_id"], job.get("next_fire_at") is None, None, seconds, True)
                    for (i, at), job in zip(due, jobs, strict=True)
                ]
        except urllib.error.HTTPError as failed:
            status, error = failed.code, failed.read()[:300].decode(errors="replace")
            if failed.code < 500:
                break
        except OSError as failed:
            status, error = 0, str(failed)
    seconds = time.monotonic() - started
    return [Created(i, at_ms, status, None, False, error, seconds, True) for i, at_ms in due]


def create_failures(created: Iterable[Created]) -> list[dict[str, Any]]:
    """The status and error of the first 20 creates that made no job."""
    return [{"status": c.status, "error": c.error} for c in created if not c.run_id][:20]


def create_each(create: Callable[[int], Created], count: int) -> list[Created]:
    """`create(i)` for i in 0..count-1, CREATE_THREADS requests at a time, results in that
    order (requests are sent in that order too, CREATE_THREADS in flight)."""
    pool = ThreadPoolExecutor(CREATE_THREADS)
    try:
        return list(pool.map(create, range(count)))
    finally:  # interrupted: the requests not yet sent never are
        pool.shutdown(wait=True, cancel_futures=True)


def create_all(
    api_url: str,
    target_url: str,
    fire_times: list[int],
    name: str = "bench-lateness",
    retry: dict[str, float] | None = None,
    min_lead_ms: int | None = None,
) -> list[Created]:
    """Create a job per fire time, CREATE_THREADS requests at a time. `min_lead_ms`: a fire
    time nearer than that when its request is sent is moved to that far from then (None: every
    job asks for its planned time, past or not)."""
    return create_each(
        lambda i: create_job(
            api_url, target_url, i, not_sooner_than(fire_times[i], min_lead_ms), name, retry
        ),
        len(fire_times),
    )


def warm_up(api_url: str, receiver: ReceiverProcess) -> tuple[float, set[str]]:
    """Jobs due in a few seconds, fired and delivered before the measured ones are created:
    they start the API's instances (first round), time the create path with its claim
    (second round), and warm the queues and the worker. Returns creates per second and
    their run ids."""
    soon = int(time.time() * 1000) + WARM_UP_FIRES_AFTER_MS
    first = create_all(api_url, receiver.url, [soon] * CREATE_THREADS, name="bench-warm-up")
    started = time.monotonic()
    timed = create_all(api_url, receiver.url, [soon + 1] * 2 * CREATE_THREADS, name="bench-warm-up")
    rate = len(timed) / (time.monotonic() - started)
    runs = {c.run_id for c in first + timed if c.run_id}
    wait_for_arrivals(receiver, runs, soon / 1000 + WARM_UP_WAIT_SECONDS, settle_seconds=1)
    return rate, runs


def wait_for_arrivals(
    receiver: ReceiverProcess, expected: set[str], deadline: float, settle_seconds: float = SETTLE_SECONDS
) -> float:
    """Until every expected run has arrived (and `settle_seconds` more, for duplicates) or the
    deadline; returns the wall time the wait ended."""
    all_arrived_at: float | None = None
    while time.time() < deadline:
        if all_arrived_at is None and expected <= {a.run_id for a in receiver.arrivals()}:
            all_arrived_at = time.time()
        if all_arrived_at is not None and time.time() - all_arrived_at >= settle_seconds:
            break
        time.sleep(POLL_SECONDS)
    return time.time()


class MotoProbe(Periodic):
    """A trivial call to moto every PROBE_SECONDS from a thread: how long it takes shows when
    moto itself stalls, so late runs can be told apart from the scheduler's own delays."""

    def __init__(self, cloud: LocalCloud) -> None:
        super().__init__(PROBE_SECONDS)
        assert cloud.aws is not None
        self._dynamodb = cloud.aws.client("dynamodb")
        self.samples: list[tuple[float, float]] = []  # (epoch seconds sent, seconds taken)

    def tick(self) -> None:
        sent = time.time()
        with contextlib.suppress(BotoCoreError, ClientError):
            self._dynamodb.list_tables(Limit=1)
        self.samples.append((sent, time.time() - sent))

    def summary(self, since: float) -> dict[str, Any]:
        taken_ms = [seconds * 1000 for _, seconds in self.samples]
        stalls = [
            {"at_seconds": round(sent - since, 1), "ms": round(seconds * 1000)}
            for sent, seconds in self.samples
            if seconds * 1000 >= STALL_MS
        ]
        return {"interval_seconds": PROBE_SECONDS, "call_ms": distribution(taken_ms), "stalls": stalls}


def queue_depths(cloud: LocalCloud) -> dict[str, dict[str, int]]:
    """Messages left on every queue of the stack (a run on the DLQ is a missed run)."""
    assert cloud.aws is not None
    sqs = cloud.aws.client("sqs")
    depths = {}
    for url in sqs.list_queues().get("QueueUrls", []):
        attributes = sqs.get_queue_attributes(
            QueueUrl=url,
            AttributeNames=[
                "ApproximateNumberOfMessages",
                "ApproximateNumberOfMessagesNotVisible",
                "ApproximateNumberOfMessagesDelayed",
            ],
        )["Attributes"]
        depths[url.rsplit("/", 1)[-1]] = {name: int(value) for name, value in attributes.items()}
    return depths


def summarize(created: list[Created], arrivals: list[Arrival]) -> dict[str, Any]:
    """Lateness of each run's first delivery; missed, duplicated, early and stray deliveries."""
    by_run = arrivals_by_run(arrivals)
    expected = {c.run_id: c for c in created if c.run_id}
    lateness: dict[str, float] = {}
    wrong_scheduled_for = 0
    for run_id, job in expected.items():
        if run_id not in by_run:
            continue
        first = by_run[run_id][0]
        scheduled_ms = to_ms(datetime.fromisoformat(first.scheduled_for))
        wrong_scheduled_for += scheduled_ms != job.at_ms
        lateness[run_id] = first.arrived_ms - scheduled_ms
    values = list(lateness.values())
    runs = [
        {
            "run_id": run_id,
            "scheduled_ms": job.at_ms,
            "claimed_at_create": job.claimed_at_create,
            "deliveries": len(by_run.get(run_id, [])),
            "lateness_ms": None if run_id not in lateness else round(lateness[run_id], 1),
            "arrived_ms": by_run[run_id][0].arrived_ms if run_id in lateness else None,
        }
        for run_id, job in expected.items()
    ]
    create_seconds = [c.seconds for c in created]
    return {
        "jobs_planned": len(created),
        "jobs_created": len(expected),
        "create_failures": create_failures(created),
        "create_latency_ms": distribution([s * 1000 for s in create_seconds]),
        "lateness_ms": distribution(values),
        "lateness_ms_by_claim": {
            "at_create": distribution([v for r, v in lateness.items() if expected[r].claimed_at_create]),
            "by_poll": distribution([v for r, v in lateness.items() if not expected[r].claimed_at_create]),
        },
        "missed": len(set(expected) - set(by_run)),
        "duplicated_runs": sum(1 for r in expected if len(by_run.get(r, [])) > 1),
        "extra_deliveries": sum(max(0, len(by_run.get(r, [])) - 1) for r in expected),
        "early": sum(1 for v in values if v < 0),
        "unexpected_deliveries": sum(len(a) for r, a in by_run.items() if r not in expected),
        "wrong_scheduled_for": wrong_scheduled_for,
        "runs": runs,
    }


Span = tuple[float, float]  # (start, end), epoch ms


def stall_spans(samples: Iterable[tuple[float, float]], threshold_ms: float) -> list[Span]:
    """The probe calls (epoch seconds sent, seconds taken) slower than `threshold_ms`, as the
    spans moto was stalled for: from when the call was sent until it came back."""
    return [
        (sent * 1000, (sent + seconds) * 1000) for sent, seconds in samples if seconds * 1000 > threshold_ms
    ]


def overlaps(path: Span, spans: Iterable[Span]) -> bool:
    """Whether `path` (its ends in either order) and one of `spans` share more than an end:
    a span that ends as the path starts, or starts as it ends, does not count."""
    start, end = min(path), max(path)
    return any(span_start < end and span_end > start for span_start, span_end in spans)


def run_paths(runs: Iterable[Mapping[str, Any]]) -> dict[str, Span]:
    """Each delivered run's path, from its scheduled time to its first arrival (epoch ms)."""
    return {
        run["run_id"]: (run["scheduled_ms"], run["arrived_ms"])
        for run in runs
        if run["arrived_ms"] is not None
    }


def net_of_moto(
    paths: Mapping[str, Span],
    samples: Sequence[tuple[float, float]],
    threshold_ms: float = CLEAN_PATH_STALL_MS,
) -> dict[str, Any]:
    """Lateness beside moto's own stalls. The window is from the first run's due time to the
    last arrival; the probe's call times are those of the calls that overlapped it. A run is
    clean when no probe call slower than `threshold_ms` overlapped its path."""
    if not paths:
        return {"stall_threshold_ms": threshold_ms, "window_seconds": 0.0}
    window = (min(min(p) for p in paths.values()), max(max(p) for p in paths.values()))
    in_window = [
        (sent, seconds)
        for sent, seconds in samples
        if overlaps(window, [(sent * 1000, (sent + seconds) * 1000)])
    ]
    stalls = stall_spans(in_window, threshold_ms)
    stalled_ms = sum(min(end, window[1]) - max(start, window[0]) for start, end in stalls)
    clean = [
        arrived - scheduled
        for scheduled, arrived in paths.values()
        if not overlaps((scheduled, arrived), stalls)
    ]
    return {
        "stall_threshold_ms": threshold_ms,
        "window_seconds": round((window[1] - window[0]) / 1000, 2),
        "probe_call_ms": distribution([seconds * 1000 for _, seconds in in_window]),
        "stalls": len(stalls),
        "stalled_seconds": round(stalled_ms / 1000, 2),
        "clean_path_lateness_ms": distribution(clean),
        "runs_with_a_stall_on_their_path": len(paths) - len(clean),
    }


def measure_lateness(
    jobs: int, spread_seconds: float, lead_seconds: float, margin_seconds: float, log_path: Path
) -> dict[str, Any]:
    """Start the local cloud (its output to `log_path`), create the jobs, listen until they
    are all due plus `margin_seconds`, stop everything, summarize."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("w") as log, ReceiverProcess() as receiver:
        started = time.monotonic()
        # verbose: every function's log lines (poll summaries too) land in the log, with times.
        options = LocalCloudOptions(api_port=0, moto_port=0, out=log, verbose=True)
        cloud = LocalCloud(options).start()
        try:
            cloud.describe()
            startup_seconds = time.monotonic() - started
            # Creation must be over before the first firing.
            rate, warm_up_runs = warm_up(cloud.api_url, receiver)
            lead_seconds = max(lead_seconds, LEAD_MARGIN_SECONDS + CREATE_TIME_FACTOR * jobs / rate)
            fire_times = plan(jobs, spread_seconds, lead_seconds, int(time.time() * 1000))
            with MotoProbe(cloud) as probe:
                creating = time.monotonic()
                created = create_all(cloud.api_url, receiver.url, fire_times)
                created_by_ms = time.time() * 1000
                create_seconds = time.monotonic() - creating
                expected = {c.run_id for c in created if c.run_id}
                ended = wait_for_arrivals(receiver, expected, fire_times[-1] / 1000 + margin_seconds)
            queues = queue_depths(cloud)
        finally:
            cloud.stop()
        arrivals = receiver.arrivals()
    result = summarize(created, [a for a in arrivals if a.run_id not in warm_up_runs])
    result |= {
        "jobs": jobs,
        "spread_seconds": spread_seconds,
        "lead_seconds": lead_seconds,
        "warm_up_creates_per_second": rate,
        "warm_up_runs": len(warm_up_runs),
        "warm_up_deliveries": sum(1 for a in arrivals if a.run_id in warm_up_runs),
        "startup_seconds": startup_seconds,
        "create_seconds": create_seconds,
        "creation_overlapped_firing": created_by_ms > fire_times[0],
        "listened_until_seconds_after_last_fire": ended - fire_times[-1] / 1000,
        "log": str(log_path),
        "queues_at_end": queues,
        "moto_probe": probe.summary(since=fire_times[0] / 1000),
        "net_of_moto_stalls": net_of_moto(run_paths(result["runs"]), probe.samples),
    }
    return result


def print_lateness(result: dict[str, Any]) -> None:
    print(
        f"Fire lateness — {result['jobs']} one-off jobs over {result['spread_seconds']:.0f} s, "
        f"HTTP targets on a loopback receiver (arrival − scheduled time)"
    )
    net = result["net_of_moto_stalls"]
    threshold = net["stall_threshold_ms"]
    named_stats = [
        ("lateness: all runs", result["lateness_ms"]),
        ("  claimed at create", result["lateness_ms_by_claim"]["at_create"]),
        ("  claimed by a poll", result["lateness_ms_by_claim"]["by_poll"]),
        (f"  path clear of moto stalls > {threshold:g} ms", net.get("clean_path_lateness_ms")),
        ("moto probe call, while firing", net.get("probe_call_ms")),
    ]
    rows = [
        [
            name,
            *(None if stats is None else stats[key] for key in ("count", "p50", "p95", "p99", "max", "min")),
        ]
        for name, stats in named_stats
    ]
    print(table(["ms", "count", "p50", "p95", "p99", "max", "min"], rows))
    print(
        f"missed {result['missed']}   duplicated {result['duplicated_runs']}   early {result['early']}   "
        f"(goal: p99 ≤ 500 ms, 0 missed, 0 duplicated; early must be 0)"
    )
    if "stalls" in net:
        print(
            f"  net of moto: a path is clear when no probe call slower than {threshold:g} ms overlapped the "
            f"run's due time → arrival; {net['runs_with_a_stall_on_their_path']} runs had one on theirs. "
            f"{net['stalls']} such calls, {net['stalled_seconds']:.1f} s of the "
            f"{net['window_seconds']:.0f} s from the first due time to the last arrival"
        )
    latency, r = result["create_latency_ms"], result
    print(
        f"  creation: {r['jobs_created']}/{r['jobs_planned']} jobs in {r['create_seconds']:.1f} s "
        f"(p50 {format_ms(latency['p50'])}, p99 {format_ms(latency['p99'])} a create); first firing "
        f"{r['lead_seconds']:.0f} s after creation began (warm-up: {r['warm_up_creates_per_second']:.1f}/s)"
    )
    if result["creation_overlapped_firing"]:
        print("  warning: creation was still going on when the first jobs fired")
    print(
        f"  checks: warm-up runs delivered {result['warm_up_deliveries']}/{result['warm_up_runs']}, "
        f"stray deliveries {result['unexpected_deliveries']}, "
        f"wrong X-Scheduler-Scheduled-For {result['wrong_scheduled_for']}"
    )
    print_probe_and_leftovers(result, "the first firing")


def print_probe_and_leftovers(result: dict[str, Any], since: str) -> None:
    """The moto probe's figures, the local cloud's log and what was left on its queues."""
    probe, call_ms = result["moto_probe"], result["moto_probe"]["call_ms"]
    stalls = ", ".join(f"{s['ms']} ms at {s['at_seconds']:+.0f} s" for s in probe["stalls"][:12])
    print(
        f"  moto probe (a trivial call every {probe['interval_seconds']} s): "
        f"p99 {format_ms(call_ms['p99'])}, max {format_ms(call_ms['max'])}; "
        f"stalls ≥ {STALL_MS} ms (from {since}): {stalls or 'none'}"
    )
    print(f"  local cloud log: {result['log']}")
    for queue, depths in result["queues_at_end"].items():
        if any(depths.values()):
            print(f"  left on {queue}: {depths}")


def lateness_headline(result: dict[str, Any]) -> str:
    stats = result["lateness_ms"]
    net = result["net_of_moto_stalls"]
    clean, probe = net.get("clean_path_lateness_ms"), net.get("probe_call_ms")
    beside = (
        ""
        if clean is None or probe is None
        else f"; p99 {format_ms(clean['p99'])} over the {clean['count']} runs clear of moto stalls "
        f"> {net['stall_threshold_ms']:g} ms, moto probe p99 {format_ms(probe['p99'])}"
    )
    return (
        f"p99 {format_ms(stats['p99'])} over {stats['count']} runs (goal ≤ 500 ms), "
        f"missed {result['missed']}, duplicated {result['duplicated_runs']}, early {result['early']}{beside}"
    )
