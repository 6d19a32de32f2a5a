"""The contract of the jobs table's ports, part four: workflow runs (`WorkflowRuns`: begun by
the attempt its owner holds, moved on at the version read, ended, reopened), a workflow run's
task runs read together (`get_runs`) and a task's output kept, on the DynamoDB adapter and
the fake alike (see `test_store_contract.py`)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Protocol, cast

from scheduler_core.domain.clock import to_ms
from scheduler_core.domain.entities import Job, Run
from scheduler_core.domain.overlap import slots_as_read
from scheduler_core.domain.schedule import ScheduleSpec
from scheduler_core.domain.vocabulary import JobKind, JobStatus, RunStatus, Trigger, TriggerRule
from scheduler_core.domain.workflows import Phase, TaskNode, WorkflowState
from scheduler_core.ports import JobStore, WorkflowRuns
from tests.support.builders import T0, a_job, a_run
from tests.support.store_contract import AT, LEASE, MINUTE, due_runs

TIMER = AT + 2 * MINUTE  # where a begun workflow run's timer goes (the runner's RECHECK)
LATER = AT + 5 * MINUTE
# A graph whose nodes keep a rule and dependencies that are not the defaults.
NODES = [
    TaskNode(task_id="a"),
    TaskNode(task_id="b", depends_on=["a"]),
    TaskNode(task_id="c", depends_on=["a", "b"], trigger_rule=TriggerRule.ALL_DONE),
]
FIRST = {"a": Phase.RELEASED, "b": Phase.WAITING, "c": Phase.WAITING}
A_DONE = {"a": Phase.SUCCEEDED, "b": Phase.RELEASED, "c": Phase.WAITING}
ALL_DONE = {"a": Phase.SUCCEEDED, "b": Phase.SUCCEEDED, "c": Phase.SUCCEEDED}


class WorkflowStore(JobStore, WorkflowRuns, Protocol):
    """What the `store` fixture hands these cases: both stores have the workflow runs' port."""


def workflows(store: JobStore) -> WorkflowStore:
    return cast(WorkflowStore, store)


def a_workflow(job_id: str = "wf", **fields: Any) -> Job:
    """A WORKFLOW job (every minute, one run at a time) with the tasks of `NODES`."""
    tasks = [
        {
            "task_id": node.task_id,
            "target": {"type": "HTTP", "url": f"https://example.com/{node.task_id}"},
            "depends_on": node.depends_on,
            "trigger_rule": node.trigger_rule,
        }
        for node in NODES
    ]
    return a_job(job_id, kind=JobKind.WORKFLOW, target=None, tasks=tasks, **fields)


def a_state() -> WorkflowState:
    return WorkflowState(graph=NODES, phases=FIRST)


def started_workflow_run(
    store: WorkflowStore, *, one_off: bool = False, in_slot: bool = False, owner: str = "w1"
) -> tuple[Job, Run]:
    """A workflow's firing at `AT` claimed and started by `owner` (in a running slot with
    `in_slot`). `one_off`: the workflow's only firing, so its run's end may complete it."""
    workflow = a_workflow(schedule=ScheduleSpec(at=AT), next_fire_at=AT) if one_off else a_workflow()
    assert store.put_job_if_absent(workflow)
    claimed = store.claim_if_unchanged(
        workflow, a_run(workflow, AT, due_at=AT + timedelta(seconds=30)), None if one_off else AT + MINUTE, T0
    )
    assert claimed is not None
    if in_slot:
        read = store.get_job(workflow.job_id)
        assert read is not None
        running = store.start_run_in_slot(
            claimed, slots_as_read(read, claimed.scheduled_for_ms), AT, AT + LEASE, owner
        )
    else:
        running = store.start_run_if_waiting(claimed, AT, AT + LEASE, owner)
    assert running is not None
    return workflow, running


def begun_workflow_run(store: WorkflowStore, **options: Any) -> tuple[Job, Run]:
    workflow, running = started_workflow_run(store, **options)
    begun = store.begin_workflow_run_if_held(running, "w1", a_state(), TIMER)
    assert begun is not None
    return workflow, begun


def read_run(store: JobStore, run: Run) -> Run:
    read = store.get_run(run.job_id, run.scheduled_for_ms)
    assert read is not None
    return read


def read_job(store: JobStore, job: Job) -> Job:
    read = store.get_job(job.job_id)
    assert read is not None
    return read


# --- begin ------------------------------------------------------------------------------


