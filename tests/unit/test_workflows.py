"""Workflows' pure rules: the graph check, the trigger rules, how a run moves on."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from scheduler_core.domain.api_shapes import TaskSpec, WorkflowCreate
from scheduler_core.domain.vocabulary import TaskStatus, TriggerRule, WorkflowRunStatus
from scheduler_core.domain.workflows import (
    ENDED,
    Graph,
    Phase,
    begin,
    cancelled,
    decide,
    graph_errors,
    retried,
    run_status,
    task_ended,
    task_status,
)

R = TriggerRule
P = Phase


@dataclass
class T:
    task_id: str
    depends_on: list[str] = field(default_factory=list)
    trigger_rule: TriggerRule = TriggerRule.ALL_SUCCESS


def diamond() -> list[T]:
    return [T("a"), T("b", ["a"]), T("c", ["a"]), T("d", ["b", "c"])]


# --- the graph check ---------------------------------------------------------------------


def test_a_valid_graph_has_no_errors() -> None:
    assert graph_errors(diamond()) == []


def test_a_repeated_task_id_names_the_second_one() -> None:
    errors = graph_errors([T("a"), T("b"), T("a")])
    assert errors == [
        {
            "field": "tasks[2].task_id",
            "message": "'a' is already tasks[0].task_id; task ids are unique within a workflow",
        }
    ]


def test_unknown_self_and_repeated_dependencies_name_their_place() -> None:
    errors = graph_errors([T("a"), T("b", ["a", "zz", "b", "a"])])
    assert [error["field"] for error in errors] == [
        "tasks[1].depends_on[1]",
        "tasks[1].depends_on[2]",
        "tasks[1].depends_on[3]",
    ]
    assert "no task 'zz'" in errors[0]["message"]
    assert "cannot depend on itself" in errors[1]["message"]
    assert "listed twice" in errors[2]["message"]


def test_a_cycle_is_named_by_the_first_task_on_it_with_its_path() -> None:
    tasks = [T("start"), T("a", ["c", "start"]), T("b", ["a"]), T("c", ["b"])]
    assert graph_errors(tasks) == [
        {
            "field": "tasks[1].depends_on",
            "message": "closes a cycle: a → b → c → a; a workflow's dependencies must not loop",
        }
    ]


def test_a_two_task_cycle() -> None:
    [error] = graph_errors([T("x", ["y"]), T("y", ["x"])])
    assert error["field"] == "tasks[0].depends_on"
    assert "x → y → x" in error["message"]


def test_more_than_a_thousand_dependencies_is_refused() -> None:
    tasks = [T(f"t{i}", [f"t{j}" for j in range(i)]) for i in range(47)]  # 1,081 edges
    [error] = graph_errors(tasks)
    assert error["field"] == "tasks"
    assert "1081 dependencies" in error["message"]


def test_graph_order_puts_each_task_after_its_upstream_and_keeps_the_request_order_otherwise() -> None:
    graph = Graph.of([T("d", ["b", "c"]), T("c", ["a"]), T("b", ["a"]), T("a")])
    assert graph.order == ("a", "c", "b", "d")
    assert graph.downstream["a"] == ("c", "b")
    assert graph.below("a") == ["c", "b", "d"]


# --- the rules ---------------------------------------------------------------------------

S, F, UF, SK, W, RE, C = (
    P.SUCCEEDED,
    P.FAILED,
    P.UPSTREAM_FAILED,
    P.SKIPPED,
    P.WAITING,
    P.RELEASED,
    P.CANCELLED,
)


@pytest.mark.parametrize(
    ("rule", "upstream", "fate"),
    [
        (R.ALL_SUCCESS, [S, S], RE),
        (R.ALL_SUCCESS, [S, RE], W),
        (R.ALL_SUCCESS, [F, RE], UF),  # decided at the first failure
        (R.ALL_SUCCESS, [UF, S], UF),
        (R.ALL_SUCCESS, [SK, S], SK),
        (R.ALL_DONE, [F, UF, SK, S], RE),
        (R.ALL_DONE, [F, RE], W),
        (R.ONE_SUCCESS, [S, RE], RE),  # does not wait for the others
        (R.ONE_SUCCESS, [F, RE], W),
        (R.ONE_SUCCESS, [F, SK], UF),
        (R.ONE_SUCCESS, [SK, SK], SK),
        (R.ONE_FAILED, [F, RE], RE),
        (R.ONE_FAILED, [UF, W], RE),
        (R.ONE_FAILED, [S, SK], SK),
        (R.ONE_FAILED, [S, RE], W),
        (R.NONE_FAILED, [S, SK], RE),
        (R.NONE_FAILED, [S, RE], W),
        (R.NONE_FAILED, [F, RE], UF),
        (R.ALL_DONE, [C, S], C),  # nothing starts after a cancel
        (R.ONE_FAILED, [], RE),
    ],
)
def test_decide(rule: TriggerRule, upstream: list[Phase], fate: Phase) -> None:
    assert decide(rule, upstream) is fate


# --- a run moving on ---------------------------------------------------------------------


def test_a_diamond_joins_once_both_branches_succeeded() -> None:
    graph = Graph.of(diamond())
    step = begin(graph)
    assert step.released == ("a",)
    step = task_ended(graph, step.phases, "a", S)
    assert step.released == ("b", "c")
    step = task_ended(graph, step.phases, "c", S)
    assert step.released == ()  # d waits for b
    step = task_ended(graph, step.phases, "b", S)
    assert step.released == ("d",)
    assert run_status(step.phases) is WorkflowRunStatus.RUNNING
    step = task_ended(graph, step.phases, "d", S)
    assert run_status(step.phases) is WorkflowRunStatus.SUCCEEDED


def test_an_end_told_twice_changes_nothing() -> None:
    graph = Graph.of(diamond())
    after_a = task_ended(graph, begin(graph).phases, "a", S)
    again = task_ended(graph, after_a.phases, "a", S)
    assert not again.changed
    assert again.phases == after_a.phases


def test_a_failure_fails_what_needs_it_and_runs_cleanup_and_alerts() -> None:
    tasks = [
        T("a"),
        T("load", ["a"], R.NONE_FAILED),
        T("report", ["load"]),
        T("cleanup", ["a"], R.ALL_DONE),
        T("alert", ["a", "load"], R.ONE_FAILED),
    ]
    graph = Graph.of(tasks)
    step = task_ended(graph, begin(graph).phases, "a", F)
    assert step.decided == {"a": F, "load": UF, "report": UF}
    assert step.released == ("cleanup", "alert")
    step = task_ended(graph, step.phases, "cleanup", S)
    step = task_ended(graph, step.phases, "alert", S)
    assert run_status(step.phases) is WorkflowRunStatus.FAILED


def test_a_skip_passes_down_all_success_but_not_none_failed() -> None:
    tasks = [
        T("a"),
        T("only_on_failure", ["a"], R.ONE_FAILED),
        T("after", ["only_on_failure"]),
        T("join", ["a", "only_on_failure"], R.NONE_FAILED),
    ]
    graph = Graph.of(tasks)
    step = task_ended(graph, begin(graph).phases, "a", S)
    assert step.decided == {"a": S, "only_on_failure": SK, "after": SK}
    assert step.released == ("join",)
    step = task_ended(graph, step.phases, "join", S)
    assert run_status(step.phases) is WorkflowRunStatus.SUCCEEDED  # skipped tasks are not failures


def test_a_retried_task_brings_back_what_its_failure_decided() -> None:
    tasks = [T("a"), T("b", ["a"]), T("c", ["b"]), T("cleanup", ["a"], R.ALL_DONE)]
    graph = Graph.of(tasks)
    step = task_ended(graph, begin(graph).phases, "a", F)
    step = task_ended(graph, step.phases, "cleanup", S)
    assert run_status(step.phases) is WorkflowRunStatus.FAILED
    step = retried(graph, step.phases, "a")
    assert step.released == ("a",)
    assert step.phases["b"] is W
    assert step.phases["c"] is W
    assert step.phases["cleanup"] is S  # it ran: it keeps its result, it does not run again
    assert run_status(step.phases) is WorkflowRunStatus.RUNNING
    step = task_ended(graph, step.phases, "a", S)
    assert step.released == ("b",)


def test_cancel_stops_what_waits() -> None:
    graph = Graph.of(diamond())
    step = task_ended(graph, begin(graph).phases, "a", S)
    step = cancelled(step.phases)
    assert step.decided == {"d": C}
    assert run_status(step.phases) is WorkflowRunStatus.RUNNING  # b and c are still out
    step = task_ended(graph, step.phases, "b", S)
    step = task_ended(graph, step.phases, "c", C)
    assert run_status(step.phases) is WorkflowRunStatus.CANCELLED


def test_task_status_shows_a_released_tasks_run() -> None:
    assert task_status(P.WAITING) is TaskStatus.PENDING
    assert task_status(P.RELEASED) is TaskStatus.PENDING
    assert task_status(P.RELEASED, TaskStatus.RETRYING) is TaskStatus.RETRYING
    assert task_status(P.UPSTREAM_FAILED) is TaskStatus.UPSTREAM_FAILED


# --- random DAGs, random outcomes, random order --------------------------------------------


@st.composite
def dags(draw: st.DrawFn) -> list[T]:
    size = draw(st.integers(1, 30))
    tasks = []
    for index in range(size):
        parents = draw(st.lists(st.integers(0, index - 1), unique=True, max_size=4)) if index else []
        tasks.append(T(f"t{index}", [f"t{parent}" for parent in parents], draw(st.sampled_from(list(R)))))
    return draw(st.permutations(tasks))


def ran(rule: TriggerRule, upstream: list[Phase]) -> bool:
    """The rules again, written from their end state: whether a task whose upstream tasks
    ended so should have run."""
    failed = [phase in (F, UF) for phase in upstream]
    if not upstream:
        return True
    return {
        R.ALL_SUCCESS: all(phase is S for phase in upstream),
        R.ALL_DONE: True,
        R.ONE_SUCCESS: any(phase is S for phase in upstream),
        R.ONE_FAILED: any(failed),
        R.NONE_FAILED: not any(failed),
    }[rule]


@settings(max_examples=300, deadline=None)
@given(tasks=dags(), data=st.data())
def test_random_workflows_run_each_task_at_most_once_by_its_rule_and_end(
    tasks: list[T], data: st.DataObject
) -> None:
    graph = Graph.of(tasks)
    step = begin(graph)
    phases = dict(step.phases)
    out = list(step.released)
    releases = dict.fromkeys(out, 1)
    while out:
        task = out.pop(data.draw(st.integers(0, len(out) - 1)))
        outcome = data.draw(st.sampled_from([S, F]))
        for parent in graph.upstream[task]:
            if graph.rules[task] in (R.ALL_SUCCESS, R.ALL_DONE, R.NONE_FAILED):
                assert phases[parent] in ENDED, f"{task} ran before {parent} ended"
        step = task_ended(graph, phases, task, outcome)
        if data.draw(st.booleans()):  # the same end told again (a duplicate message)
            assert not task_ended(graph, step.phases, task, outcome).changed
        phases = dict(step.phases)
        for released in step.released:
            releases[released] = releases.get(released, 0) + 1
        out.extend(step.released)
    assert all(count == 1 for count in releases.values())
    assert run_status(phases) is not WorkflowRunStatus.RUNNING
    for task in graph.order:
        upstream = [phases[parent] for parent in graph.upstream[task]]
        assert (phases[task] in (S, F)) == ran(graph.rules[task], upstream), (task, phases[task], upstream)


@settings(max_examples=150, deadline=None)
@given(tasks=dags(), data=st.data())
def test_random_workflows_with_retries_and_cancels_still_end(tasks: list[T], data: st.DataObject) -> None:
    graph = Graph.of(tasks)
    step = begin(graph)
    phases, out = dict(step.phases), list(step.released)
    for _ in range(200):
        failed = [task for task, phase in phases.items() if phase is F]
        if failed and data.draw(st.integers(0, 3)) == 0:
            step = retried(graph, phases, data.draw(st.sampled_from(failed)))
        elif out and data.draw(st.integers(0, 20)) == 0:
            step = cancelled(phases)
        elif out:
            task = out.pop(data.draw(st.integers(0, len(out) - 1)))
            step = task_ended(graph, phases, task, data.draw(st.sampled_from([S, F, C])))
        else:
            break
        assert not set(step.released) & set(out), "a task released while it was out"
        phases = dict(step.phases)
        out.extend(step.released)
    while out:  # whatever is out ends; the run must then be over
        phases = dict(task_ended(graph, phases, out.pop(), S).phases)
    assert run_status(phases) is not WorkflowRunStatus.RUNNING
    assert not {Phase.WAITING, Phase.RELEASED} & set(phases.values())


# --- the request ---------------------------------------------------------------------------

HTTP = {"type": "HTTP", "url": "https://example.com/hook"}


def test_a_task_payload_leaves_upstream_free() -> None:
    with pytest.raises(ValidationError) as caught:
        TaskSpec.model_validate({"task_id": "a", "target": HTTP, "payload": {"upstream": 1}})
    assert caught.value.errors()[0]["loc"] == ("payload",)


@pytest.mark.parametrize("task_id", ["", "a" * 65, "has space", "dot.ted", "colon:"])
def test_a_task_id_is_1_to_64_safe_characters(task_id: str) -> None:
    with pytest.raises(ValidationError):
        TaskSpec.model_validate({"task_id": task_id, "target": HTTP})


def test_a_workflow_needs_one_to_a_hundred_tasks() -> None:
    with pytest.raises(ValidationError):
        WorkflowCreate.model_validate({"name": "w", "tasks": []})
    tasks = [{"task_id": f"t{i}", "target": HTTP} for i in range(101)]
    with pytest.raises(ValidationError):
        WorkflowCreate.model_validate({"name": "w", "tasks": tasks})
    made = WorkflowCreate.model_validate({"name": "w", "tasks": tasks[:100]})
    assert made.schedule is None
    assert made.tasks[0].trigger_rule is R.ALL_SUCCESS
