"""Requests per run: every AWS API call made from a one-off job's creation to its run's
success, counted with botocore event hooks, and the DynamoDB write units they cost.

The services are built in this process with the composition root's builders, on sessions
whose calls are counted, against the deployed stack on moto. A manual clock lets the
"far" jobs (due beyond the lookahead, so claimed by a poll rather than at creation) be
polled without waiting minutes; it always stands where the queue delays come out as 0,
since moto's SQS delays run on the wall clock. The event source mapping's calls (receive,
delete) are counted apart from the functions'. Each batch is one worker invocation, with a
Lambda context as the worker's (what idempotency reads of it: the time left).

For the cost model (`bench.cost`) it also measures, per run, the DynamoDB read units, the
SQS requests as billed, the invocations of each function, how long they ran (wall time on
moto, in a second trial of each path with the meter off, `timed`), and the bytes the
functions log: the services' lines at the functions' log level, each with the keys
Powertools' `inject_lambda_context` adds in Lambda, and the metrics each worker or poller
invocation flushes to its log, and the api's audit lines. Creates run through the api's own
handler (one request per job, or one batch of 100 on the batched paths), polls through the
poller's; batches of messages through the service the worker's handler calls.
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from aws_lambda_powertools.logging.lambda_context import LambdaContextModel, build_lambda_context_model

from bench.common import metrics_namespace
from bench.metering import Call, CallLog, LogMeter, WriteMeter
from bench.receiver import Arrival, Receiver
from bench.report import table
from bench.stack import TENANT, BenchStack, DeployedFunction, environment, moto_session
from functions.api.handler import handler as api_handler
from functions.poller.handler import handler as poller_handler
from infra.local.api_gateway import proxy_event
from infra.local.cloud import STACK_NAME
from infra.local.deployment import REGION
from infra.local.identity import principal_id
from scheduler_core.adapters.aws import RETRY_CONFIG, AwsClients
from scheduler_core.adapters.queues import delete_received
from scheduler_core.composition import build_dispatcher, build_job_service, build_run_executor, build_store
from scheduler_core.domain import keys
from scheduler_core.domain.api_shapes import MAX_BATCH_JOBS
from scheduler_core.domain.clock import ManualClock, from_ms, to_ms
from scheduler_core.domain.messages import RunMessage
from scheduler_core.domain.vocabulary import JobStatus, Priority, RunStatus
from scheduler_core.observability import SAME_ON_EVERY_LINE, logger, metrics

FUNCTIONS = "functions"
ESM = "event source mapping"
RECEIVE_TIMEOUT_SECONDS = 30
FAR_SECONDS = 300  # beyond the lookahead: claimed by a poll, not at creation
STEADY_POLLS = 3  # polls a minute apart before the poll cycle is counted as steady state
ACCOUNT = "123456789012"
# What Lambda puts in a traced function's environment; Powertools logs its Root on every line.
XRAY_TRACE_HEADER = "Root=1-6745f0a2-3b8c1d2e4f5a6b7c8d9e0f1a;Parent=1a2b3c4d5e6f7a8b;Sampled=1"
# The phase of a label (`near:create`) → the function that does that work in the stack.
FUNCTION_OF_PHASE = {
    "create": "api",
    "poll": "poller",
    "after": "poller",
    "poll-cycle": "poller",
    "work": "worker",
}
# The phases whose polls are the poll cycle's (paid every minute whatever they find): a run
# costs them only what they do beyond a poll that finds nothing.
POLL_PHASES = ("poll", "after")


@dataclass(frozen=True)
class ClaimRoute:
    name: str
    description: str
    batched: bool = False  # made by `POST /v1/jobs/batch`, all the path's jobs in one request
    cycle_label: str | None = None  # its last steady poll cycle is counted as the poll cycle's


STEADY = "steady:poll-cycle"
NEAR = ClaimRoute("near", "due within the lookahead: claimed and enqueued at creation")
FAR = ClaimRoute("far", "due beyond the lookahead: claimed and enqueued by a poll", cycle_label=STEADY)
NEAR_BATCH = ClaimRoute("near-batch", "as near, made in keyed batches of 100 (POST /v1/jobs/batch)", True)
FAR_BATCH = ClaimRoute("far-batch", "as far, made in keyed batches of 100 (POST /v1/jobs/batch)", True)
# One run first, counted apart: this process's first create and batch load botocore models
# and build clients, which a warm Lambda has done already (and would bill as a cold start).
WARM_UP = ClaimRoute("warm", "one near run before the measured ones, not counted")
# Another after the first's polls (which move the clock): what the worker caches, as of now.
WARM_AGAIN = ClaimRoute("warm-again", "one near run before the measured ones, not counted")
# Runs on a batched path: one full batch (`MAX_BATCH_JOBS`).
BATCH_RUNS = MAX_BATCH_JOBS


def timed(route: ClaimRoute) -> ClaimRoute:
    """`route` again with the meter off, for how long its functions run: the meter's reads
    around each write would add to their time, and a batch create's writes, made side by
    side, overlap them, so they cannot be subtracted from its wall time."""
    cycle = route.cycle_label and route.cycle_label.replace(":", "~timed:", 1)
    return replace(route, name=f"{route.name}~timed", cycle_label=cycle)


class BenchLambdaContext:
    """The Lambda context of one invocation, as the local cloud's runtime gives it
    (`infra.local.runtime.LocalContext`): what Powertools idempotency reads of it, the time
    left, from a deadline the function's timeout away; and what Powertools' logger adds to
    every line in Lambda."""

    def __init__(self, function: DeployedFunction, timeout_seconds: int) -> None:
        self._deadline = time.time() + timeout_seconds
        self.function_name = f"{STACK_NAME}-{function.name}"
        self.function_version = "$LATEST"
        self.invoked_function_arn = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{self.function_name}"
        self.memory_limit_in_mb = function.memory_mb
        self.aws_request_id = str(uuid.uuid4())
        self.log_group_name = f"/aws/lambda/{self.function_name}"
        self.log_stream_name = f"2026/11/21/[$LATEST]{uuid.uuid4().hex}"

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.time()) * 1000))


class RequestCounter:
    """Drives one-off jobs through create → (poll) → event source mapping → worker."""

    def __init__(self, stack: BenchStack, receiver_url: str) -> None:
        self.settings = stack.settings
        self.log = CallLog(WriteMeter(stack.client("dynamodb")))
        self.log_meter = LogMeter(self.log)
        self.functions = stack.functions
        self.invocations: Counter[str] = Counter()  # per label
        # Per label: wall time, and the invoking thread's own CPU time (moto answers in another
        # process): what a function's work asks of its share of a vCPU. Only a timed trial's
        # (`timed`) are as long as the functions make them: a metered one reads around writes.
        self.busy_seconds: defaultdict[str, float] = defaultdict(float)
        self.cpu_seconds: defaultdict[str, float] = defaultdict(float)
        self.worker_batch_size = stack.worker_batch_size
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

    @contextlib.contextmanager
    def invocation(self, label: str, timeout_seconds: int) -> Iterator[BenchLambdaContext]:
        """One invocation of the function that does `label`'s work: its calls labelled, its
        time and log lines counted, with the keys the handlers' `inject_invocation` adds to
        each line (and the API's correlation id); the metrics a handler with `log_metrics`
        would flush are counted as its log, then dropped."""
        function = self.functions[FUNCTION_OF_PHASE[label.split(":", 1)[1]]]
        context = BenchLambdaContext(function, timeout_seconds)
        logger.append_keys(service=function.service_name, **build_lambda_context_model(context).__dict__)
        logger.remove_keys(SAME_ON_EVERY_LINE)  # as the handlers' `inject_invocation`
        if function.name == "api":
            logger.set_correlation_id(str(uuid.uuid4()))
        started, cpu = time.perf_counter(), time.thread_time()
        try:
            with (
                metrics_namespace(function.metrics_namespace, function.service_name),
                self.log.labelled(label),
                contextlib.redirect_stdout(self.log_meter),
            ):
                yield context
                if function.name != "api" and metrics.metric_set:  # the api has no `log_metrics`
                    emf = metrics.serialize_metric_set()
                    self.log_meter.add(json.dumps(emf, separators=(",", ":")) + "\n")
        finally:
            logger.set_correlation_id(None)
            self.busy_seconds[label] += time.perf_counter() - started
            self.cpu_seconds[label] += time.thread_time() - cpu
            self.invocations[label] += 1

    def create(self, route: ClaimRoute, count: int, at: datetime) -> list[str]:
        """`count` one-off jobs through the api function's handler (its audit line included):
        one request each, or one batch."""
        bodies = [
            {
                "name": f"bench-requests-{route.name}-{i}",
                "schedule": {"at": (at + timedelta(milliseconds=i)).isoformat()},
                "target": {"type": "HTTP", "url": self.receiver_url},
                "payload": {"i": i},
            }
            for i in range(count)
        ]
        if route.batched:  # with an Idempotency-Key, as docs/api.md tells a batch's sender
            key = {"Idempotency-Key": f"bench-{route.name}-{uuid.uuid4().hex}"}
            with self.invocation(f"{route.name}:create", timeout_seconds=25) as context:
                made = self._api("/v1/jobs/batch", {"jobs": bodies}, context, key)
            return [job["job_id"] for job in made["jobs"]]
        job_ids = []
        for body in bodies:
            with self.invocation(f"{route.name}:create", timeout_seconds=25) as context:
                job_ids.append(self._api("/v1/jobs", body, context)["job_id"])
        return job_ids

    def _api(
        self,
        path: str,
        body: dict[str, Any],
        context: BenchLambdaContext,
        headers: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        """A `POST` to the api function as API Gateway hands it one signed by the bench's caller."""
        reply = api_handler(rest_event("POST", path, body, TENANT, headers), context, jobs=self.jobs)
        answer: dict[str, Any] = json.loads(reply["body"])
        if reply["statusCode"] != 201:
            raise RuntimeError(f"POST {path} answered {reply['statusCode']}: {answer}")
        return answer

    def poll_all_shards(self, label: str) -> int:
        """One invocation of the poller's handler per shard, as its rules make every minute.
        How many firings it claimed or sent unclaimed (one-offs claimed at their start)."""
        dispatched = 0
        for shard in range(self.settings.shard_count):
            with self.invocation(label, timeout_seconds=60) as context:
                summary = poller_handler({"shard": shard}, context, dispatcher=self.dispatcher)
            dispatched += int(summary["claimed"]) + int(summary["sent_unclaimed"])
        return dispatched

    def work(self, route: ClaimRoute, expected: int) -> None:
        """Receive as the event source mapping does (a batch of the mappings' size, gathered
        by receives of 10 until full or the queue has no more), run the worker on each
        message, delete what did not fail (10 a call)."""
        outcomes = self.outcomes.setdefault(route.name, Counter())
        queue_url = self.settings.queue_url(Priority.NORMAL)
        deadline = time.monotonic() + RECEIVE_TIMEOUT_SECONDS
        while sum(outcomes.values()) < expected and time.monotonic() < deadline:
            messages = self._gather(route, queue_url)
            done = []
            if messages:  # one invocation of the worker per batch, as the mapping makes
                with self.invocation(f"{route.name}:work", self.worker_timeout_seconds) as context:
                    self.executor.begin_invocation(context)
                    for message in messages:
                        try:
                            run_message = RunMessage.model_validate_json(message["Body"])
                            outcome = str(self.executor.execute(run_message))
                            done.append(message)
                        except Exception as error:  # a batch item failure: left to the visibility timeout
                            outcome = f"raised {type(error).__name__}"
                        outcomes[outcome] += 1
            with self.log.labelled(f"{route.name}:receive"):
                delete_received(self.esm_sqs, queue_url, [m["ReceiptHandle"] for m in done])

    def _gather(self, route: ClaimRoute, queue_url: str) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = []
        while len(messages) < self.worker_batch_size:
            with self.log.labelled(f"{route.name}:receive"):
                received = self.esm_sqs.receive_message(
                    QueueUrl=queue_url,
                    MaxNumberOfMessages=min(10, self.worker_batch_size - len(messages)),
                    WaitTimeSeconds=1,
                ).get("Messages", [])
            messages.extend(received)
            if len(received) < 10:  # the queue holds no more now: a full load's receives are full
                break
        return messages

    def check(self, job_ids: list[str]) -> int:
        """How many of the jobs completed with a succeeded run (read outside the count)."""
        succeeded = 0
        for job_id in job_ids:
            job = self.checks.get_job(job_id)
            if job is None or job.status is not JobStatus.COMPLETED or job.fires_by.at is None:
                continue
            run = self.checks.get_run(job_id, to_ms(job.fires_by.at))
            succeeded += run is not None and run.status is RunStatus.SUCCEEDED
        return succeeded

    def near(self, count: int, route: ClaimRoute = NEAR, polls: bool = True) -> list[str]:
        # 1 s ahead: claimed at creation, and the queue delay (whole seconds − 1 s lead) is 0.
        at = from_ms(to_ms(self.clock.now())) + timedelta(seconds=1)
        job_ids = self.create(route, count, at)
        self.work(route, count)
        if polls:
            self.polls_after(route, at)
        return job_ids

    def polls_after(self, route: ClaimRoute, at: datetime) -> None:
        """The polls, a minute apart, that read the bucket of the runs due `at` after they
        ended, until it is `poll_grace_seconds` behind: what they read of it (a due listing
        and its finished jobs; nothing where the runs' ends took their entries out) is the
        runs' cost."""
        bucket_end = from_ms(keys.bucket_end(keys.bucket_of(to_ms(at))))
        when = at
        while when - timedelta(seconds=self.settings.poll_grace_seconds) <= bucket_end:
            when += timedelta(seconds=60)
            self.clock.set(when)
            if self.poll_all_shards(f"{route.name}:after"):
                raise RuntimeError("a poll after the runs ended sent one again")

    def far(self, count: int, route: ClaimRoute = FAR) -> list[str]:
        start = self.clock.now()
        at = start + timedelta(seconds=FAR_SECONDS)
        job_ids = self.create(route, count, at)
        # Polls a minute apart that see nothing due yet: the last one is the steady-state cycle.
        horizon = timedelta(seconds=self.settings.lookahead_seconds)
        first = at - horizon - timedelta(seconds=60 * STEADY_POLLS + 1)
        for number in range(STEADY_POLLS):
            self.clock.set(first + timedelta(seconds=60 * (number + 1)))
            steady = number == STEADY_POLLS - 1 and route.cycle_label  # the cycle is counted once
            label = route.cycle_label if steady and route.cycle_label else "warm:poll-cycle"
            if self.poll_all_shards(label):
                raise RuntimeError("a poll meant to find nothing claimed a run")
        # Half a second before they are due: the claim poll, and a queue delay of 0.
        self.clock.set(at - timedelta(milliseconds=500))
        claimed = self.poll_all_shards(f"{route.name}:poll")
        if claimed != count:
            raise RuntimeError(f"the poll claimed {claimed} of {count} runs")
        self.work(route, count)
        self.polls_after(route, at)
        return job_ids


def rest_event(
    method: str, path: str, body: Any, caller: str, headers: dict[str, str] | None = None
) -> dict[str, Any]:
    """A REST API proxy request as API Gateway hands it to the api function, signed by
    `caller` (an IAM user's ARN), as the local cloud's gateway makes it."""
    user = principal_id(caller)
    identity = {
        "sourceIp": "127.0.0.1",
        "userArn": caller,
        "caller": user,
        "user": user,
        "accountId": ACCOUNT,
    }
    return proxy_event(
        method,
        path,
        path,
        {"Content-Type": "application/json", **(headers or {})},
        json.dumps(body).encode(),
        identity,
        stage="prod",
        account=ACCOUNT,
    )


def _fixed_poll_call(call: Call) -> bool:
    """A poll's own calls, whatever it finds: watermark read/advance and due-index queries
    (a one-off's claim is an UpdateItem too, of its job's item)."""
    if call.operation in ("dynamodb.GetItem", "dynamodb.UpdateItem"):
        return call.partition_key.startswith("SHARD#")
    return call.operation == "dynamodb.Query"


def measure_requests(stack: BenchStack, runs: int) -> dict[str, Any]:
    """`runs` one-off jobs on each path; calls and write units per run."""
    arrivals: list[Arrival] = []
    level = logger.log_level
    handler = logger.registered_handler
    service = logger.service
    log_levels = {f.log_level for f in stack.functions.values()}
    if len(log_levels) != 1:
        raise RuntimeError(f"the functions log at different levels: {sorted(log_levels)}")
    try:
        with Receiver(arrivals.append) as receiver, environment(_X_AMZN_TRACE_ID=XRAY_TRACE_HEADER):
            counter = RequestCounter(stack, receiver.url)
            # The functions' lines are counted, not printed (they would drown the tables).
            stream = handler.setStream(counter.log_meter)  # type: ignore[attr-defined]
            logger.setLevel(log_levels.pop())
            try:
                stack.clear()
                counter.near(1, WARM_UP)  # its polls bring the shards' watermarks up to now
                counter.near(1, WARM_AGAIN, polls=False)
                trials = {
                    NEAR: (counter.near, runs),
                    FAR: (counter.far, runs),
                    NEAR_BATCH: (counter.near, BATCH_RUNS),
                    FAR_BATCH: (counter.far, BATCH_RUNS),
                }
                made = {route: trial(size, route) for route, (trial, size) in trials.items()}
                with counter.log.unmetered():
                    made_timed = {
                        timed(route): trial(size, timed(route)) for route, (trial, size) in trials.items()
                    }
            finally:
                handler.setStream(stream)  # type: ignore[attr-defined]
                logger.setLevel(level)
                logger.remove_keys(["cold_start", *vars(LambdaContextModel())])
                logger.append_keys(service=service)
            succeeded = {route.name: counter.check(job_ids) for route, job_ids in (made | made_timed).items()}
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
        "read_units_method": "computed from the full items read (moto reports none): 1 unit per started "
        "4 KB, 0.5 if eventually consistent, x2 in TransactGetItems, BatchGetItem item by item, a Query "
        "the items it evaluated (before filter and projection) together, at least 1 unit",
        "functions": {
            f.name: {"memory_mb": f.memory_mb, "architecture": f.architecture, "log_level": f.log_level}
            for f in stack.functions.values()
        },
        "event_source_mappings": stack.event_source_mappings,
        # What the worker waits out in each invocation on AWS, which this part's manual clock
        # skips (see `bench.cost`): the queue delivers a run's message this early.
        "delivery_lead_seconds": stack.settings.delivery_lead_seconds,
        "worker_batch_size": stack.worker_batch_size,
        "paths": {},
    }
    steady_label = STEADY
    for route, job_ids in made.items():
        runs = len(job_ids)
        cycles = {  # the path's polls, in poll cycles (each polls every shard once)
            label: count / counter.invocations[steady_label]
            for label, count in counter.invocations.items()
            if label.startswith(f"{route.name}:") and label.split(":", 1)[1] in POLL_PHASES
        }
        mine = [
            c
            for c in calls
            if c.label.startswith(f"{route.name}:")
            and not (c.label.split(":", 1)[1] in POLL_PHASES and _fixed_poll_call(c))
        ]
        per_phase: dict[str, dict[str, float]] = {}
        for call in mine:
            phase = f"{call.role}/{call.label.split(':', 1)[1]}"
            per_phase.setdefault(phase, {})
            per_phase[phase][call.operation] = per_phase[phase].get(call.operation, 0) + 1 / runs
        functions = [c for c in mine if c.role == FUNCTIONS]
        result["paths"][route.name] = {
            "description": route.description,
            "runs": runs,
            "calls_per_run": per_phase,
            "function_calls_per_run": len(functions) / runs,
            "event_source_mapping_calls_per_run": (len(mine) - len(functions)) / runs,
            "table_wcu_per_run": sum(c.table_wcu for c in mine) / runs,
            "index_wcu_per_run": sum(c.index_wcu for c in mine) / runs,
            "retries": sum(c.attempts - 1 for c in mine),
            "failed_calls": sum(c.failed for c in mine),
            "write_units_by_table_per_run": _by_table(mine, runs, stack),
            "read_units_per_run": (sum(c.read_units for c in mine) + _claim_poll_reads(calls, route, cycles))
            / runs,
            "sqs_requests_per_run": {
                role: sum(c.billed_requests for c in mine if c.role == role and c.service == "sqs") / runs
                for role in (FUNCTIONS, ESM)
            },
            **_functions_per_run(counter, route, runs, steady_label),
        }
        audit = sum(c.log_bytes for c in mine) / runs  # the api's audit lines, in a log group of their own
        if audit:
            result["paths"][route.name]["log_bytes_per_run"]["audit"] = audit
    steady = [c for c in calls if c.label == steady_label]
    claim_poll_fixed = [c for c in calls if c.label == f"{FAR.name}:poll" and _fixed_poll_call(c)]
    result["poll_cycle"] = {
        "description": f"one poll of all {stack.settings.shard_count} shards with nothing due, "
        "a minute after the previous one (paid every minute whatever the load)",
        "shards": stack.settings.shard_count,
        "calls": dict(Counter(c.operation for c in steady)),
        "table_wcu": sum(c.table_wcu for c in steady),
        "index_wcu": sum(c.index_wcu for c in steady),
        "read_units": sum(c.read_units for c in steady),
        "invocations": counter.invocations[steady_label],
        "seconds": counter.busy_seconds[str(timed(FAR).cycle_label)],
        "log_bytes": counter.log_meter.bytes[steady_label],
        "log_lines": counter.log_meter.lines[steady_label],
        "claim_poll_fixed_calls": dict(Counter(c.operation for c in claim_poll_fixed)),
    }
    return result


