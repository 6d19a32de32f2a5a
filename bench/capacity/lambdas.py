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

import heapq
import math
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Generic, TypeVar

from moto.sqs.models import sqs_backends

from bench.capacity.aws import ACCOUNT, REGION, SimulatedAws
from bench.capacity.kernel import Sim
from bench.capacity.latency import (
    COLD_START,
    DELAYED_PICKUP_MAX_SECONDS,
    LONG_POLL_SECONDS,
    TARGET_CALL_SECONDS,
    WARM_INVOKE,
)
from bench.capacity.partitions import Charge
from scheduler_core.adapters.aws import AwsClients
from scheduler_core.adapters.queues import SqsMessageLease, delete_received
from scheduler_core.domain import keys
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
# A standard mapping that has been serving a steady load: scaled up to its ceiling already.
STANDARD_SCALED_UP = ScalingMode("standard, scaled up", initial=1_000, per_minute=300, ceiling=1_000)


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
    modeled_invocations: int = 0  # left-out batches (sampled load), no code run
    modeled_busy_seconds: float = 0.0


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

    def invoke_modeled(self, records: Callable[[], None]) -> bool:
        """A left-out batch's invocation (sampled load, `EventSourceMapping`): it holds one of
        the account's concurrent executions, in a warm environment, while `records()` waits
        out its records' modeled work; no code runs. False if Lambda throttled it."""
        if not self._account.acquire(self.name):
            return False
        self.running += 1
        self.stats.peak_concurrency = max(self.stats.peak_concurrency, self.running)
        started = self._sim.env.now
        try:
            self._sim.sleep(self._aws.latency.draw(WARM_INVOKE))
            records()
            return True
        finally:
            self.stats.modeled_invocations += 1
            self.stats.modeled_busy_seconds += self._sim.env.now - started
            self.running -= 1
            self._account.release()


@dataclass(order=True)
class _ShadowCohort:
    """Left-out records of one queue (sampled load): `records` of them become receivable at
    `visible_at` and are due at `due_at` (virtual seconds), as the real message they stand
    beside; `firing_ms` and `kept` are that message's firing and whether its run is kept on
    its job's item (`RunMessage.with_job`: its end takes the job's due index entry out)."""

    visible_at: float
    due_at: float = field(compare=False)
    records: int = field(compare=False)
    firing_ms: int = field(compare=False, default=0)
    kept: bool = field(compare=False, default=False)


# What a left-out record writes, in write units (a run's item under 1 KB, as the requests
# part of `make bench` measures the one-off path: docs/benchmarks.md): its start 1 (with
# one-offs claimed at their start, the claim in the same write), its end 1, and, for a run
# kept on its job's item, the job's due index entry taken out with the end 1. A run in an
# item of its own (a cron job's) writes at least as much.
LEFT_OUT_START_UNITS = 1.0
LEFT_OUT_END_UNITS = 1.0
LEFT_OUT_ENTRY_UNITS = 1.0
BACKOFF_CAP_SECONDS = 20.0  # botocore's standard retry mode: a random wait up to 2^n s, at most 20


@dataclass(frozen=True)
class LeftOutWrites:
    """Where a left-out record's writes land: its own item's (a key of its own: the table's
    units alone) and, for a kept run's end, its job's due index entry, on the key of its
    firing's minute and its job's shard (the left-out jobs spread evenly over the shards)."""

    table: str
    shards: int

    def start(self, records: int) -> list[Charge]:
        return [Charge(self.table, "", LEFT_OUT_START_UNITS * records)]

    def end(self, cohorts: Counter[tuple[int, bool]], offset: int) -> list[Charge]:
        """`cohorts`: records by (firing ms, kept); `offset`: the shard the first one's job is on."""
        charges = [Charge(self.table, "", LEFT_OUT_END_UNITS * sum(cohorts.values()))]
        by_key: defaultdict[str, float] = defaultdict(float)
        for (firing_ms, kept), records in cohorts.items():
            if not kept:
                continue
            # Round robin from `offset`: each shard takes records // shards, the first
            # records % shards one more.
            each, more = divmod(records, self.shards)
            for n in range(min(records, self.shards)):
                units = (each + (1 if n < more else 0)) * LEFT_OUT_ENTRY_UNITS
                by_key[keys.due_pk(firing_ms, (offset + n) % self.shards)] += units
            offset += records
        charges += [Charge(f"{self.table}/due", key, units) for key, units in by_key.items()]
        return charges


