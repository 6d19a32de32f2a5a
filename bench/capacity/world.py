"""The simulated stack: the jobs and idempotency tables and the queues in moto, the three
functions built by `scheduler_core.composition` (the code the deployed handlers run), the
queue mappings and the poll schedule, with the stack's default settings from cdk.json."""

from __future__ import annotations

import contextlib
import io
import json
import random
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

from moto import mock_aws

from bench.capacity.aws import SimulatedAws, sqs_in_virtual_time
from bench.capacity.kernel import Sim, SimClock, TaskRunner, virtual_sleep
from bench.capacity.lambdas import (
    STANDARD,
    Account,
    EventSourceMapping,
    Function,
    LeftOutWrites,
    PollSchedule,
    ScalingMode,
)
from bench.capacity.latency import TARGET_CALL_SECONDS, LatencyModel
from bench.capacity.moto_queries import queries_read_their_key_only
from bench.capacity.partitions import CapacityModel
from bench.common import metrics_namespace
from infra.config import QueueCapacity, cdk_json_context, parse_queue_capacity
from infra.local.moto_process import roll_back_items_not_tables
from scheduler_core.adapters.aws import AwsClients
from scheduler_core.adapters.dynamodb import DUE_PAGE
from scheduler_core.adapters.http_client import Answer, GuardedHttp
from scheduler_core.composition import build_dispatcher, build_job_service, build_run_executor, build_store
from scheduler_core.domain.entities import Job
from scheduler_core.domain.vocabulary import Priority
from scheduler_core.observability import logger, metrics
from scheduler_core.services.dispatch import SEND_BATCH, Dispatcher
from scheduler_core.services.execution import RunExecutor
from scheduler_core.services.jobs import JobService
from scheduler_core.services.polls import ClaimResult
from scheduler_core.services.unclaimed_sends import Send, SendWindow, send_decision
from scheduler_core.settings import Settings

START = datetime(2030, 1, 1, tzinfo=UTC)  # virtual time 0
TARGET_URL = "https://target.example.com/hook"
API_TIMEOUT_SECONDS = 25  # infra/api.py
POLLER_TIMEOUT_SECONDS = 60  # infra/poller.py
METRICS_NAMESPACE = "ServerlessScheduler"

# The tables as infra/ declares them (keys-only indexes: a claim rewrites no index entry).
JOBS_TABLE: dict[str, Any] = {
    "TableName": "jobs",
    "BillingMode": "PAY_PER_REQUEST",
    "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
    "AttributeDefinitions": [
        {"AttributeName": name, "AttributeType": kind}
        for name, kind in [
            ("pk", "S"),
            ("sk", "S"),
            ("due_pk", "S"),
            ("due_sk", "N"),
            ("tenant", "S"),
            ("created_key", "S"),
        ]
    ],
    "GlobalSecondaryIndexes": [
        {
            "IndexName": index,
            "KeySchema": [
                {"AttributeName": hash_key, "KeyType": "HASH"},
                {"AttributeName": range_key, "KeyType": "RANGE"},
            ],
            "Projection": {"ProjectionType": "KEYS_ONLY"},
        }
        for index, hash_key, range_key in [
            ("due", "due_pk", "due_sk"),
            ("by_tenant", "tenant", "created_key"),
        ]
    ],
}
IDEMPOTENCY_TABLE: dict[str, Any] = {
    "TableName": "idempotency",
    "BillingMode": "PAY_PER_REQUEST",
    "KeySchema": [{"AttributeName": "id", "KeyType": "HASH"}],
    "AttributeDefinitions": [{"AttributeName": "id", "AttributeType": "S"}],
}


@dataclass(frozen=True)
class StackDefaults:
    """The settings `cdk deploy` gives the stack, from cdk.json's context."""

    shards: int
    lookahead_seconds: int
    delivery_lead_seconds: int
    resend_after_seconds: int
    worker_timeout_seconds: int
    max_receive_count: int
    queue_capacity: dict[Priority, QueueCapacity]
    claim_parallelism: int
    one_offs_claimed_at_start: bool = False

    @classmethod
    def from_cdk_json(cls, overrides: Mapping[str, Any] | None = None) -> StackDefaults:
        """cdk.json's context, with `overrides` (a deploy's `-c` values) over it."""
        context = cdk_json_context() | dict(overrides or {})
        capacity = parse_queue_capacity(context["queue_capacity"])
        return cls(
            shards=int(context["shards"]),
            lookahead_seconds=int(context["lookahead_seconds"]),
            delivery_lead_seconds=int(context["delivery_lead_seconds"]),
            resend_after_seconds=int(context["resend_after_seconds"]),
            worker_timeout_seconds=int(context["worker_timeout_seconds"]),
            max_receive_count=int(context["max_receive_count"]),
            queue_capacity={p: capacity[p.value] for p in Priority},
            claim_parallelism=int(context["claim_parallelism"]),
            one_offs_claimed_at_start=bool(context.get("one_offs_claimed_at_start", False)),
        )

    @property
    def visibility_timeout_seconds(self) -> int:
        return 6 * self.worker_timeout_seconds  # infra/config.py: six times the worker's timeout