def _claim_poll_reads(calls: list[Call], route: ClaimRoute, cycles: Mapping[str, float]) -> float:
    """What the due-index queries of the path's polls (its claim poll, those after its runs)
    read beyond as many polls that find nothing (`cycles`, by label): the entries of the runs
    they claim or read again."""
    steady = sum(c.read_units for c in calls if c.label == STEADY)
    extra = 0.0
    for phase in POLL_PHASES:
        label = f"{route.name}:{phase}"
        read = sum(c.read_units for c in calls if c.label == label and _fixed_poll_call(c))
        extra += max(0.0, read - cycles.get(label, 0.0) * steady)
    return extra


def _by_table(calls: list[Call], runs: int, stack: BenchStack) -> dict[str, float]:
    """Write units per run (table and its indexes) by the role of the table."""
    names = {
        stack.settings.jobs_table_name: "jobs",
        stack.settings.idempotency_table_name: "idempotency",
    }
    units: defaultdict[str, float] = defaultdict(float)
    for call in calls:
        for table_name, value in call.write_units_by_table.items():
            units[names.get(table_name, table_name)] += value
    return {name: value / runs for name, value in units.items()}


def _functions_per_run(
    counter: RequestCounter, route: ClaimRoute, runs: int, steady_label: str
) -> dict[str, Any]:
    """Invocations, busy seconds (from the path's timed trial) and log bytes per run of each
    function on one path. A poll's invocations (its claim poll's, those after its runs) are the
    poll cycle's, paid every minute whatever it finds: a run costs the poller only the time
    and log lines it adds to a poll that found nothing."""
    figures: dict[str, dict[str, float]] = {
        "invocations_per_run": {},
        "lambda_seconds_per_run": {},
        "lambda_cpu_seconds_per_run": {},
        "log_bytes_per_run": {},
        "log_lines_per_run": {},
    }
    for label, count in counter.invocations.items():
        path, phase = label.split(":", 1)
        if path != route.name:
            continue
        function = FUNCTION_OF_PHASE[phase]
        # A poll of the path is that many poll cycles (4 shards' invocations each) and more.
        cycles = count / counter.invocations[steady_label] if phase in POLL_PHASES else 0.0
        timed_label, timed_steady = f"{timed(route).name}:{phase}", str(timed(FAR).cycle_label)
        busy, cpu = counter.busy_seconds, counter.cpu_seconds
        measured = {
            "invocations_per_run": (counter.invocations[steady_label], count),
            "lambda_seconds_per_run": (busy[timed_steady], busy[timed_label]),
            "lambda_cpu_seconds_per_run": (cpu[timed_steady], cpu[timed_label]),
            "log_bytes_per_run": (counter.log_meter.bytes[steady_label], counter.log_meter.bytes[label]),
            "log_lines_per_run": (counter.log_meter.lines[steady_label], counter.log_meter.lines[label]),
        }
        for figure, (cycle, value) in measured.items():
            per_run = max(0.0, value - cycles * cycle) / runs
            if per_run:
                figures[figure][function] = figures[figure].get(function, 0.0) + per_run
    return figures


