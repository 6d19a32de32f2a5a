"""Misfires as the services apply them (issue 5), on in-memory fakes (issue 11): the poll
(`Dispatcher`), the worker (`RunExecutor`) and the job service's pause and resume, wired on
`InMemoryJobStore`, a recording queue, scripted targets and a manual clock.

Covered here: what becomes of the firings a `*/5` job missed while no poller ran (an outage)
or while it was paused, under FIRE_ONCE, SKIP and CATCH_UP (its window): which runs are
claimed, sent, run, cancelled or never made, what the job looks like after, and the
catch-up queue (caught-up firings wait for the job's running slots, oldest first, and are
never SKIPPED: a run ended before its turn, a buffered run left by an earlier policy, a
retry, two slots given back at once).

Elsewhere: the pure math (which firings a policy keeps, the resume plan) in
`tests/unit/test_misfire.py`; the misfire fields on the API (JSON, 400s, PATCH) and the
handler-level proof (the real handlers on moto, DynamoDB's conditional writes, a real
webhook receiver) in `tests/integration/test_misfire.py`; the fake store held to the
DynamoDB adapter by `tests/integration/test_store_contract.py`.

The timeline: a job created at 09:00:30 whose first firing is 09:05. An outage: no poll
until 10:03:20, so 09:05 ... 10:00 were missed."""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta
from typing import Any

import pytest

from scheduler_core.domain import keys
from scheduler_core.domain.api_shapes import JobCreate, JobPatch
from scheduler_core.domain.clock import to_ms
from scheduler_core.domain.entities import Job, Run
from scheduler_core.domain.outcomes import Outcome
from scheduler_core.domain.overlap import slots_as_read
from scheduler_core.domain.vocabulary import JobStatus, RunStatus
from scheduler_core.ports import Delivery
from scheduler_core.services.polls import PollReport
from tests.support.builders import T0
from tests.support.fakes import Deliveries, FakeWorld, fake_world
from tests.support.helpers import iso

SHARDS = 4  # fake_world's default
TENANT = "alice"
OK = Delivery(ok=True, status_code=200)
FAILS = Delivery(ok=False, status_code=500, error="HTTP 500", retryable=True)


def t(hour: int, minute: int, second: int = 0) -> datetime:
    return T0.replace(hour=hour, minute=minute, second=second)


CREATED = t(9, 0, 30)
BACK = t(10, 3, 20)  # the poller comes back after an outage


def ms(when: datetime) -> int:
    return to_ms(when)


def marks(first: datetime, last: datetime) -> list[datetime]:
    return [first + timedelta(minutes=5 * i) for i in range(int((last - first) / timedelta(minutes=5)) + 1)]


@pytest.fixture
def world() -> FakeWorld:
    return fake_world(CREATED, shards=SHARDS)


@pytest.fixture
def worker(world: FakeWorld) -> Deliveries:
    """Each message sent handed to the worker once, as soon as its run's time has come."""
    return Deliveries(world)


# --- helpers ------------------------------------------------------------------------------------


def every_five(**fields: Any) -> dict[str, Any]:
    return {
        "name": "sync",
        "schedule": {"cron": "*/5 * * * *"},
        "target": {"type": "HTTP", "url": "https://example.com/hook"},
        # Caught-up runs are due together; they run side by side here (with a limit they queue
        # for the slots: see the catch-up queue's tests).
        "concurrency": {"overlap": "ALLOW"},
        **fields,
    }


def one_at_a_time(overlap: str) -> dict[str, Any]:
    return {"concurrency": {"max_running": 1, "overlap": overlap}}


def create(world: FakeWorld, body: dict[str, Any]) -> Job:
    return world.jobs.create(TENANT, JobCreate.model_validate(body))


def update(world: FakeWorld, job_id: str, patch: dict[str, Any]) -> Job:
    return world.jobs.update(TENANT, job_id, JobPatch.model_validate(patch))


