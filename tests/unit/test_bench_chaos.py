"""How the chaos soak tells a re-delivery after a crash (at least once, one effect by the
key) from a duplicated effect (the soak fails), and how it judges its workflow mix: stuck
workflow runs, tasks started twice, rules broken, statuses at odds with the tasks'."""

from __future__ import annotations

import inspect
import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from bench import chaos_workflows as wf
from bench.chaos import (
    WORKFLOW_DEPTH,
    classify_repeats,
    failed_goals,
    later_than_planned,
    margin_for,
    read_log,
    workflow_margin_for,
)
from bench.lateness import Created, not_sooner_than
from bench.receiver import Arrival
from scheduler_core.domain.policies import RetryPolicy
from scheduler_core.services.workflow_runs import WorkflowRunner

JOB_OF = {"run-a": "job-a", "run-b": "job-b"}


def ok(run_id: str, attempt: int, at_ms: float, key: str | None = None, job_id: str = "") -> Arrival:
    return Arrival(
        run_id, "2026-11-25T00:00:00.000Z", str(attempt), at_ms, 200, key or run_id, job_id or JOB_OF[run_id]
    )


def test_one_2xx_per_key_repeats_nothing() -> None:
    arrivals = [ok("run-a", 1, 10), ok("run-b", 2, 20), Arrival("run-b", "", "1", 5, 500, "run-b")]

    assert classify_repeats(arrivals, JOB_OF, {("run-a", "1")}) == {"duplicated": {}, "after_crash": {}}


def test_a_repeat_after_an_attempt_that_never_logged_its_end_is_a_re_delivery() -> None:
    arrivals = [ok("run-a", 3, 30), ok("run-a", 2, 10)]  # attempt 2 got a 2xx, then died

    repeats = classify_repeats(arrivals, JOB_OF, {("run-a", "3")})

    assert repeats["duplicated"] == {}
    assert list(repeats["after_crash"]) == ["run-a"]
    assert "attempt 2 got a 2xx" in repeats["after_crash"]["run-a"]


def test_a_repeat_after_an_attempt_that_logged_its_end_is_a_duplicated_effect() -> None:
    arrivals = [ok("run-a", 1, 10), ok("run-a", 2, 30)]

    repeats = classify_repeats(arrivals, JOB_OF, {("run-a", "1"), ("run-a", "2")})

    assert list(repeats["duplicated"]) == ["run-a"]
    assert repeats["after_crash"] == {}


def test_a_repeat_after_any_attempt_that_logged_its_end_is_a_duplicated_effect() -> None:
    # Attempt 1 got a 2xx and died; attempt 2 got one and recorded it; attempt 3 called again.
    arrivals = [ok("run-a", 1, 10), ok("run-a", 2, 20), ok("run-a", 3, 30)]

    repeats = classify_repeats(arrivals, JOB_OF, {("run-a", "2"), ("run-a", "3")})

    assert list(repeats["duplicated"]) == ["run-a"]
    assert "attempt 2 got a 2xx and logged its end" in repeats["duplicated"]["run-a"]


def test_a_second_run_of_one_job_is_a_duplicated_effect() -> None:
    """Two runs for one firing: the second has a run id (and key) the soak never expected."""
    arrivals = [ok("run-a", 1, 10), ok("run-a-again", 1, 20, job_id="job-a")]

    repeats = classify_repeats(arrivals, JOB_OF, {("run-a", "1"), ("run-a-again", "1")})

    assert "job-a" in repeats["duplicated"]
    assert "under 2 Idempotency-Keys" in repeats["duplicated"]["job-a"]


def test_calls_for_jobs_outside_the_soak_are_not_its_effects() -> None:
    arrivals = [ok("run-a", 1, 10), ok("other-run", 1, 20, job_id="other-job")]

    assert classify_repeats(arrivals, JOB_OF, {("run-a", "1")}) == {"duplicated": {}, "after_crash": {}}


