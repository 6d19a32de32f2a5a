"""The chaos soak's workflow mix (`python -m bench.chaos --workflows N`).

N workflows, each a one-off (`schedule.at`) fired at times spread over the soak like the
jobs', cycling through three shapes whose tasks all call the soak's chaotic receiver:

    chain    a → b → c             a retries never (fails for good on one 500 or one kill),
                                   c is ALL_DONE (runs whatever came before it)
    diamond  a → b, a → c, b+c → d  b retries never, d is NONE_FAILED
    fan      split → w1..w5 → join  each w retries never; join is ALL_DONE, alert
             and w1..w5 → alert     (ONE_FAILED) runs as soon as one w failed

The other tasks take the soak's retry policy. The tasks that never retry make failures
common (a 500 is one call in five), so the rules have something to decide.

After the soak each workflow run is read through the API (`GET .../runs/{id}`) and checked
against what the receiver saw (a task's deliveries are its run id's arrivals, that id
`{workflow_id}.{task_id}:{ms}`) and what the worker logged. The soak fails on:

- a workflow run *stuck*: not ended (PENDING, RUNNING, or not found) when the margin ran out;
- a task *started twice*: its run's 2xx repeated after the attempt that got the earlier one
  logged its end, a task reached under two run ids, or its run recorded SUCCEEDED twice (the
  jobs' rules, `chaos.classify_repeats`, over the tasks' arrivals);
- a *rule broken*: a task delivered though its workflow run says it never ran, or though its
  rule and its upstream tasks' ends say it must not run; delivered before the upstream tasks
  that release it ended (their last call came after its first); not run (UPSTREAM_FAILED,
  SKIPPED) though its rule says it runs; run although its rule says it must not;
- a *status inconsistent* with the tasks: an ended workflow run with a task not ended,
  SUCCEEDED with a FAILED, UPSTREAM_FAILED or CANCELLED task, FAILED with none failed,
  CANCELLED with none cancelled.

The rules are judged here from their meaning (as `TriggerRule` states it), not with the
scheduler's own `decide`, so that a bug there cannot hide from the soak.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections import Counter, defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from bench.lateness import not_sooner_than
from bench.receiver import Arrival
from bench.report import table
from scheduler_core.domain import keys
from scheduler_core.domain.clock import from_ms
from scheduler_core.domain.entities import iso_or_none

CREATE_THREADS = 8
REQUEST_TIMEOUT_SECONDS = 30
READ_TRIES = 3
# The poller's warning when a workflow run's timer found work nobody did (a task's end not
# joined, a released task with no run): `WorkflowRunner.reconcile`.
CAUGHT_UP = "workflow run caught up by its timer"

RUN_ENDED = frozenset({"SUCCEEDED", "FAILED", "CANCELLED"})
TASK_ENDED = frozenset({"SUCCEEDED", "FAILED", "CANCELLED", "UPSTREAM_FAILED", "SKIPPED"})
TASK_FAILED = frozenset({"FAILED", "UPSTREAM_FAILED"})
NEVER_RUN = frozenset({"UPSTREAM_FAILED", "SKIPPED"})  # decided by its rule: never sent
HAD_A_RUN = frozenset({"RUNNING", "RETRYING", "SUCCEEDED", "FAILED"})
PROBLEM_KINDS = ("rule_broken", "status_inconsistent")


@dataclass(frozen=True)
class TaskPlan:
    task_id: str
    depends_on: tuple[str, ...] = ()
    rule: str = "ALL_SUCCESS"
    fragile: bool = False  # max_attempts 1: one 500 (or one kill) fails it for good


_WORKERS = tuple(f"w{i}" for i in range(1, 6))
SHAPES: dict[str, tuple[TaskPlan, ...]] = {
    "chain": (
        TaskPlan("a", fragile=True),
        TaskPlan("b", ("a",)),
        TaskPlan("c", ("b",), "ALL_DONE"),
    ),
    "diamond": (
        TaskPlan("a"),
        TaskPlan("b", ("a",), fragile=True),
        TaskPlan("c", ("a",)),
        TaskPlan("d", ("b", "c"), "NONE_FAILED"),
    ),
    "fan": (
        TaskPlan("split"),
        *(TaskPlan(w, ("split",), fragile=True) for w in _WORKERS),
        TaskPlan("join", _WORKERS, "ALL_DONE"),
        TaskPlan("alert", _WORKERS, "ONE_FAILED"),
    ),
}
SHAPE_ORDER = tuple(SHAPES)


def shape_of(index: int) -> str:
    return SHAPE_ORDER[index % len(SHAPE_ORDER)]


def depth(tasks: Sequence[TaskPlan]) -> int:
    """Tasks on the longest path of upstream to downstream: how many task runs, one after
    the other, a workflow run waits for."""
    upstream = {task.task_id: task.depends_on for task in tasks}
    memo: dict[str, int] = {}

    def reach(task_id: str) -> int:
        if task_id not in memo:
            memo[task_id] = 1 + max((reach(parent) for parent in upstream[task_id]), default=0)
        return memo[task_id]

    return max(reach(task.task_id) for task in tasks)


# --- creating them ---------------------------------------------------------------------------


@dataclass(frozen=True)
class CreatedWorkflow:
    index: int
    shape: str
    at_ms: int
    status: int
    workflow_id: str | None
    error: str | None

    @property
    def workflow_run_id(self) -> str | None:
        return keys.run_id(self.workflow_id, self.at_ms) if self.workflow_id else None

    def task_run_ids(self) -> dict[str, str]:
        """Each task's run id in the workflow's one run (task id → run id)."""
        if not self.workflow_id:
            return {}
        return {
            task.task_id: keys.run_id(keys.task_job_id(self.workflow_id, task.task_id), self.at_ms)
            for task in SHAPES[self.shape]
        }


def workflow_body(
    index: int, shape: str, at_ms: int, target_url: str, retry: dict[str, float]
) -> dict[str, Any]:
    return {
        "name": f"bench-chaos-{shape}-{index}",
        "schedule": {"at": iso_or_none(from_ms(at_ms))},
        "tasks": [
            {
                "task_id": task.task_id,
                "target": {"type": "HTTP", "url": target_url},
                "payload": {"index": index},
                "retry": retry | {"max_attempts": 1} if task.fragile else retry,
                "depends_on": list(task.depends_on),
                "trigger_rule": task.rule,
            }
            for task in SHAPES[shape]
        ],
    }


def _request(url: str, body: dict[str, Any] | None = None) -> tuple[int, Any]:
    """(HTTP status, JSON answer or error text); status 0 when no answer came."""
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode() if body is not None else None,
        headers={"Content-Type": "application/json"},
        method="POST" if body is not None else "GET",
    )
    try:
        with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_SECONDS) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as error:
        return error.code, error.read()[:300].decode(errors="replace")
    except OSError as error:
        return 0, str(error)


def create_workflow(
    api_url: str, target_url: str, index: int, at_ms: int, retry: dict[str, float]
) -> CreatedWorkflow:
    shape = shape_of(index)
    status, answer = _request(
        f"{api_url}/v1/workflows", workflow_body(index, shape, at_ms, target_url, retry)
    )
    if status == 201 and isinstance(answer, dict):
        return CreatedWorkflow(index, shape, at_ms, status, str(answer["workflow_id"]), None)
    return CreatedWorkflow(index, shape, at_ms, status, None, str(answer))


def create_workflows(
    api_url: str,
    target_url: str,
    fire_times: Sequence[int],
    retry: dict[str, float],
    min_lead_ms: int | None = None,
) -> list[CreatedWorkflow]:
    """A workflow per fire time (shapes in turn), CREATE_THREADS requests at a time;
    `min_lead_ms` as `lateness.create_all`'s."""
    pool = ThreadPoolExecutor(CREATE_THREADS)
    try:
        return list(
            pool.map(
                lambda item: create_workflow(
                    api_url, target_url, item[0], not_sooner_than(item[1], min_lead_ms), retry
                ),
                enumerate(fire_times),
            )
        )
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def read_workflow_runs(api_url: str, created: Sequence[CreatedWorkflow]) -> dict[str, dict[str, Any]]:
    """Each created workflow's run as the API answers it (workflow run id → answer); a run
    the API did not answer for is {"status": "API <code>", "tasks": {}, "error": ...}."""

    def read(workflow: CreatedWorkflow) -> tuple[str, dict[str, Any]]:
        assert workflow.workflow_run_id is not None
        url = f"{api_url}/v1/workflows/{workflow.workflow_id}/runs/{workflow.workflow_run_id}"
        status, answer = 0, None
        for _ in range(READ_TRIES):
            status, answer = _request(url)
            if status == 200 and isinstance(answer, dict):
                return workflow.workflow_run_id, answer
            if status == 404:
                break
            time.sleep(1)
        return workflow.workflow_run_id, {"status": f"API {status}", "tasks": {}, "error": str(answer)[:200]}

    pool = ThreadPoolExecutor(CREATE_THREADS)
    try:
        return dict(pool.map(read, [w for w in created if w.workflow_run_id]))
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


