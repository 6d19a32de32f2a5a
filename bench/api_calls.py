"""Requests per run: every AWS API call made from a one-off job's creation to its run's
success, counted with botocore event hooks, and the DynamoDB write units they cost.

The services are built in this process with the composition root's builders, on sessions
whose calls are counted, against the deployed stack on moto. A manual clock lets the
"far" jobs (due beyond the lookahead, so claimed by a poll rather than at creation) be
polled without waiting minutes; it always stands where the queue delays come out as 0,
since moto's SQS delays run on the wall clock. The event source mapping's calls (receive,
delete) are counted apart from the functions'. Each batch is one worker invocation, with a
Lambda context as the worker's (what idempotency reads of it: the time left).
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from bench.metering import Call, CallLog, WriteMeter
from bench.receiver import Arrival, Receiver
from bench.report import table
from bench.stack import BenchStack, moto_session
from scheduler_core.aws import RETRY_CONFIG, AwsClients
from scheduler_core.clock import ManualClock, from_ms, to_ms
from scheduler_core.composition import build_dispatcher, build_job_service, build_run_executor, build_store
from scheduler_core.model import JobCreate, JobStatus, Priority, RunMessage, RunStatus
from scheduler_core.observability import logger, metrics

TENANT = "arn:aws:iam::123456789012:user/bench"
FUNCTIONS = "functions"
ESM = "event source mapping"
RECEIVE_TIMEOUT_SECONDS = 30
FAR_SECONDS = 300  # beyond the lookahead: claimed by a poll, not at creation
STEADY_POLLS = 3  # polls a minute apart before the poll cycle is counted as steady state


@dataclass(frozen=True)
class ClaimRoute:
    name: str
    description: str


NEAR = ClaimRoute("near", "due within the lookahead: claimed and enqueued at creation")
FAR = ClaimRoute("far", "due beyond the lookahead: claimed and enqueued by a poll")


class WorkerContext:
    """The Lambda context of one worker invocation, as the local cloud's runtime gives it
    (`infra.local.runtime.LocalContext`): what Powertools idempotency reads of it, the time
    left, from a deadline the function's timeout away."""

    def __init__(self, timeout_seconds: int) -> None:
        self._deadline = time.time() + timeout_seconds

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.time()) * 1000))


