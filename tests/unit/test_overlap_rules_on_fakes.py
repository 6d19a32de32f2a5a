"""Overlap and concurrency (issue 5), the services' rules on in-memory fakes (no moto): what
a run due to start does while `concurrency.max_running` runs of its job are RUNNING (SKIP,
BUFFER_ONE, ALLOW; manual runs count and obey too), how every way an attempt ends (success,
retry, failure, a lease run out, a pause, a cancel) gives its running slot back, and how an
early or duplicate message and a change of policy bear on a start.

A run stays RUNNING while the test goes on by holding its target call open
(`CallsHeldOpen`: what happens meanwhile runs inside the call, no thread), or by an attempt
started and never finished (a worker that died, another worker). Time moves only when the
test moves it.

Elsewhere: the pure decisions and the policy's validation in `test_overlap.py`; the slots'
conditional writes, the fake's and DynamoDB's alike, in
`tests/integration/test_store_contract_runs.py`; what only the handlers on moto show (the
API's JSON and 400s, DynamoDB's transactions, a real webhook held in a worker thread, a
worker process that dies) in `tests/integration/test_overlap.py`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import pytest

from scheduler_core.domain.api_shapes import JobCreate, JobPatch
from scheduler_core.domain.clock import ManualClock, to_ms
from scheduler_core.domain.entities import Job, Run
from scheduler_core.domain.messages import run_message
from scheduler_core.domain.outcomes import Outcome
from scheduler_core.domain.overlap import slots_as_read
from scheduler_core.domain.policies import ConcurrencyPolicy
from scheduler_core.domain.vocabulary import JobStatus, Overlap, RunStatus, Trigger
from scheduler_core.ports import Delivery
from scheduler_core.services.execution import RunExecutor
from tests.support.builders import T0
from tests.support.fakes import CallsHeldOpen, Deliveries, fake_world

SHARDS = 4
LEASE = timedelta(seconds=180)
START = T0 + timedelta(seconds=30)  # 09:00:30: an every-minute job's 09:01 and 09:02 are claimed at create
OTHER_WORKER = "another-worker"
FAILS = Delivery(ok=False, status_code=500, error="HTTP 500", retryable=True)
OK = Delivery(ok=True, status_code=200)


def at(minute: int, second: int = 0, hour: int = 9) -> datetime:
    return T0.replace(hour=hour, minute=minute, second=second)


class WorkerDied(BaseException):
    """The worker's process ended during its target call (a timeout, an OOM): its attempt
    stays RUNNING, leased, and nothing after the call is written."""


def the_worker_dies() -> None:
    raise WorkerDied


class WorkersClock:
    """The world's clock as the worker reads it; `meanwhile`, if set, runs (once) when the
    worker next waits for a run's time: what happens elsewhere during that wait."""

    def __init__(self, clock: ManualClock) -> None:
        self._clock = clock
        self.meanwhile: Callable[[], None] | None = None

    def now(self) -> datetime:
        return self._clock.now()

    def sleep_until(self, when: datetime) -> None:
        steps, self.meanwhile = self.meanwhile, None
        if steps is not None:
            steps()
        self._clock.sleep_until(when)