# --- what the receiver saw of them -----------------------------------------------------------


def task_of(arrival: Arrival) -> tuple[str, str, str] | None:
    """(workflow id, task id, workflow run id) of a task's delivery, from its run id; None for
    a delivery that is no task's."""
    try:
        job_id, scheduled_ms = keys.parse_run_id(arrival.run_id)
    except ValueError:
        return None
    workflow_id, dot, task_id = job_id.rpartition(".")
    if not dot or not workflow_id:
        return None
    return workflow_id, task_id, keys.run_id(workflow_id, scheduled_ms)


def split_arrivals(
    arrivals: Iterable[Arrival], workflow_ids: Collection[str]
) -> tuple[list[Arrival], list[Arrival]]:
    """(the other deliveries, the deliveries of the tasks of `workflow_ids`)."""
    others: list[Arrival] = []
    tasks: list[Arrival] = []
    for arrival in arrivals:
        found = task_of(arrival)
        of_ours = found is not None and found[0] in workflow_ids
        (tasks if of_ours or arrival.job_id.rpartition(".")[0] in workflow_ids else others).append(arrival)
    return others, tasks


def task_job_of(created: Iterable[CreatedWorkflow]) -> dict[str, str]:
    """Every task run id the mix expects → its task's job id (`classify_repeats`' `job_of`)."""
    return {
        run_id: keys.parse_run_id(run_id)[0]
        for workflow in created
        for run_id in workflow.task_run_ids().values()
    }


