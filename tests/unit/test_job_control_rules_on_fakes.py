"""The rules of job control, on the in-memory fakes (`tests/support/fakes.py`): pause, resume
(FIRE_ONCE), a pause landing while a run calls its target, the manual trigger, PATCH of a job
whose firings are claimed or whose runs wait or run, If-Match when a claim races a patch, the
cancel of waiting runs, and the refusals (an ended job, another tenant, a retry while paused,
a one-off's cancelled time). Each test drives the API's job service (`world.jobs`), the poll
(`Dispatcher.poll_shard`) and the worker (`RunExecutor.execute`) as the handlers would, and
moves a manual clock; `Deliveries` (`tests/support/fakes.py`) stands for SQS and its event
source mapping.

Where the rest lives:
- `tests/unit/test_job_control.py`: what a resume decides (`plan_resume`) and the PATCH body;
- `tests/unit/test_services_on_fakes.py`: create, poll, worker and retry basics on the fakes;
- `tests/integration/test_job_control.py`: the same rules' handler-level proof on moto (status
  codes and JSON bodies, If-Match and tenancy from the request, the headers a real webhook
  receives, DynamoDB's conditions under a racing claim or a worker interleaved with a pause and
  a resume), and the run history's and job listing's filters and bad input.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest

from scheduler_core.domain.api_shapes import JobCreate, JobPatch
from scheduler_core.domain.clock import to_ms
from scheduler_core.domain.entities import Job, Run
from scheduler_core.domain.errors import Conflict, NotFound, PreconditionFailed
from scheduler_core.domain.outcomes import Outcome
from scheduler_core.domain.vocabulary import JobStatus, RunStatus, Trigger
from scheduler_core.ports import Delivery
from scheduler_core.services.polls import PollReport
from tests.support.builders import T0, a_run
from tests.support.fakes import Deliveries, FakeWorld, fake_world
from tests.support.helpers import iso

ALICE = "alice"
START = T0 + timedelta(seconds=30)  # 09:00:30: a `* * * * *` job claims 09:01 and 09:02 at create
LEAD = timedelta(seconds=2)  # SQS shows a delayed message this early (DELIVERY_LEAD_SECONDS)
URL = "https://example.com/hook"


def at(minute: int, second: int = 0) -> datetime:
    """09:`minute`:`second` on the day of `T0`."""
    return T0 + timedelta(minutes=minute, seconds=second)


@pytest.fixture
def world() -> FakeWorld:
    return fake_world(START)


@pytest.fixture
def worker(world: FakeWorld) -> Deliveries:
    """Each message sent handed to the worker once, when it is visible (`LEAD` before its
    run's time; the worker waits out the rest on the clock), as `cloud.deliver()` does on moto."""
    return Deliveries(world, lead=LEAD)


def create(world: FakeWorld, schedule: dict[str, Any], **fields: Any) -> Job:
    body = {"name": "ping", "schedule": schedule, "target": {"type": "HTTP", "url": URL}, "payload": {"n": 1}}
    return world.jobs.create(ALICE, JobCreate.model_validate(body | fields))


def patch(world: FakeWorld, job: Job, if_match: int | None = None, **fields: Any) -> Job:
    return world.jobs.update(ALICE, job.job_id, JobPatch.model_validate(fields), if_match)


def poll(world: FakeWorld) -> list[PollReport]:
    return [world.dispatcher.poll_shard(shard) for shard in range(4)]


def claimed(reports: list[PollReport]) -> int:
    return sum(len(report.claimed) for report in reports)


def stored(world: FakeWorld, job: Job) -> Job:
    return world.jobs.get(ALICE, job.job_id)


def runs(world: FakeWorld, job: Job, status: RunStatus | None = None) -> list[Run]:
    """The job's runs as its run history lists them: newest first."""
    page: list[Run] = world.jobs.list_runs(ALICE, job.job_id, 100, None, status).items
    return page


def called(world: FakeWorld) -> list[Run]:
    """The runs the target was called for, in order."""
    return [run for _, run in world.targets.calls]


def run_id(job: Job, when: datetime) -> str:
    return a_run(job, when).run_id


def during_the_call(world: FakeWorld, monkeypatch: pytest.MonkeyPatch, act: Callable[[], object]) -> None:
    """Do `act` while the worker calls the target (after the worker's last look at the job)."""
    deliver = world.targets.deliver

    def act_then_deliver(job: Job, run: Run) -> Delivery:
        act()
        return deliver(job, run)

    monkeypatch.setattr(world.targets, "deliver", act_then_deliver)


def pause_during_the_call(world: FakeWorld, job: Job, monkeypatch: pytest.MonkeyPatch) -> None:
    during_the_call(world, monkeypatch, lambda: world.jobs.pause(ALICE, job.job_id))


# --- pause ------------------------------------------------------------------------------------


def test_a_pause_takes_the_job_out_of_the_due_index_and_a_second_pause_changes_nothing(
    world: FakeWorld, worker: Deliveries
) -> None:
    job = create(world, {"cron": "0 * * * *"})  # next at 10:00, not claimed yet
    assert world.queue.sent == []

    paused = world.jobs.pause(ALICE, job.job_id)
    assert (paused.status, paused.paused_at, paused.version) == (JobStatus.PAUSED, START, job.version + 1)
    shown = paused.to_api()
    assert (shown["next_fire_at"], shown["paused_at"]) == (None, iso(START))  # the API shows no next firing
    world.clock.advance(5)
    again = world.jobs.pause(ALICE, job.job_id)
    assert again == paused == stored(world, job)  # same version, same pause time

    world.clock.set(T0 + timedelta(hours=1))
    assert claimed(poll(world)) == 0
    assert worker.deliver() == []
    assert world.targets.calls == []
    assert runs(world, job) == []


def test_a_run_claimed_before_the_pause_is_set_aside_at_its_time_and_the_resume_fires_once_for_it(
    world: FakeWorld, worker: Deliveries
) -> None:
    fire_at = START + timedelta(seconds=20)
    job = create(world, {"at": iso(fire_at)})  # claimed and sent at create
    world.jobs.pause(ALICE, job.job_id)

    world.clock.set(fire_at)
    assert worker.deliver() == [Outcome.SET_ASIDE]
    assert world.targets.calls == []
    [waiting] = runs(world, job)
    assert (waiting.status, waiting.attempt) == (RunStatus.PENDING, 1)  # waits for the resume to decide

    # While the job stays paused, the watchdog only looks again now and then; it sends nothing.
    world.clock.advance(16 * 60)
    assert [report.watched for report in poll(world) if report.watched] == [{"paused": 1}]
    assert worker.deliver() == []

    # FIRE_ONCE: the resume fires one run now for the missed firing; the one set aside ends.
    world.jobs.resume(ALICE, job.job_id)
    assert worker.deliver() == [Outcome.SUCCEEDED]
    assert len(world.targets.calls) == 1
    assert sorted(run.status for run in runs(world, job)) == [RunStatus.CANCELLED, RunStatus.SUCCEEDED]
    assert stored(world, job).status is JobStatus.COMPLETED


def ended_jobs(world: FakeWorld, worker: Deliveries) -> list[Job]:
    """A cancelled job and a completed one."""
    cancelled = create(world, {"cron": "0 * * * *"})
    world.jobs.cancel(ALICE, cancelled.job_id)
    fire_at = START + timedelta(seconds=10)
    completed = create(world, {"at": iso(fire_at)})
    world.clock.set(fire_at)
    worker.deliver()
    assert stored(world, completed).status is JobStatus.COMPLETED
    return [stored(world, cancelled), stored(world, completed)]


@pytest.mark.parametrize("action", ["pause", "resume", "trigger"])
def test_a_cancelled_or_completed_job_cannot_be_paused_resumed_or_triggered(
    world: FakeWorld, worker: Deliveries, action: str
) -> None:
    for job in ended_jobs(world, worker):
        with pytest.raises(Conflict) as refused:
            getattr(world.jobs, action)(ALICE, job.job_id)
        assert (refused.value.status, refused.value.code) == (409, "CONFLICT")
        assert str(job.status) in refused.value.message
        assert stored(world, job) == job


# --- resume -----------------------------------------------------------------------------------


def test_firings_missed_while_paused_fire_once_at_the_resume_and_the_schedule_carries_on(
    world: FakeWorld, worker: Deliveries
) -> None:
    job = create(world, {"cron": "* * * * *"})  # 09:01 and 09:02 claimed at create
    world.jobs.pause(ALICE, job.job_id)

    # Nine minute marks pass; the two claimed runs come and are set aside, nothing else fires.
    world.clock.set(at(10, 15))
    assert worker.deliver() == [Outcome.SET_ASIDE, Outcome.SET_ASIDE]
    assert claimed(poll(world)) == 0
    assert world.targets.calls == []

    resumed = world.jobs.resume(ALICE, job.job_id)
    assert (resumed.status, resumed.paused_at) == (JobStatus.SCHEDULED, None)
    now = world.clock.now()
    assert worker.deliver() == [Outcome.SUCCEEDED]
    catch_up = run_id(job, now)
    assert [run.run_id for run in called(world)] == [catch_up]
    # The schedule carries on from its first firing after the resume (claimed at once: due soon).
    assert resumed.next_fire_at == at(13)
    assert [(run.run_id, run.status, run.trigger) for run in runs(world, job)] == [
        (run_id(job, at(12)), RunStatus.PENDING, Trigger.SCHEDULE),
        (run_id(job, at(11)), RunStatus.PENDING, Trigger.SCHEDULE),
        (catch_up, RunStatus.SUCCEEDED, Trigger.SCHEDULE),
        (run_id(job, at(2)), RunStatus.CANCELLED, Trigger.SCHEDULE),
        (run_id(job, at(1)), RunStatus.CANCELLED, Trigger.SCHEDULE),
    ]
    # Resuming again changes nothing, and fires nothing more.
    before = stored(world, job)
    assert world.jobs.resume(ALICE, job.job_id) == before == stored(world, job)
    assert worker.deliver() == []


def test_a_resume_before_the_claimed_runs_are_due_lets_them_run_as_planned(
    world: FakeWorld, worker: Deliveries
) -> None:
    # 09:01 and 09:02 claimed, then delivered together (overlap ALLOW: both run).
    job = create(world, {"cron": "* * * * *"}, concurrency={"overlap": "ALLOW"})
    world.jobs.pause(ALICE, job.job_id)
    world.clock.advance(10)
    resumed = world.jobs.resume(ALICE, job.job_id)
    assert resumed.next_fire_at == at(3)

    world.clock.set(at(2))
    # The resume sent both again (the worker may have set them aside): the duplicates drop.
    outcomes = worker.deliver()
    assert sorted(outcomes) == [Outcome.DUPLICATE, Outcome.DUPLICATE, Outcome.SUCCEEDED, Outcome.SUCCEEDED]
    assert sorted(run.scheduled_for for run in called(world)) == [at(1), at(2)]


def test_a_one_off_whose_time_passed_while_paused_fires_once_at_the_resume_and_completes(
    world: FakeWorld, worker: Deliveries
) -> None:
    fire_at = START + timedelta(minutes=10)
    job = create(world, {"at": iso(fire_at)})  # beyond the lookahead: not claimed
    world.jobs.pause(ALICE, job.job_id)

    world.clock.set(fire_at + timedelta(minutes=5))
    poll(world)
    worker.deliver()
    assert world.targets.calls == []
    resumed = world.jobs.resume(ALICE, job.job_id)
    assert (resumed.status, resumed.next_fire_at) == (JobStatus.SCHEDULED, None)
    assert worker.deliver() == [Outcome.SUCCEEDED]
    assert len(world.targets.calls) == 1
    assert stored(world, job).status is JobStatus.COMPLETED


def test_a_new_schedule_while_paused_cancels_the_runs_the_old_one_set_aside(
    world: FakeWorld, worker: Deliveries
) -> None:
    """A resume counts missed firings on the job's new schedule: a run of the old schedule,
    set aside while paused, is no missed firing of the new one."""
    job = create(world, {"cron": "*/5 * * * *"})  # next 09:05
    world.clock.set(at(5) - timedelta(seconds=90))
    poll(world)
    world.jobs.pause(ALICE, job.job_id)
    world.clock.set(at(5))
    assert worker.deliver() == [Outcome.SET_ASIDE]
    assert [run.status for run in runs(world, job)] == [RunStatus.PENDING]

    world.clock.set(at(6))
    patch(world, job, schedule={"cron": "0 * * * *"})
    assert [run.status for run in runs(world, job)] == [RunStatus.CANCELLED]
    world.jobs.resume(ALICE, job.job_id)
    assert worker.deliver() == []
    assert world.targets.calls == []  # nothing of the new schedule fell in the pause
    assert stored(world, job).next_fire_at == T0 + timedelta(hours=1)


def test_a_paused_job_takes_a_new_schedule_and_resumes_on_it(world: FakeWorld) -> None:
    job = create(world, {"cron": "0 * * * *"})
    world.jobs.pause(ALICE, job.job_id)
    patched = patch(world, job, schedule={"cron": "30 9 * * *"})
    assert (patched.status, patched.to_api()["next_fire_at"]) == (JobStatus.PAUSED, None)

    resumed = world.jobs.resume(ALICE, job.job_id)  # at 09:00:30, before 09:30: nothing missed
    assert resumed.next_fire_at == at(30)
    assert runs(world, job) == []
    assert world.queue.sent == []


def test_a_failed_run_of_a_paused_job_cannot_be_retried_until_the_resume(
    world: FakeWorld, worker: Deliveries
) -> None:
    """The worker sets a paused job's runs aside until the resume, whose misfire policy may
    drop them, so a retry accepted while paused would not run when asked, perhaps never."""
    job = create(world, {"cron": "* * * * *"})
    world.jobs.pause(ALICE, job.job_id)
    world.targets.answers = [Delivery(ok=False, status_code=404, error="HTTP 404", retryable=False)]
    manual = world.jobs.trigger(ALICE, job.job_id)
    assert worker.deliver() == [Outcome.FAILED]

    with pytest.raises(Conflict) as refused:
        world.jobs.retry_run(ALICE, job.job_id, manual.run_id)
    assert "paused" in refused.value.message
    assert [run.run_id for run in runs(world, job, RunStatus.FAILED)] == [manual.run_id]
    assert len(world.queue.sent) == 3  # 09:01, 09:02 and the manual run: no retry sent


# --- a pause while a run calls its target -----------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "retry", "run_status"),
    [
        (Delivery(ok=True, status_code=200), {}, RunStatus.SUCCEEDED),
        (Delivery(ok=False, status_code=404, error="HTTP 404", retryable=False), {}, RunStatus.FAILED),
        (  # retryable, but no attempt left
            Delivery(ok=False, status_code=503, error="HTTP 503", retryable=True),
            {"max_attempts": 1},
            RunStatus.FAILED,
        ),
    ],
    ids=["succeeds", "fails for good", "no attempt left"],
)
def test_a_one_off_paused_while_its_run_calls_the_target_completes_when_the_run_ends(
    world: FakeWorld,
    worker: Deliveries,
    monkeypatch: pytest.MonkeyPatch,
    answer: Delivery,
    retry: dict[str, int],
    run_status: RunStatus,
) -> None:
    fire_at = START + timedelta(seconds=10)
    job = create(world, {"at": iso(fire_at)}, retry=retry)
    pause_during_the_call(world, job, monkeypatch)
    world.targets.answers = [answer]

    world.clock.set(fire_at)
    assert worker.deliver() == [Outcome(str(run_status))]
    assert len(world.targets.calls) == 1
    assert [run.status for run in runs(world, job)] == [run_status]
    assert stored(world, job).status is JobStatus.COMPLETED

    with pytest.raises(Conflict):
        world.jobs.resume(ALICE, job.job_id)
    assert worker.deliver() == []
    assert len(world.targets.calls) == 1