class Scheduler:
    """The API's job service, the poller and the worker on fakes (`fake_world`), driven step
    by step. The queue hands the worker each message sent once, when its attempt is due
    (`Deliveries`)."""

    def __init__(self) -> None:
        self.targets = CallsHeldOpen()
        world = fake_world(START, shards=SHARDS, lease=LEASE, targets=self.targets)
        self.worker_clock = WorkersClock(world.clock)
        worker = RunExecutor(world.store, self.targets, self.worker_clock, LEASE, world.lifecycle)
        self.world = replace(world, executor=worker)
        self.store = world.store
        self.clock = world.clock
        self.deliveries = Deliveries(self.world)

    # --- the API, the poller, the clock ----------------------------------------------------

    def create(self, **fields: Any) -> Job:
        """An every-minute HTTP job of `alice`; `fields` override the create request's."""
        request = {
            "name": "every-minute",
            "schedule": {"cron": "* * * * *"},
            "target": {"type": "HTTP", "url": "https://example.com/hook"},
        }
        return self.world.jobs.create("alice", JobCreate.model_validate(request | fields))

    def poll(self) -> None:
        for shard in range(SHARDS):
            self.world.dispatcher.poll_shard(shard)

    def move_to(self, when: datetime) -> None:
        self.clock.sleep_until(when)
        assert self.clock.now() == when, "time only moves forward"

    # --- the worker ------------------------------------------------------------------------

    def deliver(self, early: timedelta = timedelta(0)) -> list[Outcome]:
        """The queue's event source mapping: each message sent and not handed over yet whose
        attempt is due by now (`early`: or within that much; the worker waits out the rest),
        to the worker, one at a time, until none is left (those sent meanwhile included).
        The outcomes, in order."""
        return self.deliveries.deliver(early)

    def deliver_holding(self, when: datetime, meanwhile: Callable[[], None]) -> list[Outcome]:
        """`deliver`, the target call of the run at `when` held open while `meanwhile` runs."""
        self.targets.meanwhile[when] = meanwhile
        outcomes = self.deliver()
        assert when not in self.targets.meanwhile, f"the run at {when} was never called"
        return outcomes

    def deliver_early(self, by: timedelta, meanwhile: Callable[[], None]) -> list[Outcome]:
        """`deliver`, the messages due within `by` handed over early (SQS does, by a second
        or so); `meanwhile` runs while the worker waits for its run's time."""
        self.worker_clock.meanwhile = meanwhile
        outcomes = self.deliver(early=by)
        assert self.worker_clock.meanwhile is None, "the worker never waited"
        return outcomes

    def started_by_another_worker(self, job: Job, when: datetime) -> Run:
        """The run at `when` started by another worker (its message taken off the queue), as
        a worker's start writes it: a slot taken. `finished_by_the_other_worker` ends it."""
        self.deliveries.take(lambda run: run.scheduled_for == when)
        read, waiting = self.store.get_job_and_run(job.job_id, to_ms(when))
        assert read is not None
        assert waiting is not None
        now = self.clock.now()
        slots = slots_as_read(read, waiting.scheduled_for_ms)
        started = self.store.start_run_in_slot(waiting, slots, now, now + LEASE, OTHER_WORKER)
        assert started is not None
        return started

    def finished_by_the_other_worker(self, run: Run) -> None:
        assert self.store.finish_run_if_held(run, OTHER_WORKER, RunStatus.SUCCEEDED, self.clock.now())

    # --- what the store holds --------------------------------------------------------------

    def job(self, job: Job) -> Job:
        read = self.store.get_job(job.job_id)
        assert read is not None
        return read

    def slots(self, job: Job) -> tuple[int, int | None]:
        """The job's running slots taken, and the run (by time in ms) waiting for one."""
        read = self.job(job)
        return read.running_count, read.buffered_run_ms

    def run(self, job: Job, when: datetime) -> Run:
        run = self.store.get_run(job.job_id, to_ms(when))
        assert run is not None, f"no run at {when}"
        return run

    def statuses(self, job: Job) -> dict[datetime, RunStatus]:
        """The job's runs' statuses by time."""
        return {run.scheduled_for: run.status for run in self.store.recent_runs(job.job_id, 100)}

    def called(self) -> list[datetime]:
        """The times of the runs whose target was called, in the order of the calls."""
        return [run.scheduled_for for _, run in self.targets.calls]


# --- SKIP (the default) ------------------------------------------------------------------------


def test_a_run_due_while_the_previous_one_runs_is_skipped_by_default() -> None:
    s = Scheduler()
    job = s.create()  # 09:01 and 09:02 claimed
    assert job.concurrency == ConcurrencyPolicy(overlap=Overlap.SKIP, max_running=1)

    def while_09_01_runs() -> None:
        assert s.slots(job) == (1, None)
        s.move_to(at(2))
        assert s.deliver() == [Outcome.SKIPPED]
        skipped = s.run(job, at(2))
        assert skipped.status is RunStatus.SKIPPED
        assert skipped.error == (
            "skipped: 1 run of the job running when it was due (concurrency.max_running 1, overlap SKIP)"
        )
        assert (skipped.started_at, skipped.finished_at) == (None, at(2))

    s.move_to(at(1))
    assert s.deliver_holding(at(1), while_09_01_runs) == [Outcome.SUCCEEDED]
    assert s.statuses(job) == {at(1): RunStatus.SUCCEEDED, at(2): RunStatus.SKIPPED}
    assert s.called() == [at(1)]  # the skipped run's target was never called
    assert s.slots(job) == (0, None)

    s.move_to(at(3))  # the slot is free again: the next run goes ahead
    s.poll()
    assert s.deliver() == [Outcome.SUCCEEDED]
    assert s.statuses(job)[at(3)] is RunStatus.SUCCEEDED
    assert s.slots(job) == (0, None)


