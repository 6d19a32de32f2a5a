"""How workflow runs move on (`services/workflow_runs.py`, `WorkflowRunner`), as the services
write it, on the in-memory fakes (`tests/support/fakes.py`): the worker's begin releases a
workflow run's first tasks (their runs put and sent); a task's end releases what follows
it, once, however often it is told; the last task's end ends the workflow run (its running
slot given back, a one-off workflow completed); the poll's `reconcile` joins an end nobody
joined and makes a released task's run nobody made; a cancel stops what has not started,
a stand-in run taking the place of a release under way; a failed task retried reopens its
ended workflow run.

Elsewhere: the same through the real handlers on moto in `tests/integration/test_workflows.py`;
the fake's `WorkflowRuns` held to the adapter by
`tests/integration/test_store_contract_workflows.py`; the pure rules in
`tests/unit/test_workflows.py`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest

from scheduler_core.domain import keys
from scheduler_core.domain.api_shapes import WorkflowCreate
from scheduler_core.domain.entities import Job, Run
from scheduler_core.domain.outcomes import Outcome
from scheduler_core.domain.vocabulary import JobStatus, RunStatus
from scheduler_core.domain.workflows import Phase
from scheduler_core.ports import Delivery
from scheduler_core.services.workflow_runs import RECHECK
from scheduler_core.services.workflows import WorkflowService
from tests.support.builders import T0
from tests.support.fakes import Deliveries, FakeWorld, ScriptedTargets, fake_world
from tests.support.helpers import iso

ALICE = "alice"
START = T0 + timedelta(seconds=30)
BROKEN = Delivery(ok=False, status_code=500, error="boom", retryable=False)
P = Phase


class WorkerDied(BaseException):
    """The worker's process ended (a timeout, an OOM): nothing after this point runs."""


@dataclass
class ByTask(ScriptedTargets):
    """`ScriptedTargets` answering each workflow task by its id (`answers_by_task`; 200 with
    the output `{"task": <id>}` otherwise)."""

    answers_by_task: dict[str, Delivery] = field(default_factory=dict)

    def deliver(self, job: Job, run: Run) -> Delivery:
        self.calls.append((job, run))
        answer = Delivery(ok=True, status_code=200, output=f'{{"task":"{job.task_id}"}}')
        return self.answers_by_task.get(job.task_id or "", answer)


@pytest.fixture
def targets() -> ByTask:
    return ByTask()


@pytest.fixture
def world(targets: ByTask) -> FakeWorld:
    return fake_world(START, targets=targets)


@pytest.fixture
def worker(world: FakeWorld) -> Deliveries:
    return Deliveries(world)


def api(world: FakeWorld) -> WorkflowService:
    assert world.jobs.workflows is not None
    return world.jobs.workflows


def task(task_id: str, *depends_on: str, **fields: Any) -> dict[str, Any]:
    return {
        "task_id": task_id,
        "target": {"type": "HTTP", "url": f"https://example.com/{task_id}"},
        "depends_on": list(depends_on),
    } | fields


DIAMOND = [task("a"), task("b", "a"), task("c", "a"), task("d", "b", "c")]


def create(world: FakeWorld, tasks: list[dict[str, Any]], **fields: Any) -> Job:
    body = {"name": "pipeline", "tasks": tasks} | fields
    return api(world).create(ALICE, WorkflowCreate.model_validate(body))


def trigger(world: FakeWorld, workflow: Job) -> Run:
    """A workflow run now (MANUAL), claimed and sent, not begun yet."""
    view = api(world).trigger(ALICE, workflow.job_id)
    job_id, ms = keys.parse_run_id(view["workflow_run_id"])
    return now_of(world, job_id, ms)


def now_of(world: FakeWorld, job_id: str, ms: int) -> Run:
    run = world.store.get_run(job_id, ms)
    assert run is not None
    return run


def current(world: FakeWorld, run: Run) -> Run:
    return now_of(world, run.job_id, run.scheduled_for_ms)


def phases(world: FakeWorld, workflow_run: Run) -> dict[str, Phase]:
    state = current(world, workflow_run).workflow
    assert state is not None
    return dict(state.phases)


def version_of(world: FakeWorld, workflow_run: Run) -> int:
    state = current(world, workflow_run).workflow
    assert state is not None
    return state.version


def job_now(world: FakeWorld, job: Job) -> Job:
    read = world.store.get_job(job.job_id)
    assert read is not None
    return read