def poll(world: FakeWorld) -> list[PollReport]:
    return [world.dispatcher.poll_shard(shard) for shard in range(SHARDS)]


def claimed(reports: list[PollReport]) -> list[datetime]:
    return [run.scheduled_for for report in reports for run in report.claimed]


def called(world: FakeWorld, start: int = 0) -> list[datetime]:
    """The scheduled times of the target calls, in the order they were made."""
    return [run.scheduled_for for _, run in world.targets.calls[start:]]


def job_now(world: FakeWorld, job_id: str) -> Job:
    job = world.store.get_job(job_id)
    assert job is not None
    return job


def run_at(world: FakeWorld, job_id: str, when: datetime) -> Run:
    run = world.store.get_run(job_id, ms(when))
    assert run is not None
    return run


def runs_of(world: FakeWorld, job_id: str) -> dict[datetime, Run]:
    """The job's runs by scheduled time, oldest first."""
    runs = world.store.list_runs(job_id, 1000, None).items
    return {run.scheduled_for: run for run in sorted(runs, key=lambda run: run.scheduled_for)}


def outage(world: FakeWorld, **fields: Any) -> str:
    """A */5 job created at 09:00:30 (the poller has run: the shards' watermarks exist), then
    no poll for an hour: 09:05 ... 10:00 are missed. The clock is at 10:03:20, when the poller
    comes back."""
    poll(world)
    job = create(world, every_five(**fields))
    assert job.next_fire_at == t(9, 5)
    world.clock.set(BACK)
    return job.job_id


def paused_across_the_half_hour(world: FakeWorld, worker: Deliveries, **fields: Any) -> str:
    """A */5 job paused at 09:04, with 09:05 claimed before the pause (its run is set aside by
    the worker at 09:05), resumed at 09:31:20: 09:05 ... 09:30 were missed."""
    job_id = create(world, every_five(**fields)).job_id
    world.clock.set(t(9, 3, 30))
    assert claimed(poll(world)) == [t(9, 5)]
    world.clock.set(t(9, 4))
    world.jobs.pause(TENANT, job_id)
    world.clock.set(t(9, 5))
    assert len(worker.deliver()) == 1
    assert worker.outcomes == [Outcome.SET_ASIDE]
    world.clock.set(t(9, 31, 20))
    poll(world)
    assert world.targets.calls == []
    assert [(when, run.status) for when, run in runs_of(world, job_id).items()] == [
        (t(9, 5), RunStatus.PENDING)
    ]
    resumed = world.jobs.resume(TENANT, job_id)
    assert (resumed.status, resumed.next_fire_at) == (JobStatus.SCHEDULED, t(9, 35))
    return job_id


def calls_take_a_second_each(world: FakeWorld, monkeypatch: pytest.MonkeyPatch, job_id: str) -> list[int]:
    """Each target call lasts a second (so runs that overlap show it in their times); returns
    the list the job's `running_count` at each call is noted in."""
    running: list[int] = []
    real_deliver = world.targets.deliver

    def deliver(job: Job, run: Run) -> Delivery:
        running.append(job_now(world, job_id).running_count)
        world.clock.advance(1)
        return real_deliver(job, run)

    monkeypatch.setattr(world.targets, "deliver", deliver)
    return running


def started_one_after_another(runs: list[Run]) -> bool:
    ordered = sorted(runs, key=lambda run: run.scheduled_for)
    return all(
        later.started_at is not None
        and earlier.finished_at is not None
        and later.started_at >= earlier.finished_at
        for earlier, later in itertools.pairwise(ordered)
    )


# --- a poller outage ----------------------------------------------------------------------------


