"""The poll's and the worker's rules on in-memory fakes of their ports (no moto): the fakes
are held to the adapters by `tests/integration/test_store_contract.py`."""

from __future__ import annotations

from datetime import timedelta

from scheduler_core import keys
from scheduler_core.clock import to_ms
from scheduler_core.messages import run_message
from scheduler_core.outcomes import Outcome
from scheduler_core.policies import RetryPolicy
from scheduler_core.ports import Delivery
from scheduler_core.schedule import ScheduleSpec
from scheduler_core.vocabulary import JobStatus, RunStatus
from tests.support.builders import T0, a_job
from tests.support.fakes import FakeWorld, fake_world

AT = T0 + timedelta(minutes=1)
SHARDS = 4


def poll_all(world: FakeWorld) -> int:
    return sum(len(world.dispatcher.poll_shard(shard).claimed) for shard in range(SHARDS))


def test_a_poll_claims_a_due_firing_once_and_sends_its_run() -> None:
    world = fake_world(T0)
    job = a_job()
    world.store.put_job_if_absent(job)
    assert poll_all(world) == 2  # its two firings within the lookahead (2 minutes)
    firings = [AT, AT + timedelta(minutes=1)]
    assert [run.run_id for run in world.queue.sent] == [keys.run_id(job.job_id, to_ms(t)) for t in firings]
    assert poll_all(world) == 0  # a second poll finds them claimed
    read = world.store.get_job(job.job_id)
    assert read is not None
    assert read.next_fire_at == AT + timedelta(minutes=2)


def test_a_run_sent_but_never_started_is_sent_again_by_its_timer() -> None:
    world = fake_world(T0)
    world.store.put_job_if_absent(a_job(schedule=ScheduleSpec(at=AT)))
    world.queue.refuse = True  # the send fails: the run waits in the due index
    poll_all(world)
    assert world.queue.sent == []
    world.queue.refuse = False
    world.clock.sleep_until(AT + timedelta(minutes=3))
    poll_all(world)
    assert len(world.queue.sent) == 1


def test_the_worker_calls_the_target_once_and_completes_a_one_off() -> None:
    world = fake_world(T0)
    job = a_job(schedule=ScheduleSpec(at=AT))
    world.store.put_job_if_absent(job)
    poll_all(world)
    [run] = world.queue.sent
    world.clock.sleep_until(AT - timedelta(seconds=2))  # SQS hands it over a little early
    assert world.executor.execute(run_message(run)) is Outcome.SUCCEEDED
    assert world.executor.execute(run_message(run)) is Outcome.DUPLICATE  # the message again
    assert len(world.targets.calls) == 1
    done = world.store.get_run(job.job_id, run.scheduled_for_ms)
    read = world.store.get_job(job.job_id)
    assert done is not None
    assert read is not None
    assert (done.status, done.response_code, read.status) == (RunStatus.SUCCEEDED, 200, JobStatus.COMPLETED)
    assert done.lateness_ms == 0  # the worker waited for the run's time


def test_a_failing_target_is_retried_then_the_run_fails_to_the_dlq() -> None:
    world = fake_world(T0)
    retry = RetryPolicy(max_attempts=2, backoff_seconds=1, max_backoff_seconds=1)
    job = a_job(schedule=ScheduleSpec(at=AT), retry=retry)
    world.store.put_job_if_absent(job)
    world.targets.answers = [Delivery(ok=False, status_code=503, error="busy", retryable=True)]
    poll_all(world)
    [first] = world.queue.sent
    world.clock.sleep_until(AT)
    assert world.executor.execute(run_message(first)) is Outcome.RETRYING
    [_, second] = world.queue.sent  # the retry, sent again with its delay
    assert second.attempt == 2
    assert second.next_attempt_at is not None
    world.clock.sleep_until(second.next_attempt_at)
    assert world.executor.execute(run_message(second)) is Outcome.FAILED
    failed = world.store.get_run(job.job_id, first.scheduled_for_ms)
    assert failed is not None
    assert (failed.status, failed.attempt, failed.error) == (RunStatus.FAILED, 2, "busy")
    assert [record.run_id for record in world.queue.dead_letters] == [first.run_id]
    assert len(world.targets.calls) == 2


def test_a_run_of_a_cancelled_job_is_cancelled_not_called() -> None:
    world = fake_world(T0)
    job = a_job(schedule=ScheduleSpec(at=AT))
    world.store.put_job_if_absent(job)
    poll_all(world)
    world.store.cancel_job_if_active(job.job_id, T0)
    [run] = world.queue.sent
    world.clock.sleep_until(AT)
    assert world.executor.execute(run_message(run)) is Outcome.CANCELLED
    assert world.targets.calls == []
