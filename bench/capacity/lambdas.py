"""Lambda in virtual time: account concurrency, warm and cold execution environments, the
SQS event source mappings that invoke the worker, and the EventBridge schedule that invokes
the poller once a minute per shard.

Figures (AWS Lambda developer guide):
- account concurrency: 1,000 concurrent executions per Region by default ("Lambda quotas").
- SQS event source mapping, standard mode ("Scaling and processing" for Amazon SQS): "When
  messages are available, Lambda starts processing five batches at a time with five
  concurrent invocations of your function. If messages are still available, Lambda increases
  the number of processes that are reading batches by up to 300 more instances per minute.
  The maximum number of batches that an event source mapping can process simultaneously is
  1,000", capped by the mapping's MaximumConcurrency (2-1,000) and the account's concurrency.
- SQS event source mapping, provisioned mode (AWS What's New, 2025: "provisioned mode for SQS
  event source mappings"): up to 3x faster scaling, about 1,000 concurrent executions a
  minute, up to 20,000; the minimum pollers are kept ready. Modelled as a mapping that
  starts at its minimum and adds 1,000 a minute.
- a function that outlives its timeout is stopped; the work it held returns (its messages
  after their visibility timeout, its run after its lease).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Generic, TypeVar

from moto.sqs.models import sqs_backends

from bench.capacity.aws import ACCOUNT, REGION, SimulatedAws
from bench.capacity.kernel import Sim
from bench.capacity.latency import COLD_START, DELAYED_PICKUP_MAX_SECONDS, LONG_POLL_SECONDS, WARM_INVOKE
from scheduler_core.adapters.aws import AwsClients
from scheduler_core.adapters.queues import SqsMessageLease
from scheduler_core.domain.messages import RunMessage
from scheduler_core.services.execution import RunExecutor, RunNotDueYet

ACCOUNT_CONCURRENCY = 1_000


@dataclass(frozen=True)
class ScalingMode:
    """How an event source mapping grows its concurrent batches while messages wait."""

    name: str
    initial: int
    per_minute: int
    ceiling: int


STANDARD = ScalingMode("standard", initial=5, per_minute=300, ceiling=1_000)


def provisioned(minimum_pollers: int) -> ScalingMode:
    return ScalingMode("provisioned", initial=minimum_pollers, per_minute=1_000, ceiling=20_000)


class Account:
    """The account's concurrent executions, shared by every function."""

    def __init__(self, limit: int = ACCOUNT_CONCURRENCY) -> None:
        self.limit = limit
        self.in_use = 0
        self.peak = 0
        self.throttles: Counter[str] = Counter()

    def acquire(self, function: str) -> bool:
        if self.in_use >= self.limit:
            self.throttles[function] += 1
            return False
        self.in_use += 1
        self.peak = max(self.peak, self.in_use)
        return True

    def release(self) -> None:
        self.in_use -= 1


Service = TypeVar("Service")


@dataclass
class Container(Generic[Service]):
    """One execution environment: its clients and the service built on them, kept warm."""

    clients: AwsClients
    service: Service


@dataclass
class FunctionStats:
    invocations: int = 0
    cold_starts: int = 0
    timeouts: int = 0
    peak_concurrency: int = 0
    busy_seconds: float = 0.0


class Function(Generic[Service]):
    """A Lambda function: warm containers reused, new ones cold-started, each invocation
    bounded by the function's timeout."""

    def __init__(
        self,
        name: str,
        sim: Sim,
        aws: SimulatedAws,
        account: Account,
        build: Callable[[AwsClients], Service],
        timeout_seconds: float,
    ) -> None:
        self.name = name
        self._sim = sim
        self._aws = aws
        self._account = account
        self._build = build
        self.timeout_seconds = timeout_seconds
        self._idle: list[Container[Service]] = []
        self.running = 0
        self.stats = FunctionStats()

    def invoke(self, handler: Callable[[Container[Service]], Any]) -> tuple[bool, Any]:
        """Run `handler` in a container, from a task; (False, None) if Lambda throttled it.
        The handler's value, or None if it raised or ran out of time."""
        if not self._account.acquire(self.name):
            return False, None
        self.running += 1
        self.stats.invocations += 1
        self.stats.peak_concurrency = max(self.stats.peak_concurrency, self.running)
        started = self._sim.env.now
        try:
            if self._idle:
                container = self._idle.pop()
                self._sim.sleep(self._aws.latency.draw(WARM_INVOKE))
            else:
                self.stats.cold_starts += 1
                self._sim.sleep(self._aws.latency.draw(COLD_START))
                clients = self._aws.clients(self.name)
                container = Container(clients, self._build(clients))
            timeout = self.timeout_seconds - (self._sim.env.now - started)
            process = self._sim.spawn(handler, container, name=f"{self.name} invocation", deadline=timeout)
            value = self._sim.wait(process)
            if self._sim.env.now - started >= self.timeout_seconds:
                self.stats.timeouts += 1
            else:
                self._idle.append(container)  # a timed-out environment is discarded
            return True, value
        finally:
            self.stats.busy_seconds += self._sim.env.now - started
            self.running -= 1
            self._account.release()


