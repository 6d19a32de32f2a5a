"""Workflows through the real handlers on moto: a DAG's tasks reach a real HTTP receiver in
their order, with their upstream tasks' outputs; failures pass down by the trigger rules;
the joins hold when parents end together, when a worker dies between a task's end and the
join, and when a message comes twice."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from scheduler_core.composition import build_queue, build_redriver
from scheduler_core.domain.clock import to_ms
from scheduler_core.domain.messages import RunMessage
from scheduler_core.domain.vocabulary import Priority, RunStatus
from scheduler_core.services import workflow_runs
from scheduler_core.services.workflow_runs import WorkflowRunner
from tests.support.faults import WorkerDied, dying_executor
from tests.support.harness import FrozenClock, SchedulerHarness
from tests.support.helpers import iso
from tests.support.receiver import WebhookReceiver


def task(receiver: WebhookReceiver, task_id: str, *depends_on: str, **fields: Any) -> dict[str, Any]:
    """A task posting to its own path on `receiver`, answering `body` there."""
    body = fields.pop("body", None)
    statuses = fields.pop("statuses", ())
    url = receiver.answer_on(task_id, body, statuses)
    return {
        "task_id": task_id,
        "target": {"type": "HTTP", "url": url},
        "depends_on": list(depends_on),
    } | fields


def create(cloud: SchedulerHarness, tasks: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    reply = cloud.call("POST", "/v1/workflows", {"name": "pipeline", "tasks": tasks} | fields)
    assert reply.status == 201, reply.body
    created: dict[str, Any] = reply.body
    return created


def trigger(cloud: SchedulerHarness, workflow_id: str) -> str:
    reply = cloud.call("POST", f"/v1/workflows/{workflow_id}/trigger")
    assert reply.status == 202, reply.body
    run_id: str = reply.body["workflow_run_id"]
    return run_id


def workflow_run(cloud: SchedulerHarness, workflow_id: str, run_id: str) -> dict[str, Any]:
    reply = cloud.call("GET", f"/v1/workflows/{workflow_id}/runs/{run_id}")
    assert reply.status == 200, reply.body
    body: dict[str, Any] = reply.body
    return body


def run_until_quiet(cloud: SchedulerHarness) -> int:
    """Deliver until no queue has a visible message (each task's release sends the next)."""
    handed = 0
    while True:
        more = cloud.deliver()
        if not more:
            return handed
        handed += more


def statuses(run: dict[str, Any]) -> dict[str, str]:
    return {task_id: task["status"] for task_id, task in run["tasks"].items()}


def diamond(receiver: WebhookReceiver) -> list[dict[str, Any]]:
    return [
        task(receiver, "a", body={"rows": 3}),
        task(receiver, "b", "a", body={"b": "done"}, payload={"region": "eu"}),
        task(receiver, "c", "a", body=["c", 1]),
        task(receiver, "d", "b", "c"),
    ]


def test_a_diamond_runs_each_task_once_in_order_and_passes_outputs_down(
    cloud: SchedulerHarness, receiver: WebhookReceiver
) -> None:
    workflow = create(cloud, diamond(receiver))
    assert workflow["status"] == "SCHEDULED"
    assert workflow["next_fire_at"] is None  # no schedule: it runs when triggered
    run_id = trigger(cloud, workflow["workflow_id"])

    run_until_quiet(cloud)

    [a], [b], [c], [d] = (receiver.at(name) for name in "abcd")
    assert a.received_at <= b.received_at
    assert a.received_at <= c.received_at
    assert d.received_at >= max(b.received_at, c.received_at)
    assert a.body == {"upstream": {}}
    assert b.body == {"region": "eu", "upstream": {"a": {"rows": 3}}}
    assert d.body == {"upstream": {"b": {"b": "done"}, "c": ["c", 1]}}
    assert d.headers["x-scheduler-workflow-run-id"] == run_id
    assert d.headers["x-scheduler-task-id"] == "d"
    assert d.headers["idempotency-key"] == d.headers["x-scheduler-run-id"]
    assert d.headers["idempotency-key"] == f"{workflow['workflow_id']}.d:{run_id.rsplit(':', 1)[1]}"

    run = workflow_run(cloud, workflow["workflow_id"], run_id)
    assert run["status"] == "SUCCEEDED"
    assert statuses(run) == dict.fromkeys("abcd", "SUCCEEDED")
    assert run["tasks"]["d"]["response_code"] == 200
    assert run["tasks"]["d"]["attempt"] == 1
    listed = cloud.call("GET", f"/v1/workflows/{workflow['workflow_id']}/runs").body["items"]
    assert [item["workflow_run_id"] for item in listed] == [run_id]


def test_a_failure_fails_what_needs_it_and_cleanup_still_runs(
    cloud: SchedulerHarness, receiver: WebhookReceiver
) -> None:
    workflow = create(
        cloud,
        [
            task(receiver, "extract", statuses=(500,), retry={"max_attempts": 1}),
            task(receiver, "load", "extract", trigger_rule="NONE_FAILED"),
            task(receiver, "cleanup", "extract", trigger_rule="ALL_DONE"),
            task(receiver, "alert", "extract", trigger_rule="ONE_FAILED"),
        ],
    )
    run_id = trigger(cloud, workflow["workflow_id"])
    run_until_quiet(cloud)

    run = workflow_run(cloud, workflow["workflow_id"], run_id)
    assert statuses(run) == {
        "extract": "FAILED",
        "load": "UPSTREAM_FAILED",
        "cleanup": "SUCCEEDED",
        "alert": "SUCCEEDED",
    }
    assert run["status"] == "FAILED"
    assert run["tasks"]["extract"]["response_code"] == 500
    assert run["tasks"]["load"]["run_id"] is None  # never sent
    assert receiver.at("load") == []
    [cleanup] = receiver.at("cleanup")
    assert cleanup.body == {"upstream": {"extract": None}}


def test_a_task_retries_within_its_workflow_run(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    workflow = create(
        cloud,
        [
            task(receiver, "flaky", statuses=(503,), retry={"backoff_seconds": 1}),
            task(receiver, "next", "flaky"),
        ],
    )
    run_id = trigger(cloud, workflow["workflow_id"])
    for _ in range(10):  # the retry is due within its backoff (at most a second here)
        run_until_quiet(cloud)
        if receiver.at("next"):
            break
        clock.advance(1)
    run = workflow_run(cloud, workflow["workflow_id"], run_id)
    assert statuses(run) == {"flaky": "SUCCEEDED", "next": "SUCCEEDED"}
    assert [request.headers["x-scheduler-attempt"] for request in receiver.at("flaky")] == ["1", "2"]
    assert run["tasks"]["flaky"]["attempt"] == 2


def test_a_scheduled_workflow_runs_on_its_cron(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    workflow = create(cloud, diamond(receiver), schedule={"cron": "*/5 * * * *"})
    fire_at = clock.now().replace(second=0, microsecond=0) + timedelta(minutes=5 - clock.now().minute % 5)
    assert workflow["next_fire_at"] == iso(fire_at)
    clock.move_to(fire_at - timedelta(seconds=60))
    cloud.poll()
    clock.move_to(fire_at)
    run_until_quiet(cloud)
    [run] = cloud.call("GET", f"/v1/workflows/{workflow['workflow_id']}/runs").body["items"]
    assert run["trigger"] == "SCHEDULE"
    assert run["scheduled_for"] == iso(fire_at)
    assert run["status"] == "SUCCEEDED"
    assert len(receiver.at("d")) == 1


def test_two_parents_ending_together_release_the_join_once(
    cloud: SchedulerHarness, receiver: WebhookReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """b and c have ended; b's join reads the workflow run, then c's join lands before b's
    write: b's write finds the version moved on, reads again and sees both ended. d is
    released once (without the condition, b's write would undo c's end: d never runs)."""
    workflow = create(cloud, diamond(receiver))
    workflow_id = workflow["workflow_id"]
    run_id = trigger(cloud, workflow_id)
    cloud.deliver((Priority.HIGH,))  # the workflow run begins: a is sent
    cloud.deliver_batches()  # a, which releases b and c
    with monkeypatch.context() as patched:
        patched.setattr(WorkflowRunner, "task_run_ended", lambda *args: None)  # joins held back
        cloud.deliver_batches()  # b and c
    assert statuses(workflow_run(cloud, workflow_id, run_id)) == {
        "a": "SUCCEEDED",
        "b": "SUCCEEDED",
        "c": "SUCCEEDED",
        "d": "PENDING",
    }
    store = cloud.worker_store
    runner = WorkflowRunner(
        store, build_queue(cloud.settings, cloud.clients, cloud.clock), cloud.clock, cloud.worker_lifecycle
    )
    ms = int(run_id.rsplit(":", 1)[1])
    b_job, b_run = store.get_job_and_run(f"{workflow_id}.b", ms)
    c_job, c_run = store.get_job_and_run(f"{workflow_id}.c", ms)
    assert b_job is not None
    assert b_run is not None
    assert c_job is not None
    assert c_run is not None
    advance = store.advance_workflow_run_if_unchanged
    writes: list[dict[str, str]] = []

    def c_joins_first(run: Any, phases: Any, now: Any, **kw: Any) -> bool:
        if not writes:
            writes.append({})
            runner.task_run_ended(c_job, c_run, RunStatus.SUCCEEDED)  # lands between b's read and write
        written = advance(run, phases, now, **kw)
        writes.append({task: str(phase) for task, phase in phases.items()} | {"written": str(written)})
        return written

    monkeypatch.setattr(store, "advance_workflow_run_if_unchanged", c_joins_first)
    runner.task_run_ended(b_job, b_run, RunStatus.SUCCEEDED)
    assert [write["written"] for write in writes[1:]] == ["True", "False", "True"]  # c; b refused; b again
    run_until_quiet(cloud)
    assert len(receiver.at("d")) == 1
    assert workflow_run(cloud, workflow_id, run_id)["status"] == "SUCCEEDED"


def test_a_worker_dying_between_a_tasks_end_and_the_join_is_caught_up_by_the_poller(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    workflow = create(cloud, [task(receiver, "a"), task(receiver, "b", "a")])
    run_id = trigger(cloud, workflow["workflow_id"])
    monkeypatch.setattr(WorkflowRunner, "task_run_ended", lambda *args: None)  # the worker dies
    run_until_quiet(cloud)
    assert receiver.at("b") == []
    assert statuses(workflow_run(cloud, workflow["workflow_id"], run_id)) == {
        "a": "SUCCEEDED",
        "b": "PENDING",
    }
    monkeypatch.undo()

    clock.advance(workflow_runs.RECHECK.total_seconds() + 1)
    watched = cloud.poll()
    assert sum(report.watched.get("workflow_joined", 0) for report in watched) == 1
    run_until_quiet(cloud)
    assert len(receiver.at("b")) == 1
    assert workflow_run(cloud, workflow["workflow_id"], run_id)["status"] == "SUCCEEDED"


def test_a_task_message_delivered_twice_calls_its_target_once(
    cloud: SchedulerHarness, receiver: WebhookReceiver
) -> None:
    workflow = create(cloud, [task(receiver, "a"), task(receiver, "b", "a")])
    trigger(cloud, workflow["workflow_id"])
    cloud.deliver((Priority.HIGH,))  # the workflow run begins: a is sent
    sqs = cloud.clients.sqs()
    url = cloud.queue_url(Priority.NORMAL)
    [message] = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=0)["Messages"]
    sqs.send_message(QueueUrl=url, MessageBody=message["Body"])  # the same message, twice
    run_until_quiet(cloud)
    assert len(receiver.at("a")) == 1
    assert len(receiver.at("b")) == 1


@pytest.mark.parametrize(
    ("tasks", "field", "words"),
    [
        (
            [
                {"task_id": "a", "depends_on": ["c"]},
                {"task_id": "b", "depends_on": ["a"]},
                {"task_id": "c", "depends_on": ["b"]},
            ],
            "tasks[0].depends_on",
            "a → b → c → a",
        ),
        ([{"task_id": "a", "depends_on": ["nope"]}], "tasks[0].depends_on[0]", "no task 'nope'"),
        ([{"task_id": "a"}, {"task_id": "a"}], "tasks[1].task_id", "already tasks[0].task_id"),
        ([{"task_id": "a", "depends_on": ["a"]}], "tasks[0].depends_on[0]", "cannot depend on itself"),
        ([{"task_id": "a b"}], "tasks[0].task_id", "pattern"),
        ([{"task_id": "a", "payload": {"upstream": 1}}], "tasks[0].payload", "upstream"),
    ],
)
def test_a_workflow_that_is_not_a_dag_is_a_400_naming_the_field(
    cloud: SchedulerHarness, tasks: list[dict[str, Any]], field: str, words: str
) -> None:
    body = {
        "name": "bad",
        "tasks": [t | {"target": {"type": "HTTP", "url": "https://example.com/x"}} for t in tasks],
    }
    reply = cloud.call("POST", "/v1/workflows", body)
    assert reply.status == 400, reply.body
    [detail] = [d for d in reply.body["error"]["details"] if d["field"] == field]
    assert words in detail["message"]


def test_workflows_are_their_tenants_and_not_jobs(cloud: SchedulerHarness, receiver: WebhookReceiver) -> None:
    workflow = create(cloud, [task(receiver, "a")])
    workflow_id = workflow["workflow_id"]
    assert (
        cloud.call("GET", f"/v1/workflows/{workflow_id}", caller="arn:aws:iam::123456789012:user/bob").status
        == 404
    )
    assert cloud.call("GET", f"/v1/jobs/{workflow_id}").status == 404
    assert cloud.call("GET", f"/v1/jobs/{workflow_id}.a").status == 404
    assert cloud.call("GET", "/v1/jobs").body["items"] == []
    assert [w["workflow_id"] for w in cloud.call("GET", "/v1/workflows").body["items"]] == [workflow_id]


def test_run_ids_hold_the_workflow_runs_time(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    workflow = create(cloud, [task(receiver, "a")])
    run_id = trigger(cloud, workflow["workflow_id"])
    assert run_id == f"{workflow['workflow_id']}:{to_ms(clock.now())}"


def test_a_one_off_workflow_runs_at_its_time_and_completes(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    fire_at = clock.now() + timedelta(minutes=10)
    workflow = create(cloud, [task(receiver, "a"), task(receiver, "b", "a")], schedule={"at": iso(fire_at)})
    clock.move_to(fire_at - timedelta(seconds=60))
    cloud.poll()
    clock.move_to(fire_at)
    run_until_quiet(cloud)
    [run] = cloud.call("GET", f"/v1/workflows/{workflow['workflow_id']}/runs").body["items"]
    assert run["status"] == "SUCCEEDED"
    assert statuses(run) == {"a": "SUCCEEDED", "b": "SUCCEEDED"}
    assert cloud.call("GET", f"/v1/workflows/{workflow['workflow_id']}").body["status"] == "COMPLETED"


def test_a_cancel_stops_what_has_not_started(cloud: SchedulerHarness, receiver: WebhookReceiver) -> None:
    workflow = create(cloud, [task(receiver, "a"), task(receiver, "b", "a"), task(receiver, "c", "b")])
    workflow_id = workflow["workflow_id"]
    run_id = trigger(cloud, workflow_id)
    cloud.deliver((Priority.HIGH,))  # begun: a released, its message on its queue
    cloud.deliver_batches()  # a ran: b released
    reply = cloud.call("POST", f"/v1/workflows/{workflow_id}/runs/{run_id}/cancel")
    assert reply.status == 202, reply.body
    assert statuses(reply.body) == {"a": "SUCCEEDED", "b": "CANCELLED", "c": "CANCELLED"}
    assert reply.body["status"] == "CANCELLED"
    run_until_quiet(cloud)  # b's message finds its run cancelled
    assert receiver.at("b") == []
    again = cloud.call("POST", f"/v1/workflows/{workflow_id}/runs/{run_id}/cancel")
    assert again.status == 409
    assert "CANCELLED" in again.body["error"]["message"]


def test_a_cancel_before_the_workflow_run_began_cancels_it_whole(
    cloud: SchedulerHarness, receiver: WebhookReceiver
) -> None:
    workflow = create(cloud, [task(receiver, "a")])
    run_id = trigger(cloud, workflow["workflow_id"])
    reply = cloud.call("POST", f"/v1/workflows/{workflow['workflow_id']}/runs/{run_id}/cancel")
    assert reply.status == 202, reply.body
    assert reply.body["status"] == "CANCELLED"
    run_until_quiet(cloud)
    assert receiver.requests == []


def test_a_failed_task_retried_brings_back_what_its_failure_decided(
    cloud: SchedulerHarness, receiver: WebhookReceiver
) -> None:
    workflow = create(
        cloud,
        [
            task(receiver, "extract", statuses=(500,), retry={"max_attempts": 1}),
            task(receiver, "load", "extract"),
            task(receiver, "report", "load"),
            task(receiver, "cleanup", "extract", trigger_rule="ALL_DONE"),
        ],
    )
    workflow_id = workflow["workflow_id"]
    run_id = trigger(cloud, workflow_id)
    run_until_quiet(cloud)
    failed = workflow_run(cloud, workflow_id, run_id)
    assert failed["status"] == "FAILED"
    assert statuses(failed)["load"] == "UPSTREAM_FAILED"
    refused = cloud.call("POST", f"/v1/workflows/{workflow_id}/runs/{run_id}/tasks/cleanup/retry")
    assert refused.status == 409
    assert "only a FAILED task" in refused.body["error"]["message"]

    reply = cloud.call("POST", f"/v1/workflows/{workflow_id}/runs/{run_id}/tasks/extract/retry")
    assert reply.status == 202, reply.body
    assert reply.body["status"] == "RUNNING"
    assert statuses(reply.body) == {
        "extract": "RETRYING",  # a re-driven run: its next attempt is on its way
        "load": "PENDING",
        "report": "PENDING",
        "cleanup": "SUCCEEDED",
    }
    run_until_quiet(cloud)
    run = workflow_run(cloud, workflow_id, run_id)
    assert statuses(run) == dict.fromkeys(("extract", "load", "report", "cleanup"), "SUCCEEDED")
    assert run["status"] == "SUCCEEDED"
    assert len(receiver.at("cleanup")) == 1  # it ran: it keeps its result
    assert len(receiver.at("extract")) == 2
    assert cloud.call("POST", f"/v1/workflows/{workflow_id}/runs/{run_id}/tasks/nope/retry").status == 404


def test_pause_resume_and_cancel_a_workflow(cloud: SchedulerHarness, receiver: WebhookReceiver) -> None:
    workflow = create(cloud, [task(receiver, "a"), task(receiver, "b", "a")], schedule={"rate": "1 hour"})
    workflow_id = workflow["workflow_id"]
    paused = cloud.call("POST", f"/v1/workflows/{workflow_id}/pause")
    assert paused.status == 200, paused.body
    assert paused.body["status"] == "PAUSED"
    assert paused.body["next_fire_at"] is None
    resumed = cloud.call("POST", f"/v1/workflows/{workflow_id}/resume")
    assert resumed.body["status"] == "SCHEDULED"
    assert resumed.body["next_fire_at"] == workflow["next_fire_at"]

    run_id = trigger(cloud, workflow_id)
    cloud.deliver((Priority.HIGH,))  # begun: a released
    cancelled = cloud.call("DELETE", f"/v1/workflows/{workflow_id}")
    assert cancelled.status == 200, cancelled.body
    assert cancelled.body["status"] == "CANCELLED"
    run_until_quiet(cloud)
    assert receiver.requests == []
    assert workflow_run(cloud, workflow_id, run_id)["status"] == "CANCELLED"
    assert cloud.call("POST", f"/v1/workflows/{workflow_id}/trigger").status == 409


def test_a_backfill_runs_an_hourly_jobs_past_firings_once_each_in_turn(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    job = cloud.create(
        {"name": "hourly", "schedule": {"cron": "0 * * * *"}, "target": {"type": "HTTP", "url": receiver.url}}
    )
    start = (clock.now() - timedelta(hours=3)).replace(minute=0, second=0, microsecond=0)
    body = {"start": iso(start), "end": iso(start + timedelta(hours=2))}
    reply = cloud.call("POST", f"/v1/jobs/{job['job_id']}/backfill", body)
    assert reply.status == 202, reply.body
    assert reply.body == {"runs": 3, "already_run": 0}
    run_until_quiet(cloud)
    assert [request.headers["x-scheduler-scheduled-for"] for request in receiver.requests] == [
        iso(start + timedelta(hours=hour)) for hour in range(3)
    ]
    runs = cloud.runs(job["job_id"])
    assert {run["trigger"] for run in runs} == {"BACKFILL"}
    assert {run["status"] for run in runs} == {"SUCCEEDED"}
    again = cloud.call("POST", f"/v1/jobs/{job['job_id']}/backfill", body)
    assert again.body == {"runs": 0, "already_run": 3}  # a firing with a run is not run again


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        ({"start": "2026-11-21T00:00:00Z", "end": "2026-11-20T00:00:00Z"}, 400, "end"),
        ({"start": "2026-11-21T00:00:00", "end": "2026-11-21T01:00:00Z"}, 400, "start"),
        ({"start": "2026-10-01T00:00:00Z", "end": "2026-11-21T00:00:00Z"}, 422, "end"),
    ],
)
def test_a_backfill_window_that_is_wrong_or_too_big_names_its_field(
    cloud: SchedulerHarness, receiver: WebhookReceiver, body: dict[str, str], status: int, field: str
) -> None:
    job = cloud.create(
        {"name": "hourly", "schedule": {"cron": "0 * * * *"}, "target": {"type": "HTTP", "url": receiver.url}}
    )
    reply = cloud.call("POST", f"/v1/jobs/{job['job_id']}/backfill", body)
    assert reply.status == status, reply.body
    assert [detail["field"] for detail in reply.body["error"]["details"]] == [field]


def test_a_workflow_backfill_runs_one_workflow_run_at_a_time(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    workflow = create(cloud, [task(receiver, "a"), task(receiver, "b", "a")], schedule={"cron": "0 * * * *"})
    start = (clock.now() - timedelta(hours=2)).replace(minute=0, second=0, microsecond=0)
    body = {"start": iso(start), "end": iso(start + timedelta(hours=1))}
    reply = cloud.call("POST", f"/v1/workflows/{workflow['workflow_id']}/backfill", body)
    assert reply.body == {"runs": 2, "already_run": 0}
    run_until_quiet(cloud)
    runs = cloud.call("GET", f"/v1/workflows/{workflow['workflow_id']}/runs").body["items"]
    assert [(run["trigger"], run["status"]) for run in runs] == [("BACKFILL", "SUCCEEDED")] * 2
    b_calls = [request.headers["x-scheduler-scheduled-for"] for request in receiver.at("b")]
    assert b_calls == [iso(start), iso(start + timedelta(hours=1))]  # in turn: SKIP never skips a backfill


def test_a_scheduled_workflow_run_due_while_one_runs_is_skipped_and_recorded(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    workflow = create(cloud, [task(receiver, "a"), task(receiver, "b", "a")], schedule={"cron": "* * * * *"})
    workflow_id = workflow["workflow_id"]
    first = clock.now().replace(second=0, microsecond=0) + timedelta(minutes=1)

    def by_time() -> dict[str, str]:
        runs = cloud.call("GET", f"/v1/workflows/{workflow_id}/runs").body["items"]
        return {
            run["scheduled_for"]: run["status"] for run in runs if run["scheduled_for"] <= iso(clock.now())
        }

    clock.move_to(first)
    cloud.poll()
    cloud.deliver((Priority.HIGH,))  # the first workflow run begins: a waits on its queue
    clock.move_to(first + timedelta(minutes=1))
    cloud.poll()
    cloud.deliver((Priority.HIGH,))  # the next one is due while the first runs
    assert by_time() == {iso(first): "RUNNING", iso(first + timedelta(minutes=1)): "SKIPPED"}
    run_until_quiet(cloud)
    assert by_time() == {iso(first): "SUCCEEDED", iso(first + timedelta(minutes=1)): "SKIPPED"}
    assert len(receiver.at("b")) == 1
    clock.move_to(first + timedelta(minutes=2))  # the slot is free again: the next one runs
    cloud.poll()
    run_until_quiet(cloud)
    assert by_time()[iso(first + timedelta(minutes=2))] == "SUCCEEDED"


def test_a_change_applies_to_later_runs_and_takes_a_task_out(
    cloud: SchedulerHarness, receiver: WebhookReceiver
) -> None:
    workflow = create(cloud, [task(receiver, "a"), task(receiver, "b", "a"), task(receiver, "c", "a")])
    workflow_id = workflow["workflow_id"]
    first = trigger(cloud, workflow_id)
    cloud.deliver((Priority.HIGH,))  # the first run begins with the old graph
    patch = {
        "name": "renamed",
        "tasks": [task(receiver, "a"), task(receiver, "c", "a"), task(receiver, "c2", "c")],
    }
    stale = cloud.call("PATCH", f"/v1/workflows/{workflow_id}", patch, headers={"If-Match": "7"})
    assert stale.status == 412
    changed = cloud.call("PATCH", f"/v1/workflows/{workflow_id}", patch, headers={"If-Match": "1"})
    assert changed.status == 200, changed.body
    assert changed.body["version"] == 2
    assert [t["task_id"] for t in changed.body["tasks"]] == ["a", "c", "c2"]
    run_until_quiet(cloud)
    old = workflow_run(cloud, workflow_id, first)
    assert statuses(old) == {"a": "SUCCEEDED", "b": "CANCELLED", "c": "SUCCEEDED"}  # b was taken out
    assert old["status"] == "CANCELLED"
    second = trigger(cloud, workflow_id)
    run_until_quiet(cloud)
    assert statuses(workflow_run(cloud, workflow_id, second)) == dict.fromkeys(("a", "c", "c2"), "SUCCEEDED")
    cyclic = {
        "tasks": [{"task_id": "x", "depends_on": ["x"], "target": {"type": "HTTP", "url": receiver.url}}]
    }
    refused = cloud.call("PATCH", f"/v1/workflows/{workflow_id}", cyclic)
    assert refused.status == 400
    assert refused.body["error"]["details"][0]["field"] == "tasks[0].depends_on[0]"


def test_a_failed_task_re_driven_from_the_dlq_carries_its_workflow_run_on(
    cloud: SchedulerHarness, receiver: WebhookReceiver
) -> None:
    """`make redrive` re-drives a task's run as any run: its success then counts as a retry
    of the task, and the workflow run that had failed runs again."""
    workflow = create(
        cloud,
        [
            task(receiver, "extract", statuses=(500,), retry={"max_attempts": 1}),
            task(receiver, "load", "extract"),
        ],
    )
    workflow_id = workflow["workflow_id"]
    run_id = trigger(cloud, workflow_id)
    run_until_quiet(cloud)
    assert workflow_run(cloud, workflow_id, run_id)["status"] == "FAILED"

    report = build_redriver(cloud.settings, cloud.clients, cloud.clock, wait_seconds=0).redrive()
    assert sum(report.outcomes.values()) >= 1, report
    run_until_quiet(cloud)
    run = workflow_run(cloud, workflow_id, run_id)
    assert statuses(run) == {"extract": "SUCCEEDED", "load": "SUCCEEDED"}
    assert run["status"] == "SUCCEEDED"
    assert len(receiver.at("load")) == 1


def test_a_task_whose_worker_died_with_no_attempt_left_fails_and_moves_its_workflow_run_on(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    workflow = create(
        cloud,
        [
            task(receiver, "a", retry={"max_attempts": 1}),
            task(receiver, "cleanup", "a", trigger_rule="ALL_DONE"),
        ],
    )
    run_id = trigger(cloud, workflow["workflow_id"])
    cloud.deliver((Priority.HIGH,))  # begun: a on its queue
    url = cloud.queue_url(Priority.NORMAL)
    [message] = cloud.clients.sqs().receive_message(QueueUrl=url, MaxNumberOfMessages=1)["Messages"]
    with pytest.raises(WorkerDied):
        dying_executor(cloud).execute(RunMessage.model_validate_json(message["Body"]))
    clock.advance(cloud.settings.run_lease_seconds + 1)
    reports = cloud.poll()  # the lease ran out: a FAILED, and its workflow run moves on at once
    assert sum(report.watched.get("failed", 0) for report in reports) == 1
    assert sum(report.watched.get("workflow_joined", 0) for report in reports) == 0
    run_until_quiet(cloud)
    run = workflow_run(cloud, workflow["workflow_id"], run_id)
    assert statuses(run) == {"a": "FAILED", "cleanup": "SUCCEEDED"}
    assert run["status"] == "FAILED"


def test_a_worker_dying_between_the_join_and_the_release_is_caught_up_by_the_poller(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    workflow = create(cloud, [task(receiver, "a"), task(receiver, "b", "a")])
    run_id = trigger(cloud, workflow["workflow_id"])
    with monkeypatch.context() as patched:
        patched.setattr(WorkflowRunner, "_release", lambda *args: None)  # dies after each write
        run_until_quiet(cloud)
    assert receiver.requests == []  # begun, a released, but its run never made
    clock.advance(workflow_runs.RECHECK.total_seconds() + 1)
    reports = cloud.poll()
    assert sum(report.watched.get("workflow_released", 0) for report in reports) == 1
    run_until_quiet(cloud)
    assert len(receiver.at("a")) == 1
    assert len(receiver.at("b")) == 1
    assert workflow_run(cloud, workflow["workflow_id"], run_id)["status"] == "SUCCEEDED"


def test_a_workflow_create_sent_again_with_its_idempotency_key_makes_one_workflow(
    cloud: SchedulerHarness, receiver: WebhookReceiver
) -> None:
    body = {"name": "pipeline", "tasks": [task(receiver, "a"), task(receiver, "b", "a")]}
    key = {"Idempotency-Key": "nightly-2026-11-26"}
    first = cloud.call("POST", "/v1/workflows", body, headers=key)
    again = cloud.call("POST", "/v1/workflows", body, headers=key)
    assert (first.status, again.status) == (201, 201)
    assert again.body["workflow_id"] == first.body["workflow_id"]
    assert len(cloud.call("GET", "/v1/workflows").body["items"]) == 1
    other = cloud.call("POST", "/v1/workflows", body | {"name": "another"}, headers=key)
    assert other.status == 422
    assert other.body["error"]["details"][0]["field"] == "Idempotency-Key"
    # A job's keys are its own: the same key makes a job, not the workflow.
    job = cloud.call(
        "POST",
        "/v1/jobs",
        {"name": "j", "schedule": {"rate": "1 hour"}, "target": {"type": "HTTP", "url": receiver.url}},
        headers=key,
    )
    assert job.status == 201, job.body
    assert job.body["job_id"] != first.body["workflow_id"]


def test_a_tasks_run_goes_on_the_queue_of_its_priority(
    cloud: SchedulerHarness, receiver: WebhookReceiver
) -> None:
    workflow = create(cloud, [task(receiver, "a", priority="LOW"), task(receiver, "b", "a", priority="HIGH")])
    trigger(cloud, workflow["workflow_id"])
    cloud.deliver((Priority.HIGH,))  # the workflow run begins: a is released
    assert (cloud.visible_messages(Priority.LOW), cloud.visible_messages(Priority.NORMAL)) == (1, 0)
    cloud.deliver((Priority.LOW,))  # a runs: b is released
    assert cloud.visible_messages(Priority.HIGH) == 1