# --- the workflow mix (bench/chaos_workflows.py) ---------------------------------------------

WORKFLOW = "wf1"
AT_MS = 1_790_000_000_000
WORKFLOW_RUN = f"{WORKFLOW}:{AT_MS}"


def call(
    task_id: str, at_ms: float, status: int = 200, attempt: int = 1, workflow_id: str = WORKFLOW
) -> Arrival:
    """A task's delivery as the receiver records it: its run id is the Idempotency-Key."""
    run_id = f"{workflow_id}.{task_id}:{AT_MS}"
    return Arrival(
        run_id, "2026-11-26T00:00:00.000Z", str(attempt), at_ms, status, run_id, f"{workflow_id}.{task_id}"
    )


def answer(status: str, **tasks: str) -> dict[str, Any]:
    return {"status": status, "tasks": {task: {"status": task_status} for task, task_status in tasks.items()}}


def problems(shape: str, reply: dict[str, Any], *arrivals: Arrival) -> list[tuple[str, str | None, str]]:
    by_task: dict[str, list[Arrival]] = {}
    for arrival in arrivals:
        by_task.setdefault(arrival.run_id.split(".")[1].split(":")[0], []).append(arrival)
    found = wf.check_workflow_run(WORKFLOW_RUN, wf.SHAPES[shape], reply, by_task)
    return [(p.kind, p.task_id, p.why) for p in found]


@pytest.mark.parametrize(
    ("rule", "upstream", "allowed"),
    [
        ("ALL_SUCCESS", ["SUCCEEDED", "SUCCEEDED"], True),
        ("ALL_SUCCESS", ["SUCCEEDED", "RUNNING"], None),
        ("ALL_SUCCESS", ["FAILED", "RUNNING"], False),  # decided at the first failure
        ("ALL_SUCCESS", ["SUCCEEDED", "SKIPPED"], False),
        ("ALL_DONE", ["FAILED", "UPSTREAM_FAILED"], True),
        ("ALL_DONE", ["FAILED", "RETRYING"], None),
        ("ONE_SUCCESS", ["SUCCEEDED", "PENDING"], True),
        ("ONE_SUCCESS", ["FAILED", "SKIPPED"], False),
        ("ONE_FAILED", ["SUCCEEDED", "FAILED", "RUNNING"], True),  # released before the others end
        ("ONE_FAILED", ["SUCCEEDED", "RUNNING"], None),
        ("ONE_FAILED", ["SUCCEEDED", "SKIPPED"], False),
        ("NONE_FAILED", ["SUCCEEDED", "SKIPPED"], True),
        ("NONE_FAILED", ["SUCCEEDED", "UPSTREAM_FAILED"], False),
        ("NONE_FAILED", ["SUCCEEDED", "RUNNING"], None),
        ("ALL_DONE", ["CANCELLED", "SUCCEEDED"], False),  # a cancel stops what follows
        ("ALL_SUCCESS", [], True),
    ],
)
def test_a_rule_is_judged_from_its_upstream_tasks_ends(
    rule: str, upstream: list[str], allowed: bool | None
) -> None:
    assert wf.rule_allows(rule, upstream) is allowed


def test_the_shapes_are_three_deep_and_the_margin_is_built_on_that() -> None:
    assert {shape: wf.depth(tasks) for shape, tasks in wf.SHAPES.items()} == {
        "chain": 3,
        "diamond": 3,
        "fan": 3,
    }
    assert WORKFLOW_DEPTH == 3
    assert len(wf.SHAPES["fan"]) == 8  # split, five workers, join, alert
    retry = RetryPolicy(max_attempts=5, backoff_seconds=1, max_backoff_seconds=5)
    # Its own run: 90 s lease + 2 polls + re-send 60 s + the workflow's first backoff (10 s) = 280;
    # each task level: 90 + 120 + 60 + backoffs 1 + 2 + 4 + 5 = 282; then RECHECK 120 + a poll 60
    # + slack 30.
    assert workflow_margin_for(90, retry, 3) == 280 + 3 * 282 + 120 + 60 + 30
    assert margin_for(90, 5) == 90 + 120 + 60 + 5 + 30  # the jobs' own, unchanged