def test_a_workflow_run_is_begun_by_the_attempt_its_owner_holds_once(store: JobStore) -> None:
    wf = workflows(store)
    workflow, running = started_workflow_run(wf)
    assert wf.begin_workflow_run_if_held(running, "w2", a_state(), TIMER) is None  # not its lease
    stale = running.model_copy(update={"attempt": 2})
    assert wf.begin_workflow_run_if_held(stale, "w1", a_state(), TIMER) is None  # not its attempt
    assert read_run(wf, running).workflow is None

    begun = wf.begin_workflow_run_if_held(running, "w1", a_state(), TIMER)
    assert begun is not None
    read = read_run(wf, running)
    for seen in (begun, read):
        assert seen.workflow is not None
        assert (seen.workflow.graph, seen.workflow.phases, seen.workflow.version) == (NODES, FIRST, 1)
        assert (seen.status, seen.lease_until, seen.due_at, seen.started_at) == (
            RunStatus.RUNNING,
            None,
            TIMER,
            AT,
        )
    assert due_runs(wf, workflow, TIMER, runs_until=TIMER) == ([to_ms(AT)], 0)  # watched at its timer
    assert wf.begin_workflow_run_if_held(running, "w1", a_state(), LATER) is None  # begun already
    assert read_run(wf, running).due_at == TIMER


def test_a_run_that_holds_its_phases_already_is_not_begun_again(store: JobStore) -> None:
    """The condition that the run was never begun holds on its own, not only through the
    lease the begin gives up: an attempt held by its owner of a run with phases is refused."""
    wf = workflows(store)
    workflow = a_workflow()
    wf.put_job_if_absent(workflow)
    phased = a_run(workflow, T0, trigger=Trigger.MANUAL, workflow=a_state())
    assert wf.put_run_if_absent(phased, T0)
    running = wf.start_run_if_waiting(phased, AT, AT + LEASE, "w1")
    assert running is not None
    assert wf.begin_workflow_run_if_held(running, "w1", a_state(), TIMER) is None
    read = read_run(wf, phased)
    assert (read.lease_until, read.due_at) == (AT + LEASE, None)  # as the start left it


def test_a_begun_run_keeps_the_running_slot_its_attempt_took(store: JobStore) -> None:
    wf = workflows(store)
    workflow, begun = begun_workflow_run(wf, in_slot=True)
    assert begun.holds_slot
    assert read_run(wf, begun).holds_slot
    assert read_job(wf, workflow).running_count == 1


# --- advance ----------------------------------------------------------------------------


def test_a_workflow_run_moves_on_only_from_the_version_read(store: JobStore) -> None:
    wf = workflows(store)
    workflow, begun = begun_workflow_run(wf)
    assert wf.advance_workflow_run_if_unchanged(begun, A_DONE, AT, timer=LATER)
    moved = read_run(wf, begun)
    assert moved.workflow is not None
    assert (moved.workflow.phases, moved.workflow.version, moved.workflow.graph) == (A_DONE, 2, NODES)
    assert (moved.status, moved.due_at, moved.finished_at) == (RunStatus.RUNNING, LATER, None)
    assert due_runs(wf, workflow, LATER, runs_until=LATER) == ([to_ms(AT)], 0)

    # Another join computed from version 1 lost: nothing of it is written.
    assert not wf.advance_workflow_run_if_unchanged(begun, ALL_DONE, AT, timer=TIMER)
    assert not wf.advance_workflow_run_if_unchanged(begun, ALL_DONE, AT, end=RunStatus.SUCCEEDED)
    assert read_run(wf, begun) == moved

    assert wf.advance_workflow_run_if_unchanged(moved, FIRST, AT, timer=TIMER)
    again = read_run(wf, begun)
    assert again.workflow is not None
    assert (again.workflow.phases, again.workflow.version, again.due_at) == (FIRST, 3, TIMER)


def test_a_workflow_run_that_ended_does_not_move_on(store: JobStore) -> None:
    wf = workflows(store)
    _, begun = begun_workflow_run(wf)
    assert wf.advance_workflow_run_if_unchanged(begun, ALL_DONE, AT, end=RunStatus.SUCCEEDED)
    ended = read_run(wf, begun)
    # At its version as it is now, but no longer RUNNING.
    as_if_running = ended.model_copy(update={"status": RunStatus.RUNNING})
    assert not wf.advance_workflow_run_if_unchanged(as_if_running, A_DONE, LATER, timer=LATER)
    assert not wf.advance_workflow_run_if_unchanged(as_if_running, A_DONE, LATER, end=RunStatus.FAILED)
    assert read_run(wf, begun) == ended