# --- the checks (pure) -----------------------------------------------------------------------


@dataclass(frozen=True)
class Problem:
    kind: str  # one of PROBLEM_KINDS
    workflow_run_id: str
    task_id: str | None
    why: str

    def line(self) -> str:
        where = self.workflow_run_id + (f" task {self.task_id}" if self.task_id else "")
        return f"{where}: {self.why}"


def rule_allows(rule: str, upstream: Sequence[str]) -> bool | None:
    """Whether a task with `rule` runs, given its direct upstream tasks' (final) statuses:
    True, False, or None while that cannot be told yet (an upstream task not ended). A
    cancelled upstream task cancels what follows it."""
    if not upstream:
        return True
    ended = [status in TASK_ENDED for status in upstream]
    if "CANCELLED" in upstream:
        return False
    failed = any(status in TASK_FAILED for status in upstream)
    succeeded = "SUCCEEDED" in upstream
    if rule == "ALL_SUCCESS":
        if any(done and status != "SUCCEEDED" for done, status in zip(ended, upstream, strict=True)):
            return False
        return True if all(ended) else None
    if rule == "ALL_DONE":
        return True if all(ended) else None
    if rule == "ONE_SUCCESS":
        return True if succeeded else (False if all(ended) else None)
    if rule == "ONE_FAILED":
        return True if failed else (False if all(ended) else None)
    if rule == "NONE_FAILED":
        return False if failed else (True if all(ended) else None)
    raise ValueError(f"unknown trigger rule {rule}")