def print_requests(result: dict[str, Any]) -> None:
    runs = ", ".join(f"{name} {path['runs']}" for name, path in result["paths"].items())
    print(f"Requests per run — one-off runs per path ({runs}), create → success (HTTP target)")
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
            f"{result['succeeded'][name]}/{path['runs']}",
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
        f"  ESM calls: receives of up to 10 messages gather a batch of up to {result['worker_batch_size']} "
        "runs (the mappings' batch size), deletes take 10; a real mapping also long-polls each queue "
        "while it is idle"
    )
    cpu = {
        name: path.get("lambda_cpu_seconds_per_run", {}).get("worker")
        for name, path in result["paths"].items()
    }
    print(
        "  worker CPU a run (its thread's CPU time on this machine, in the timed trial): "
        + ", ".join(f"{name} {seconds * 1000:.1f} ms" for name, seconds in cpu.items() if seconds)
    )
    print(f"  write units: {result['write_units_method']}")


def requests_headline(result: dict[str, Any]) -> str:
    return "; ".join(
        f"{name} {p['function_calls_per_run']:.1f} calls + {p['event_source_mapping_calls_per_run']:.1f}"
        f" ESM, {p['table_wcu_per_run'] + p['index_wcu_per_run']:.0f} WCU"
        for name, p in result["paths"].items()
    )