def test_an_end_ends_the_run_and_gives_back_the_slot_it_holds(store: JobStore) -> None:
    wf = workflows(store)
    workflow, begun = begun_workflow_run(wf, in_slot=True)
    at = AT + MINUTE
    assert wf.advance_workflow_run_if_unchanged(begun, ALL_DONE, at, end=RunStatus.FAILED)
    ended = read_run(wf, begun)
    assert ended.workflow is not None
    assert (ended.workflow.phases, ended.workflow.version) == (ALL_DONE, 2)
    assert (ended.status, ended.finished_at, ended.due_at, ended.lease_until, ended.holds_slot) == (
        RunStatus.FAILED,
        at,
        None,
        None,
        False,
    )
    assert due_runs(wf, workflow, TIMER, runs_until=TIMER) == ([], 0)  # its timer went
    job = read_job(wf, workflow)
    assert (job.running_count, job.status) == (0, JobStatus.SCHEDULED)  # not asked to complete it


def test_an_end_completes_the_workflow_when_asked_and_it_has_nothing_left_to_fire(store: JobStore) -> None:
    wf = workflows(store)
    workflow, begun = begun_workflow_run(wf, one_off=True, in_slot=True)
    assert read_job(wf, workflow).running_count == 1
    assert wf.advance_workflow_run_if_unchanged(
        begun, ALL_DONE, AT + MINUTE, end=RunStatus.SUCCEEDED, complete_job=True
    )
    job = read_job(wf, workflow)
    assert (job.status, job.running_count, job.version) == (JobStatus.COMPLETED, 0, workflow.version + 2)
    assert read_run(wf, begun).status is RunStatus.SUCCEEDED


def test_an_end_without_a_slot_completes_only_a_workflow_with_nothing_left_to_fire(store: JobStore) -> None:
    wf = workflows(store)
    workflow, begun = begun_workflow_run(wf)  # fires again at AT + 1 minute
    assert not begun.holds_slot
    assert wf.advance_workflow_run_if_unchanged(
        begun, ALL_DONE, AT, end=RunStatus.SUCCEEDED, complete_job=True
    )
    job = read_job(wf, workflow)
    assert (job.status, job.running_count) == (JobStatus.SCHEDULED, 0)

    once = a_workflow("wf-once", schedule=ScheduleSpec(at=AT), next_fire_at=AT)
    assert wf.put_job_if_absent(once)
    claimed = wf.claim_if_unchanged(once, a_run(once, AT), None, T0)
    assert claimed is not None
    running = wf.start_run_if_waiting(claimed, AT, AT + LEASE, "w1")
    assert running is not None
    last = wf.begin_workflow_run_if_held(running, "w1", a_state(), TIMER)
    assert last is not None
    assert wf.advance_workflow_run_if_unchanged(
        last, ALL_DONE, AT, end=RunStatus.CANCELLED, complete_job=True
    )
    done = read_job(wf, once)
    assert (done.status, done.running_count) == (JobStatus.COMPLETED, 0)
    assert read_run(wf, last).status is RunStatus.CANCELLED


# --- reopen -----------------------------------------------------------------------------


