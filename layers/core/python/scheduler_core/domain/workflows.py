"""Workflows' rules, pure: a workflow's tasks as a graph (checked: no unknown, repeated or
self dependency, no cycle, within the limits), and how a workflow run moves on when a task
ends: which tasks its end releases, which it decides without a run (UPSTREAM_FAILED,
SKIPPED), when the run is over and how it ended. docs/concepts/workflows.md says it for
users; the store writes each step with a condition on the state it was computed from.

A task's phase in a run (`Phase`) is what the workflow run itself records: WAITING for its
upstream tasks, RELEASED (its run made and sent; the run item then says whether it is
pending, running or retrying), or how it ended.
"""

from __future__ import annotations

import graphlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

from pydantic import BaseModel

from scheduler_core.domain.errors import field_error
from scheduler_core.domain.vocabulary import (
    MAX_WORKFLOW_EDGES,
    Priority,
    TaskStatus,
    TriggerRule,
    WorkflowRunStatus,
)


class Phase(StrEnum):
    WAITING = "WAITING"
    RELEASED = "RELEASED"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    UPSTREAM_FAILED = "UPSTREAM_FAILED"
    SKIPPED = "SKIPPED"


ENDED = frozenset({Phase.SUCCEEDED, Phase.FAILED, Phase.CANCELLED, Phase.UPSTREAM_FAILED, Phase.SKIPPED})
# What a task's run can end as (the rest are decided by the rules).
RUN_OUTCOMES = frozenset({Phase.SUCCEEDED, Phase.FAILED, Phase.CANCELLED})
_FAILED = frozenset({Phase.FAILED, Phase.UPSTREAM_FAILED})


class TaskNode(BaseModel):
    """A task as its workflow run's graph holds it: its place in the graph and the queue its
    runs go on, not its target."""

    task_id: str
    depends_on: list[str] = []
    trigger_rule: TriggerRule = TriggerRule.ALL_SUCCESS
    priority: Priority = Priority.NORMAL


class WorkflowState(BaseModel):
    """What a workflow run records once begun: its tasks' graph as it was then (a change of
    the workflow applies to later runs), each task's phase, and a version every change of
    the phases is conditioned on (the join: a conditional write, not a read-then-write)."""

    graph: list[TaskNode]
    phases: dict[str, Phase]
    version: int = 1
    # Cancelled (`cancelled`): its tasks under way end as they end, and it ends CANCELLED;
    # a task's later attempts are not delivered.
    cancelled: bool = False


class TaskLike(Protocol):
    @property
    def task_id(self) -> str: ...

    @property
    def depends_on(self) -> list[str]: ...

    @property
    def trigger_rule(self) -> TriggerRule: ...


def graph_errors(tasks: Sequence[TaskLike]) -> list[dict[str, str]]:
    """What is wrong with a workflow's tasks as a graph, each naming its field: a repeated
    `task_id`, a dependency on no task of the workflow, on itself or listed twice, more than
    MAX_WORKFLOW_EDGES dependencies, a cycle (named by the `depends_on` that closes it, with
    its path `a → b → a`: each task there runs before the next). Empty: a valid DAG."""
    errors: list[dict[str, str]] = []
    first_index: dict[str, int] = {}
    for index, task in enumerate(tasks):
        if task.task_id in first_index:
            errors.append(
                field_error(
                    f"tasks[{index}].task_id",
                    f"'{task.task_id}' is already tasks[{first_index[task.task_id]}].task_id; "
                    "task ids are unique within a workflow",
                )
            )
        else:
            first_index[task.task_id] = index
    for index, task in enumerate(tasks):
        seen: set[str] = set()
        for position, upstream in enumerate(task.depends_on):
            where = f"tasks[{index}].depends_on[{position}]"
            if upstream == task.task_id:
                errors.append(field_error(where, f"task '{upstream}' cannot depend on itself"))
            elif upstream not in first_index:
                errors.append(field_error(where, f"no task '{upstream}' in this workflow"))
            elif upstream in seen:
                errors.append(field_error(where, f"'{upstream}' is listed twice"))
            seen.add(upstream)
    edges = sum(len(set(task.depends_on)) for task in tasks)
    if edges > MAX_WORKFLOW_EDGES:
        errors.append(
            field_error(
                "tasks", f"{edges} dependencies in all; a workflow may have at most {MAX_WORKFLOW_EDGES}"
            )
        )
    if errors:
        return errors
    cycle = _a_cycle(tasks)
    if cycle:
        # Told from the task that comes first in the request, back to it.
        start = min(range(len(cycle) - 1), key=lambda at: first_index[cycle[at]])
        path = cycle[start:-1] + cycle[:start] + [cycle[start]]
        errors.append(
            field_error(
                f"tasks[{first_index[path[0]]}].depends_on",
                f"closes a cycle: {' → '.join(path)}; a workflow's dependencies must not loop",
            )
        )
    return errors