def test_a_window_paused_while_its_last_run_calls_the_target_completes_when_the_run_ends(
    world: FakeWorld, worker: Deliveries, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = create(world, {"cron": "* * * * *", "end_at": iso(at(2))})  # 09:01 and 09:02 claimed
    world.clock.set(at(1))
    assert worker.deliver() == [Outcome.SUCCEEDED]
    assert stored(world, job).status is JobStatus.SCHEDULED

    pause_during_the_call(world, job, monkeypatch)
    world.clock.set(at(2))
    assert worker.deliver() == [Outcome.SUCCEEDED]
    assert [run.status for run in runs(world, job)] == [RunStatus.SUCCEEDED, RunStatus.SUCCEEDED]
    assert stored(world, job).status is JobStatus.COMPLETED


@pytest.mark.parametrize(
    "schedule",
    [
        {"cron": "* * * * *"},
        # The last firing (09:02) is claimed, but its run has not run yet.
        {"cron": "* * * * *", "end_at": iso(at(2))},
    ],
    ids=["endless", "last firing claimed"],
)
def test_a_job_paused_while_a_run_calls_the_target_stays_paused_with_firings_left(
    world: FakeWorld, worker: Deliveries, monkeypatch: pytest.MonkeyPatch, schedule: dict[str, str]
) -> None:
    job = create(world, schedule)  # 09:01 and 09:02 claimed at create
    pause_during_the_call(world, job, monkeypatch)

    world.clock.set(at(1))
    assert worker.deliver() == [Outcome.SUCCEEDED]
    assert len(world.targets.calls) == 1
    assert runs(world, job, RunStatus.SUCCEEDED)[0].scheduled_for == at(1)
    paused = stored(world, job)
    assert paused.status is JobStatus.PAUSED
    assert paused.next_fire_at == job.next_fire_at  # where a resume carries on from
    assert world.jobs.resume(ALICE, job.job_id).status is JobStatus.SCHEDULED


# --- trigger ----------------------------------------------------------------------------------


def test_a_trigger_runs_the_job_now_through_the_queue_and_leaves_its_schedule(
    world: FakeWorld, worker: Deliveries
) -> None:
    job = create(world, {"cron": "0 * * * *"}, priority="HIGH")
    world.clock.advance(5)
    now = world.clock.now()

    run = world.jobs.trigger(ALICE, job.job_id)
    assert (run.run_id, run.trigger, run.status, run.scheduled_for) == (
        run_id(job, now),
        Trigger.MANUAL,
        RunStatus.PENDING,
        now,
    )
    assert world.queue.sent == [run]  # through the queue of the job's priority
    after = stored(world, job)
    assert (after.next_fire_at, after.version) == (job.next_fire_at, job.version)

    assert worker.deliver() == [Outcome.SUCCEEDED]
    assert [called_run.run_id for called_run in called(world)] == [run.run_id]
    done = world.jobs.get_run(ALICE, job.job_id, run.run_id)
    assert (done.status, done.trigger, done.attempt, done.lateness_ms) == (
        RunStatus.SUCCEEDED,
        Trigger.MANUAL,
        1,
        0,
    )
    assert stored(world, job).status is JobStatus.SCHEDULED


def test_a_manual_run_never_takes_the_id_of_a_firing(world: FakeWorld) -> None:
    job = create(world, {"cron": "*/5 * * * *"})  # next 09:05, not claimed yet
    world.clock.set(at(5))  # no poll ran: the firing is due and unclaimed

    manual = world.jobs.trigger(ALICE, job.job_id)
    assert manual.scheduled_for_ms == to_ms(at(5)) + 1
    poll(world)  # the firing is claimed under its own id
    assert {run.run_id for run in runs(world, job)} == {manual.run_id, run_id(job, at(5))}
    again = world.jobs.trigger(ALICE, job.job_id)  # the same millisecond again
    assert again.scheduled_for_ms == to_ms(at(5)) + 2


def test_a_paused_job_can_be_triggered_and_its_manual_run_goes_on_while_it_stays_paused(
    world: FakeWorld, worker: Deliveries
) -> None:
    job = create(world, {"cron": "0 * * * *"})
    world.jobs.pause(ALICE, job.job_id)
    manual = world.jobs.trigger(ALICE, job.job_id)

    assert worker.deliver() == [Outcome.SUCCEEDED]
    assert [run.run_id for run in called(world)] == [manual.run_id]
    assert stored(world, job).status is JobStatus.PAUSED


def test_a_manual_run_of_a_one_off_does_not_complete_it(world: FakeWorld, worker: Deliveries) -> None:
    fire_at = START + timedelta(seconds=30)
    job = create(world, {"at": iso(fire_at)})  # claimed: nothing left to fire
    world.jobs.trigger(ALICE, job.job_id)
    assert worker.deliver() == [Outcome.SUCCEEDED]  # the manual run only: the firing is not due
    assert stored(world, job).status is JobStatus.SCHEDULED

    world.clock.set(fire_at)
    assert worker.deliver() == [Outcome.SUCCEEDED]
    assert len(world.targets.calls) == 2
    assert stored(world, job).status is JobStatus.COMPLETED


# --- PATCH ------------------------------------------------------------------------------------


def test_a_run_already_on_the_queue_calls_the_job_as_patched(world: FakeWorld, worker: Deliveries) -> None:
    fire_at = START + timedelta(seconds=30)
    job = create(world, {"at": iso(fire_at)})  # its run is on the queue already
    changed = patch(
        world,
        job,
        payload={"n": 2},
        target={"type": "HTTP", "url": f"{URL}/v2", "method": "PUT"},
        name="renamed",
    )
    assert (changed.version, changed.name, changed.schedule) == (job.version + 1, "renamed", job.schedule)

    world.clock.set(fire_at)
    assert worker.deliver() == [Outcome.SUCCEEDED]
    [(called_job, _)] = world.targets.calls
    assert called_job.target is not None
    target = called_job.target.model_dump()
    assert (target["method"], target["url"], called_job.payload) == ("PUT", f"{URL}/v2", {"n": 2})
    assert stored(world, job).status is JobStatus.COMPLETED


def test_a_new_schedule_moves_the_job_in_the_due_index_and_cancels_claims_it_does_not_fire_at(
    world: FakeWorld, worker: Deliveries
) -> None:
    # 09:01 and 09:02 claimed; 09:02 is delivered late, with 09:04 (overlap ALLOW: both run).
    job = create(world, {"cron": "* * * * *"}, concurrency={"overlap": "ALLOW"})

    changed = patch(world, job, schedule={"cron": "*/2 * * * *"})
    # 09:02 is a firing of the new schedule too: its run keeps its place. 09:04 is next; it
    # is beyond the lookahead, so it waits in the due index.
    assert changed.next_fire_at == at(4)
    assert {run.scheduled_for: run.status for run in runs(world, job)} == {
        at(2): RunStatus.PENDING,
        at(1): RunStatus.CANCELLED,
    }

    world.clock.set(at(4))
    assert [run.scheduled_for for report in poll(world) for run in report.claimed] == [at(4), at(6)]
    worker.deliver()
    assert sorted(run.scheduled_for for run in called(world)) == [at(2), at(4)]


def test_a_new_schedule_leaves_a_run_that_is_calling_its_target_alone(
    world: FakeWorld, worker: Deliveries, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = create(world, {"cron": "* * * * *"})  # 09:01 and 09:02 claimed
    during_the_call(world, monkeypatch, lambda: patch(world, job, schedule={"cron": "0 * * * *"}))

    world.clock.set(at(1))
    assert worker.deliver() == [Outcome.SUCCEEDED]
    world.clock.set(at(2))
    assert worker.deliver() == [Outcome.DUPLICATE]  # 09:02's run was cancelled by the patch
    assert {run.scheduled_for: run.status for run in runs(world, job)} == {
        at(2): RunStatus.CANCELLED,
        at(1): RunStatus.SUCCEEDED,
    }
    assert len(world.targets.calls) == 1
    assert stored(world, job).next_fire_at == T0 + timedelta(hours=1)


def test_a_new_schedule_due_within_the_lookahead_is_claimed_at_once(
    world: FakeWorld, worker: Deliveries
) -> None:
    job = create(world, {"cron": "0 * * * *"})
    fire_at = START + timedelta(seconds=40)

    changed = patch(world, job, schedule={"at": iso(fire_at)})
    assert changed.next_fire_at is None  # claimed
    assert [run.scheduled_for for run in world.queue.sent] == [fire_at]
    world.clock.set(fire_at)
    assert worker.deliver() == [Outcome.SUCCEEDED]
    assert stored(world, job).status is JobStatus.COMPLETED


def claim_before_the_first_write(world: FakeWorld, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A poll claims between a change's read of the job and its first write; returns the list
    the change's writes are counted in."""
    write = world.store.update_job_if_unchanged
    writes: list[int] = []

    def claim_first(*args: Any, **kwargs: Any) -> bool:
        writes.append(1)
        if len(writes) == 1:
            poll(world)
        return write(*args, **kwargs)

    monkeypatch.setattr(world.store, "update_job_if_unchanged", claim_first)
    return writes


def test_a_patch_racing_a_claim_is_applied_again_and_neither_loses_nor_doubles_the_claim(
    world: FakeWorld, worker: Deliveries, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = create(world, {"cron": "*/5 * * * *"})  # next 09:05
    world.clock.set(at(3, 30))
    writes = claim_before_the_first_write(world, monkeypatch)

    changed = patch(world, job, payload={"n": 3})
    assert len(writes) == 2  # the first write lost to the claim; read again, it won
    assert (changed.version, changed.next_fire_at) == (job.version + 2, at(10))
    world.clock.set(at(5))
    poll(world)
    assert worker.deliver() == [Outcome.SUCCEEDED]
    assert [called_job.payload for called_job, _ in world.targets.calls] == [{"n": 3}]


def test_a_patch_with_if_match_that_loses_to_a_claim_is_refused_not_applied_again(
    world: FakeWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = create(world, {"cron": "*/5 * * * *"})  # next 09:05
    world.clock.set(at(3, 30))
    writes = claim_before_the_first_write(world, monkeypatch)

    with pytest.raises(PreconditionFailed):
        patch(world, job, if_match=job.version, payload={"n": 3})
    assert len(writes) == 1
    after = stored(world, job)
    assert (after.payload, after.version, after.next_fire_at) == ({"n": 1}, job.version + 1, at(10))


def test_a_job_gone_while_a_change_was_written_is_not_found_not_a_server_error(
    world: FakeWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only an ended job leaves the table, when its retention is up (DynamoDB's TTL): a change
    whose write lost a race and whose job has gone by the time it reads it again is a 404."""
    job = create(world, {"cron": "*/5 * * * *"})

    def gone_meanwhile(*args: Any, **kwargs: Any) -> bool:
        world.store._jobs.pop(job.job_id)
        return False

    monkeypatch.setattr(world.store, "update_job_if_unchanged", gone_meanwhile)
    with pytest.raises(NotFound):
        patch(world, job, payload={"n": 3})


def test_a_cancelled_or_completed_job_cannot_be_patched(world: FakeWorld, worker: Deliveries) -> None:
    for job in ended_jobs(world, worker):
        with pytest.raises(Conflict) as refused:
            patch(world, job, name="again")
        assert (refused.value.status, refused.value.code) == (409, "CONFLICT")
        assert str(job.status) in refused.value.message
        assert stored(world, job) == job


def test_patching_a_one_off_away_and_back_to_its_cancelled_time_is_refused(world: FakeWorld) -> None:
    fire_at = START + timedelta(seconds=90)  # within the lookahead: claimed at create
    job = create(world, {"at": iso(fire_at)})
    moved = patch(world, job, schedule={"at": iso(fire_at + timedelta(minutes=1))})
    assert moved.next_fire_at == fire_at + timedelta(minutes=1)

    with pytest.raises(Conflict) as refused:
        patch(world, job, schedule={"at": iso(fire_at)})
    assert "schedule" in refused.value.message
    assert stored(world, job).next_fire_at == fire_at + timedelta(minutes=1)  # unchanged, still fires


# --- tenancy and cancel -----------------------------------------------------------------------


@pytest.mark.parametrize("action", ["pause", "resume", "trigger", "cancel", "update"])
def test_another_tenant_cannot_change_a_job(world: FakeWorld, action: str) -> None:
    job = create(world, {"cron": "0 * * * *"})
    args: list[Any] = [JobPatch.model_validate({"name": "x"})] if action == "update" else []
    with pytest.raises(NotFound):
        getattr(world.jobs, action)("bob", job.job_id, *args)
    assert stored(world, job) == job
    assert runs(world, job) == []


def test_a_cancel_cancels_the_waiting_runs_at_once_and_their_messages_are_dropped(
    world: FakeWorld, worker: Deliveries
) -> None:
    job = create(world, {"cron": "* * * * *"})  # 09:01 and 09:02 claimed

    cancelled = world.jobs.cancel(ALICE, job.job_id)
    assert cancelled.status is JobStatus.CANCELLED
    assert [run.status for run in runs(world, job)] == [RunStatus.CANCELLED, RunStatus.CANCELLED]
    world.clock.set(at(3))
    assert worker.deliver() == [Outcome.CANCELLED, Outcome.CANCELLED]  # their messages come
    assert world.targets.calls == []