def test_an_ended_workflow_run_reopens_once_from_the_status_and_version_read(store: JobStore) -> None:
    wf = workflows(store)
    workflow, begun = begun_workflow_run(wf, in_slot=True)
    failed_phases = {"a": Phase.SUCCEEDED, "b": Phase.FAILED, "c": Phase.SUCCEEDED}
    assert wf.advance_workflow_run_if_unchanged(begun, failed_phases, AT, end=RunStatus.FAILED)
    ended = read_run(wf, begun)
    assert read_job(wf, workflow).running_count == 0

    assert ended.workflow is not None
    older = ended.model_copy(update={"workflow": ended.workflow.model_copy(update={"version": 1})})
    assert not wf.reopen_workflow_run_if_unchanged(older, A_DONE, LATER)  # how it ended, an older version
    assert not wf.reopen_workflow_run_if_unchanged(begun, A_DONE, LATER)  # as it was before its end
    other_status = ended.model_copy(update={"status": RunStatus.SUCCEEDED})
    assert not wf.reopen_workflow_run_if_unchanged(other_status, A_DONE, LATER)  # not how it ended
    assert read_run(wf, begun) == ended

    retried = {"a": Phase.SUCCEEDED, "b": Phase.RELEASED, "c": Phase.WAITING}
    assert wf.reopen_workflow_run_if_unchanged(ended, retried, LATER)
    reopened = read_run(wf, begun)
    assert reopened.workflow is not None
    assert (reopened.workflow.phases, reopened.workflow.version, reopened.workflow.graph) == (
        retried,
        3,
        NODES,
    )
    assert (reopened.status, reopened.finished_at, reopened.due_at, reopened.holds_slot) == (
        RunStatus.RUNNING,
        None,
        LATER,
        False,
    )
    assert read_job(wf, workflow).running_count == 0  # it takes no slot again
    assert due_runs(wf, workflow, LATER, runs_until=LATER) == ([to_ms(AT)], 0)

    assert not wf.reopen_workflow_run_if_unchanged(ended, retried, LATER)  # once
    # Running again, it is not reopened as if it had ended, even at its version.
    as_if_failed = reopened.model_copy(update={"status": RunStatus.FAILED})
    assert not wf.reopen_workflow_run_if_unchanged(as_if_failed, retried, TIMER)
    # Its end gave its slot back: read as holding one, it does not end (nothing given back).
    as_if_in_slot = reopened.model_copy(update={"holds_slot": True})
    assert not wf.advance_workflow_run_if_unchanged(as_if_in_slot, ALL_DONE, LATER, end=RunStatus.SUCCEEDED)
    assert read_run(wf, begun) == reopened
    # It moves on, and ends, from its new version.
    assert wf.advance_workflow_run_if_unchanged(reopened, ALL_DONE, LATER, end=RunStatus.SUCCEEDED)
    assert read_run(wf, begun).status is RunStatus.SUCCEEDED
    assert read_job(wf, workflow).running_count == 0


# --- task runs read together; a task's output ---------------------------------------------


def test_runs_are_read_together_in_the_order_asked_with_none_for_missing(store: JobStore) -> None:
    workflow = a_workflow()
    store.put_job_if_absent(workflow)
    task_a, task_b = (a_job(f"wf.{t}", kind=JobKind.TASK, schedule=None, next_fire_at=None) for t in "ab")
    for task in (task_a, task_b):
        store.put_job_if_absent(task)
    a1, a2, b1 = a_run(task_a, AT), a_run(task_a, LATER), a_run(task_b, AT, status=RunStatus.RUNNING)
    for run in (a1, a2, b1):
        assert store.put_run_if_absent(run, T0)
    refs = [
        (task_b.job_id, to_ms(AT)),
        ("no-such-job", to_ms(AT)),
        (task_a.job_id, to_ms(LATER)),
        (task_b.job_id, to_ms(LATER)),  # its job, not this run
        (task_a.job_id, to_ms(AT)),
    ]
    read = store.get_runs(refs)
    assert [(r.run_id, r.status) if r else None for r in read] == [
        (b1.run_id, RunStatus.RUNNING),
        None,
        (a2.run_id, RunStatus.PENDING),
        None,
        (a1.run_id, RunStatus.PENDING),
    ]
    assert read == [store.get_run(job_id, ms) for job_id, ms in refs]
    assert store.get_runs([]) == []


def test_runs_read_together_include_a_run_kept_on_its_jobs_item(store: JobStore) -> None:
    """A one-off's last firing is claimed onto its job's item in the DynamoDB store
    (`Run.with_job`); the fake keeps every run apart, where it is read all the same."""
    once = a_job("once", schedule=ScheduleSpec(at=AT), next_fire_at=AT)
    assert store.put_job_if_absent(once)
    kept = store.claim_if_unchanged(once, a_run(once, AT, due_at=TIMER), None, T0)
    assert kept is not None
    manual = a_run(once, T0, trigger=Trigger.MANUAL)
    assert store.put_run_if_absent(manual, T0)
    running = store.start_run_if_waiting(kept, AT, AT + LEASE, "w1")
    assert running is not None

    read = store.get_runs([(once.job_id, to_ms(LATER)), (once.job_id, to_ms(AT)), (once.job_id, to_ms(T0))])
    assert read[0] is None  # a time the job's item does not keep
    assert read[1] is not None
    assert read[2] is not None
    assert (read[1].run_id, read[1].status, read[1].trigger, read[1].started_at, read[1].lease_until) == (
        kept.run_id,
        RunStatus.RUNNING,
        Trigger.SCHEDULE,
        AT,
        AT + LEASE,
    )
    assert (read[2].run_id, read[2].trigger) == (manual.run_id, Trigger.MANUAL)
    assert read[1] == store.get_run(once.job_id, to_ms(AT))