def test_fire_once_runs_one_late_run_for_an_outage(world: FakeWorld, worker: Deliveries) -> None:
    job_id = outage(world)
    assert claimed(poll(world)) == [t(10, 0), t(10, 5)]  # 10:05 is within the lookahead
    worker.deliver()
    assert called(world) == [t(10, 0)]  # one run, not twelve
    assert list(runs_of(world, job_id)) == [t(10, 0), t(10, 5)]  # none made for 09:05 ... 09:55
    world.clock.set(t(10, 5))
    worker.deliver()
    assert called(world) == [t(10, 0), t(10, 5)]
    assert job_now(world, job_id).next_fire_at == t(10, 10)


def test_skip_runs_nothing_for_an_outage_and_carries_on_on_time(world: FakeWorld, worker: Deliveries) -> None:
    job_id = outage(world, misfire="SKIP")
    assert claimed(poll(world)) == [t(10, 5)]
    assert worker.deliver() == []  # 10:05 is not due yet; nothing else was sent
    assert world.targets.calls == []
    world.clock.set(t(10, 5))
    worker.deliver()
    assert called(world) == [t(10, 5)]
    [(when, run)] = runs_of(world, job_id).items()
    assert (when, run.status, run.lateness_ms) == (t(10, 5), RunStatus.SUCCEEDED, 0)


def test_skip_moves_a_job_with_nothing_due_soon_past_its_missed_firings(world: FakeWorld) -> None:
    poll(world)
    job = create(world, every_five(schedule={"cron": "0 * * * *"}, misfire="SKIP"))
    world.clock.set(t(12, 30))  # 10:00, 11:00 and 12:00 missed; 13:00 is beyond the lookahead
    reports = poll(world)
    assert claimed(reports) == []
    assert sum(report.skipped for report in reports) == 1
    assert job_now(world, job.job_id).next_fire_at == t(13, 0)
    assert runs_of(world, job.job_id) == {}
    world.clock.set(t(12, 58, 30))
    assert claimed(poll(world)) == [t(13, 0)]  # found in its new bucket


def test_skip_still_runs_a_firing_claimed_only_seconds_late(world: FakeWorld, worker: Deliveries) -> None:
    """A poll that comes late (here: 30 s after 09:05) is not an outage worth skipping."""
    poll(world)
    create(world, every_five(misfire="SKIP"))
    world.clock.set(t(9, 5, 30))
    assert claimed(poll(world)) == [t(9, 5)]
    worker.deliver()
    assert called(world) == [t(9, 5)]


def test_a_one_off_skipped_through_an_outage_completes_without_a_run(world: FakeWorld) -> None:
    poll(world)
    job = create(world, every_five(schedule={"at": iso(t(9, 30))}, misfire="SKIP"))
    world.clock.set(t(9, 45))
    assert claimed(poll(world)) == []
    assert job_now(world, job.job_id).status is JobStatus.COMPLETED
    assert runs_of(world, job.job_id) == {}
    assert world.queue.sent == []


def test_catch_up_runs_each_firing_of_its_window_once_oldest_first(
    world: FakeWorld, worker: Deliveries
) -> None:
    job_id = outage(world, misfire="CATCH_UP", catch_up_window_seconds=1800)
    # The last 30 minutes (from 09:33:20) held six firings; each is claimed, oldest first, as
    # its own run, and sent at once. Older ones get no run; 10:05 is claimed ahead.
    missed = marks(t(9, 35), t(10, 0))
    assert claimed(poll(world)) == [*missed, t(10, 5)]
    assert [run.scheduled_for for run in world.queue.sent] == [*missed, t(10, 5)]
    assert [run.run_id for run in world.queue.sent[:6]] == [keys.run_id(job_id, ms(when)) for when in missed]
    assert len(worker.deliver()) == 6
    assert called(world) == missed
    assert [run.run_id for _, run in world.targets.calls] == [
        keys.run_id(job_id, ms(when)) for when in missed
    ]
    runs = runs_of(world, job_id)
    assert list(runs) == [*missed, t(10, 5)]
    for when in missed:
        assert runs[when].status is RunStatus.SUCCEEDED
        assert runs[when].lateness_ms == ms(BACK) - ms(when)
    # Nothing is run twice: the next poll finds nothing more to catch up.
    assert claimed(poll(world)) == []
    world.clock.set(t(10, 5))
    worker.deliver()
    assert called(world) == [*missed, t(10, 5)]