def _released_too_early(
    task: TaskPlan, first_ms: float, statuses: Mapping[str, str], last_ms: Mapping[str, float]
) -> str | None:
    """Why `task`'s first delivery (at `first_ms`) came before it could have been released,
    or None. A task is released once the upstream tasks its rule waits for have ended, and
    a task ends after its last call: with ALL_* and NONE_FAILED, after every upstream task's
    last call; with ONE_*, after the last call of one of those whose end can release it
    (told only when each of those was called: one decided without a call ends unseen)."""
    if task.rule in ("ONE_SUCCESS", "ONE_FAILED"):
        releasing = {"SUCCEEDED"} if task.rule == "ONE_SUCCESS" else TASK_FAILED
        could = [parent for parent in task.depends_on if statuses.get(parent) in releasing]
        if not could or any(parent not in last_ms for parent in could):
            return None
        earliest = min(last_ms[parent] for parent in could)
        if first_ms < earliest:
            return (
                f"delivered {earliest - first_ms:.0f} ms before any of {could} (its {task.rule} "
                "releasers) had its last call"
            )
        return None
    late = {
        parent: last_ms[parent] - first_ms for parent in task.depends_on if last_ms.get(parent, 0) > first_ms
    }
    if late:
        gaps = ", ".join(f"{parent} {gap:.0f} ms later" for parent, gap in late.items())
        return (
            f"delivered before its upstream tasks ended ({task.rule}): their last calls came after ({gaps})"
        )
    return None


def check_workflow_run(
    workflow_run_id: str,
    tasks: Sequence[TaskPlan],
    answer: Mapping[str, Any],
    arrivals: Mapping[str, Sequence[Arrival]],
) -> list[Problem]:
    """What is wrong with one workflow run: its rules (each task's deliveries and status
    against its rule and its upstream tasks' statuses) and its status against its tasks'.
    `answer`: the API's; `arrivals`: its tasks' deliveries by task id."""
    statuses = {
        task.task_id: str(answer.get("tasks", {}).get(task.task_id, {}).get("status")) for task in tasks
    }
    problems: list[Problem] = []

    def rule_broken(task_id: str, why: str) -> None:
        problems.append(Problem("rule_broken", workflow_run_id, task_id, why))

    ordered = {
        task_id: sorted(came, key=lambda a: a.arrived_ms) for task_id, came in arrivals.items() if came
    }
    last_ms = {task_id: came[-1].arrived_ms for task_id, came in ordered.items()}
    for task in tasks:
        status = statuses[task.task_id]
        upstream = [statuses[parent] for parent in task.depends_on]
        allowed = rule_allows(task.rule, upstream)
        came = ordered.get(task.task_id, [])
        told = f"{task.rule} with upstream {dict(zip(task.depends_on, upstream, strict=True))}"
        if came and status in NEVER_RUN | {"CANCELLED"}:
            rule_broken(task.task_id, f"delivered {len(came)}× though its workflow run says {status}")
        elif came and allowed is False:
            rule_broken(task.task_id, f"delivered {len(came)}× ({status}) though {told} says it must not run")
        elif allowed is False and status in HAD_A_RUN:
            rule_broken(task.task_id, f"{status} (had a run) though {told} says it must not run")
        if allowed is True and status in NEVER_RUN:
            rule_broken(task.task_id, f"{status} though {told} says it runs")
        if came and (early := _released_too_early(task, came[0].arrived_ms, statuses, last_ms)):
            rule_broken(task.task_id, early)

    run_status = str(answer.get("status"))
    if run_status in RUN_ENDED:
        values = set(statuses.values())
        open_tasks = sorted(task for task, status in statuses.items() if status not in TASK_ENDED)
        why = None
        if open_tasks:
            why = f"{run_status} with tasks not ended: {open_tasks}"
        elif run_status == "SUCCEEDED" and values & (TASK_FAILED | {"CANCELLED"}):
            why = f"SUCCEEDED with tasks {statuses}"
        elif run_status == "FAILED" and not values & TASK_FAILED:
            why = f"FAILED with no task failed: {statuses}"
        elif run_status == "FAILED" and "CANCELLED" in values:
            why = f"FAILED with a task cancelled: {statuses}"
        elif run_status == "CANCELLED" and "CANCELLED" not in values:
            why = f"CANCELLED with no task cancelled: {statuses}"
        if why:
            problems.append(Problem("status_inconsistent", workflow_run_id, None, why))
    return problems


