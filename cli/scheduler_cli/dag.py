"""How workflows and their runs are drawn: tables of workflows and workflow runs, and one
workflow run as a Rich tree of its DAG, each task under the task it waits for, with its state.
A task that waits for several tasks is drawn in full under the first of them and named under
the others."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from scheduler_cli.render import STATUS_STYLES, fields_table, new_table, schedule_text, styled, text


def workflows_table(page: Mapping[str, Any]) -> Table:
    table = new_table("WORKFLOW ID", "NAME", "STATUS", "SCHEDULE", "TASKS", "NEXT FIRE")
    for workflow in page["items"]:
        table.add_row(
            workflow["workflow_id"],
            workflow["name"],
            styled(workflow["status"]),
            schedule_text(workflow.get("schedule")),
            str(len(workflow.get("tasks") or [])),
            text(workflow.get("next_fire_at")),
        )
    return table


def workflow_table(workflow: Mapping[str, Any]) -> RenderableType:
    fields = fields_table(
        [
            ("workflow_id", workflow["workflow_id"]),
            ("name", workflow["name"]),
            ("status", styled(workflow["status"])),
            ("schedule", schedule_text(workflow.get("schedule"))),
            ("concurrency", workflow.get("concurrency")),
            ("misfire", workflow.get("misfire")),
            ("next_fire_at", workflow.get("next_fire_at")),
            ("paused_at", workflow.get("paused_at")),
            ("created_at", workflow.get("created_at")),
            ("version", workflow.get("version")),
        ]
    )
    tasks = new_table("TASK", "DEPENDS ON", "RULE", "TARGET")
    for task in workflow.get("tasks") or []:
        target = task.get("target") or {}
        tasks.add_row(
            task["task_id"],
            ", ".join(task.get("depends_on") or []) or "-",
            task.get("trigger_rule") or "-",
            f"{target.get('type', '?')} {target.get('url') or ''}".strip(),
        )
    return Group(fields, Text(""), tasks)


def workflow_runs_table(page: Mapping[str, Any]) -> Table:
    table = new_table("WORKFLOW RUN ID", "STATUS", "TRIGGER", "SCHEDULED FOR", "FINISHED", "TASKS")
    for run in page["items"]:
        table.add_row(
            run["workflow_run_id"],
            styled(run["status"]),
            run.get("trigger"),
            text(run.get("scheduled_for")),
            text(run.get("finished_at")),
            task_counts(run.get("tasks") or {}),
        )
    return table


def task_counts(tasks: Mapping[str, Mapping[str, Any]]) -> Text:
    counts = Counter(str(task.get("status")) for task in tasks.values())
    shown = Text()
    for index, (status, count) in enumerate(sorted(counts.items())):
        if index:
            shown.append(", ")
        shown.append(f"{count} {status.lower()}", style=STATUS_STYLES.get(status, ""))
    return shown


def run_tree(run: Mapping[str, Any], tasks: list[Mapping[str, Any]] | None) -> Tree:
    """The workflow run as a tree of its tasks; `tasks`: the workflow's definition (who
    depends on whom), or None when it could not be read (the tasks are then listed flat)."""
    states: Mapping[str, Mapping[str, Any]] = run.get("tasks") or {}
    depends = {str(t["task_id"]): list(t.get("depends_on") or []) for t in tasks or []}
    rules = {str(t["task_id"]): t.get("trigger_rule") for t in tasks or []}
    order = [task_id for task_id in depends if task_id in states] + [t for t in states if t not in depends]
    known = set(order)
    upstream = {task_id: [d for d in depends.get(task_id, []) if d in known] for task_id in order}
    below = {task_id: [other for other in order if task_id in upstream[other]] for task_id in order}

    title = Text.assemble(
        ("workflow run ", "bold"),
        (str(run.get("workflow_run_id")), "bold"),
        "  ",
        styled(run.get("status")),
        f"  {run.get('trigger', '')}, scheduled for {run.get('scheduled_for')}",
    )
    tree = Tree(title)
    drawn: set[str] = set()

    def add(parent: Tree, task_id: str) -> None:
        if task_id in drawn:
            parent.add(Text(f"{task_id} (drawn above)", style="dim"))
            return
        drawn.add(task_id)
        node = parent.add(
            _task_label(task_id, states.get(task_id, {}), upstream[task_id], rules.get(task_id))
        )
        for child in below[task_id]:
            add(node, child)

    for task_id in order:
        if not upstream[task_id]:
            add(tree, task_id)
    for task_id in order:  # a cycle cannot be created, but draw anything left all the same
        if task_id not in drawn:
            add(tree, task_id)
    return tree


def _task_label(task_id: str, state: Mapping[str, Any], upstream: list[str], rule: str | None) -> Text:
    label = Text.assemble((task_id, "bold"), "  ", styled(state.get("status")))
    if state.get("attempt"):
        label.append(f"  attempt {state['attempt']}")
    if state.get("response_code") is not None:
        label.append(f"  HTTP {state['response_code']}")
    if len(upstream) > 1 or (rule and rule != "ALL_SUCCESS"):
        label.append(f"  after {', '.join(upstream) or '-'} ({rule or 'ALL_SUCCESS'})", style="dim")
    if state.get("run_id"):
        label.append(f"  run {state['run_id']}", style="dim")
    if state.get("error"):
        label.append(f"\n{state['error']}", style="red")
    return label


def workflow_run_view(run: Mapping[str, Any], tasks: list[Mapping[str, Any]] | None) -> RenderableType:
    tree = run_tree(run, tasks)
    if run.get("finished_at") or run.get("started_at"):
        times = Text(
            f"started {run.get('started_at') or '-'}, finished {run.get('finished_at') or '-'}", "dim"
        )
        return Group(tree, times)
    return tree