def _a_cycle(tasks: Sequence[TaskLike]) -> list[str]:
    """One cycle of the graph (each task an upstream of the next, the first repeated last),
    or none: graphlib's, whose list runs predecessor → successor."""
    sorter = graphlib.TopologicalSorter({task.task_id: task.depends_on for task in tasks})
    try:
        sorter.prepare()
    except graphlib.CycleError as error:
        return list(error.args[1])
    return []


@dataclass(frozen=True)
class Graph:
    """A valid workflow's tasks: each one's upstream and downstream tasks and rule, and a
    topological order (every task after its upstream tasks, otherwise as given)."""

    upstream: Mapping[str, tuple[str, ...]]
    downstream: Mapping[str, tuple[str, ...]]
    rules: Mapping[str, TriggerRule]
    order: tuple[str, ...]

    @classmethod
    def of(cls, tasks: Sequence[TaskLike]) -> Graph:
        assert not graph_errors(tasks), "only a checked workflow makes a graph"
        upstream = {task.task_id: tuple(task.depends_on) for task in tasks}
        downstream: dict[str, list[str]] = {task.task_id: [] for task in tasks}
        for task in tasks:
            for parent in task.depends_on:
                downstream[parent].append(task.task_id)
        position = {task.task_id: index for index, task in enumerate(tasks)}
        order: list[str] = []
        sorter = graphlib.TopologicalSorter(upstream)
        sorter.prepare()
        while sorter.is_active():
            ready = sorted(sorter.get_ready(), key=position.__getitem__)
            order.extend(ready)
            sorter.done(*ready)
        return cls(
            upstream=upstream,
            downstream={task: tuple(children) for task, children in downstream.items()},
            rules={task.task_id: task.trigger_rule for task in tasks},
            order=tuple(order),
        )

    def below(self, task_id: str) -> list[str]:
        """Every task downstream of `task_id`, directly or not, in topological order."""
        found: set[str] = set()
        stack = list(self.downstream[task_id])
        while stack:
            task = stack.pop()
            if task not in found:
                found.add(task)
                stack.extend(self.downstream[task])
        return [task for task in self.order if task in found]


def decide(rule: TriggerRule, upstream: Iterable[Phase]) -> Phase:
    """A waiting task's fate from its direct upstream tasks' phases: RELEASED (its rule is
    met: it runs), WAITING (not decided yet), or UPSTREAM_FAILED / SKIPPED / CANCELLED (it
    never runs). A rule is decided as soon as it can be: ALL_SUCCESS fails at the first
    upstream failure, ONE_SUCCESS runs at the first success. A cancelled upstream task
    cancels what follows it (a cancel stops what has not started, cleanup tasks included)."""
    phases = list(upstream)
    if not phases:
        return Phase.RELEASED  # a first task runs when the workflow run starts
    if Phase.CANCELLED in phases:
        return Phase.CANCELLED
    done = all(phase in ENDED for phase in phases)
    failed = any(phase in _FAILED for phase in phases)
    succeeded = any(phase is Phase.SUCCEEDED for phase in phases)
    match rule:
        case TriggerRule.ALL_SUCCESS:
            if failed:
                return Phase.UPSTREAM_FAILED
            if Phase.SKIPPED in phases:
                return Phase.SKIPPED
            return Phase.RELEASED if done else Phase.WAITING
        case TriggerRule.ALL_DONE:
            return Phase.RELEASED if done else Phase.WAITING
        case TriggerRule.ONE_SUCCESS:
            if succeeded:
                return Phase.RELEASED
            if not done:
                return Phase.WAITING
            return Phase.SKIPPED if all(phase is Phase.SKIPPED for phase in phases) else Phase.UPSTREAM_FAILED
        case TriggerRule.ONE_FAILED:
            if failed:
                return Phase.RELEASED
            return Phase.SKIPPED if done else Phase.WAITING
        case TriggerRule.NONE_FAILED:
            if failed:
                return Phase.UPSTREAM_FAILED
            return Phase.RELEASED if done else Phase.WAITING