def summarize_workflows(
    created: Sequence[CreatedWorkflow],
    answers: Mapping[str, Mapping[str, Any]],
    arrivals: Sequence[Arrival],
    repeats: Mapping[str, Mapping[str, str]],
    succeeded_logged: Mapping[str, int],
    catch_ups: Sequence[Mapping[str, Any]],
    dead_lettered: Collection[str],
    job_statuses: Mapping[str, str],
) -> dict[str, Any]:
    """The mix's figures and checks. `answers`: workflow run id → the API's answer;
    `arrivals`: the deliveries of the mix's tasks (`split_arrivals`); `repeats`:
    `classify_repeats` over them (keyed by task run id, or task job id); `succeeded_logged`:
    run id → times a worker logged it SUCCEEDED; `catch_ups`: the poller's CAUGHT_UP records;
    `dead_lettered`: the run ids of the DLQ's RUN_FAILED records; `job_statuses`: job id →
    status of the jobs table's job items (workflows among them)."""
    made = [w for w in created if w.workflow_run_id]
    by_run: dict[str, dict[str, list[Arrival]]] = defaultdict(lambda: defaultdict(list))
    for arrival in arrivals:
        found = task_of(arrival)
        if found is not None:
            by_run[found[2]][found[1]].append(arrival)
    problems: list[Problem] = []
    run_statuses: dict[str, str] = {}
    status_of_task_run: dict[str, str] = {}  # task run id → the task's status
    attempts: Counter[int] = Counter()
    for workflow in made:
        assert workflow.workflow_run_id is not None
        answer = answers.get(workflow.workflow_run_id, {"status": "NOT_READ", "tasks": {}})
        run_statuses[workflow.workflow_run_id] = str(answer.get("status"))
        for task_id, run_id in workflow.task_run_ids().items():
            shown = answer.get("tasks", {}).get(task_id) or {}
            status_of_task_run[run_id] = str(shown.get("status", "MISSING"))
            if shown.get("attempt"):
                attempts[int(shown["attempt"])] += 1
        problems += check_workflow_run(
            workflow.workflow_run_id, SHAPES[workflow.shape], answer, by_run.get(workflow.workflow_run_id, {})
        )
    stuck = sorted(run_id for run_id, status in run_statuses.items() if status not in RUN_ENDED)
    succeeded_twice = sorted(
        run_id for run_id, n in succeeded_logged.items() if n > 1 and run_id in status_of_task_run
    )
    started_twice = dict(repeats.get("duplicated", {})) | {
        run_id: f"recorded SUCCEEDED {succeeded_logged[run_id]} times" for run_id in succeeded_twice
    }
    ours = {w.workflow_run_id for w in made}
    caught = [c for c in catch_ups if c.get("workflow_run_id") in ours]
    failed_tasks = {r for r, status in status_of_task_run.items() if status == "FAILED"}
    reached = {a.run_id for a in arrivals if 200 <= a.status < 300}
    dead = set(dead_lettered) & set(status_of_task_run)
    by_kind = {kind: [p for p in problems if p.kind == kind] for kind in PROBLEM_KINDS}
    return {
        "workflows_planned": len(created),
        "workflows_created": len(made),
        "workflows_by_shape": dict(Counter(w.shape for w in made)),
        "create_failures": [{"status": w.status, "error": w.error} for w in created if not w.workflow_id][
            :20
        ],
        "depth_by_shape": {shape: depth(tasks) for shape, tasks in SHAPES.items()},
        "tasks": len(status_of_task_run),
        "deliveries": len(arrivals),
        "deliveries_by_status": dict(sorted(Counter(a.status for a in arrivals).items())),
        "stuck": len(stuck),
        "stuck_runs": [brief(r, answers.get(r, {})) for r in stuck[:20]],
        "started_twice": len(started_twice),
        "started_twice_keys": dict(list(started_twice.items())[:20]),
        "redelivered_after_crash": len(repeats.get("after_crash", {})),
        "redelivered_after_crash_keys": dict(list(repeats.get("after_crash", {}).items())[:20]),
        "rule_broken": len(by_kind["rule_broken"]),
        "rule_broken_tasks": [p.line() for p in by_kind["rule_broken"][:20]],
        "status_inconsistent": len(by_kind["status_inconsistent"]),
        "status_inconsistent_runs": [p.line() for p in by_kind["status_inconsistent"][:20]],
        "workflow_runs_by_status": dict(Counter(run_statuses.values()).most_common()),
        "tasks_by_status": dict(Counter(status_of_task_run.values()).most_common()),
        "tasks_by_attempts": dict(sorted(attempts.items())),
        "workflows_by_status": dict(
            Counter(job_statuses.get(str(w.workflow_id), "NO_JOB_ITEM") for w in made).most_common()
        ),
        "caught_up_by_timer": {
            "workflow_runs": len({c["workflow_run_id"] for c in caught}),
            "times": len(caught),
            "joined": sum(1 for c in caught if c.get("joined")),
            "released_only": sum(1 for c in caught if not c.get("joined") and c.get("released")),
        },
        "caught_up_by_timer_runs": [dict(c) for c in caught[:20]],
        "checks": {
            "failed_tasks_without_dlq_record": len(failed_tasks - dead),
            "dlq_records_of_tasks_not_failed": len(dead - failed_tasks),
            "tasks_succeeded_without_2xx": sum(
                1 for r, s in status_of_task_run.items() if s == "SUCCEEDED" and r not in reached
            ),
            "tasks_2xx_but_not_succeeded": sum(
                1 for r in reached & set(status_of_task_run) if status_of_task_run[r] != "SUCCEEDED"
            ),
            "ended_runs_with_workflow_not_completed": sum(
                1
                for w in made
                if run_statuses[str(w.workflow_run_id)] in RUN_ENDED
                and job_statuses.get(str(w.workflow_id)) != "COMPLETED"
            ),
        },
    }