def status_of(world: FakeWorld, workflow_run: Run, task_id: str) -> RunStatus | None:
    run = task_run(world, workflow_run, task_id)
    return run.status if run else None


def task_run(world: FakeWorld, workflow_run: Run, task_id: str) -> Run | None:
    return world.store.get_run(keys.task_job_id(workflow_run.job_id, task_id), workflow_run.scheduled_for_ms)


def task_job(world: FakeWorld, workflow: Job, task_id: str) -> Job:
    job = world.store.get_job(keys.task_job_id(workflow.job_id, task_id))
    assert job is not None
    return job


def sent_tasks(world: FakeWorld, workflow_run: Run) -> list[str]:
    """The task ids of the task runs of `workflow_run` sent so far, in the order sent."""
    ms = workflow_run.scheduled_for_ms
    prefix = f"{workflow_run.job_id}."
    return [
        run.job_id.removeprefix(prefix)
        for run in world.queue.sent
        if run.job_id.startswith(prefix) and run.scheduled_for_ms == ms
    ]


def hand(world: FakeWorld, worker: Deliveries, which: Callable[[Run], bool]) -> list[Outcome]:
    """Hand the worker only the messages waiting that `which` picks."""
    return [world.executor.execute(message) for message in worker.take(which)]


def of_task(workflow_run: Run, *task_ids: str) -> Callable[[Run], bool]:
    jobs = {keys.task_job_id(workflow_run.job_id, task_id) for task_id in task_ids}
    return lambda run: run.job_id in jobs


def is_the(workflow_run: Run) -> Callable[[Run], bool]:
    return lambda run: run.run_id == workflow_run.run_id


def begun(world: FakeWorld, worker: Deliveries, workflow: Job) -> Run:
    """A workflow run triggered and begun by the worker (its first tasks released and sent,
    not delivered)."""
    workflow_run = trigger(world, workflow)
    assert hand(world, worker, is_the(workflow_run)) == [Outcome.BEGUN]
    return current(world, workflow_run)


def watchdog(world: FakeWorld) -> dict[str, int]:
    """A poll of every shard: what its watchdog did, summed."""
    done: dict[str, int] = {}
    for shard in range(4):
        for action, count in world.dispatcher.poll_shard(shard).watched.items():
            done[action] = done.get(action, 0) + count
    return done


# --- the worker's begin -------------------------------------------------------------------


def test_the_begin_releases_the_first_tasks_and_only_them(world: FakeWorld, worker: Deliveries) -> None:
    workflow = create(world, [*DIAMOND, task("z")])
    workflow_run = trigger(world, workflow)
    assert workflow_run.workflow is None
    assert [run.run_id for run in world.queue.sent] == [workflow_run.run_id]

    assert hand(world, worker, is_the(workflow_run)) == [Outcome.BEGUN]
    now = world.clock.now()
    read = current(world, workflow_run)
    assert read.workflow is not None
    assert read.workflow.version == 1
    assert [node.task_id for node in read.workflow.graph] == ["a", "b", "c", "d", "z"]
    assert read.workflow.phases == {
        "a": P.RELEASED,
        "b": P.WAITING,
        "c": P.WAITING,
        "d": P.WAITING,
        "z": P.RELEASED,
    }
    assert (read.status, read.lease_until, read.due_at, read.holds_slot) == (
        RunStatus.RUNNING,
        None,
        now + RECHECK,
        True,
    )
    assert job_now(world, workflow).running_count == 1

    assert sent_tasks(world, workflow_run) == ["a", "z"]
    for task_id in "az":
        made = task_run(world, workflow_run, task_id)
        assert made is not None
        assert (made.status, made.trigger, made.scheduled_for, made.attempt) == (
            RunStatus.PENDING,
            workflow_run.trigger,
            workflow_run.scheduled_for,
            1,
        )
        assert made.due_at == now + timedelta(seconds=60)  # sent: the poll re-sends it if lost
    assert [task_run(world, workflow_run, task_id) for task_id in "bcd"] == [None, None, None]


def test_a_begin_by_an_attempt_that_lost_its_lease_releases_nothing(
    world: FakeWorld, worker: Deliveries
) -> None:
    workflow = create(world, DIAMOND)
    workflow_run = trigger(world, workflow)
    [message] = worker.take(is_the(workflow_run))
    now = world.clock.now()
    running = world.store.start_run_if_waiting(message, now, now + timedelta(minutes=3), "owner")
    assert running is not None
    assert world.workflows.begin(workflow, running, "another") is Outcome.LEASE_LOST
    assert world.workflows.begin(workflow, running, "owner") is Outcome.BEGUN
    assert world.workflows.begin(workflow, running, "owner") is Outcome.LEASE_LOST  # begun already
    assert sent_tasks(world, workflow_run) == ["a"]
    assert phases(world, workflow_run)["a"] is P.RELEASED