def test_max_running_two_lets_two_run_at_once_and_skips_the_third() -> None:
    s = Scheduler()
    job = s.create(concurrency={"max_running": 2})

    def while_09_01_and_09_02_run() -> None:
        assert s.slots(job) == (2, None)
        s.move_to(at(3))
        s.poll()
        assert s.deliver() == [Outcome.SKIPPED]
        assert s.run(job, at(3)).error == (
            "skipped: 2 runs of the job running when it was due (concurrency.max_running 2, overlap SKIP)"
        )

    def while_09_01_runs() -> None:
        assert s.slots(job) == (1, None)
        s.move_to(at(2))
        assert s.deliver_holding(at(2), while_09_01_and_09_02_run) == [Outcome.SUCCEEDED]

    s.move_to(at(1))
    assert s.deliver_holding(at(1), while_09_01_runs) == [Outcome.SUCCEEDED]
    statuses = s.statuses(job)
    assert [statuses[at(m)] for m in (1, 2, 3)] == [
        RunStatus.SUCCEEDED,
        RunStatus.SUCCEEDED,
        RunStatus.SKIPPED,
    ]
    assert s.called() == [at(1), at(2)]
    assert s.targets.max_in_flight == 2
    assert s.slots(job) == (0, None)


def test_a_manual_run_takes_a_slot_and_a_one_off_skipped_behind_it_completes_its_job() -> None:
    """Manual runs count and obey the policy like any run; a one-off's run skipped (its last
    and only firing) completes the job, as its end would have."""
    s = Scheduler()
    job = s.create(schedule={"at": at(1).isoformat()})  # claimed at create
    manual = s.world.jobs.trigger("alice", job.job_id)
    assert manual.trigger is Trigger.MANUAL

    def while_the_manual_run_runs() -> None:
        assert s.slots(job) == (1, None)
        s.move_to(at(1))
        assert s.deliver() == [Outcome.SKIPPED]
        assert s.run(job, at(1)).status is RunStatus.SKIPPED
        assert s.job(job).status is JobStatus.COMPLETED

    assert s.deliver_holding(manual.scheduled_for, while_the_manual_run_runs) == [Outcome.SUCCEEDED]
    assert s.run(job, manual.scheduled_for).status is RunStatus.SUCCEEDED
    assert s.job(job).status is JobStatus.COMPLETED
    assert s.called() == [manual.scheduled_for]
    assert s.slots(job) == (0, None)


# --- BUFFER_ONE --------------------------------------------------------------------------------


def test_buffer_one_keeps_one_run_waiting_starts_it_when_the_running_one_ends_and_skips_more() -> None:
    s = Scheduler()
    job = s.create(concurrency={"overlap": "BUFFER_ONE"})
    assert job.concurrency == ConcurrencyPolicy(overlap=Overlap.BUFFER_ONE, max_running=1)

    def while_09_01_runs() -> None:
        s.move_to(at(2))
        assert s.deliver() == [Outcome.BUFFERED]  # 09:02 waits for the slot
        assert s.statuses(job) == {at(1): RunStatus.RUNNING, at(2): RunStatus.PENDING}
        assert s.slots(job) == (1, to_ms(at(2)))

        # 09:03 comes due while 09:02 waits: skipped. (09:02's timer is up too: the poller
        # sends its message again, and it goes on waiting.)
        s.move_to(at(3))
        s.poll()
        assert sorted(s.deliver()) == [Outcome.BUFFERED, Outcome.SKIPPED]
        three = s.run(job, at(3))
        assert three.status is RunStatus.SKIPPED
        assert three.error == (
            "skipped: another run of the job already waits for a slot "
            "(concurrency.max_running 1, overlap BUFFER_ONE)"
        )
        assert s.run(job, at(2)).status is RunStatus.PENDING
        assert s.slots(job) == (1, to_ms(at(2)))

    # 09:01 ends: its slot goes to 09:02 at once (the ending worker sends 09:02's message; the
    # same pass over the queue hands it over).
    s.move_to(at(1))
    assert s.deliver_holding(at(1), while_09_01_runs) == [Outcome.SUCCEEDED, Outcome.SUCCEEDED]
    statuses = s.statuses(job)
    assert [statuses[at(m)] for m in (1, 2, 3)] == [
        RunStatus.SUCCEEDED,
        RunStatus.SUCCEEDED,
        RunStatus.SKIPPED,
    ]
    assert s.called() == [at(1), at(2)]
    two_started, one_finished = s.run(job, at(2)).started_at, s.run(job, at(1)).finished_at
    assert two_started is not None
    assert one_finished is not None
    assert two_started >= one_finished
    assert s.slots(job) == (0, None)