def test_a_body_names_the_rules_and_lets_the_fragile_tasks_fail_at_once() -> None:
    body = wf.workflow_body(
        1, "diamond", AT_MS, "http://127.0.0.1:1/hook", {"max_attempts": 5, "backoff_seconds": 1}
    )
    tasks = {task["task_id"]: task for task in body["tasks"]}
    assert body["schedule"] == {"at": "2026-09-21T14:13:20.000Z"}
    assert tasks["b"]["retry"] == {"max_attempts": 1, "backoff_seconds": 1}
    assert tasks["a"]["retry"] == {"max_attempts": 5, "backoff_seconds": 1}
    assert tasks["d"]["depends_on"] == ["b", "c"]
    assert tasks["d"]["trigger_rule"] == "NONE_FAILED"
    assert [wf.shape_of(i) for i in range(4)] == ["chain", "diamond", "fan", "chain"]


def test_a_workflow_run_that_followed_its_rules_has_no_problem() -> None:
    reply = answer("FAILED", a="SUCCEEDED", b="FAILED", c="SUCCEEDED", d="UPSTREAM_FAILED")
    calls = [call("a", 10), call("b", 20, 500), call("c", 21)]  # d never delivered

    assert problems("diamond", reply, *calls) == []


def test_a_task_delivered_though_an_upstream_failed_breaks_its_rule() -> None:
    reply = answer("FAILED", a="SUCCEEDED", b="FAILED", c="SUCCEEDED", d="SUCCEEDED")
    calls = [call("a", 10), call("b", 20, 500), call("c", 21), call("d", 30)]

    [(kind, task, why)] = problems("diamond", reply, *calls)
    assert (kind, task) == ("rule_broken", "d")
    assert "NONE_FAILED" in why
    assert "must not run" in why


def test_a_task_delivered_though_its_workflow_run_says_it_never_ran_breaks_its_rule() -> None:
    reply = answer("FAILED", a="SUCCEEDED", b="FAILED", c="SUCCEEDED", d="UPSTREAM_FAILED")
    calls = [call("a", 10), call("b", 20, 500), call("c", 21), call("d", 30)]

    [(kind, task, why)] = problems("diamond", reply, *calls)
    assert (kind, task) == ("rule_broken", "d")
    assert "though its workflow run says UPSTREAM_FAILED" in why


def test_a_task_delivered_before_its_upstream_ended_breaks_its_rule() -> None:
    # c (ALL_DONE) called while b was still being called: b's retry came after c's first call.
    reply = answer("SUCCEEDED", a="SUCCEEDED", b="SUCCEEDED", c="SUCCEEDED")
    calls = [call("a", 10), call("b", 20, 500), call("c", 25), call("b", 30, attempt=2)]

    [(kind, task, why)] = problems("chain", reply, *calls)
    assert (kind, task) == ("rule_broken", "c")
    assert "b 5 ms later" in why


def test_one_failed_runs_once_one_upstream_failed_not_before() -> None:
    statuses = {w: "SUCCEEDED" for w in ("w1", "w2", "w4", "w5")} | {"w3": "FAILED"}
    reply = answer("FAILED", split="SUCCEEDED", join="SUCCEEDED", alert="SUCCEEDED", **statuses)
    others = [call(w, 40 + i) for i, w in enumerate(("w1", "w2", "w4", "w5"))]
    # alert is released by w3's failure, before the other workers end: its rule allows that.
    early_enough = [call("split", 10), call("w3", 20, 500), call("alert", 30), *others, call("join", 60)]
    too_early = [call("split", 10), call("alert", 15), call("w3", 20, 500), *others, call("join", 60)]

    assert problems("fan", reply, *early_enough) == []
    [(kind, task, why)] = problems("fan", reply, *too_early)
    assert (kind, task) == ("rule_broken", "alert")
    assert "before any of ['w3']" in why