# --- a task's end: the join ---------------------------------------------------------------


def test_a_tasks_end_releases_what_follows_once(
    world: FakeWorld, worker: Deliveries, targets: ByTask
) -> None:
    workflow = create(world, DIAMOND)
    workflow_run = begun(world, worker, workflow)

    assert hand(world, worker, of_task(workflow_run, "a")) == [Outcome.SUCCEEDED]
    assert phases(world, workflow_run) == {"a": P.SUCCEEDED, "b": P.RELEASED, "c": P.RELEASED, "d": P.WAITING}
    assert sent_tasks(world, workflow_run) == ["a", "b", "c"]
    version = version_of(world, workflow_run)

    # Told again (a duplicate, or the poll's reconcile first): nothing changes, nothing is sent.
    a_run = task_run(world, workflow_run, "a")
    assert a_run is not None
    world.workflows.task_run_ended(task_job(world, workflow, "a"), a_run, RunStatus.SUCCEEDED)
    assert version_of(world, workflow_run) == version
    assert sent_tasks(world, workflow_run) == ["a", "b", "c"]

    assert hand(world, worker, of_task(workflow_run, "b")) == [Outcome.SUCCEEDED]
    assert phases(world, workflow_run)["d"] is P.WAITING  # c has not ended
    assert hand(world, worker, of_task(workflow_run, "c")) == [Outcome.SUCCEEDED]
    assert phases(world, workflow_run)["d"] is P.RELEASED
    b_run = task_run(world, workflow_run, "b")
    assert b_run is not None
    world.workflows.task_run_ended(task_job(world, workflow, "b"), b_run, RunStatus.SUCCEEDED)
    assert sent_tasks(world, workflow_run) == ["a", "b", "c", "d"]  # d once

    # d is delivered with its upstream tasks' outputs.
    assert hand(world, worker, of_task(workflow_run, "d")) == [Outcome.SUCCEEDED]
    [d_job] = [job for job, _ in targets.calls if job.task_id == "d"]
    assert d_job.payload == {"upstream": {"b": {"task": "b"}, "c": {"task": "c"}}}


def test_the_last_tasks_end_ends_the_workflow_run_and_gives_back_its_slot(
    world: FakeWorld, worker: Deliveries
) -> None:
    workflow = create(world, DIAMOND)
    workflow_run = begun(world, worker, workflow)
    worker.deliver()
    ended = current(world, workflow_run)
    assert ended.workflow is not None
    assert ended.workflow.phases == dict.fromkeys("abcd", P.SUCCEEDED)
    assert (ended.status, ended.finished_at, ended.due_at, ended.holds_slot) == (
        RunStatus.SUCCEEDED,
        world.clock.now(),
        None,
        False,
    )
    read = job_now(world, workflow)
    assert (read.status, read.running_count) == (JobStatus.SCHEDULED, 0)  # triggered: not its last run
    assert sent_tasks(world, workflow_run) == ["a", "b", "c", "d"]


def test_a_failure_fails_what_needs_it_and_the_workflow_run(
    world: FakeWorld, worker: Deliveries, targets: ByTask
) -> None:
    targets.answers_by_task["b"] = BROKEN
    workflow = create(world, [*DIAMOND, task("cleanup", "d", trigger_rule="ALL_DONE")])
    workflow_run = begun(world, worker, workflow)
    worker.deliver()
    assert phases(world, workflow_run) == {
        "a": P.SUCCEEDED,
        "b": P.FAILED,
        "c": P.SUCCEEDED,
        "d": P.UPSTREAM_FAILED,
        "cleanup": P.SUCCEEDED,
    }
    assert current(world, workflow_run).status is RunStatus.FAILED
    assert task_run(world, workflow_run, "d") is None  # decided without a run
    assert [record.job_id for record in world.queue.dead_letters] == [keys.task_job_id(workflow.job_id, "b")]


def test_a_one_off_workflows_run_completes_it(world: FakeWorld, worker: Deliveries) -> None:
    fire_at = START + timedelta(seconds=5)
    workflow = create(world, DIAMOND, schedule={"at": iso(fire_at)})
    [workflow_run] = world.queue.sent  # claimed and sent at its create
    world.clock.set(fire_at)
    worker.deliver()
    assert current(world, workflow_run).status is RunStatus.SUCCEEDED
    read = job_now(world, workflow)
    assert (read.status, read.running_count) == (JobStatus.COMPLETED, 0)


