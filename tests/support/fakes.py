"""In-memory fakes of the ports beside the jobs table (`fake_store.py`): the run queue, the
targets, the DLQ, the create-once record and a message's lease; and the services wired on
them, as the composition root wires the real ones. For tests of the services' rules with
no moto: what a fake records is what the port was asked."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from scheduler_core.domain.clock import ManualClock
from scheduler_core.domain.entities import Job, Run
from scheduler_core.domain.messages import DeadLetter
from scheduler_core.ports import DeadLetterMessage, Delivery, KeyInUse, KeyReused
from scheduler_core.services.dispatch import Dispatcher, PollPolicy
from scheduler_core.services.execution import RunExecutor
from scheduler_core.services.jobs import JobService
from scheduler_core.services.lifecycle import RunLifecycle, TimerPolicy
from scheduler_core.services.parallel import InOrder
from tests.support.fake_store import InMemoryJobStore


@dataclass
class RecordingQueue:
    """`RunQueue`: every run sent and every dead letter, in order; `refuse` makes sends fail."""

    sent: list[Run] = field(default_factory=list)
    dead_letters: list[DeadLetter] = field(default_factory=list)
    refuse: bool = False

    def send_runs(self, runs: list[Run]) -> list[Run]:
        if self.refuse:
            return list(runs)
        self.sent += runs
        return []

    def send_dead_letter(self, record: DeadLetter) -> bool:
        if self.refuse:
            return False
        self.dead_letters.append(record)
        return True


@dataclass
class ScriptedTargets:
    """`TargetInvoker`: answers each call with the next of `answers` (the last one again once
    they run out), and records the (job, run) of every call."""

    answers: list[Delivery] = field(default_factory=lambda: [Delivery(ok=True, status_code=200)])
    calls: list[tuple[Job, Run]] = field(default_factory=list)

    def deliver(self, job: Job, run: Run) -> Delivery:
        self.calls.append((job, run))
        return self.answers[min(len(self.calls), len(self.answers)) - 1]

    def begin_invocation(self, context: Any) -> None:
        pass


@dataclass
class MemoryCreateOnce:
    """`CreateOnce`: a key's job id, kept for as long as the fake lives."""

    made: dict[tuple[str, str], tuple[dict[str, Any], str | None]] = field(default_factory=dict)

    def job_id(self, tenant: str, key: str, body: dict[str, Any], create: Callable[[], str]) -> str:
        seen = self.made.get((tenant, key))
        if seen is not None:
            first_body, job_id = seen
            if first_body != body:
                raise KeyReused(key)
            if job_id is None:
                raise KeyInUse(key)
            return job_id
        self.made[(tenant, key)] = (body, None)
        job_id = create()
        self.made[(tenant, key)] = (body, job_id)
        return job_id

    def begin_invocation(self, context: Any) -> None:
        pass


@dataclass
class MemoryDeadLetters:
    """`DeadLetterQueue`: messages waiting, hidden while a pass holds them."""

    waiting: list[DeadLetterMessage] = field(default_factory=list)
    deleted: list[DeadLetterMessage] = field(default_factory=list)
    _held: list[DeadLetterMessage] = field(default_factory=list)

    def receive(self, max_messages: int) -> list[DeadLetterMessage]:
        taken, self.waiting = self.waiting[:max_messages], self.waiting[max_messages:]
        self._held += taken
        return taken

    def delete(self, messages: Sequence[DeadLetterMessage]) -> int:
        self.deleted += messages
        self._held = [m for m in self._held if m not in messages]
        return len(messages)

    def release(self, messages: Sequence[DeadLetterMessage]) -> None:
        self._held = [m for m in self._held if m not in messages]
        self.waiting += messages


@dataclass
class NoteLease:
    """`MessageLease`: the visibility each heartbeat asked for."""

    hidden_for: list[int] = field(default_factory=list)

    def hide_for(self, seconds: int) -> None:
        self.hidden_for.append(seconds)


@dataclass
class FakeWorld:
    """The API's job service, the poll and the worker on fakes, sharing one store, queue and
    clock."""

    clock: ManualClock
    store: InMemoryJobStore
    queue: RecordingQueue
    targets: ScriptedTargets
    lifecycle: RunLifecycle
    dispatcher: Dispatcher
    executor: RunExecutor
    jobs: JobService
    creates: MemoryCreateOnce


def fake_world(start: datetime, shards: int = 4, lease: timedelta = timedelta(seconds=180)) -> FakeWorld:
    """The services on fakes, with the settings' default timers (lookahead 120 s, re-send
    after 60 s, grace 120 s, first-poll lookback 900 s); the job service lets a job target
    any URL or ARN."""
    clock = ManualClock(start)
    store = InMemoryJobStore(shards)
    queue = RecordingQueue()
    targets = ScriptedTargets()
    timers = TimerPolicy(resend_after=timedelta(seconds=60), lookahead=timedelta(seconds=120))
    lifecycle = RunLifecycle(store, queue, clock, timers)
    policy = PollPolicy(
        lookahead=timedelta(seconds=120),
        grace=timedelta(seconds=120),
        first_poll_lookback=timedelta(seconds=900),
        max_buckets=240,
    )
    dispatcher = Dispatcher(store, queue, clock, policy, lifecycle, InOrder())
    executor = RunExecutor(store, targets, clock, lease=lease, lifecycle=lifecycle)
    creates = MemoryCreateOnce()
    jobs = JobService(store, dispatcher, clock, lifecycle, creates=creates)
    return FakeWorld(clock, store, queue, targets, lifecycle, dispatcher, executor, jobs, creates)