def test_a_buffered_run_whose_wake_up_is_lost_is_started_by_the_poller_at_its_timer() -> None:
    """The slot's release sends the buffered run's message; if that send is lost, the
    buffered run's timer has the poller send it."""
    s = Scheduler()
    job = s.create(concurrency={"overlap": "BUFFER_ONE"})

    def while_09_01_runs() -> None:
        s.move_to(at(2))
        assert s.deliver() == [Outcome.BUFFERED]
        s.world.queue.refuse = True  # the release's send of 09:02's message is lost

    s.move_to(at(1))
    assert s.deliver_holding(at(1), while_09_01_runs) == [Outcome.SUCCEEDED]
    s.world.queue.refuse = False
    assert s.run(job, at(2)).status is RunStatus.PENDING
    assert s.slots(job) == (0, to_ms(at(2)))

    s.move_to(at(3))  # 09:02's timer (a minute after it was buffered)
    s.poll()
    s.deliver()
    assert s.run(job, at(2)).status is RunStatus.SUCCEEDED
    assert s.called()[:2] == [at(1), at(2)]


def test_a_buffered_run_that_ended_without_starting_does_not_hold_up_the_next_ones() -> None:
    s = Scheduler()
    job = s.create(concurrency={"overlap": "BUFFER_ONE"})

    def while_09_01_runs() -> None:
        s.move_to(at(2))
        assert s.deliver() == [Outcome.BUFFERED]
        # Cancelled before its start (e.g. by a schedule change).
        assert s.store.cancel_run_if_not_started(s.run(job, at(2)), s.clock.now())

    s.move_to(at(1))
    assert s.deliver_holding(at(1), while_09_01_runs) == [Outcome.SUCCEEDED]

    s.move_to(at(3))
    s.poll()
    assert s.deliver() == [Outcome.SUCCEEDED]  # the buffered run ended: forgotten, 09:03 runs
    statuses = s.statuses(job)
    assert [statuses[at(m)] for m in (1, 2, 3)] == [
        RunStatus.SUCCEEDED,
        RunStatus.CANCELLED,
        RunStatus.SUCCEEDED,
    ]
    assert s.slots(job) == (0, None)


# --- ALLOW -------------------------------------------------------------------------------------


def test_allow_starts_every_run_whatever_runs_already_and_counts_none() -> None:
    s = Scheduler()
    job = s.create(concurrency={"overlap": "ALLOW"})
    assert job.concurrency == ConcurrencyPolicy(overlap=Overlap.ALLOW, max_running=None)

    def while_09_01_runs() -> None:
        assert s.slots(job) == (0, None)  # ALLOW counts nothing
        s.move_to(at(2))
        assert s.deliver() == [Outcome.SUCCEEDED]
        assert s.statuses(job) == {at(1): RunStatus.RUNNING, at(2): RunStatus.SUCCEEDED}

    s.move_to(at(1))
    assert s.deliver_holding(at(1), while_09_01_runs) == [Outcome.SUCCEEDED]
    assert s.targets.max_in_flight == 2
    assert s.statuses(job) == {at(1): RunStatus.SUCCEEDED, at(2): RunStatus.SUCCEEDED}
    assert s.slots(job) == (0, None)


# --- every way an attempt ends gives its slot back -----------------------------------------------