@dataclass
class MappingStats:
    receives: int = 0
    empty_long_polls: int = 0  # long polls that found nothing in 20 s (billed, not simulated as calls)
    batches: int = 0
    records: int = 0
    failed_records: int = 0
    lambda_throttles: int = 0
    peak_concurrency: int = 0
    concurrency_over_time: list[tuple[float, int]] = field(default_factory=list)


class EventSourceMapping:
    """An SQS event source mapping: pollers receive batches and invoke the worker; the
    records a batch did not fail are deleted; the rest come back after their visibility
    timeout (or sooner if the worker hid them for less)."""

    def __init__(
        self,
        sim: Sim,
        aws: SimulatedAws,
        function: Function[RunExecutor],
        queue_url: str,
        batch_size: int,
        max_concurrency: int,
        mode: ScalingMode = STANDARD,
    ) -> None:
        self._sim = sim
        self._aws = aws
        self._function = function
        self.queue_url = queue_url
        self._queue_name = queue_url.rstrip("/").rsplit("/", 1)[-1]
        self.batch_size = batch_size
        self.ceiling = min(max_concurrency, mode.ceiling)
        self.mode = mode
        self.limit = float(min(mode.initial, self.ceiling))
        self.pollers = 0
        self.busy = 0
        self.stats = MappingStats()
        self._clients = aws.clients("esm")
        self._changed = sim.env.event()
        aws.on_send(queue_url, self._notify)

    def start(self) -> None:
        for _ in range(int(self.limit)):
            self._add_poller()
        self._sim.env.process(self._scale())

    # --- scaling ----------------------------------------------------------------------

    def _scale(self) -> Any:
        """Once a second: while messages wait and every poller is busy, allow more
        concurrent batches, at the mode's rate per minute, up to the ceiling."""
        step = self.mode.per_minute / 60.0
        while True:
            yield self._sim.env.timeout(1.0)
            waiting = self.has_visible_messages()
            if waiting and self.busy >= self.pollers and self.limit < self.ceiling:
                self.limit = min(float(self.ceiling), self.limit + step)
                while self.pollers < int(self.limit):
                    self._add_poller()
            elif not waiting and self.busy == 0:
                self.limit = max(float(min(self.mode.initial, self.ceiling)), self.limit - step)
            self.stats.peak_concurrency = max(self.stats.peak_concurrency, self.busy)
            if int(self._sim.env.now) % 10 == 0:
                self.stats.concurrency_over_time.append((self._sim.env.now, self.busy))

    def scaling_limit(self) -> int:
        return int(self.limit)

    # --- the queue, as moto holds it ----------------------------------------------------

    def _queue(self) -> Any:
        return sqs_backends[ACCOUNT][REGION].queues[self._queue_name]

    def has_visible_messages(self) -> bool:
        return any(m.visible and not m.delayed for m in self._queue()._messages)

    def seconds_to_next_visible(self) -> float | None:
        """Virtual seconds until the next message becomes receivable (0: one is now)."""
        now_ms = self._sim.now().timestamp() * 1000.0
        soonest: float | None = None
        for message in self._queue()._messages:
            at = max(message.visible_at, message.delayed_until or 0)
            if soonest is None or at < soonest:
                soonest = at
        if soonest is None:
            return None
        return max(0.0, (soonest - now_ms) / 1000.0)

    def _notify(self) -> None:
        changed, self._changed = self._changed, self._sim.env.event()
        changed.succeed()

    # --- pollers ----------------------------------------------------------------------

    def _add_poller(self) -> None:
        self.pollers += 1
        self._sim.spawn(self._poll, name=f"mapping {self._queue_name}")

    def _poll(self) -> None:
        sim = self._sim
        while True:
            if self.pollers > int(self.limit):
                self.pollers -= 1
                return
            wait = self.seconds_to_next_visible()
            if wait is None or wait > 0:
                # A long poll: returns when a message becomes receivable (a delayed one is
                # noticed up to a second late), or empty after 20 s.
                timeout = LONG_POLL_SECONDS if wait is None else min(LONG_POLL_SECONDS, wait)
                if wait is not None:
                    timeout += self._aws.latency.uniform(0.0, DELAYED_PICKUP_MAX_SECONDS)
                changed = self._changed
                sim.wait(sim.env.timeout(timeout) | changed)
                if wait is None and not changed.triggered:
                    self.stats.empty_long_polls += 1
                continue
            self.busy += 1
            try:
                self._receive_and_invoke()
            finally:
                self.busy -= 1

    def _receive_and_invoke(self) -> None:
        sqs = self._clients.sqs()
        reply = sqs.receive_message(
            QueueUrl=self.queue_url, MaxNumberOfMessages=self.batch_size, AttributeNames=["All"]
        )
        self.stats.receives += 1
        messages: list[dict[str, Any]] = list(reply.get("Messages", []))  # type: ignore[arg-type]
        if not messages:
            return
        self.stats.batches += 1
        self.stats.records += len(messages)
        invoked, handled = self._function.invoke(lambda container: self._batch(container, messages))
        if not invoked:
            # Throttled by Lambda: the mapping backs off; the messages come back after
            # their visibility timeout.
            self.stats.lambda_throttles += 1
            self._sim.sleep(1.0)
            return
        done: list[str] = handled or []
        self.stats.failed_records += len(messages) - len(done)
        for first in range(0, len(done), 10):
            sqs.delete_message_batch(
                QueueUrl=self.queue_url,
                Entries=[{"Id": str(i), "ReceiptHandle": h} for i, h in enumerate(done[first : first + 10])],
            )

    def _batch(self, container: Container[RunExecutor], messages: list[dict[str, Any]]) -> list[str]:
        """The worker's handler: the batch's records concurrently (one thread each in the
        real handler, one task each here); the receipt handles of the records that succeeded."""
        processes = [
            self._sim.spawn(self._record, container, message, name="worker record") for message in messages
        ]
        self._sim.wait_all(processes)
        return [
            message["ReceiptHandle"]
            for message, process in zip(messages, processes, strict=True)
            if process.value is True
        ]

    def _record(self, container: Container[RunExecutor], message: dict[str, Any]) -> bool:
        """One record, as `functions.worker.handler.record_handler_for` handles it."""
        run_message = RunMessage.model_validate_json(message["Body"])
        lease = SqsMessageLease(container.clients, self.queue_url, message["ReceiptHandle"])
        try:
            container.service.execute(run_message, lease)
        except RunNotDueYet as early:
            lease.hide_for(max(0, int(early.seconds) - 1))
            return False
        return True