def brief(workflow_run_id: str, answer: Mapping[str, Any]) -> dict[str, Any]:
    """A workflow run as the report shows it: its status and each task's status, attempt
    and error."""
    tasks = {
        task_id: " ".join(
            str(part)
            for part in (
                shown.get("status"),
                f"attempt {shown['attempt']}" if shown.get("attempt") else None,
                shown.get("error"),
            )
            if part
        )
        for task_id, shown in (answer.get("tasks") or {}).items()
    }
    return {"workflow_run_id": workflow_run_id, "status": answer.get("status"), "tasks": tasks} | (
        {"error": answer["error"]} if answer.get("error") else {}
    )


def failed_workflow_goals(result: Mapping[str, Any]) -> bool:
    """The mix's goals missed; a workflow not created is one (nothing of it was checked)."""
    return bool(
        result["stuck"]
        or result["started_twice"]
        or result["rule_broken"]
        or result["status_inconsistent"]
        or result["workflows_created"] < result["workflows_planned"]
    )


def workflows_headline(result: Mapping[str, Any]) -> str:
    return (
        f"workflows: not created {result['workflows_planned'] - result['workflows_created']}, "
        f"stuck {result['stuck']}, tasks started twice {result['started_twice']}, rules broken "
        f"{result['rule_broken']}, statuses inconsistent {result['status_inconsistent']} (goal 0 each) over "
        f"{result['workflows_created']} workflow runs and {result['tasks']} tasks"
    )