def test_a_retrying_or_failed_attempt_gives_its_slot_back_and_each_attempt_takes_one() -> None:
    """Hourly, so no other firing comes near: attempt 1 takes a slot and fails (RETRYING: not
    running, its slot given back), attempt 2 takes a slot again at its start and fails for
    good (given back); the next hour's run is not held up."""
    s = Scheduler()
    job = s.create(schedule={"cron": "0 * * * *"}, retry={"max_attempts": 2, "backoff_seconds": 30})
    s.targets.answers = [FAILS, FAILS, OK]
    ten = at(0, hour=10)

    def slot_taken() -> None:
        assert s.slots(job) == (1, None)

    s.move_to(ten - timedelta(minutes=1))
    s.poll()
    s.move_to(ten)
    assert s.deliver_holding(ten, slot_taken) == [Outcome.RETRYING]  # the retry is not due yet
    retrying = s.run(job, ten)
    assert (retrying.status, retrying.attempt) == (RunStatus.RETRYING, 2)
    assert s.slots(job) == (0, None)

    assert retrying.next_attempt_at is not None
    s.move_to(retrying.next_attempt_at)
    assert s.deliver_holding(ten, slot_taken) == [Outcome.FAILED]
    assert s.statuses(job) == {ten: RunStatus.FAILED}
    assert s.called() == [ten, ten]
    assert s.slots(job) == (0, None)

    eleven = ten + timedelta(hours=1)
    s.move_to(eleven - timedelta(minutes=1))
    s.poll()
    s.move_to(eleven)
    assert s.deliver() == [Outcome.SUCCEEDED]
    assert s.statuses(job)[eleven] is RunStatus.SUCCEEDED
    assert s.slots(job) == (0, None)


def test_a_dead_workers_run_holds_its_slot_until_its_lease_runs_out_then_its_retry_frees_it() -> None:
    """A worker dies during its call: its run holds the slot (it might still be running)
    until the lease runs out, and a manual run triggered meanwhile is skipped; then the
    watchdog retries it, the slot is free, and attempt 2 calls the target with the same run
    (its idempotency key)."""
    s = Scheduler()
    job = s.create(schedule={"cron": "0 * * * *"}, retry={"backoff_seconds": 1})
    ten = at(0, hour=10)
    s.move_to(ten - timedelta(minutes=1))
    s.poll()
    s.move_to(ten)
    with pytest.raises(WorkerDied):
        s.deliver_holding(ten, the_worker_dies)
    assert s.run(job, ten).status is RunStatus.RUNNING
    assert s.slots(job) == (1, None)

    manual = s.world.jobs.trigger("alice", job.job_id)
    s.move_to(manual.scheduled_for)  # 10:00:00.001: 10:00 itself is the firing's
    assert s.deliver() == [Outcome.SKIPPED]
    assert s.run(job, manual.scheduled_for).status is RunStatus.SKIPPED
    assert s.slots(job) == (1, None)

    s.move_to(ten + LEASE - timedelta(seconds=1))
    s.poll()  # the lease holds: nothing is taken over
    assert s.run(job, ten).status is RunStatus.RUNNING
    assert s.slots(job) == (1, None)

    s.move_to(ten + LEASE + timedelta(seconds=5))
    s.poll()  # the watchdog: attempt 1 is lost, attempt 2 is due after its backoff
    retrying = s.run(job, ten)
    assert (retrying.status, retrying.attempt) == (RunStatus.RETRYING, 2)
    assert s.slots(job) == (0, None)

    s.move_to(ten + LEASE + timedelta(seconds=15))
    assert s.deliver() == [Outcome.SUCCEEDED]
    assert s.run(job, ten).status is RunStatus.SUCCEEDED
    assert [run.run_id for _, run in s.targets.calls] == [retrying.run_id] * 2
    assert s.slots(job) == (0, None)


def test_a_dead_workers_run_gives_its_slot_back_when_its_cancelled_job_lets_it_go() -> None:
    s = Scheduler()
    job = s.create()
    s.move_to(at(1))
    with pytest.raises(WorkerDied):
        s.deliver_holding(at(1), the_worker_dies)
    assert s.slots(job) == (1, None)
    s.world.jobs.cancel("alice", job.job_id)
    assert s.slots(job) == (1, None)  # it might still be running

    s.move_to(at(1) + LEASE + timedelta(seconds=5))
    s.poll()
    assert s.statuses(job) == {at(1): RunStatus.CANCELLED, at(2): RunStatus.CANCELLED}
    assert s.slots(job) == (0, None)
    assert s.called() == [at(1)]