# --- pause and resume ---------------------------------------------------------------------------


def test_a_resume_under_fire_once_runs_one_run_at_the_resume(world: FakeWorld, worker: Deliveries) -> None:
    job_id = paused_across_the_half_hour(world, worker)
    assert len(worker.deliver()) == 1
    assert called(world) == [t(9, 31, 20)]
    assert run_at(world, job_id, t(9, 5)).status is RunStatus.CANCELLED  # stood for by the one run


def test_a_resume_under_skip_runs_nothing_and_carries_on_on_time(
    world: FakeWorld, worker: Deliveries
) -> None:
    job_id = paused_across_the_half_hour(world, worker, misfire="SKIP")
    assert worker.deliver() == []
    world.clock.set(t(9, 33, 30))
    assert claimed(poll(world)) == [t(9, 35)]
    world.clock.set(t(9, 35))
    worker.deliver()
    assert called(world) == [t(9, 35)]
    statuses = {when: run.status for when, run in runs_of(world, job_id).items()}
    assert statuses == {t(9, 5): RunStatus.CANCELLED, t(9, 35): RunStatus.SUCCEEDED}


def test_a_resume_under_catch_up_runs_each_firing_of_its_window_with_its_own_id(
    world: FakeWorld, worker: Deliveries
) -> None:
    job_id = paused_across_the_half_hour(world, worker, misfire="CATCH_UP", catch_up_window_seconds=1800)
    missed = marks(t(9, 5), t(9, 30))
    assert len(worker.deliver()) == 6
    assert sorted(called(world)) == missed
    assert sorted(run.run_id for _, run in world.targets.calls) == [
        keys.run_id(job_id, ms(when)) for when in missed
    ]
    # 09:05, set aside by the worker while paused, was sent again and ran.
    runs = runs_of(world, job_id)
    assert [runs[when].status for when in missed] == [RunStatus.SUCCEEDED] * 6
    assert worker.deliver() == []
    world.clock.set(t(9, 35))
    poll(world)
    worker.deliver()
    assert len(world.targets.calls) == 7
    assert called(world)[-1] == t(9, 35)


def test_a_resume_under_catch_up_leaves_what_is_older_than_its_window(
    world: FakeWorld, worker: Deliveries
) -> None:
    job_id = paused_across_the_half_hour(world, worker, misfire="CATCH_UP", catch_up_window_seconds=600)
    assert len(worker.deliver()) == 2
    assert sorted(called(world)) == [t(9, 25), t(9, 30)]
    statuses = {when: run.status for when, run in runs_of(world, job_id).items()}
    assert statuses == {
        t(9, 5): RunStatus.CANCELLED,
        t(9, 25): RunStatus.SUCCEEDED,
        t(9, 30): RunStatus.SUCCEEDED,
    }


def test_a_retry_due_while_paused_is_set_aside_and_caught_up_at_the_resume(
    world: FakeWorld, worker: Deliveries
) -> None:
    """A retry is a run waiting for its time like a first attempt: its time comes while the
    job is paused, the watchdog sets it aside (sends nothing), the resume's CATCH_UP sends it
    again, same run, next attempt."""
    job_id = create(world, every_five(misfire="CATCH_UP")).job_id
    world.clock.set(t(9, 3, 30))
    assert claimed(poll(world)) == [t(9, 5)]
    world.clock.set(t(9, 5))
    world.targets.answers = [FAILS, OK]  # the first attempt fails: the run waits for its retry
    assert len(worker.deliver()) == 1  # attempt 1 only: the retry is not due yet
    run = run_at(world, job_id, t(9, 5))
    assert (run.status, run.attempt) == (RunStatus.RETRYING, 2)
    world.jobs.pause(TENANT, job_id)

    # Past the retry's time and its timer: the watchdog finds the job paused.
    world.clock.set(t(9, 9))
    sent_before = len(world.queue.sent)
    watched = [report.watched for report in poll(world) if report.watched]
    assert watched == [{"paused": 1}]
    assert len(world.queue.sent) == sent_before  # nothing sent
    run = run_at(world, job_id, t(9, 5))
    assert (run.status, run.attempt) == (RunStatus.RETRYING, 2)

    world.clock.set(t(9, 9, 30))
    world.jobs.resume(TENANT, job_id)
    worker.deliver()
    run = run_at(world, job_id, t(9, 5))
    assert (run.status, run.attempt) == (RunStatus.SUCCEEDED, 2)
    assert called(world) == [t(9, 5)] * 2


