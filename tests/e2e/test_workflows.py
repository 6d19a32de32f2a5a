"""Workflows through the whole local cloud: API Gateway → api function → DynamoDB → the HIGH
queue → the worker begins the workflow run → each task's run on its queue → the worker
delivers it to a real webhook on loopback → its end joins the workflow run, releasing what
follows. Also a cron workflow the local cloud runs by itself, and a job's backfill.

Each test's tasks post to paths of their own on the suite's receiver, so the JSON a task
answers (its output) and the statuses it answers with reach no other test."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.e2e.api_client import ApiClient, arrivals, http_job, unique_name
from tests.e2e.polling import API_POLL_INTERVAL_SECONDS, seconds_until, wait_for
from tests.support.helpers import iso
from tests.support.receiver import WebhookReceiver

pytestmark = pytest.mark.e2e

# How long a test waits for a workflow run (or a backfill) to end: generous, it is a deadline
# for a failure message, not a measure (each step is a queue hop and a function call).
MARGIN_SECONDS = 60
ENDED = {"SUCCEEDED", "FAILED", "CANCELLED", "SKIPPED"}


# --- helpers ---------------------------------------------------------------------------------


def task(
    receiver: WebhookReceiver,
    prefix: str,
    task_id: str,
    *depends_on: str,
    body: Any = None,
    statuses: tuple[int, ...] = (),
    **fields: Any,
) -> dict[str, Any]:
    """A task posting to `<prefix>/<task_id>` on `receiver`, which answers `statuses` there
    first, then 200 with `body` as JSON (the task's output)."""
    url = receiver.answer_on(f"{prefix}/{task_id}", body, statuses)
    return {
        "task_id": task_id,
        "target": {"type": "HTTP", "url": url},
        "depends_on": list(depends_on),
    } | fields


def create_workflow(api: ApiClient, tasks: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    reply = api.call("POST", "/v1/workflows", {"name": unique_name("workflow"), "tasks": tasks} | fields)
    assert reply.status == 201, reply.body
    workflow: dict[str, Any] = reply.body
    return workflow


def trigger(api: ApiClient, workflow_id: str) -> dict[str, Any]:
    reply = api.call("POST", f"/v1/workflows/{workflow_id}/trigger")
    assert reply.status == 202, reply.body
    run: dict[str, Any] = reply.body
    return run


def workflow_run(api: ApiClient, workflow_id: str, run_id: str) -> dict[str, Any]:
    reply = api.call("GET", f"/v1/workflows/{workflow_id}/runs/{run_id}")
    assert reply.status == 200, reply.body
    run: dict[str, Any] = reply.body
    return run


def workflow_runs(api: ApiClient, workflow_id: str) -> list[dict[str, Any]]:
    reply = api.call("GET", f"/v1/workflows/{workflow_id}/runs")
    assert reply.status == 200, reply.body
    runs: list[dict[str, Any]] = reply.body["items"]
    return runs


def ended_run(api: ApiClient, workflow_id: str, run_id: str) -> dict[str, Any]:
    """The workflow run once it has ended (polled over the API)."""

    def ended() -> dict[str, Any] | None:
        run = workflow_run(api, workflow_id, run_id)
        return run if run["status"] in ENDED else None

    return wait_for(ended, MARGIN_SECONDS, f"workflow run {run_id} to end", API_POLL_INTERVAL_SECONDS)


def statuses(run: dict[str, Any]) -> dict[str, str]:
    return {task_id: task["status"] for task_id, task in run["tasks"].items()}


def hour_mark(when: datetime) -> datetime:
    return when.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def next_minute_mark(after: datetime) -> datetime:
    return after.astimezone(UTC).replace(second=0, microsecond=0) + timedelta(minutes=1)


# --- the cron workflow: created first, checked last ---------------------------------------------


@pytest.fixture(scope="module", autouse=True)
def every_minute_workflow(api: ApiClient, receiver: WebhookReceiver) -> Iterator[dict[str, Any]]:
    """A `* * * * *` workflow created before this module's other tests, so its first minute
    mark (up to a minute away) passes while they run; its test is the module's last."""
    prefix = unique_name("cron-workflow")
    workflow = create_workflow(
        api,
        [task(receiver, prefix, "first", body={"ok": 1}), task(receiver, prefix, "second", "first")],
        schedule={"cron": "* * * * *"},
    )
    yield workflow | {"prefix": prefix}
    api.call("DELETE", f"/v1/workflows/{workflow['workflow_id']}")  # it fires no more


# --- the tests --------------------------------------------------------------------------------


def test_a_diamond_calls_each_task_once_and_the_join_after_both_parents_with_their_outputs(
    api: ApiClient, receiver: WebhookReceiver
) -> None:
    prefix = unique_name("diamond")
    workflow = create_workflow(
        api,
        [
            task(receiver, prefix, "a", body={"rows": 3}),
            task(receiver, prefix, "b", "a", body={"b": "done"}, payload={"region": "eu"}),
            task(receiver, prefix, "c", "a", body=["c", 1]),
            task(receiver, prefix, "d", "b", "c"),
        ],
    )
    workflow_id = workflow["workflow_id"]
    assert workflow["status"] == "SCHEDULED"
    assert workflow["next_fire_at"] is None  # no schedule: it runs when triggered

    triggered = trigger(api, workflow_id)
    run_id = triggered["workflow_run_id"]
    assert triggered["trigger"] == "MANUAL"
    assert set(triggered["tasks"]) == set("abcd")

    run = ended_run(api, workflow_id, run_id)
    assert run["status"] == "SUCCEEDED", run
    assert statuses(run) == dict.fromkeys("abcd", "SUCCEEDED")
    assert run["workflow_id"] == workflow_id
    assert run["started_at"] is not None
    assert run["finished_at"] is not None

    # Each task once (now that the run has ended, nothing more may come), d after b and c.
    [a], [b], [c], [d] = (receiver.at(f"{prefix}/{name}") for name in "abcd")
    assert a.received_at <= b.received_at
    assert a.received_at <= c.received_at
    assert d.received_at >= max(b.received_at, c.received_at)
    assert a.body == {"upstream": {}}
    assert b.body == {"region": "eu", "upstream": {"a": {"rows": 3}}}
    assert c.body == {"upstream": {"a": {"rows": 3}}}
    assert d.body == {"upstream": {"b": {"b": "done"}, "c": ["c", 1]}}

    for name, request in zip("abcd", (a, b, c, d), strict=True):
        task_run = run["tasks"][name]
        assert request.headers["x-scheduler-workflow-run-id"] == run_id
        assert request.headers["x-scheduler-task-id"] == name
        assert request.headers["x-scheduler-run-id"] == task_run["run_id"]
        assert request.headers["idempotency-key"] == task_run["run_id"]
        assert request.headers["x-scheduler-attempt"] == "1"
        assert (task_run["attempt"], task_run["response_code"], task_run["error"]) == (1, 200, None)
    assert [item["workflow_run_id"] for item in workflow_runs(api, workflow_id)] == [run_id]


def test_a_failed_task_fails_its_none_failed_child_unsent_and_its_all_done_cleanup_still_runs(
    api: ApiClient, receiver: WebhookReceiver
) -> None:
    prefix = unique_name("failing")
    workflow = create_workflow(
        api,
        [
            task(receiver, prefix, "a", statuses=(500,), retry={"max_attempts": 1}),
            task(receiver, prefix, "load", "a", trigger_rule="NONE_FAILED"),
            task(receiver, prefix, "cleanup", "a", trigger_rule="ALL_DONE"),
        ],
    )
    workflow_id = workflow["workflow_id"]
    run_id = trigger(api, workflow_id)["workflow_run_id"]

    run = ended_run(api, workflow_id, run_id)
    assert run["status"] == "FAILED", run
    assert statuses(run) == {"a": "FAILED", "load": "UPSTREAM_FAILED", "cleanup": "SUCCEEDED"}
    assert run["tasks"]["a"]["response_code"] == 500
    assert run["tasks"]["a"]["attempt"] == 1
    assert run["tasks"]["load"]["run_id"] is None  # never sent

    [a] = receiver.at(f"{prefix}/a")
    assert a.headers["x-scheduler-attempt"] == "1"
    assert receiver.at(f"{prefix}/load") == []
    [cleanup] = receiver.at(f"{prefix}/cleanup")
    assert cleanup.body == {"upstream": {"a": None}}  # a failed: no output
    assert cleanup.headers["x-scheduler-workflow-run-id"] == run_id
    assert cleanup.received_at >= a.received_at


def test_a_backfill_runs_an_hourly_jobs_past_firings_once_each_oldest_first(
    api: ApiClient, receiver: WebhookReceiver
) -> None:
    job = api.create_job(http_job(receiver, "backfill", {"cron": "0 * * * *"}))
    job_id = job["job_id"]
    start = hour_mark(datetime.now(UTC)) - timedelta(hours=3)
    firings = [iso(start + timedelta(hours=hour)) for hour in range(3)]
    window = {"start": iso(start), "end": firings[-1]}

    reply = api.call("POST", f"/v1/jobs/{job_id}/backfill", window)
    assert reply.status == 202, reply.body
    assert reply.body == {"runs": 3, "already_run": 0}

    def backfilled() -> list[dict[str, Any]] | None:
        runs = [run for run in api.runs(job_id) if run["trigger"] == "BACKFILL"]
        return runs if len(runs) == 3 and all(run["status"] in ENDED for run in runs) else None

    runs = wait_for(backfilled, MARGIN_SECONDS, "the 3 backfilled runs to end", API_POLL_INTERVAL_SECONDS)
    assert {run["status"] for run in runs} == {"SUCCEEDED"}, runs
    assert sorted(run["scheduled_for"] for run in runs) == firings

    # Delivered once each, oldest first, each with its own time. (Only the window's: should
    # the job's next hour mark come meanwhile, its scheduled run is no backfill.)
    delivered = [
        r for r in arrivals(receiver, job_id) if r.headers["x-scheduler-scheduled-for"] <= firings[-1]
    ]
    assert [r.headers["x-scheduler-scheduled-for"] for r in delivered] == firings
    by_time = {run["scheduled_for"]: run for run in runs}
    for request in delivered:
        run = by_time[request.headers["x-scheduler-scheduled-for"]]
        assert request.headers["x-scheduler-run-id"] == run["run_id"]
        assert request.headers["idempotency-key"] == run["run_id"]
        assert request.headers["x-scheduler-attempt"] == "1"

    again = api.call("POST", f"/v1/jobs/{job_id}/backfill", window)
    assert again.status == 202, again.body
    assert again.body == {"runs": 0, "already_run": 3}  # a firing with a run is not run again
    api.cancel(job_id)


def test_a_cron_workflow_runs_by_itself_at_its_minute_mark(
    api: ApiClient, receiver: WebhookReceiver, every_minute_workflow: dict[str, Any]
) -> None:
    """Last in this module: the workflow was created before the other tests. (Its
    `next_fire_at` is no help here: the create claimed the firings within the lookahead.)"""
    workflow_id = every_minute_workflow["workflow_id"]
    prefix = every_minute_workflow["prefix"]
    first_mark = next_minute_mark(datetime.fromisoformat(every_minute_workflow["created_at"]))

    def first_run_ended() -> dict[str, Any] | None:
        runs = workflow_runs(api, workflow_id)  # newest first
        return runs[-1] if runs and runs[-1]["status"] in ENDED else None

    run = wait_for(
        first_run_ended,
        seconds_until(first_mark) + MARGIN_SECONDS,
        "the cron workflow's first run to end",
        API_POLL_INTERVAL_SECONDS,
    )
    assert run["status"] == "SUCCEEDED", run
    assert run["trigger"] == "SCHEDULE"
    assert run["scheduled_for"] == iso(first_mark)
    assert statuses(run) == {"first": "SUCCEEDED", "second": "SUCCEEDED"}
    run_id = run["workflow_run_id"]
    [second] = [
        r for r in receiver.at(f"{prefix}/second") if r.headers["x-scheduler-workflow-run-id"] == run_id
    ]
    assert second.body == {"upstream": {"first": {"ok": 1}}}
    assert second.headers["x-scheduler-scheduled-for"] == iso(first_mark)

    cancelled = api.call("DELETE", f"/v1/workflows/{workflow_id}")
    assert cancelled.status == 200, cancelled.body
    assert (cancelled.body["status"], cancelled.body["next_fire_at"]) == ("CANCELLED", None)