class RequestCounter:
    """Drives one-off jobs through create → (poll) → event source mapping → worker."""

    def __init__(self, stack: BenchStack, receiver_url: str) -> None:
        self.settings = stack.settings
        self.log = CallLog(WriteMeter(stack.client("dynamodb")))
        clients = AwsClients(self.log.session(FUNCTIONS, moto_session()))
        self.clock = ManualClock(datetime.now(UTC))
        self.jobs = build_job_service(self.settings, clients, self.clock)
        self.dispatcher = build_dispatcher(self.settings, clients, self.clock)
        self.executor = build_run_executor(self.settings, clients, self.clock)
        # The run lease is the queues' visibility timeout: six times the worker's timeout.
        self.worker_timeout_seconds = max(1, self.settings.run_lease_seconds // 6)
        self.esm_sqs: Any = self.log.session(ESM, moto_session()).client("sqs", config=RETRY_CONFIG)
        self.checks = build_store(self.settings, AwsClients(moto_session()))
        self.receiver_url = receiver_url
        self.outcomes: dict[str, Counter[str]] = {}

    def create(self, route: ClaimRoute, count: int, at: datetime) -> list[str]:
        with self.log.labelled(f"{route.name}:create"):
            return [
                self.jobs.create(
                    TENANT,
                    JobCreate.model_validate(
                        {
                            "name": f"bench-requests-{route.name}-{i}",
                            "schedule": {"at": (at + timedelta(milliseconds=i)).isoformat()},
                            "target": {"type": "HTTP", "url": self.receiver_url},
                            "payload": {"i": i},
                        }
                    ),
                ).job_id
                for i in range(count)
            ]

    def poll_all_shards(self, label: str) -> int:
        with self.log.labelled(label):
            reports = [self.dispatcher.poll_shard(shard) for shard in range(self.settings.shard_count)]
        return sum(len(report.claimed) for report in reports)

    def work(self, route: ClaimRoute, expected: int) -> None:
        """Receive as the event source mapping does, run the worker on each message, delete
        what did not fail."""
        outcomes = self.outcomes.setdefault(route.name, Counter())
        queue_url = self.settings.queue_url(Priority.NORMAL)
        deadline = time.monotonic() + RECEIVE_TIMEOUT_SECONDS
        while sum(outcomes.values()) < expected and time.monotonic() < deadline:
            with self.log.labelled(f"{route.name}:receive"):
                messages = self.esm_sqs.receive_message(
                    QueueUrl=queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=1
                ).get("Messages", [])
            done = []
            if messages:  # one invocation of the worker per batch, as the mapping makes
                self.executor.begin_invocation(WorkerContext(self.worker_timeout_seconds))
            for message in messages:
                try:
                    with self.log.labelled(f"{route.name}:work"):
                        outcome = str(self.executor.execute(RunMessage.model_validate_json(message["Body"])))
                    done.append(message)
                except Exception as error:  # a batch item failure: left to the visibility timeout
                    outcome = f"raised {type(error).__name__}"
                metrics.clear_metrics()  # the worker's handler would flush them to its log
                outcomes[outcome] += 1
            if done:
                with self.log.labelled(f"{route.name}:receive"):
                    self.esm_sqs.delete_message_batch(
                        QueueUrl=queue_url,
                        Entries=[
                            {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(done)
                        ],
                    )

    def check(self, job_ids: list[str]) -> int:
        """How many of the jobs completed with a succeeded run (read outside the count)."""
        succeeded = 0
        for job_id in job_ids:
            job = self.checks.get_job(job_id)
            if job is None or job.status is not JobStatus.COMPLETED or job.schedule.at is None:
                continue
            run = self.checks.get_run(job_id, to_ms(job.schedule.at))
            succeeded += run is not None and run.status is RunStatus.SUCCEEDED
        return succeeded

    def near(self, count: int) -> list[str]:
        # 1 s ahead: claimed at creation, and the queue delay (whole seconds − 1 s lead) is 0.
        job_ids = self.create(NEAR, count, from_ms(to_ms(self.clock.now())) + timedelta(seconds=1))
        self.work(NEAR, count)
        return job_ids

    def far(self, count: int) -> list[str]:
        start = self.clock.now()
        at = start + timedelta(seconds=FAR_SECONDS)
        job_ids = self.create(FAR, count, at)
        # Polls a minute apart that see nothing due yet: the last one is the steady-state cycle.
        horizon = timedelta(seconds=self.settings.lookahead_seconds)
        first = at - horizon - timedelta(seconds=60 * STEADY_POLLS + 1)
        for number in range(STEADY_POLLS):
            self.clock.set(first + timedelta(seconds=60 * (number + 1)))
            label = "steady:poll-cycle" if number == STEADY_POLLS - 1 else "warm:poll-cycle"
            if self.poll_all_shards(label):
                raise RuntimeError("a poll meant to find nothing claimed a run")
        # Half a second before they are due: the claim poll, and a queue delay of 0.
        self.clock.set(at - timedelta(milliseconds=500))
        claimed = self.poll_all_shards(f"{FAR.name}:poll")
        if claimed != count:
            raise RuntimeError(f"the poll claimed {claimed} of {count} runs")
        self.work(FAR, count)
        return job_ids


def _fixed_poll_call(call: Call) -> bool:
    """A poll's own calls, whatever it finds: watermark read/advance and due-index queries."""
    return call.operation in ("dynamodb.GetItem", "dynamodb.UpdateItem", "dynamodb.Query")


def measure_requests(stack: BenchStack, runs: int) -> dict[str, Any]:
    """`runs` one-off jobs on each path; calls and write units per run."""
    arrivals: list[Arrival] = []
    level = logger.log_level
    logger.setLevel("WARNING")  # the services' per-run INFO lines would drown the tables
    try:
        with Receiver(arrivals.append) as receiver:
            counter = RequestCounter(stack, receiver.url)
            stack.clear()
            near_ids = counter.near(runs)
            far_ids = counter.far(runs)
            succeeded = {NEAR.name: counter.check(near_ids), FAR.name: counter.check(far_ids)}
    finally:
        logger.setLevel(level)
    calls = counter.log.calls
    result: dict[str, Any] = {
        "runs_per_path": runs,
        "succeeded": succeeded,
        "worker_outcomes": {name: dict(outcomes) for name, outcomes in counter.outcomes.items()},
        "deliveries": len(arrivals),
        "write_units_method": "computed from item sizes (moto's ConsumedCapacity is a fixed 1.0): "
        "1 WCU per started KB of the larger of the before/after item, x2 in TransactWriteItems "
        "(a ConditionCheck counted as a write); GSI entries written or deleted 1 WCU per started KB each",
        "paths": {},
    }
    for route in (NEAR, FAR):
        mine = [
            c
            for c in calls
            if c.label.startswith(f"{route.name}:")
            and not (c.label == f"{route.name}:poll" and _fixed_poll_call(c))
        ]
        per_phase: dict[str, dict[str, float]] = {}
        for call in mine:
            phase = f"{call.role}/{call.label.split(':', 1)[1]}"
            per_phase.setdefault(phase, {})
            per_phase[phase][call.operation] = per_phase[phase].get(call.operation, 0) + 1 / runs
        functions = [c for c in mine if c.role == FUNCTIONS]
        result["paths"][route.name] = {
            "description": route.description,
            "calls_per_run": per_phase,
            "function_calls_per_run": len(functions) / runs,
            "event_source_mapping_calls_per_run": (len(mine) - len(functions)) / runs,
            "table_wcu_per_run": sum(c.table_wcu for c in mine) / runs,
            "index_wcu_per_run": sum(c.index_wcu for c in mine) / runs,
            "retries": sum(c.attempts - 1 for c in mine),
            "failed_calls": sum(c.failed for c in mine),
        }
    steady = [c for c in calls if c.label == "steady:poll-cycle"]
    claim_poll_fixed = [c for c in calls if c.label == f"{FAR.name}:poll" and _fixed_poll_call(c)]
    result["poll_cycle"] = {
        "description": f"one poll of all {stack.settings.shard_count} shards with nothing due, "
        "a minute after the previous one (paid every minute whatever the load)",
        "calls": dict(Counter(c.operation for c in steady)),
        "table_wcu": sum(c.table_wcu for c in steady),
        "claim_poll_fixed_calls": dict(Counter(c.operation for c in claim_poll_fixed)),
    }
    return result


def print_requests(result: dict[str, Any]) -> None:
    runs = result["runs_per_path"]
    print(f"Requests per run — {runs} one-off runs per path, create → success (HTTP target)")
    rows: list[list[Any]] = []
    for name, path in result["paths"].items():
        for phase, operations in path["calls_per_run"].items():
            for operation, count in sorted(operations.items()):
                rows.append([f"{name}  {phase}", operation, count])
    print(table(["path  role/phase", "call", "per run"], rows))
    rows = [
        [
            name,
            path["function_calls_per_run"],
            path["event_source_mapping_calls_per_run"],
            path["table_wcu_per_run"],
            path["index_wcu_per_run"],
            f"{result['succeeded'][name]}/{runs}",
        ]
        for name, path in result["paths"].items()
    ]
    print()
    print(table(["path", "function calls", "ESM calls", "table WCU", "GSI WCU", "succeeded"], rows))
    for name, path in result["paths"].items():
        print(f"  {name}: {path['description']}")
    cycle = result["poll_cycle"]
    calls = ", ".join(f"{op.split('.', 1)[1]} {n}" for op, n in sorted(cycle["calls"].items()))
    print(f"  plus the poll cycle, every minute whatever the load: {calls} ({cycle['table_wcu']:.0f} WCU)")
    print(
        "  ESM calls: one receive and one delete per batch of up to 10 runs; a real mapping also "
        "long-polls each queue while it is idle"
    )
    print(f"  write units: {result['write_units_method']}")


def requests_headline(result: dict[str, Any]) -> str:
    return "; ".join(
        f"{name} {p['function_calls_per_run']:.1f} calls + {p['event_source_mapping_calls_per_run']:.1f}"
        f" ESM, {p['table_wcu_per_run'] + p['index_wcu_per_run']:.0f} WCU"
        for name, p in result["paths"].items()
    )