# --- caught-up firings queue for the job's running slots ---------------------------------------


@pytest.mark.parametrize("overlap", ["SKIP", "BUFFER_ONE"])
def test_caught_up_firings_wait_their_turn_and_run_one_at_a_time_oldest_first(
    world: FakeWorld, worker: Deliveries, monkeypatch: pytest.MonkeyPatch, overlap: str
) -> None:
    """With one running slot, the six caught-up firings are not SKIPPED as they come due
    together: they queue, and each run's end sends the next one."""
    job_id = outage(world, misfire="CATCH_UP", catch_up_window_seconds=1800, **one_at_a_time(overlap))
    running = calls_take_a_second_each(world, monkeypatch, job_id)
    missed = marks(t(9, 35), t(10, 0))
    assert claimed(poll(world)) == [*missed, t(10, 5)]
    assert job_now(world, job_id).catch_up_queue_ms == [ms(when) for when in missed]  # not 10:05: on time

    worker.deliver()
    assert called(world) == missed  # in order, each once
    assert running == [1] * 6  # each alone in the job's one slot
    runs = [run for when, run in runs_of(world, job_id).items() if when != t(10, 5)]
    assert [run.status for run in runs] == [RunStatus.SUCCEEDED] * 6
    assert started_one_after_another(runs)
    assert job_now(world, job_id).catch_up_queue_ms == []
    # The firing on time after it obeys the overlap policy as ever (the slot is free: it runs).
    world.clock.set(t(10, 5))
    worker.deliver()
    assert called(world, 6) == [t(10, 5)]


def test_a_caught_up_run_that_ended_before_its_turn_does_not_hold_up_the_queue(
    world: FakeWorld, worker: Deliveries
) -> None:
    job_id = outage(world, misfire="CATCH_UP", catch_up_window_seconds=1800, **one_at_a_time("SKIP"))
    missed = marks(t(9, 35), t(10, 0))
    poll(world)
    first = run_at(world, job_id, missed[0])
    # As a change of the job cancels a run not started yet.
    assert world.store.cancel_run_if_not_started(first, world.clock.now())

    worker.deliver()
    assert called(world) == missed[1:]
    assert job_now(world, job_id).catch_up_queue_ms == []


def test_a_catch_up_resume_queues_the_missed_firings_for_the_slot(
    world: FakeWorld, worker: Deliveries, monkeypatch: pytest.MonkeyPatch
) -> None:
    job_id = paused_across_the_half_hour(
        world, worker, misfire="CATCH_UP", catch_up_window_seconds=1800, **one_at_a_time("SKIP")
    )
    running = calls_take_a_second_each(world, monkeypatch, job_id)
    missed = marks(t(9, 5), t(9, 30))
    assert job_now(world, job_id).catch_up_queue_ms == [ms(when) for when in missed]
    worker.deliver()
    assert called(world) == missed
    assert running == [1] * 6
    runs = list(runs_of(world, job_id).values())
    assert [run.status for run in runs] == [RunStatus.SUCCEEDED] * 6
    assert started_one_after_another(runs)
    assert job_now(world, job_id).catch_up_queue_ms == []


# --- corners of the catch-up queue --------------------------------------------------------------