# --- the poll's reconcile -----------------------------------------------------------------


def test_reconcile_joins_an_end_nobody_joined(
    world: FakeWorld, worker: Deliveries, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker dies between a task run's end and the join: the workflow run's timer has the
    poll join it, and release what it releases."""
    workflow = create(world, DIAMOND)
    workflow_run = begun(world, worker, workflow)

    def dies(*_: Any) -> None:
        raise WorkerDied

    with monkeypatch.context() as patched:
        patched.setattr(world.workflows, "task_run_ended", dies)
        with pytest.raises(WorkerDied):
            hand(world, worker, of_task(workflow_run, "a"))
    assert status_of(world, workflow_run, "a") is RunStatus.SUCCEEDED
    assert phases(world, workflow_run)["a"] is P.RELEASED  # never joined
    assert watchdog(world) == {}  # nothing is due yet

    world.clock.advance(RECHECK.total_seconds())
    assert watchdog(world) == {"workflow_joined": 1}
    read = current(world, workflow_run)
    assert read.workflow is not None
    assert read.workflow.phases == {"a": P.SUCCEEDED, "b": P.RELEASED, "c": P.RELEASED, "d": P.WAITING}
    assert read.due_at == world.clock.now() + RECHECK  # watched on
    assert sent_tasks(world, workflow_run) == ["a", "b", "c"]

    worker.deliver()
    assert current(world, workflow_run).status is RunStatus.SUCCEEDED
    assert sent_tasks(world, workflow_run) == ["a", "b", "c", "d"]


def test_reconcile_makes_a_released_tasks_run_nobody_made(
    world: FakeWorld, worker: Deliveries, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker dies between the begin's write (a released) and a's run being made."""
    workflow = create(world, DIAMOND)
    workflow_run = trigger(world, workflow)

    def dies(*_: Any) -> bool:
        raise WorkerDied

    with monkeypatch.context() as patched:
        patched.setattr(world.store, "put_run_if_absent", dies)
        with pytest.raises(WorkerDied):
            hand(world, worker, is_the(workflow_run))
    assert phases(world, workflow_run)["a"] is P.RELEASED
    assert task_run(world, workflow_run, "a") is None
    assert sent_tasks(world, workflow_run) == []

    world.clock.advance(RECHECK.total_seconds())
    assert watchdog(world) == {"workflow_released": 1}
    made = task_run(world, workflow_run, "a")
    assert made is not None
    assert made.status is RunStatus.PENDING
    assert sent_tasks(world, workflow_run) == ["a"]
    assert version_of(world, workflow_run) == 2

    worker.deliver()
    assert current(world, workflow_run).status is RunStatus.SUCCEEDED
    assert sent_tasks(world, workflow_run) == ["a", "b", "c", "d"]


def test_reconcile_of_a_run_with_nothing_to_catch_up_moves_its_timer_on(
    world: FakeWorld, worker: Deliveries
) -> None:
    workflow = create(world, DIAMOND)
    workflow_run = begun(world, worker, workflow)
    [message] = worker.take(of_task(workflow_run, "a"))
    now = world.clock.now()
    lease = now + RECHECK + timedelta(minutes=10)
    assert world.store.start_run_if_waiting(message, now, lease, "slow-worker") is not None
    world.clock.advance(RECHECK.total_seconds())
    # a's resend timer is up too: its run is under way, so the watchdog waits for its lease.
    assert watchdog(world) == {"workflow_running": 1, "lease_holds": 1}
    read = current(world, workflow_run)
    assert read.due_at == world.clock.now() + RECHECK
    assert read.workflow is not None
    assert read.workflow.version == 2
    assert sent_tasks(world, workflow_run) == ["a"]


# --- a cancel -----------------------------------------------------------------------------


def test_a_cancel_stops_what_has_not_started_and_lets_what_runs_end(
    world: FakeWorld, worker: Deliveries
) -> None:
    workflow = create(world, [*DIAMOND, task("z"), task("y", "z")])
    workflow_run = begun(world, worker, workflow)
    [z_message] = worker.take(of_task(workflow_run, "z"))
    now = world.clock.now()
    z_running = world.store.start_run_if_waiting(z_message, now, now + timedelta(minutes=3), "w-z")
    assert z_running is not None  # under way: a's run waits on its queue

    view = api(world).cancel_run(ALICE, workflow.job_id, workflow_run.run_id)
    assert view["status"] == "RUNNING"  # z still runs
    assert phases(world, workflow_run) == {
        "a": P.CANCELLED,
        "b": P.CANCELLED,
        "c": P.CANCELLED,
        "d": P.CANCELLED,
        "z": P.RELEASED,
        "y": P.CANCELLED,
    }
    assert status_of(world, workflow_run, "a") is RunStatus.CANCELLED
    assert hand(world, worker, of_task(workflow_run, "a")) == [Outcome.DUPLICATE]  # its message: dropped

    # z ends as it ends; the workflow run ends with it, CANCELLED, and nothing is released.
    assert world.store.finish_run_if_held(z_running, "w-z", RunStatus.SUCCEEDED, world.clock.now())
    world.workflows.task_run_ended(task_job(world, workflow, "z"), z_running, RunStatus.SUCCEEDED)
    ended = current(world, workflow_run)
    assert (ended.status, ended.holds_slot) == (RunStatus.CANCELLED, False)
    assert phases(world, workflow_run)["z"] is P.SUCCEEDED
    assert task_run(world, workflow_run, "y") is None
    assert sent_tasks(world, workflow_run) == ["a", "z"]
    assert job_now(world, workflow).running_count == 0
    assert not world.workflows.cancel(ended)  # nothing left to cancel


def test_a_cancel_puts_a_cancelled_run_where_a_release_under_way_would_have(
    world: FakeWorld, worker: Deliveries, monkeypatch: pytest.MonkeyPatch
) -> None:
    workflow = create(world, DIAMOND)
    workflow_run = trigger(world, workflow)

    def dies(*_: Any) -> bool:
        raise WorkerDied

    with monkeypatch.context() as patched:
        patched.setattr(world.store, "put_run_if_absent", dies)
        with pytest.raises(WorkerDied):
            hand(world, worker, is_the(workflow_run))
    assert world.workflows.cancel(current(world, workflow_run))
    stand_in = task_run(world, workflow_run, "a")
    assert stand_in is not None
    assert (stand_in.status, stand_in.due_at) == (RunStatus.CANCELLED, None)
    assert current(world, workflow_run).status is RunStatus.CANCELLED  # nothing was left running
    assert job_now(world, workflow).running_count == 0

    # The ended workflow run has no timer: nothing makes or sends a's run later.
    world.clock.advance(RECHECK.total_seconds())
    assert watchdog(world) == {}
    assert sent_tasks(world, workflow_run) == []


def test_a_cancel_before_the_begin_cancels_the_workflow_run_whole(
    world: FakeWorld, worker: Deliveries
) -> None:
    workflow = create(world, DIAMOND)
    workflow_run = trigger(world, workflow)
    assert world.workflows.cancel(workflow_run)
    assert current(world, workflow_run).status is RunStatus.CANCELLED
    assert hand(world, worker, is_the(workflow_run)) == [Outcome.DUPLICATE]
    assert sent_tasks(world, workflow_run) == []


# --- a failed task retried ----------------------------------------------------------------


def test_a_failed_task_retried_reopens_its_ended_workflow_run(
    world: FakeWorld, worker: Deliveries, targets: ByTask
) -> None:
    targets.answers_by_task["b"] = BROKEN
    workflow = create(world, DIAMOND)
    workflow_run = begun(world, worker, workflow)
    worker.deliver()
    assert current(world, workflow_run).status is RunStatus.FAILED

    del targets.answers_by_task["b"]
    view = api(world).retry_task(ALICE, workflow.job_id, workflow_run.run_id, "b")
    assert view["status"] == "RUNNING"
    reopened = current(world, workflow_run)
    assert (reopened.finished_at, reopened.due_at, reopened.holds_slot) == (
        None,
        world.clock.now() + RECHECK,
        False,
    )
    assert phases(world, workflow_run) == {
        "a": P.SUCCEEDED,
        "b": P.RELEASED,
        "c": P.SUCCEEDED,
        "d": P.WAITING,
    }
    assert job_now(world, workflow).running_count == 0

    worker.deliver()
    assert phases(world, workflow_run) == dict.fromkeys("abcd", P.SUCCEEDED)
    assert current(world, workflow_run).status is RunStatus.SUCCEEDED
    assert sent_tasks(world, workflow_run) == ["a", "b", "c", "b", "d"]  # b again, d once