def test_a_run_whose_job_is_paused_while_it_waits_for_its_time_is_set_aside_without_a_slot() -> None:
    """The worker got the run's message a little early and waits for its time before it
    takes a slot; the job is paused meanwhile, so its start (conditioned on the job as read)
    fails, and the worker sets the run aside, uncalled, waiting for the resume, never
    having taken the slot. The resume (misfire FIRE_ONCE) fires one run now in its place,
    which takes the slot and gives it back."""
    s = Scheduler()
    job = s.create()
    taken: list[tuple[int, int | None]] = []

    def paused_meanwhile() -> None:
        taken.append(s.slots(job))
        s.world.jobs.pause("alice", job.job_id)

    s.move_to(at(1) - timedelta(seconds=1))
    assert s.deliver_early(timedelta(seconds=1), paused_meanwhile) == [Outcome.SET_ASIDE]
    assert taken == [(0, None)]
    assert s.run(job, at(1)).status is RunStatus.PENDING
    assert s.called() == []
    assert s.slots(job) == (0, None)

    resumed_at = at(1, 20)
    s.move_to(resumed_at)
    s.world.jobs.resume("alice", job.job_id)

    def slot_taken() -> None:
        assert s.slots(job) == (1, None)

    assert s.deliver_holding(resumed_at, slot_taken) == [Outcome.SUCCEEDED]
    assert s.called() == [resumed_at]
    assert s.run(job, at(1)).status is RunStatus.CANCELLED
    assert s.slots(job) == (0, None)


# --- early messages, duplicates, changes of policy ------------------------------------------


def test_a_run_whose_message_comes_early_is_admitted_at_its_time_not_on_arrival() -> None:
    """The worker gets a run's message a little early, while the slots are all taken. It
    decides at the run's time, not before: the run before may have ended meanwhile."""
    s = Scheduler()
    job = s.create()
    s.move_to(at(1))
    first = s.started_by_another_worker(job, at(1))
    seen: list[tuple[int, int | None]] = []

    def previous_run_ends_meanwhile() -> None:
        seen.append(s.slots(job))
        s.finished_by_the_other_worker(first)

    s.move_to(at(2) - timedelta(seconds=1))  # 09:02's message arrives a little early
    assert s.deliver_early(timedelta(seconds=1), previous_run_ends_meanwhile) == [Outcome.SUCCEEDED]
    assert seen == [(1, None)]  # on arrival, every slot was taken
    assert s.statuses(job) == {at(1): RunStatus.SUCCEEDED, at(2): RunStatus.SUCCEEDED}
    assert s.called() == [at(2)]
    assert s.slots(job) == (0, None)


def test_a_duplicate_message_of_a_running_run_is_dropped_not_skipped() -> None:
    s = Scheduler()
    job = s.create()

    def the_message_again() -> None:
        running = s.run(job, at(1))
        assert s.world.executor.execute(run_message(running)) is Outcome.DUPLICATE
        assert s.run(job, at(1)).status is RunStatus.RUNNING
        assert s.slots(job) == (1, None)

    s.move_to(at(1))
    assert s.deliver_holding(at(1), the_message_again) == [Outcome.SUCCEEDED]
    assert s.statuses(job) == {at(1): RunStatus.SUCCEEDED, at(2): RunStatus.PENDING}
    assert s.called() == [at(1)]
    assert s.slots(job) == (0, None)


def test_a_changed_policy_applies_to_the_runs_that_start_after_it() -> None:
    s = Scheduler()
    job = s.create()

    def allowed_meanwhile() -> None:
        patch = JobPatch.model_validate({"concurrency": {"overlap": "ALLOW"}})
        changed = s.world.jobs.update("alice", job.job_id, patch)
        assert changed.concurrency == ConcurrencyPolicy(overlap=Overlap.ALLOW, max_running=None)
        s.move_to(at(2))
        assert s.deliver() == [Outcome.SUCCEEDED]  # no longer skipped behind 09:01
        assert s.statuses(job) == {at(1): RunStatus.RUNNING, at(2): RunStatus.SUCCEEDED}

    s.move_to(at(1))
    assert s.deliver_holding(at(1), allowed_meanwhile) == [Outcome.SUCCEEDED]
    assert s.targets.max_in_flight == 2
    # The 09:01 run took its slot under SKIP and gave it back at its end.
    assert s.slots(job) == (0, None)