def test_the_same_run_asked_twice_is_read_twice(store: JobStore) -> None:
    job = a_job()
    store.put_job_if_absent(job)
    run = a_run(job, T0, trigger=Trigger.MANUAL)
    store.put_run_if_absent(run, T0)
    ref = (job.job_id, run.scheduled_for_ms)
    read = store.get_runs([ref, (job.job_id, 1), ref])
    assert [r.run_id if r else None for r in read] == [run.run_id, None, run.run_id]


def test_a_finished_task_run_keeps_its_output(store: JobStore) -> None:
    task = a_job("wf.a", kind=JobKind.TASK, schedule=None, next_fire_at=None)
    store.put_job_if_absent(task)
    with_output, without = a_run(task, AT), a_run(task, LATER)
    output = '{"rows":3,"names":["é","b"]}'
    for run, answer in ((with_output, output), (without, None)):
        store.put_run_if_absent(run, T0)
        running = store.start_run_if_waiting(run, AT, AT + LEASE, "w1")
        assert running is not None
        assert store.finish_run_if_held(
            running, "w1", RunStatus.SUCCEEDED, AT, response_code=200, output=answer
        )
    read = store.get_runs([(task.job_id, to_ms(AT)), (task.job_id, to_ms(LATER))])
    assert [r.output if r else "missing" for r in read] == [output, None]
    assert read_run(store, with_output).output == output


def test_a_workflow_run_begun_by_a_later_attempt_ends_as_the_adapter_writes_it(store: JobStore) -> None:
    """The first attempt's worker died before the begin; the next attempt begins the run. Its
    end removes its timer and slot only: its retry's time stays as it was (as the adapter's
    end of a workflow run writes it; a task run's end, `finish_run_if_held`, removes it)."""
    wf = workflows(store)
    workflow, running = started_workflow_run(wf)
    retry_at = AT + LEASE + MINUTE
    taken = wf.take_over_expired_lease(running, AT + LEASE, RunStatus.RETRYING, "lost", retry_at, retry_at)
    assert taken is not None
    again = wf.start_run_if_waiting(read_run(wf, running), retry_at, retry_at + LEASE, "w2")
    assert again is not None
    assert wf.begin_workflow_run_if_held(running, "w2", a_state(), TIMER) is None  # attempt 1's
    begun = wf.begin_workflow_run_if_held(again, "w2", a_state(), LATER)
    assert begun is not None
    assert (begun.attempt, begun.next_attempt_at, begun.due_at) == (2, retry_at, LATER)
    assert wf.advance_workflow_run_if_unchanged(begun, ALL_DONE, LATER, end=RunStatus.SUCCEEDED)
    ended = read_run(wf, begun)
    assert (ended.status, ended.attempt, ended.error, ended.due_at) == (RunStatus.SUCCEEDED, 2, "lost", None)
    assert ended.next_attempt_at == retry_at
    assert read_job(wf, workflow).running_count == 0


def test_a_started_workflow_run_not_begun_is_cancelled_once_and_gives_its_slot_back(store: JobStore) -> None:
    wf = workflows(store)
    workflow, running = started_workflow_run(wf, in_slot=True)
    assert wf.cancel_started_workflow_run_if_not_begun(running, LATER)
    assert not wf.cancel_started_workflow_run_if_not_begun(running, LATER)  # ended: once only
    cancelled = store.get_run(workflow.job_id, running.scheduled_for_ms)
    assert cancelled is not None
    assert (cancelled.status, cancelled.finished_at, cancelled.due_at) == (RunStatus.CANCELLED, LATER, None)
    read = store.get_job(workflow.job_id)
    assert read is not None
    assert read.running_count == 0
    assert wf.begin_workflow_run_if_held(running, "w1", a_state(), TIMER) is None  # its worker finds it ended


def test_a_begun_workflow_run_is_not_cancelled_as_one_not_begun(store: JobStore) -> None:
    wf = workflows(store)
    workflow, running = started_workflow_run(wf)
    begun = wf.begin_workflow_run_if_held(running, "w1", a_state(), TIMER)
    assert begun is not None
    assert not wf.cancel_started_workflow_run_if_not_begun(running, LATER)
    read = store.get_run(workflow.job_id, running.scheduled_for_ms)
    assert read is not None
    assert read.status is RunStatus.RUNNING
