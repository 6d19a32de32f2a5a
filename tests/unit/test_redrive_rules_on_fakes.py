"""`make redrive`'s rules (`DeadLetterRedriver`), on the in-memory fakes
(`tests/support/fakes.py`): what a pass over the DLQ does with each message. A RUN_FAILED
record re-drives its run (a new attempt, a fresh round) unless the run moved on (retried
through the API: stale), is gone, or its job is cancelled (dropped) or paused (kept until
the resume); a poison run message goes back to its run's priority queue while its run
waits for that attempt, and is dropped once the run moved on; what cannot be read stays;
a pass works batch by batch, a limit stops it, and a run that fails again during the pass
leaves its new record for the next one.

The DLQ is `MemoryDeadLetters`, fed by the worker's dead letters (`RecordingQueue` posts
each record's JSON to it, as the SQS adapter sends it); the worker is handed its messages
by `Deliveries`.

Elsewhere: on moto (`tests/integration/test_redrive.py`), what only real SQS shows (a
poison message moved to the DLQ by the queues' redrive policy and sent back to its priority
queue; kept messages made visible again when the pass ends) and the CLI that finds a
deployed stack's DLQ and settings in its outputs."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import pytest

from scheduler_core.domain.api_shapes import JobCreate
from scheduler_core.domain.entities import Job, Run
from scheduler_core.domain.messages import DeadLetter, run_message
from scheduler_core.domain.outcomes import Outcome
from scheduler_core.domain.vocabulary import Priority, RunStatus, Trigger
from scheduler_core.ports import DeadLetterMessage, Delivery
from scheduler_core.services.redrive import DeadLetterRedriver, RedriveOutcome, RedriveReport
from tests.support.builders import T0
from tests.support.fakes import Deliveries, FakeWorld, MemoryDeadLetters, fake_world
from tests.support.helpers import iso

ALICE = "alice"
START = T0 + timedelta(seconds=30)  # 09:00:30
OK = Delivery(ok=True, status_code=200)
FAILS = Delivery(ok=False, status_code=500, error="HTTP 500", retryable=True)


@pytest.fixture
def world() -> FakeWorld:
    return fake_world(START)


@pytest.fixture
def worker(world: FakeWorld) -> Deliveries:
    return Deliveries(world)


def create(world: FakeWorld, schedule: dict[str, Any], **fields: Any) -> Job:
    """An HTTP job whose first failed attempt is its last."""
    body = {
        "name": "redrive",
        "schedule": schedule,
        "target": {"type": "HTTP", "url": "https://example.com/hook"},
        "retry": {"max_attempts": 1},
    }
    return world.jobs.create(ALICE, JobCreate.model_validate(body | fields))


def only_run(world: FakeWorld, job: Job) -> Run:
    [run] = world.jobs.list_runs(ALICE, job.job_id, 100, None, None).items
    return run  # type: ignore[no-any-return]


def fail_one_run(world: FakeWorld, worker: Deliveries) -> Job:
    """A one-off for now whose run FAILED (its target answered 500, no attempts left): its
    record is on the DLQ. The target answers 200 from then on."""
    world.targets.answers = [FAILS]
    job = create(world, {"at": iso(world.clock.now())})
    assert worker.deliver() == [Outcome.FAILED]
    world.targets.answers = [OK]
    run = only_run(world, job)
    assert (run.status, run.attempt) == (RunStatus.FAILED, 1)
    return job


def dlq_depth(dlq: MemoryDeadLetters) -> tuple[int, int]:
    """(visible, in flight) messages on the DLQ."""
    return len(dlq.waiting), len(dlq.held)


def counts(report: RedriveReport) -> dict[RedriveOutcome, int]:
    return {outcome: count for outcome, count in report.outcomes.items() if count}


def attempts_called(world: FakeWorld) -> list[int]:
    return [run.attempt for _, run in world.targets.calls]


# --- RUN_FAILED records ---------------------------------------------------------------------


def test_a_failed_run_is_redriven_from_its_record_and_succeeds_at_its_next_attempt(
    world: FakeWorld, worker: Deliveries
) -> None:
    job = fail_one_run(world, worker)
    [record] = [DeadLetter.model_validate_json(m.body) for m in world.dead_letters.waiting]
    assert (record.run_id, record.attempts, record.last_error) == (only_run(world, job).run_id, 1, "HTTP 500")

    report = world.redriver.redrive()

    assert counts(report) == {RedriveOutcome.REDRIVEN: 1}
    assert (report.received, report.deleted, report.kept) == (1, 1, 0)
    redriven = only_run(world, job)
    assert (redriven.status, redriven.attempt, redriven.trigger) == (RunStatus.RETRYING, 2, Trigger.RETRY)
    assert dlq_depth(world.dead_letters) == (0, 0)
    assert world.queue.sent[-1].run_id == redriven.run_id  # its new attempt is on its queue
    assert worker.deliver() == [Outcome.SUCCEEDED]
    run = only_run(world, job)
    assert (run.status, run.attempt, run.trigger) == (RunStatus.SUCCEEDED, 2, Trigger.RETRY)
    assert attempts_called(world) == [1, 2]


def test_a_record_of_a_run_already_retried_through_the_api_is_dropped(
    world: FakeWorld, worker: Deliveries
) -> None:
    job = fail_one_run(world, worker)
    retried = world.jobs.retry_run(ALICE, job.job_id, only_run(world, job).run_id)
    assert (retried.status, retried.attempt) == (RunStatus.RETRYING, 2)

    report = world.redriver.redrive()

    assert counts(report) == {RedriveOutcome.STALE: 1}
    assert (report.deleted, dlq_depth(world.dead_letters)) == (1, (0, 0))
    assert worker.deliver() == [Outcome.SUCCEEDED]
    assert attempts_called(world) == [1, 2]  # one new attempt (the API's), not two
    assert only_run(world, job).status is RunStatus.SUCCEEDED


def every_minute_failing(world: FakeWorld, worker: Deliveries) -> tuple[Job, Run]:
    """An every-minute job whose 09:01 run FAILED: its record is on the DLQ."""
    world.targets.answers = [FAILS]
    job = create(world, {"cron": "* * * * *"})  # 09:01 and 09:02 claimed
    world.clock.set(T0 + timedelta(minutes=1))
    assert worker.deliver() == [Outcome.FAILED]
    world.targets.answers = [OK]
    [failed] = world.jobs.list_runs(ALICE, job.job_id, 100, None, RunStatus.FAILED).items
    return job, failed


def test_a_record_whose_job_is_cancelled_is_dropped_and_its_run_stays_failed(
    world: FakeWorld, worker: Deliveries
) -> None:
    job, failed = every_minute_failing(world, worker)
    world.jobs.cancel(ALICE, job.job_id)

    report = world.redriver.redrive()

    assert counts(report) == {RedriveOutcome.CANCELLED: 1}
    assert (report.deleted, dlq_depth(world.dead_letters)) == (1, (0, 0))
    assert world.jobs.get_run(ALICE, job.job_id, failed.run_id).status is RunStatus.FAILED
    assert len(world.targets.calls) == 1


def test_a_record_whose_job_is_paused_waits_on_the_dlq_and_is_redriven_after_the_resume(
    world: FakeWorld, worker: Deliveries
) -> None:
    job, failed = every_minute_failing(world, worker)
    world.jobs.pause(ALICE, job.job_id)

    report = world.redriver.redrive()

    assert counts(report) == {RedriveOutcome.PAUSED: 1}
    assert (report.received, report.deleted, report.kept) == (1, 0, 1)
    assert world.jobs.get_run(ALICE, job.job_id, failed.run_id).status is RunStatus.FAILED
    assert dlq_depth(world.dead_letters) == (1, 0)  # visible again for the next pass

    world.jobs.resume(ALICE, job.job_id)
    assert counts(world.redriver.redrive()) == {RedriveOutcome.REDRIVEN: 1}
    assert world.jobs.get_run(ALICE, job.job_id, failed.run_id).status is RunStatus.RETRYING


def test_records_of_gone_runs_are_dropped(world: FakeWorld, worker: Deliveries) -> None:
    job = fail_one_run(world, worker)
    [message] = world.dead_letters.receive(10)
    world.dead_letters.delete([message])
    record = json.loads(message.body)
    assert record["kind"] == "RUN_FAILED"
    gone = record | {"job_id": "nope", "message": record["message"] | {"job_id": "nope"}}
    world.dead_letters.post(json.dumps(gone))

    report = world.redriver.redrive()

    assert counts(report) == {RedriveOutcome.GONE: 1}
    assert (report.deleted, dlq_depth(world.dead_letters)) == (1, (0, 0))
    assert only_run(world, job).status is RunStatus.FAILED


# --- poison run messages ----------------------------------------------------------------------


def test_a_poison_message_goes_back_to_its_runs_priority_queue(world: FakeWorld, worker: Deliveries) -> None:
    job = create(world, {"at": iso(world.clock.now())}, priority="HIGH")
    # A message that crashes every worker that takes it: the queue's redrive policy moves it,
    # as it is, to the DLQ; its run still waits for attempt 1.
    [poison] = worker.take(lambda run: run.job_id == job.job_id)
    world.dead_letters.post(poison.model_dump_json())
    sent = len(world.queue.sent)

    report = world.redriver.redrive()

    assert counts(report) == {RedriveOutcome.REQUEUED: 1}
    assert (report.deleted, dlq_depth(world.dead_letters)) == (1, (0, 0))
    [requeued] = world.queue.sent[sent:]
    assert (requeued.run_id, requeued.priority) == (poison.run_id, Priority.HIGH)
    assert run_message(requeued) == poison
    assert worker.deliver() == [Outcome.SUCCEEDED]
    run = only_run(world, job)
    assert (run.status, run.attempt) == (RunStatus.SUCCEEDED, 1)


def test_a_poison_message_of_a_run_that_moved_on_is_dropped(world: FakeWorld, worker: Deliveries) -> None:
    create(world, {"at": iso(world.clock.now())})
    message = run_message(world.queue.sent[-1])
    assert worker.deliver() == [Outcome.SUCCEEDED]  # the run succeeds; a duplicate is taken for poison
    world.dead_letters.post(message.model_dump_json())
    sent = len(world.queue.sent)

    report = world.redriver.redrive()

    assert counts(report) == {RedriveOutcome.STALE: 1}
    assert dlq_depth(world.dead_letters) == (0, 0)
    assert world.queue.sent[sent:] == []  # nothing sent back
    assert len(world.targets.calls) == 1


def test_a_poison_message_whose_send_fails_is_kept_for_the_next_pass(
    world: FakeWorld, worker: Deliveries
) -> None:
    job = create(world, {"at": iso(world.clock.now())})
    [poison] = worker.take(lambda run: run.job_id == job.job_id)
    world.dead_letters.post(poison.model_dump_json())
    world.queue.refuse = True

    report = world.redriver.redrive()

    assert counts(report) == {RedriveOutcome.DEFERRED: 1}
    assert (report.deleted, report.kept, dlq_depth(world.dead_letters)) == (0, 1, (1, 0))
    world.queue.refuse = False
    assert counts(world.redriver.redrive()) == {RedriveOutcome.REQUEUED: 1}


def test_unreadable_messages_stay_on_the_dlq_visible_again(world: FakeWorld) -> None:
    unreadable = ["{not json", json.dumps({"job_id": "x"}), json.dumps({"kind": "RUN_FAILED"})]
    for body in unreadable:
        world.dead_letters.post(body)

    report = world.redriver.redrive()

    assert counts(report) == {RedriveOutcome.UNREADABLE: 3}
    assert (report.received, report.deleted, report.kept) == (3, 0, 3)
    assert dlq_depth(world.dead_letters) == (3, 0)  # released when the pass ended
    assert sorted(message.body for message in world.dead_letters.waiting) == sorted(unreadable)


# --- a pass ---------------------------------------------------------------------------------


class Receives(MemoryDeadLetters):
    """The DLQ, noting how many messages each receive asked for and got."""

    def __init__(self, waiting: list[DeadLetterMessage]) -> None:
        super().__init__(waiting=list(waiting))
        self.asked: list[tuple[int, int]] = []

    def receive(self, max_messages: int) -> list[DeadLetterMessage]:
        got = super().receive(max_messages)
        self.asked.append((max_messages, len(got)))
        return got


def test_many_records_are_moved_batch_by_batch_and_a_limit_stops_a_pass(
    world: FakeWorld, worker: Deliveries
) -> None:
    world.targets.answers = [FAILS]
    jobs = [create(world, {"at": iso(world.clock.now())}) for _ in range(23)]
    assert worker.deliver() == [Outcome.FAILED] * 23
    world.targets.answers = [OK]
    dlq = Receives(world.dead_letters.waiting)
    redriver = DeadLetterRedriver(world.store, world.queue, world.lifecycle, dlq)

    first = redriver.redrive(limit=15)
    assert counts(first) == {RedriveOutcome.REDRIVEN: 15}
    assert dlq.asked == [(10, 10), (5, 5)]  # ten at a time (SQS's most), no more than the limit
    assert dlq_depth(dlq) == (8, 0)
    rest = redriver.redrive()
    assert (counts(rest), rest.received, rest.deleted) == ({RedriveOutcome.REDRIVEN: 8}, 8, 8)
    assert dlq.asked[2:] == [(10, 8), (10, 0)]  # until the DLQ has nothing new
    assert dlq_depth(dlq) == (0, 0)

    assert worker.deliver() == [Outcome.SUCCEEDED] * 23
    assert {only_run(world, job).status for job in jobs} == {RunStatus.SUCCEEDED}


class WorkerRunsDuringThePass(MemoryDeadLetters):
    """The DLQ as a pass sees it while the workers go on: before each receive, the queue is
    delivered (a re-driven run may fail again before the pass ends). A pass that re-drove
    the new failure too would never end: it is stopped after a few receives."""

    def __init__(self, dlq: MemoryDeadLetters, worker: Deliveries) -> None:
        super().__init__()
        self._dlq = dlq
        self._worker = worker
        self.receives = 0

    def receive(self, max_messages: int) -> list[DeadLetterMessage]:
        self.receives += 1
        assert self.receives <= 5, "the pass keeps re-driving the run it re-drove"
        self._worker.deliver()
        return self._dlq.receive(max_messages)

    def delete(self, messages: Sequence[DeadLetterMessage]) -> int:
        return self._dlq.delete(messages)

    def release(self, messages: Sequence[DeadLetterMessage]) -> None:
        self._dlq.release(messages)


def test_a_run_that_fails_again_during_the_pass_is_left_for_the_next_one(
    world: FakeWorld, worker: Deliveries
) -> None:
    job = fail_one_run(world, worker)
    world.targets.answers = [FAILS]  # its re-driven attempt fails too
    dlq = WorkerRunsDuringThePass(world.dead_letters, worker)
    redriver = DeadLetterRedriver(world.store, world.queue, world.lifecycle, dlq)

    report = redriver.redrive()

    assert counts(report) == {RedriveOutcome.REDRIVEN: 1, RedriveOutcome.FAILED_AGAIN: 1}
    assert (report.deleted, report.kept) == (1, 1)
    assert dlq.receives == 3  # the record; the new failure's record; nothing new
    run = only_run(world, job)
    assert (run.status, run.attempt) == (RunStatus.FAILED, 2)
    assert dlq_depth(world.dead_letters) == (1, 0)  # the new failure's record, for the next pass
    [record] = [DeadLetter.model_validate_json(m.body) for m in world.dead_letters.waiting]
    assert record.attempts == 2
    assert attempts_called(world) == [1, 2]