class PollSchedule:
    """EventBridge `rate(1 minute)` with one target per shard: every minute, at the rule's
    second, one asynchronous invocation of the poller per shard."""

    def __init__(self, sim: Sim, function: Function[Any], shards: int, second_of_minute: float) -> None:
        self._sim = sim
        self._function = function
        self._shards = shards
        self._second = second_of_minute
        self.polls: list[dict[str, Any]] = []

    def start(self, first_minute: float) -> None:
        self._sim.env.process(self._tick(first_minute))

    def _tick(self, first_minute: float) -> Any:
        yield self._sim.env.timeout(max(0.0, first_minute + self._second - self._sim.env.now))
        while True:
            for shard in range(self._shards):
                self._sim.spawn(self._poll, shard, name=f"poll shard {shard}")
            yield self._sim.env.timeout(60.0)

    def _poll(self, shard: int) -> None:
        started = self._sim.env.now

        def poll(container: Container[Any]) -> Any:
            # What the handler reads from its context: the time left of the invocation's
            # timeout (which, as `Function.invoke` counts it, the start-up took from).
            time_left = self._function.timeout_seconds - (self._sim.env.now - started)
            return container.service.poll_shard(shard, timedelta(seconds=time_left))

        invoked, report = self._function.invoke(poll)
        self.polls.append(
            {
                "shard": shard,
                "at": started,
                "seconds": self._sim.env.now - started,
                "throttled": not invoked,
                "claimed": len(report.claimed) if report is not None else None,
                "contended": report.contended if report is not None else None,
            }
        )