def test_a_task_not_run_though_its_rule_says_it_runs_breaks_its_rule() -> None:
    reply = answer("FAILED", a="FAILED", b="UPSTREAM_FAILED", c="UPSTREAM_FAILED")  # c is ALL_DONE

    [(kind, task, why)] = problems("chain", reply, call("a", 10, 500))
    assert (kind, task) == ("rule_broken", "c")
    assert "says it runs" in why


@pytest.mark.parametrize(
    ("reply", "words"),
    [
        (
            answer("SUCCEEDED", a="SUCCEEDED", b="FAILED", c="SUCCEEDED", d="UPSTREAM_FAILED"),
            "SUCCEEDED with",
        ),
        (answer("FAILED", a="SUCCEEDED", b="SUCCEEDED", c="SUCCEEDED", d="SUCCEEDED"), "no task failed"),
        (answer("SUCCEEDED", a="SUCCEEDED", b="SUCCEEDED", c="SUCCEEDED", d="PENDING"), "not ended: ['d']"),
        (
            answer("CANCELLED", a="SUCCEEDED", b="SUCCEEDED", c="SUCCEEDED", d="SUCCEEDED"),
            "no task cancelled",
        ),
    ],
)
def test_a_workflow_runs_status_at_odds_with_its_tasks_is_inconsistent(
    reply: dict[str, Any], words: str
) -> None:
    calls = [
        call(task, 10 * i) for i, task in enumerate("abcd") if reply["tasks"][task]["status"] == "SUCCEEDED"
    ]

    found = [p for p in problems("diamond", reply, *calls) if p[0] == "status_inconsistent"]
    assert len(found) == 1
    assert words in found[0][2]


def test_a_running_workflow_run_is_not_judged_on_what_has_not_ended() -> None:
    reply = answer("RUNNING", a="SUCCEEDED", b="RETRYING", c="SUCCEEDED", d="PENDING")

    assert problems("diamond", reply, call("a", 10), call("b", 20, 500), call("c", 21)) == []


def created(workflow_id: str = WORKFLOW, shape: str = "chain") -> wf.CreatedWorkflow:
    return wf.CreatedWorkflow(0, shape, AT_MS, 201, workflow_id, None)


