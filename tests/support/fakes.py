"""In-memory fakes of the ports beside the jobs table (`fake_store.py`): the run queue, the
targets, the DLQ, the create-once record and a message's lease; the services wired on
them, as the composition root wires the real ones (`fake_world`, workflows included); and
SQS's event source mapping between the queue and the worker (`Deliveries`). For tests of
the services' rules with no moto: what a fake records is what the port was asked."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from scheduler_core.domain.clock import ManualClock, to_ms
from scheduler_core.domain.entities import Job, Run
from scheduler_core.domain.messages import DeadLetter, RunMessage, run_message
from scheduler_core.domain.outcomes import Outcome
from scheduler_core.ports import DeadLetterMessage, Delivery, KeyInUse, KeyReused
from scheduler_core.services.dispatch import Dispatcher
from scheduler_core.services.execution import RunExecutor
from scheduler_core.services.jobs import JobService
from scheduler_core.services.lifecycle import RunLifecycle, TimerPolicy
from scheduler_core.services.parallel import InOrder
from scheduler_core.services.polls import PollPolicy
from scheduler_core.services.redrive import DeadLetterRedriver
from scheduler_core.services.target_check import TargetCheck
from scheduler_core.services.workflow_runs import WorkflowRunner
from scheduler_core.services.workflows import WorkflowService
from tests.support.fake_store import InMemoryJobStore


@dataclass
class MemoryDeadLetters:
    """`DeadLetterQueue`: messages waiting, hidden while a pass holds them. `post` puts one on
    it, as SQS's send does (or the queues' redrive policy, for a poison message)."""

    waiting: list[DeadLetterMessage] = field(default_factory=list)
    deleted: list[DeadLetterMessage] = field(default_factory=list)
    _held: list[DeadLetterMessage] = field(default_factory=list)
    _posted: int = 0

    def post(self, body: str) -> DeadLetterMessage:
        self._posted += 1
        message = DeadLetterMessage(f"dlq-{self._posted}", f"receipt-{self._posted}", body)
        self.waiting.append(message)
        return message

    @property
    def held(self) -> list[DeadLetterMessage]:
        """Received by a pass and neither deleted nor released (SQS: in flight)."""
        return list(self._held)

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
class RecordingQueue:
    """`RunQueue`: every run sent and every dead letter, in order; `refuse` makes sends fail.
    A dead letter recorded is also posted to `dlq`, if there is one, as the SQS adapter sends
    it (its JSON body)."""

    sent: list[Run] = field(default_factory=list)
    dead_letters: list[DeadLetter] = field(default_factory=list)
    refuse: bool = False
    dlq: MemoryDeadLetters | None = None

    def send_runs(self, runs: list[Run]) -> list[Run]:
        if self.refuse:
            return list(runs)
        self.sent += runs
        return []

    def send_dead_letter(self, record: DeadLetter) -> bool:
        if self.refuse:
            return False
        self.dead_letters.append(record)
        if self.dlq is not None:
            self.dlq.post(record.model_dump_json())
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
class CallsHeldOpen(ScriptedTargets):
    """`ScriptedTargets` whose call of a chosen run stays in flight while the test acts:
    `meanwhile[the run's time]` runs inside that call (once), after the call is recorded and
    before it answers, the run RUNNING throughout. Counts the calls in flight at once."""

    meanwhile: dict[datetime, Callable[[], None]] = field(default_factory=dict)
    in_flight: int = 0
    max_in_flight: int = 0

    def deliver(self, job: Job, run: Run) -> Delivery:
        answer = super().deliver(job, run)
        steps = self.meanwhile.pop(run.scheduled_for, None)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if steps is not None:
                steps()
        finally:
            self.in_flight -= 1
        return answer


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
class NoteLease:
    """`MessageLease`: the visibility each heartbeat asked for."""

    hidden_for: list[int] = field(default_factory=list)

    def hide_for(self, seconds: int) -> None:
        self.hidden_for.append(seconds)


@dataclass
class FakeWorld:
    """The API's job service (its workflows API: `jobs.workflows`), the poll and the worker
    on fakes, sharing one store, queue and clock."""

    clock: ManualClock
    store: InMemoryJobStore
    queue: RecordingQueue
    targets: ScriptedTargets
    lifecycle: RunLifecycle
    dispatcher: Dispatcher
    executor: RunExecutor
    jobs: JobService
    creates: MemoryCreateOnce
    dead_letters: MemoryDeadLetters  # the DLQ the queue's dead letters are posted to
    redriver: DeadLetterRedriver  # `make redrive` on that DLQ
    workflows: WorkflowRunner  # how workflow runs move on: the worker's, the poll's, the API's


# The settings' default poll timers (lookahead 120 s, grace 120 s, first-poll lookback 900 s).
POLL_POLICY = PollPolicy(
    lookahead=timedelta(seconds=120),
    grace=timedelta(seconds=120),
    first_poll_lookback=timedelta(seconds=900),
    max_buckets=240,
)


def fake_world(
    start: datetime,
    shards: int = 4,
    lease: timedelta = timedelta(seconds=180),
    targets: ScriptedTargets | None = None,
) -> FakeWorld:
    """The services on fakes, with the settings' default timers (`POLL_POLICY`, re-send
    after 60 s); the job service lets a job target any URL or ARN. `targets`: the worker's
    (a `ScriptedTargets` answering 200 by default)."""
    clock = ManualClock(start)
    store = InMemoryJobStore(shards)
    dead_letters = MemoryDeadLetters()
    queue = RecordingQueue(dlq=dead_letters)
    targets = targets if targets is not None else ScriptedTargets()
    timers = TimerPolicy(resend_after=timedelta(seconds=60), lookahead=POLL_POLICY.lookahead)
    lifecycle = RunLifecycle(store, queue, clock, timers)
    workflows = WorkflowRunner(store, queue, clock, lifecycle)
    dispatcher = Dispatcher(store, queue, clock, POLL_POLICY, lifecycle, InOrder(), workflows=workflows)
    executor = RunExecutor(store, targets, clock, lease=lease, lifecycle=lifecycle, workflows=workflows)
    creates = MemoryCreateOnce()
    access = TargetCheck()
    workflow_api = WorkflowService(store, workflows, dispatcher, clock, lifecycle, access)
    jobs = JobService(store, dispatcher, clock, lifecycle, access, creates=creates, workflows=workflow_api)
    redriver = DeadLetterRedriver(store, queue, lifecycle, dead_letters)
    return FakeWorld(
        clock,
        store,
        queue,
        targets,
        lifecycle,
        dispatcher,
        executor,
        jobs,
        creates,
        dead_letters,
        redriver,
        workflows,
    )


class Deliveries:
    """SQS and its event source mapping between the services and the worker, on fakes: each
    run the services sent (`world.queue.sent`) is handed to `world.executor`, as its message,
    once, when it is visible: `lead` before its attempt is due (SQS shows a delayed message a
    little early, DELIVERY_LEAD_SECONDS; the worker waits out the rest on the clock).

    Reentrant: a message is taken off the queue before the worker is handed it, so a
    delivery from inside a target call (another worker, side by side) never hands the same
    message twice. Every outcome is kept in `outcomes`, in the order the worker returned them."""

    def __init__(self, world: FakeWorld, lead: timedelta = timedelta(0)) -> None:
        self._world = world
        self._lead = lead
        self._read = 0  # how much of `world.queue.sent` is on `_waiting` already
        self._waiting: list[tuple[Run, RunMessage]] = []
        self.outcomes: list[Outcome] = []

    def deliver(self, early: timedelta = timedelta(0)) -> list[Outcome]:
        """Hand the worker each visible message (`early`: or visible within that much more),
        one at a time, oldest sent first, until none is left (those sent meanwhile included);
        the outcomes of this call, in order."""
        outcomes: list[Outcome] = []
        while (message := self._next_visible(early)) is not None:
            outcome = self._world.executor.execute(message)
            outcomes.append(outcome)
            self.outcomes.append(outcome)
        return outcomes

    def take(self, which: Callable[[Run], bool]) -> list[RunMessage]:
        """Take the messages of the runs sent that `which` picks off the queue without handing
        them to this worker (another worker took them, or they were lost)."""
        self._catch_up()
        taken = [message for run, message in self._waiting if which(run)]
        self._waiting = [(run, message) for run, message in self._waiting if not which(run)]
        return taken

    def _catch_up(self) -> None:
        sent = self._world.queue.sent
        self._waiting += [(run, run_message(run)) for run in sent[self._read :]]
        self._read = len(sent)

    def _next_visible(self, early: timedelta) -> RunMessage | None:
        self._catch_up()
        horizon = to_ms(self._world.clock.now() + self._lead + early)
        for index, (_, message) in enumerate(self._waiting):
            if message.due_ms <= horizon:
                del self._waiting[index]
                return message
        return None
