"""The job service's, the poll's and the worker's rules on in-memory fakes of their ports (no
moto): the fakes are held to the adapters by `tests/integration/test_store_contract.py`."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from scheduler_core.domain import keys
from scheduler_core.domain.api_shapes import JobCreate, JobPatch
from scheduler_core.domain.clock import to_ms
from scheduler_core.domain.entities import Job
from scheduler_core.domain.errors import Conflict, NotFound, PreconditionFailed, Unprocessable
from scheduler_core.domain.messages import run_message
from scheduler_core.domain.outcomes import Outcome
from scheduler_core.domain.policies import RetryPolicy
from scheduler_core.domain.schedule import ScheduleSpec
from scheduler_core.domain.vocabulary import JobStatus, RunStatus, Trigger
from scheduler_core.ports import Delivery
from tests.support.builders import T0, a_job
from tests.support.fakes import Deliveries, FakeWorld, fake_world
from tests.support.helpers import iso

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
    deliveries = Deliveries(world)
    world.clock.sleep_until(AT)
    assert deliveries.deliver() == [Outcome.RETRYING]  # the retry is not due yet
    [_, second] = world.queue.sent  # the retry, sent again with its delay
    assert second.attempt == 2
    assert second.next_attempt_at is not None
    world.clock.sleep_until(second.next_attempt_at)
    assert deliveries.deliver() == [Outcome.FAILED]
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
    world.clock.sleep_until(AT)
    assert Deliveries(world).deliver() == [Outcome.CANCELLED]
    assert world.targets.calls == []


# --- the API's job service ---------------------------------------------------------------


def create(world: FakeWorld, **body: Any) -> Job:
    request = {"name": "n", "target": {"type": "HTTP", "url": "https://example.com/h"}} | body
    return world.jobs.create("alice", JobCreate.model_validate(request))


def test_a_job_due_within_the_lookahead_is_claimed_and_sent_at_create() -> None:
    world = fake_world(T0)
    job = create(world, schedule={"at": iso(AT)})
    assert [run.job_id for run in world.queue.sent] == [job.job_id]
    far = create(world, schedule={"at": iso(AT + timedelta(hours=1))})
    assert far.next_fire_at == AT + timedelta(hours=1)
    assert len(world.queue.sent) == 1  # left to a poll


def test_a_create_sent_again_with_its_key_makes_one_job() -> None:
    world = fake_world(T0)
    request = JobCreate.model_validate(
        {"name": "n", "schedule": {"cron": "0 * * * *"}, "target": {"type": "HTTP", "url": "https://e/h"}}
    )
    first = world.jobs.create("alice", request, idempotency_key="k1")
    again = world.jobs.create("alice", request, idempotency_key="k1")
    assert again.job_id == first.job_id
    other = request.model_copy(update={"name": "other"})
    with pytest.raises(Unprocessable):
        world.jobs.create("alice", other, idempotency_key="k1")


def test_another_tenant_sees_no_job() -> None:
    world = fake_world(T0)
    job = create(world, schedule={"cron": "0 * * * *"})
    with pytest.raises(NotFound):
        world.jobs.get("bob", job.job_id)
    assert world.jobs.list("bob", 10, None, None).items == []


def test_a_paused_job_does_not_fire_and_its_resume_runs_what_was_missed_once() -> None:
    world = fake_world(T0)
    job = create(world, schedule={"cron": "*/5 * * * *"})  # next at 09:05
    paused = world.jobs.pause("alice", job.job_id)
    assert paused.status is JobStatus.PAUSED
    world.clock.sleep_until(T0 + timedelta(minutes=16))  # 09:05, 09:10 and 09:15 missed
    poll_all(world)
    assert world.queue.sent == []
    resumed = world.jobs.resume("alice", job.job_id)
    assert resumed.status is JobStatus.SCHEDULED
    assert [run.scheduled_for for run in world.queue.sent] == [world.clock.now()]  # FIRE_ONCE: one run, now
    assert resumed.next_fire_at == T0 + timedelta(minutes=20)


def test_a_trigger_runs_a_paused_job_now_and_a_cancel_stops_it() -> None:
    world = fake_world(T0)
    job = create(world, schedule={"cron": "0 * * * *"})
    world.jobs.pause("alice", job.job_id)
    run = world.jobs.trigger("alice", job.job_id)
    assert run.trigger is Trigger.MANUAL
    assert T0 < run.scheduled_for < T0 + timedelta(milliseconds=10)  # 09:00 itself is a firing
    assert world.executor.execute(run_message(run)) is Outcome.SUCCEEDED  # a manual run goes on
    cancelled = world.jobs.cancel("alice", job.job_id)
    assert cancelled.status is JobStatus.CANCELLED
    with pytest.raises(Conflict):
        world.jobs.trigger("alice", job.job_id)


def test_a_change_at_another_version_than_the_caller_read_is_refused() -> None:
    world = fake_world(T0)
    job = create(world, schedule={"cron": "0 * * * *"})
    with pytest.raises(PreconditionFailed):
        world.jobs.update(
            "alice", job.job_id, JobPatch.model_validate({"name": "x"}), if_match=job.version + 1
        )
    changed = world.jobs.update(
        "alice", job.job_id, JobPatch.model_validate({"name": "x"}), if_match=job.version
    )
    assert (changed.name, changed.version) == ("x", job.version + 1)