def summary(
    replies: dict[str, dict[str, Any]],
    arrivals: list[Arrival],
    ended: set[tuple[str, str]],
    workflows: list[wf.CreatedWorkflow] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    workflows = workflows or [created()]
    repeats = classify_repeats(arrivals, wf.task_job_of(workflows), ended)
    return wf.summarize_workflows(
        workflows,
        replies,
        arrivals,
        repeats,
        extra.get("succeeded_logged", Counter()),
        extra.get("catch_ups", []),
        extra.get("dead_lettered", []),
        extra.get("jobs", {WORKFLOW: "COMPLETED"}),
    )


def ended_of(*arrivals: Arrival) -> set[tuple[str, str]]:
    return {(a.run_id, a.attempt) for a in arrivals}


def test_a_workflow_run_that_went_well_passes_and_is_counted() -> None:
    calls = [call("a", 10), call("b", 20, 500), call("b", 30, attempt=2), call("c", 40)]
    replies = {WORKFLOW_RUN: answer("SUCCEEDED", a="SUCCEEDED", b="SUCCEEDED", c="SUCCEEDED")}
    catch_ups = [
        {"workflow_run_id": WORKFLOW_RUN, "joined": {"b": "SUCCEEDED"}, "released": []},
        {"workflow_run_id": "someone-else:1", "joined": {"x": "SUCCEEDED"}, "released": []},
    ]

    result = summary(replies, calls, ended_of(*calls), catch_ups=catch_ups)

    assert not wf.failed_workflow_goals(result)
    assert result["workflow_runs_by_status"] == {"SUCCEEDED": 1}
    assert result["tasks_by_status"] == {"SUCCEEDED": 3}
    assert result["deliveries_by_status"] == {200: 3, 500: 1}
    assert result["caught_up_by_timer"] == {"workflow_runs": 1, "times": 1, "joined": 1, "released_only": 0}
    assert result["workflows_by_status"] == {"COMPLETED": 1}
    assert set(result["checks"].values()) == {0}


def test_a_workflow_run_not_ended_is_stuck() -> None:
    replies = {WORKFLOW_RUN: answer("RUNNING", a="SUCCEEDED", b="SUCCEEDED", c="PENDING")}
    other = created("wf2")  # never answered for: its run was never made
    calls = [call("a", 10), call("b", 20)]

    result = summary(
        replies | {"wf2:" + str(AT_MS): {"status": "API 404", "tasks": {}}},
        calls,
        ended_of(*calls),
        workflows=[created(), other],
        jobs={WORKFLOW: "SCHEDULED"},
    )

    assert result["stuck"] == 2
    assert [run["workflow_run_id"] for run in result["stuck_runs"]] == [WORKFLOW_RUN, f"wf2:{AT_MS}"]
    assert result["stuck_runs"][0]["tasks"] == {"a": "SUCCEEDED", "b": "SUCCEEDED", "c": "PENDING"}
    assert wf.failed_workflow_goals(result)


def test_a_task_called_again_after_its_attempt_logged_its_end_was_started_twice() -> None:
    first, again = call("b", 20, attempt=1), call("b", 50, attempt=2)
    calls = [call("a", 10), first, again, call("c", 60)]
    replies = {WORKFLOW_RUN: answer("SUCCEEDED", a="SUCCEEDED", b="SUCCEEDED", c="SUCCEEDED")}

    result = summary(replies, calls, ended_of(*calls))

    assert result["started_twice"] == 1
    assert list(result["started_twice_keys"]) == [first.run_id]
    assert wf.failed_workflow_goals(result)


def test_a_task_called_again_after_a_crash_is_a_re_delivery_not_a_start() -> None:
    first, again = call("b", 20, attempt=1), call("b", 50, attempt=2)  # attempt 1 died after its 2xx
    calls = [call("a", 10), first, again, call("c", 60)]
    replies = {WORKFLOW_RUN: answer("SUCCEEDED", a="SUCCEEDED", b="SUCCEEDED", c="SUCCEEDED")}

    result = summary(replies, calls, ended_of(*calls) - {(first.run_id, "1")})

    assert result["started_twice"] == 0
    assert result["redelivered_after_crash"] == 1
    assert not wf.failed_workflow_goals(result)


def test_a_task_recorded_succeeded_twice_was_started_twice() -> None:
    calls = [call("a", 10), call("b", 20), call("c", 30)]
    replies = {WORKFLOW_RUN: answer("SUCCEEDED", a="SUCCEEDED", b="SUCCEEDED", c="SUCCEEDED")}

    result = summary(
        replies, calls, ended_of(*calls), succeeded_logged=Counter({calls[1].run_id: 2, "job:1": 2})
    )

    assert result["started_twice_keys"] == {calls[1].run_id: "recorded SUCCEEDED 2 times"}


def test_a_rule_broken_fails_the_soak_and_a_failed_task_is_looked_for_on_the_dlq() -> None:
    calls = [call("a", 10, 500), call("b", 20), call("c", 30)]  # b ran though a FAILED
    replies = {WORKFLOW_RUN: answer("FAILED", a="FAILED", b="SUCCEEDED", c="SUCCEEDED")}

    result = summary(replies, calls, ended_of(*calls))

    assert result["rule_broken"] == 1
    assert result["rule_broken_tasks"][0].startswith(f"{WORKFLOW_RUN} task b: ")
    assert result["checks"]["failed_tasks_without_dlq_record"] == 1
    assert wf.failed_workflow_goals(result)


def test_a_workflow_the_api_did_not_create_fails_the_soak() -> None:
    not_made = wf.CreatedWorkflow(
        1, "diamond", AT_MS, 403, None, '{"message": "Missing Authentication Token"}'
    )

    result = summary({}, [], set(), workflows=[not_made])

    assert result["workflows_created"] == 0
    assert result["create_failures"] == [{"status": 403, "error": not_made.error}]
    assert result["stuck"] == 0
    assert wf.failed_workflow_goals(result)
    assert wf.workflows_headline(result).startswith("workflows: not created 1, stuck 0")


def test_the_mixs_deliveries_are_told_from_the_jobs() -> None:
    job_call = ok("run-a", 1, 10)
    stray = Arrival("", "", "", 5, 200)
    mine, someone_elses = call("a", 10), call("a", 20, workflow_id="wf9")

    others, tasks = wf.split_arrivals([job_call, stray, mine, someone_elses], {WORKFLOW})

    assert others == [job_call, stray, someone_elses]
    assert tasks == [mine]
    assert wf.task_of(mine) == (WORKFLOW, "a", WORKFLOW_RUN)
    assert wf.task_of(job_call) is None


def test_the_soak_reads_the_workflow_runs_its_timer_caught_up(tmp_path: Path) -> None:
    record = {
        "level": "WARNING",
        "message": wf.CAUGHT_UP,
        "workflow_id": WORKFLOW,
        "workflow_run_id": WORKFLOW_RUN,
        "joined": {"a": "SUCCEEDED", "b": "UPSTREAM_FAILED"},
        "released": [],
    }
    log = tmp_path / "cloud.log"
    log.write_text(
        f"07:00:00.000  poller: {json.dumps(record)}\n07:00:00.001  poller: {json.dumps({'message': 'x'})}\n"
    )

    assert read_log(log)["workflow_catch_ups"] == [
        {
            "workflow_run_id": WORKFLOW_RUN,
            "joined": {"a": "SUCCEEDED", "b": "UPSTREAM_FAILED"},
            "released": [],
        }
    ]
    # The poller's words, as the scheduler logs them.
    assert wf.CAUGHT_UP in inspect.getsource(WorkflowRunner.reconcile)


# --- creates that come too late for their planned time (the creates themselves: tests/e2e)


def test_later_than_planned_counts_the_moved_and_their_largest_shift() -> None:
    made = [
        (1_000, created_at(1_000)),
        (2_000, created_at(14_500)),
        (3_000, created_at(5_000)),
        (4_000, created_at(30_000, job_id=None)),  # refused: nothing made, nothing moved
    ]
    assert later_than_planned(made) == {"count": 2, "max_seconds": 12.5}
    assert later_than_planned(made[:1]) == {"count": 0, "max_seconds": 0}


def created_at(at_ms: int, job_id: str | None = "job") -> Created:
    return Created(0, at_ms, 201 if job_id else 422, job_id, True, None, 0.1)


def test_a_planned_time_nearer_than_the_lead_moves_to_the_lead_from_now(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(time, "time", lambda: 1_000.0)
    assert not_sooner_than(1_000_000 + 10_000, 10_000) == 1_010_000  # exactly the lead: kept
    assert not_sooner_than(1_000_000 + 9_999, 10_000) == 1_010_000
    assert not_sooner_than(900_000, 10_000) == 1_010_000  # past
    assert not_sooner_than(1_060_000, 10_000) == 1_060_000
    assert not_sooner_than(900_000, None) == 900_000  # no lead: as planned, past or not


def test_jobs_the_api_did_not_make_fail_the_soak() -> None:
    clean = {"jobs_planned": 10, "jobs_created": 10, "lost": 0, "succeeded_twice": 0, "duplicated_effects": 0}
    assert not failed_goals(clean)
    assert failed_goals(clean | {"jobs_created": 9})