@dataclass
class Arrivals:
    """Every call the targets received: run id → virtual arrival times (epoch ms)."""

    by_run: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))

    def lateness_ms(self) -> list[float]:
        """Per run, its first arrival minus its scheduled time (from `run_id = job:ms`)."""
        return [min(times) - int(run_id.rsplit(":", 1)[1]) for run_id, times in self.by_run.items()]

    def duplicated(self) -> int:
        return sum(1 for times in self.by_run.values() if len(times) > 1)


class World:
    """One simulated stack in virtual time. Use within `running()`."""

    def __init__(
        self,
        defaults: StackDefaults | None = None,
        *,
        shards: int | None = None,
        seed: int = 1,
        latency_factor: float = 1.0,
        mode: ScalingMode = STANDARD,
        account_concurrency: int = 1_000,
        context: Mapping[str, Any] | None = None,
        claim_parallelism: int | None = None,
        fraction: float = 1.0,
        previous_peak_wcu: float = 0.0,
        previous_peak_rcu: float = 0.0,
    ) -> None:
        """`fraction`: the share of the scenario's jobs run by the production code; the
        rest is shadow load (`scenarios`). `previous_peak_wcu`, `previous_peak_rcu`: the write
        and read units a second the on-demand table and its indexes have served before (they
        serve double at once; 0: as new tables do)."""
        self.defaults = defaults or StackDefaults.from_cdk_json(context)
        self.shards = shards or self.defaults.shards
        self.claim_parallelism = claim_parallelism or self.defaults.claim_parallelism
        self.fraction = fraction
        self.previous_peak_wcu = previous_peak_wcu
        self.sim = Sim(START)
        self.clock = SimClock(self.sim)
        self.latency = LatencyModel(seed, latency_factor)
        # Jobs put by the scenarios or made by the api draw their ids from the seed too (a
        # stream of its own, so the latency draws stay as they were): an id is its job's shard
        # and keys, and uuid4 ids moved a scenario's tail from run to run.
        self._job_ids = random.Random(f"job ids {seed}")
        self._seed = seed
        self.capacity = CapacityModel()
        tables = ("jobs", "jobs/due", "jobs/by_tenant")
        self.capacity.assume_previous_peak(
            {table: previous_peak_wcu for table in tables if previous_peak_wcu},
            {table: previous_peak_rcu for table in tables if previous_peak_rcu},
        )
        self.account = Account(account_concurrency)
        self.mode = mode
        self.arrivals = Arrivals()
        self.log = _LogSink()
        self.aws: SimulatedAws
        self.settings: Settings
        self.api: Function[JobService]
        self.worker: Function[RunExecutor]
        self.poller: Function[Dispatcher]
        self.mappings: dict[Priority, EventSourceMapping] = {}
        self.schedule: PollSchedule

    def new_job_id(self) -> str:
        """The next job id drawn from the world's seed, shaped as a uuid4's hex."""
        return uuid.UUID(int=self._job_ids.getrandbits(128), version=4).hex

    @contextlib.contextmanager
    def running(self) -> Iterator[World]:
        """moto (its queries sped up), virtual sleeps, SQS in virtual time, the fake target and a
        quiet logger."""
        with contextlib.ExitStack() as stack:
            stack.enter_context(mock_aws())
            stack.callback(roll_back_items_not_tables())  # moto deep-copies whole tables otherwise
            stack.enter_context(virtual_sleep(self.sim))
            stack.enter_context(sqs_in_virtual_time(self.sim))
            stack.enter_context(queries_read_their_key_only())
            stack.enter_context(self._target_answers())
            stack.enter_context(self._quiet_functions())
            stack.enter_context(self._seeded_backoff())
            self.aws = SimulatedAws(self.sim, self.latency, self.capacity, self.fraction)
            self.settings = self._create_resources()
            self._build_functions()
            yield self

    @contextlib.contextmanager
    def _seeded_backoff(self) -> Iterator[None]:
        """botocore's retries wait a random share of their backoff drawn from the `random`
        module's own generator: seeded from the world's seed for the run (and put back after),
        so a throttled run is the same run again with the same seed."""
        state = random.getstate()
        random.seed(f"botocore backoff {self._seed}")
        try:
            yield
        finally:
            random.setstate(state)

    def _create_resources(self) -> Settings:
        dynamodb = self.aws.plain_client("dynamodb")
        dynamodb.create_table(**JOBS_TABLE)
        dynamodb.create_table(**IDEMPOTENCY_TABLE)
        sqs = self.aws.plain_client("sqs")
        dlq = sqs.create_queue(QueueName="scheduler-dlq")["QueueUrl"]
        dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        redrive = json.dumps(
            {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": self.defaults.max_receive_count}
        )
        urls = {
            priority: sqs.create_queue(
                QueueName=f"scheduler-{priority.lower()}",
                Attributes={
                    "VisibilityTimeout": str(self.defaults.visibility_timeout_seconds),
                    "RedrivePolicy": redrive,
                },
            )["QueueUrl"]
            for priority in Priority
        }
        return Settings(
            jobs_table_name="jobs",
            idempotency_table_name="idempotency",
            queue_url_high=urls[Priority.HIGH],
            queue_url_normal=urls[Priority.NORMAL],
            queue_url_low=urls[Priority.LOW],
            dlq_url=dlq,
            shard_count=self.shards,
            lookahead_seconds=self.defaults.lookahead_seconds,
            delivery_lead_seconds=self.defaults.delivery_lead_seconds,
            resend_after_seconds=self.defaults.resend_after_seconds,
            run_lease_seconds=self.defaults.visibility_timeout_seconds,
            one_offs_claimed_at_start=self.defaults.one_offs_claimed_at_start,
            **({"claim_parallelism": self.claim_parallelism} if self.claim_parallelism else {}),
        )

    def _build_functions(self) -> None:
        settings, clock = self.settings, self.clock
        sim, aws, account = self.sim, self.aws, self.account
        api = partial(build_job_service, settings, clock=clock, new_id=self.new_job_id)
        self.api = Function("api", sim, aws, account, api, API_TIMEOUT_SECONDS)
        self.worker = Function(
            "worker",
            sim,
            aws,
            account,
            lambda c: build_run_executor(settings, c, clock),
            self.defaults.worker_timeout_seconds,
        )
        # A poll's claims side by side: as tasks in virtual time, not threads; sampled, the
        # left-out jobs' claims are modeled in the same pool (`TaskRunner`).
        self.runners: list[TaskRunner] = []
        self.modeled_work: Counter[str] = Counter()  # the runners' modeled items, by kind
        latency = self.latency

        capacity = self.capacity

        def claim_seconds(job: Any, outcome: Any, count: int) -> float:
            # `count` modeled jobs one after the other, as the real ones beside them go
            # (`modeled_work`, decided once for them all; a latency drawn for each): a claim is its
            # transaction and its tenth of the batch send that carries its run (the thread
            # whose claim fills a batch sends it: `dispatch.Outbox`); while the table or its
            # due index was offered more than it serves, claims go no faster than it serves:
            # each takes that many times longer (throttled and retried). A one-off sent
            # unclaimed (`one_offs_claimed_at_start`) is its share of the send alone; one
            # left in its bucket (sent already, claimed already, not tried) costs nothing.
            # The watchdog's runs (`poll_watch`) are modeled as claims: a write and a send.
            if isinstance(job, Job):
                kind = modeled_work(job, outcome if isinstance(outcome, ClaimResult) else None)
            else:
                kind = "watch"
            self.modeled_work[kind] += count
            if kind == "none":
                return 0.0
            sends = sum(latency.call("sqs", "SendMessageBatch") for _ in range(count)) / SEND_BATCH
            if kind == "send":
                return sends
            load = capacity.write_load(sim.env.now, ("jobs", "jobs/due"))
            claims = sum(latency.call("dynamodb", "TransactWriteItems") for _ in range(count))
            return (claims + sends) * max(1.0, load)

        def modeled_work(job: Job, outcome: ClaimResult | None) -> str:
            """What a left-out job beside `job` costs a poll: "claim", "send" or "none". As
            the real job that finished last did (a page's jobs are alike in a burst), or,
            before any did, as `job`'s state says (`unclaimed_sends.send_decision` without
            the sent mark: a one-off due within SEND_MARGIN of the horizon is the next poll's
            to send)."""
            if outcome is None:
                if job.next_fire_at is None:
                    return "none"  # claimed already: its entry waits for its run's end
                if not settings.one_offs_claimed_at_start:
                    return "claim"
                now = clock.now()
                window = SendWindow.of_poll(None, now + timedelta(seconds=settings.lookahead_seconds))
                resend_after = timedelta(seconds=settings.resend_after_seconds)
                decision = send_decision(job, now, window, resend_after)
                return {Send.SEND: "send", Send.WAIT: "none"}.get(decision, "claim")
            if outcome.sent:
                return "send"
            if outcome.runs or outcome.contended or outcome.skipped:
                return "claim"  # claimed, or a claim's write tried (throttled, misfire skipped)
            return "none"  # left in its bucket, not tried, nothing to claim (a lost race: rare)

        def dispatcher(clients: AwsClients) -> Dispatcher:
            runner = TaskRunner(
                sim,
                settings.claim_parallelism,
                shadow_per_item=aws.shadow,
                shadow_seconds=claim_seconds if aws.shadow else None,
            )
            self.runners.append(runner)
            # Sampled, each claimed run stands for 1/f whose batches fill at once: sent as
            # claimed (the others' sends are modeled with their claims).
            send_batch = 1 if aws.shadow else SEND_BATCH
            # Likewise a page of the due index: its real entries stand for 1/f each.
            due_page = max(1, round(DUE_PAGE * self.fraction))
            store = build_store(settings, clients, due_page=due_page)
            return build_dispatcher(settings, clients, clock, store, runner, send_batch)

        self.poller = Function("poller", sim, aws, account, dispatcher, POLLER_TIMEOUT_SECONDS)
        for priority, queue in self.defaults.queue_capacity.items():
            self.mappings[priority] = EventSourceMapping(
                sim,
                aws,
                self.worker,
                settings.queue_url(priority),
                queue.batch_size,
                queue.max_concurrency,
                self.mode,
                window_seconds=queue.batching_window_seconds,
                left_out_writes=LeftOutWrites(settings.jobs_table_name, self.shards),
            )
        # EventBridge fires a rate rule at a second of the minute fixed when it was created.
        self.schedule = PollSchedule(sim, self.poller, self.shards, self.latency.uniform(0.0, 60.0))

    def start(self, first_poll_minute: float = 0.0) -> None:
        for mapping in self.mappings.values():
            mapping.start()
        self.schedule.start(first_poll_minute)

    # --- the target -------------------------------------------------------------------

    @contextlib.contextmanager
    def _target_answers(self) -> Iterator[None]:
        """HTTP targets answer 200 after `TARGET_CALL_SECONDS`, with no network: the worker's
        own HTTP client's `send` is answered here, and the arrival recorded."""
        real = GuardedHttp.send

        def send(
            client: GuardedHttp,
            method: str,
            url: str,
            headers: list[tuple[bytes, bytes]],
            *args: Any,
            **kwargs: Any,
        ) -> Answer:
            if not self.sim.in_task():
                return real(client, method, url, headers, *args, **kwargs)
            run_id = dict(headers)[b"X-Scheduler-Run-Id"].decode()
            self.arrivals.by_run[run_id].append(self.sim.now().timestamp() * 1000.0)
            self.sim.sleep(TARGET_CALL_SECONDS)
            return Answer(200, {}, b"")

        GuardedHttp.send = send  # type: ignore[method-assign,assignment]
        try:
            yield
        finally:
            GuardedHttp.send = real  # type: ignore[method-assign]

    @contextlib.contextmanager
    def _quiet_functions(self) -> Iterator[None]:
        """The functions' log lines and metrics are counted, not printed."""
        handler = logger.registered_handler
        stream = handler.setStream(self.log)  # type: ignore[attr-defined]
        # As deployed (POWERTOOLS_METRICS_NAMESPACE): Powertools flushes every 100 values of a
        # metric, and refuses to without a namespace.
        try:
            with (
                metrics_namespace(metrics.provider.namespace or METRICS_NAMESPACE),
                contextlib.redirect_stdout(self.log),
            ):
                yield
        finally:
            handler.setStream(stream)  # type: ignore[attr-defined]


class _LogSink(io.TextIOBase):
    """Keeps no text: counts lines by their `message`, and bytes."""

    def __init__(self) -> None:
        super().__init__()
        self.bytes = 0
        self.messages: dict[str, int] = defaultdict(int)

    def write(self, text: str) -> int:
        self.bytes += len(text.encode())
        for line in text.splitlines():
            if line.startswith("{"):
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                key = f"{record.get('level', 'METRICS')} {record.get('message', '')}"
                self.messages[key] += 1
        return len(text)


def poll_summary(polls: list[dict[str, Any]]) -> dict[str, Any]:
    seconds = [p["seconds"] for p in polls if not p["throttled"]]
    return {
        "polls": len(polls),
        "longest_seconds": round(max(seconds), 3) if seconds else None,
        "claimed_most_in_one": max((p["claimed"] or 0 for p in polls), default=0),
        "contended": sum(p["contended"] or 0 for p in polls),
    }