def print_workflows(result: Mapping[str, Any]) -> None:
    r = result
    shapes = ", ".join(f"{n} {shape}" for shape, n in r["workflows_by_shape"].items())
    print(
        f"\nworkflow mix — {r['workflows_created']} of {r['workflows_planned']} one-off workflows created "
        f"({shapes}), {r['tasks']} tasks; depth by shape {r['depth_by_shape']}"
    )
    rows = [
        [
            "task deliveries",
            r["deliveries"],
            ", ".join(f"{n}× {s}" for s, n in r["deliveries_by_status"].items()) or "none",
        ],
        [
            "not created",
            r["workflows_planned"] - r["workflows_created"],
            "workflows the API did not create (goal 0: nothing of them is checked)",
        ],
        ["stuck", r["stuck"], "workflow runs not ended when the margin ran out (goal 0)"],
        [
            "tasks started twice",
            r["started_twice"],
            "a 2xx repeated after its attempt logged its end, two run ids, SUCCEEDED twice (goal 0)",
        ],
        [
            "rules broken",
            r["rule_broken"],
            "delivered though it must not run or before its upstream ended, not run though it must (goal 0)",
        ],
        [
            "statuses inconsistent",
            r["status_inconsistent"],
            "a workflow run's status against its tasks' (goal 0)",
        ],
        [
            "task re-delivered after a crash",
            r["redelivered_after_crash"],
            "a 2xx repeated, same key, the attempt that got it killed before its end write",
        ],
    ]
    caught = r["caught_up_by_timer"]
    rows.append(
        [
            "caught up by the timer",
            caught["workflow_runs"],
            f"workflow runs the poller's watchdog moved on ({caught['times']} times: {caught['joined']} "
            f"joined a task's end, {caught['released_only']} only released a task)",
        ]
    )
    print(table(["figure", "value", ""], rows))
    print(
        "workflow runs by status: "
        + ", ".join(f"{s} {n}" for s, n in r["workflow_runs_by_status"].items())
        + "   workflows: "
        + ", ".join(f"{s} {n}" for s, n in r["workflows_by_status"].items())
    )
    print(
        "tasks by status: "
        + ", ".join(f"{s} {n}" for s, n in r["tasks_by_status"].items())
        + "   by attempts: "
        + ", ".join(f"{a}: {n}" for a, n in r["tasks_by_attempts"].items())
    )
    print("workflow checks: " + ", ".join(f"{k.replace('_', ' ')} {n}" for k, n in r["checks"].items()))
    for failure in r["create_failures"]:
        print(f"  workflow not created: {failure}")
    for run in r["stuck_runs"]:
        print(f"  stuck: {run}")
    for key, why in r["started_twice_keys"].items():
        print(f"  task started twice: {key}: {why}")
    for line in r["rule_broken_tasks"]:
        print(f"  rule broken: {line}")
    for line in r["status_inconsistent_runs"]:
        print(f"  status inconsistent: {line}")
    for key, why in r["redelivered_after_crash_keys"].items():
        print(f"  task re-delivered after a crash: {key}: {why}")
    for caught_up in r["caught_up_by_timer_runs"]:
        print(f"  caught up by its timer: {caught_up}")