def caught_up_every_five(**fields: Any) -> dict[str, Any]:
    return every_five(misfire="CATCH_UP", catch_up_window_seconds=1800, **fields)


def test_a_run_buffered_under_an_earlier_policy_does_not_hold_up_the_catch_up_queue(
    world: FakeWorld, worker: Deliveries
) -> None:
    """A BUFFER_ONE run that started after a change to ALLOW leaves `buffered_run_ms` behind;
    under SKIP it holds nothing back, and the caught-up firings of an outage all run."""
    poll(world)
    job_id = create(world, caught_up_every_five(**one_at_a_time("BUFFER_ONE"))).job_id
    store, clock = world.store, world.clock
    clock.set(t(9, 3, 30))
    poll(world)
    clock.set(t(9, 5))
    first = run_at(world, job_id, t(9, 5))
    owner = "a-slow-worker"
    started = store.start_run_in_slot(
        first,
        slots_as_read(job_now(world, job_id), first.scheduled_for_ms),
        clock.now(),
        clock.now() + timedelta(minutes=9),
        owner,
    )
    assert started is not None  # a worker calling a slow target holds the slot
    worker.deliver()
    assert worker.outcomes == [Outcome.DUPLICATE]  # 09:05's own message
    clock.set(t(9, 8, 30))
    poll(world)
    clock.set(t(9, 10))
    worker.deliver()
    assert worker.outcomes[-1] is Outcome.BUFFERED
    update(world, job_id, {"concurrency": {"overlap": "ALLOW"}})
    clock.set(t(9, 11, 1))
    poll(world)  # 09:10's timer: sent again, it starts under ALLOW
    worker.deliver()
    assert called(world) == [t(9, 10)]
    assert store.finish_run_if_held(started, owner, RunStatus.SUCCEEDED, clock.now())
    update(world, job_id, {"concurrency": {"overlap": "SKIP", "max_running": 1}})
    assert job_now(world, job_id).buffered_run_ms == ms(t(9, 10))  # left behind

    clock.set(BACK)  # an outage: 09:15 ... 10:00 missed, the last 30 min caught up
    poll(world)
    worker.deliver()
    assert called(world, 1) == marks(t(9, 35), t(10, 0))
    assert job_now(world, job_id).catch_up_queue_ms == []