@dataclass(frozen=True)
class Step:
    """A workflow run's tasks after a change: `phases` in full, the tasks the change
    released (to be given a run and sent) and those it decided without one."""

    phases: Mapping[str, Phase]
    released: tuple[str, ...] = ()
    decided: Mapping[str, Phase] = field(default_factory=dict)

    @property
    def changed(self) -> bool:
        return bool(self.released or self.decided)

    def then(self, after: Step) -> Step:
        """This change followed by `after` (computed from this one's phases), as one."""
        return Step(after.phases, (*self.released, *after.released), {**self.decided, **after.decided})


def settle(graph: Graph, phases: Mapping[str, Phase]) -> Step:
    """Decide every waiting task that can be decided, in topological order (a task's fate
    depends only on tasks before it, so one pass reaches the fixpoint)."""
    now = dict(phases)
    released: list[str] = []
    decided: dict[str, Phase] = {}
    for task in graph.order:
        if now[task] is not Phase.WAITING:
            continue
        fate = decide(graph.rules[task], (now[parent] for parent in graph.upstream[task]))
        if fate is Phase.WAITING:
            continue
        now[task] = fate
        if fate is Phase.RELEASED:
            released.append(task)
        else:
            decided[task] = fate
    return Step(now, tuple(released), decided)


def begin(graph: Graph) -> Step:
    """A new workflow run: its first tasks (no upstream) released, the rest waiting."""
    return settle(graph, dict.fromkeys(graph.order, Phase.WAITING))


def task_ended(graph: Graph, phases: Mapping[str, Phase], task_id: str, outcome: Phase) -> Step:
    """The run of a released task ended (`outcome`: SUCCEEDED, FAILED or CANCELLED): record
    it and decide what follows. The end of a task that is not released (told twice, or
    cancelled meanwhile) changes nothing: an unchanged `Step`."""
    assert outcome in RUN_OUTCOMES, f"a task's run does not end {outcome}"
    if phases.get(task_id) is not Phase.RELEASED:
        return Step(dict(phases))
    step = settle(graph, {**phases, task_id: outcome})
    return Step(step.phases, step.released, {task_id: outcome, **step.decided})


def retried(graph: Graph, phases: Mapping[str, Phase], task_id: str) -> Step:
    """A FAILED task run again (Airflow's "clear"): it is released, and every task below it
    that the rules decided without a run (UPSTREAM_FAILED, SKIPPED) waits again and is
    decided afresh; a task below it that ran keeps its result and does not run again."""
    assert phases[task_id] is Phase.FAILED, "only a failed task is retried"
    again = {**phases, task_id: Phase.RELEASED}
    for task in graph.below(task_id):
        if again[task] in (Phase.UPSTREAM_FAILED, Phase.SKIPPED):
            again[task] = Phase.WAITING
    step = settle(graph, again)
    return Step(step.phases, (task_id, *step.released), step.decided)


def cancelled(phases: Mapping[str, Phase]) -> Step:
    """A cancelled workflow run: every waiting task is CANCELLED (decided). The released
    ones are the caller's to cancel where their runs have not started."""
    decided = {task: Phase.CANCELLED for task, phase in phases.items() if phase is Phase.WAITING}
    return Step({**phases, **decided}, (), decided)


def run_status(phases: Mapping[str, Phase], cancelled: bool = False) -> WorkflowRunStatus:
    """RUNNING while a task waits or is released; then CANCELLED if the run was cancelled or
    a task was, FAILED if one failed or could not run for its upstream's failure, else
    SUCCEEDED (every task ended, none FAILED or UPSTREAM_FAILED: leaves are not special)."""
    values = set(phases.values())
    if values & {Phase.WAITING, Phase.RELEASED}:
        return WorkflowRunStatus.RUNNING
    if cancelled or Phase.CANCELLED in values:
        return WorkflowRunStatus.CANCELLED
    if values & _FAILED:
        return WorkflowRunStatus.FAILED
    return WorkflowRunStatus.SUCCEEDED


def task_status(phase: Phase, run_status: TaskStatus | None = None) -> TaskStatus:
    """What the API shows for a task: a released task's run status (PENDING until its run
    is picked up), else its phase."""
    if phase is Phase.RELEASED:
        return run_status or TaskStatus.PENDING
    if phase is Phase.WAITING:
        return TaskStatus.PENDING
    return TaskStatus(phase.value)