@dataclass
class _Gathered:
    """A batch a poller gathers: real messages (received from moto) and left-out records
    (how many, and the latest of their runs' times)."""

    messages: list[dict[str, Any]] = field(default_factory=list)
    left_out: int = 0
    due_at: float = 0.0
    firings: Counter[tuple[int, bool]] = field(default_factory=Counter)  # left out, by (firing, kept)

    @property
    def size(self) -> int:
        return len(self.messages) + self.left_out


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
    modeled_batches: int = 0  # left-out batches (sampled load)
    modeled_records: int = 0


class EventSourceMapping:
    """An SQS event source mapping: pollers receive batches and invoke the worker; the
    records a batch did not fail are deleted; the rest come back after their visibility
    timeout (or sooner if the worker hid them for less).

    Sampled load (`scenarios`): each real message sent stands beside `SimulatedAws.shadow`
    left-out ones, receivable at the same moment and due at the same time. They wait on the
    same queue, in the order they become receivable (the real message at a random place
    among its own), and the pollers take them in batches as they take real ones: each
    left-out batch holds a poller (the mapping's concurrency) and one of the account's
    concurrent executions while its invocation waits for its runs' time and does a start,
    the target's call and an end (drawn latencies), as the worker does; no code runs for it.
    With `left_out_writes`, their start's and end's write units are asked of the table and
    its due index when they would be written (`LeftOutWrites`), and wait as botocore's
    retries would while refused: a burst's ends meet on its minute's keys of the due index,
    and every start and end on the table's own limit."""

    def __init__(
        self,
        sim: Sim,
        aws: SimulatedAws,
        function: Function[RunExecutor],
        queue_url: str,
        batch_size: int,
        max_concurrency: int,
        mode: ScalingMode = STANDARD,
        *,
        window_seconds: float = 0.0,
        left_out_writes: LeftOutWrites | None = None,
    ) -> None:
        self._sim = sim
        self._aws = aws
        self._function = function
        self.queue_url = queue_url
        self._queue_name = queue_url.rstrip("/").rsplit("/", 1)[-1]
        self.batch_size = batch_size
        self.window_seconds = window_seconds
        self._writes = left_out_writes
        self._next_shard = 0  # the shard of the next left-out record's job (round robin)
        self.ceiling = min(max_concurrency, mode.ceiling)
        self.mode = mode
        self.limit = float(min(mode.initial, self.ceiling))
        self.pollers = 0
        self.busy = 0
        self.stats = MappingStats()
        self._clients = aws.clients("esm")
        self._changed = sim.env.event()
        self._shadow: list[_ShadowCohort] = []  # a heap, by when they become receivable
        self._shadow_carry = 0.0  # the fraction of a left-out record not yet queued
        self._seen: set[str] = set()  # real messages already given their left-out peers
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
        return self._shadow_receivable() or any(m.visible and not m.delayed for m in self._queue()._messages)

    def _real_receivable_at(self) -> float | None:
        """Virtual seconds until the next real message becomes receivable (0: one is now)."""
        now_ms = self._sim.now().timestamp() * 1000.0
        soonest: float | None = None
        for message in self._queue()._messages:
            at = max(message.visible_at, message.delayed_until or 0)
            if soonest is None or at < soonest:
                soonest = at
        if soonest is None:
            return None
        return max(0.0, (soonest - now_ms) / 1000.0)

    def seconds_to_next_visible(self) -> float | None:
        """Virtual seconds until the next message, real or left out, becomes receivable."""
        real = self._real_receivable_at()
        if not self._shadow:
            return real
        shadow = max(0.0, self._shadow[0].visible_at - self._sim.env.now)
        return shadow if real is None else min(real, shadow)

    def _shadow_receivable(self) -> bool:
        return bool(self._shadow) and self._shadow[0].visible_at <= self._sim.env.now

    def _shadow_first(self) -> bool:
        """Whether the next batch is left-out records: they became receivable before any real
        message that is receivable now."""
        if not self._shadow_receivable():
            return False
        real = self._real_receivable_at()
        return real is None or real > 0 or self._shadow[0].visible_at <= self._oldest_real_visible_at()

    def _oldest_real_visible_at(self) -> float:
        messages = self._queue()._messages
        times = [_became_visible_ms(m) for m in messages if m.visible and not m.delayed]
        return self._virtual(min(times)) if times else math.inf

    def _virtual(self, at_ms: float) -> float:
        """The virtual second of a moment on moto's clock (milliseconds since the epoch)."""
        return self._sim.env.now + (at_ms - self._sim.now().timestamp() * 1000.0) / 1000.0

    def _notify(self) -> None:
        if self._aws.shadow > 0:
            self._queue_left_out_peers()
        changed, self._changed = self._changed, self._sim.env.event()
        changed.succeed()

    def _queue_left_out_peers(self) -> None:
        """Each real message sent since last time gets its left-out peers: receivable and due
        when it is, split before and after it at random."""
        for message in self._queue()._messages:
            if message.id in self._seen:
                continue
            self._seen.add(message.id)
            visible_at = self._virtual(_became_visible_ms(message))
            run = RunMessage.model_validate_json(message.body)
            due_at = self._virtual(run.due_ms)
            peers = self._aws.shadow + self._shadow_carry
            whole = int(peers)
            self._shadow_carry = peers - whole
            before = round(whole * self._aws.latency.uniform(0.0, 1.0))
            for offset, records in ((-1e-6, before), (1e-6, whole - before)):
                if records:
                    cohort = _ShadowCohort(
                        visible_at + offset, due_at, records, run.scheduled_for_ms, run.with_job
                    )
                    heapq.heappush(self._shadow, cohort)

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
                self._gather_and_invoke()
            finally:
                self.busy -= 1

    def _gather_and_invoke(self) -> None:
        """One batch, as a poller gathers it: records in the order they became receivable,
        real and left out, until it holds `batch_size` or its window has passed since it
        began (no window: what is receivable now); then one invocation, and the deletes."""
        batch = _Gathered()
        closes_at = self._sim.env.now + self.window_seconds
        while True:
            self._take_receivable(batch)
            left = closes_at - self._sim.env.now
            if batch.size >= self.batch_size or left <= 0:
                break
            wait = self.seconds_to_next_visible()
            changed = self._changed
            self._sim.wait(
                self._sim.env.timeout(left if wait is None else max(1e-3, min(left, wait))) | changed
            )
        if batch.messages:
            self._invoke_real(batch)
        elif batch.left_out:
            self._invoke_left_out(batch)

    def _take_receivable(self, batch: _Gathered) -> None:
        """What is receivable now, up to a full batch: a receive (10 at most) for real
        messages; left-out records (a receive's latency for each 10) that became receivable
        before any real one."""
        latency = self._aws.latency
        while (room := self.batch_size - batch.size) > 0:
            if self._shadow_first():
                taken = self._take_left_out(min(room, 10), batch)
                self._sim.sleep(latency.call("sqs", "ReceiveMessage"))
                if not taken:
                    return
                continue
            if self._real_receivable_at() != 0:
                return
            reply = self._clients.sqs().receive_message(
                QueueUrl=self.queue_url, MaxNumberOfMessages=min(room, 10), AttributeNames=["All"]
            )
            self.stats.receives += 1
            received: list[dict[str, Any]] = list(reply.get("Messages", []))  # type: ignore[arg-type]
            if not received:
                return
            batch.messages.extend(received)

    def _take_left_out(self, most: int, batch: _Gathered) -> int:
        """Up to `most` receivable left-out records, none from behind a real message."""
        taken = 0
        real = self._oldest_real_visible_at()
        while taken < most and self._shadow_receivable() and self._shadow[0].visible_at <= real:
            cohort = self._shadow[0]
            take = min(most - taken, cohort.records)
            taken += take
            batch.due_at = max(batch.due_at, cohort.due_at)
            batch.firings[(cohort.firing_ms, cohort.kept)] += take
            cohort.records -= take
            if cohort.records == 0:
                heapq.heappop(self._shadow)
        batch.left_out += taken
        return taken

    def _left_out_records(self, batch: _Gathered) -> None:
        """An invocation's left-out records, side by side: wait for the last one's time, then
        a start, the target's call and an end (the slowest of them, roughly one of each),
        their writes asked of the table when they are made (`LeftOutWrites`)."""
        latency = self._aws.latency
        self._sim.sleep(max(0.0, batch.due_at - self._sim.env.now))
        writes = self._writes
        self._sim.sleep(latency.call("dynamodb", "UpdateItem"))
        if writes is not None:
            self._write_left_out(writes.start(batch.left_out))
        self._sim.sleep(TARGET_CALL_SECONDS + latency.call("dynamodb", "UpdateItem"))
        if writes is not None:
            charges = writes.end(batch.firings, self._next_shard)
            self._next_shard = (self._next_shard + batch.left_out) % writes.shards
            self._write_left_out(charges)

    def _write_left_out(self, charges: list[Charge]) -> None:
        """Left-out writes, admitted by the capacity model as the real ones are; refused,
        asked again after botocore's standard backoff (a random wait up to 2^n seconds, at
        most 20), for as long as it takes (the worker retries a throttled start with the
        message, a throttled end for 16 s: `execution`)."""
        attempt = 0
        while self._aws.capacity.admit_write(self._sim.env.now, charges) is not None:
            attempt += 1
            self._sim.sleep(self._aws.latency.uniform(0.0, min(BACKOFF_CAP_SECONDS, 2.0**attempt)))
        self._aws.capacity.shadow_write_units += sum(charge.units for charge in charges)

    def _invoke_real(self, batch: _Gathered) -> None:
        messages = batch.messages
        self.stats.batches += 1
        self.stats.records += batch.size
        invoked, handled = self._function.invoke(lambda container: self._batch(container, messages, batch))
        if not invoked:
            # Throttled by Lambda: the mapping backs off; the messages come back after
            # their visibility timeout.
            self.stats.lambda_throttles += 1
            self._requeue_left_out(batch)
            self._sim.sleep(1.0)
            return
        done: list[str] = handled or []
        self.stats.failed_records += len(messages) - len(done)
        delete_received(self._clients.sqs(), self.queue_url, done)
        self._delete_left_out(batch.left_out, already=len(done))

    def _invoke_left_out(self, batch: _Gathered) -> None:
        """A batch of left-out records only: the worker's invocation is modeled."""
        self.stats.modeled_batches += 1
        self.stats.modeled_records += batch.left_out
        if not self._function.invoke_modeled(lambda: self._left_out_records(batch)):
            self.stats.lambda_throttles += 1
            self._requeue_left_out(batch)
            self._sim.sleep(1.0)
            return
        self._delete_left_out(batch.left_out)

    def _requeue_left_out(self, batch: _Gathered) -> None:
        for (firing_ms, kept), records in batch.firings.items():
            cohort = _ShadowCohort(self._sim.env.now, batch.due_at, records, firing_ms, kept)
            heapq.heappush(self._shadow, cohort)

    def _delete_left_out(self, records: int, already: int = 0) -> None:
        """The DeleteMessageBatch calls (10 a call) left-out records add to `already` real ones."""
        for _ in range(math.ceil((records + already) / 10) - math.ceil(already / 10)):
            self._sim.sleep(self._aws.latency.call("sqs", "DeleteMessageBatch"))

    def _batch(
        self, container: Container[RunExecutor], messages: list[dict[str, Any]], batch: _Gathered
    ) -> list[str]:
        """The worker's handler: the batch's records concurrently (one thread each in the
        real handler, one task each here), its left-out records beside them (modeled); the
        receipt handles of the real records that succeeded."""
        processes = [
            self._sim.spawn(self._record, container, message, name="worker record") for message in messages
        ]
        if batch.left_out:
            processes.append(self._sim.spawn(self._left_out_records, batch, name="left-out records"))
        self._sim.wait_all(processes)
        return [
            message["ReceiptHandle"]
            for message, process in zip(messages, processes[: len(messages)], strict=True)
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


def _became_visible_ms(message: Any) -> float:
    """When a moto message became (or becomes) receivable: sent, delayed, or hidden by a
    receive until then (moto's `visible_at` is 0 until a receive sets it)."""
    return float(max(message.sent_timestamp or 0, message.delayed_until or 0, message.visible_at or 0))


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