def test_a_caught_up_runs_retry_waits_for_the_slot_instead_of_being_skipped(
    world: FakeWorld, worker: Deliveries, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first caught-up run fails once; its slot goes to the next of the queue, and its
    retry, no longer in the queue, takes the queue's front again: it runs, it is not SKIPPED."""
    poll(world)
    retry = {"max_attempts": 3, "backoff_seconds": 1, "max_backoff_seconds": 1}
    job_id = create(world, caught_up_every_five(retry=retry, **one_at_a_time("SKIP"))).job_id
    world.clock.set(BACK)
    poll(world)
    world.targets.answers = [FAILS, OK]
    real_deliver = world.targets.deliver
    front_while_second_runs: list[int] = []

    def deliver(job: Job, run: Run) -> Delivery:
        if len(world.targets.calls) == 1:  # the next caught-up run holds the slot: the retry comes now
            world.clock.advance(2)
            worker.deliver()
            front_while_second_runs.extend(job_now(world, job_id).catch_up_queue_ms[:1])
        return real_deliver(job, run)

    monkeypatch.setattr(world.targets, "deliver", deliver)
    worker.deliver()
    first, second, *rest = marks(t(9, 35), t(10, 0))
    assert Outcome.SKIPPED not in worker.outcomes
    assert front_while_second_runs == [ms(first)]  # the retry rejoined at the front
    assert called(world) == [first, second, first, *rest]
    retried = run_at(world, job_id, first)
    assert (retried.status, retried.attempt) == (RunStatus.SUCCEEDED, 2)
    runs = [run for when, run in runs_of(world, job_id).items() if when != t(10, 5)]
    assert [run.status for run in runs] == [RunStatus.SUCCEEDED] * 6
    assert job_now(world, job_id).catch_up_queue_ms == []


@pytest.mark.parametrize(
    "b_ends",
    [
        pytest.param("before C starts", id="B ends between C's read and C's start"),
        pytest.param("after C starts", id="B ends right after C's start"),
    ],
)
def test_two_slots_given_back_together_start_two_caught_up_runs(
    world: FakeWorld, worker: Deliveries, monkeypatch: pytest.MonkeyPatch, b_ends: str
) -> None:
    """max_running 2: A and B hold both slots, C, D, E, F queue. A ends and wakes C. B ends
    while C's worker is starting C: whether B's wake-up finds C still first (C is sent again,
    a duplicate) or already started (D is sent), D does not wait for its timer while a slot
    sits idle: C, reading the job after its start, finds a slot free and wakes D."""
    poll(world)
    job_id = create(world, caught_up_every_five(concurrency={"max_running": 2})).job_id
    store, lifecycle = world.store, world.lifecycle
    world.clock.set(BACK)
    poll(world)
    queue = list(job_now(world, job_id).catch_up_queue_ms)
    a_ms, b_ms, c_ms, d_ms = queue[:4]
    owners: dict[int, str] = {}
    for run_ms in (a_ms, b_ms):  # two workers calling the target
        run = store.get_run(job_id, run_ms)
        assert run is not None
        owners[run_ms] = f"worker-{run_ms}"
        started = store.start_run_in_slot(
            run,
            slots_as_read(job_now(world, job_id), run_ms),
            world.clock.now(),
            world.clock.now() + timedelta(minutes=9),
            owners[run_ms],
        )
        assert started is not None
    worker.deliver()  # the other caught-up runs come and wait their turn
    assert worker.outcomes.count(Outcome.WAITING_TURN) == 4
    assert world.targets.calls == []

    def end(run_ms: int) -> None:
        job, run = job_now(world, job_id), store.get_run(job_id, run_ms)
        assert run is not None
        assert store.finish_run_if_held(run, owners[run_ms], RunStatus.SUCCEEDED, world.clock.now())
        lifecycle.wake_next_in_line(job, run)

    end(a_ms)  # wakes C
    real_get_job_and_run = store.get_job_and_run
    real_start = store.start_run_in_slot
    b_ended = False

    def end_b_once() -> None:
        nonlocal b_ended
        if not b_ended:
            b_ended = True
            end(b_ms)

    def get_job_and_run(job_id_read: str, run_ms: int) -> tuple[Job | None, Run | None]:
        read = real_get_job_and_run(job_id_read, run_ms)
        if run_ms == c_ms and b_ends == "before C starts":
            end_b_once()  # right after C's worker read the job: B's wake-up sends C again
        return read

    def start_run_in_slot(run: Run, *args: Any, **kwargs: Any) -> Run | None:
        started = real_start(run, *args, **kwargs)
        if run.scheduled_for_ms == c_ms and started is not None and b_ends == "after C starts":
            end_b_once()  # before C's worker reads the job again
        return started

    sent_while_c_runs: list[str] = []
    mark = len(world.queue.sent)
    real_deliver = world.targets.deliver

    def deliver(job: Job, run: Run) -> Delivery:
        if run.scheduled_for_ms == c_ms:
            sent_while_c_runs.extend(sent.run_id for sent in world.queue.sent[mark:])
        return real_deliver(job, run)

    monkeypatch.setattr(store, "get_job_and_run", get_job_and_run)
    monkeypatch.setattr(store, "start_run_in_slot", start_run_in_slot)
    monkeypatch.setattr(world.targets, "deliver", deliver)
    worker.deliver()
    assert b_ended
    assert keys.run_id(job_id, d_ms) in sent_while_c_runs
    assert job_now(world, job_id).catch_up_queue_ms == []
    assert [to_ms(when) for when in called(world)] == queue[2:]
