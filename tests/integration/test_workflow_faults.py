"""Faults a fresh-eyes review found in workflows and backfills, each fixed since: every test
states a behaviour the docs or the guarantees promise; its docstring tells how the code
broke it when it was found (where and why), so a regression reads as that defect again."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from scheduler_core.domain.clock import to_ms
from scheduler_core.domain.messages import RunMessage
from scheduler_core.domain.vocabulary import Priority
from scheduler_core.services.workflow_runs import WorkflowRunner
from tests.integration.test_workflows import (
    create,
    run_until_quiet,
    statuses,
    task,
    trigger,
    workflow_run,
)
from tests.support.faults import WorkerDied, dying_executor
from tests.support.harness import FrozenClock, SchedulerHarness
from tests.support.helpers import iso
from tests.support.receiver import WebhookReceiver

HOUR = timedelta(hours=1)


def hourly_job(receiver: WebhookReceiver, **fields: Any) -> dict[str, Any]:
    return {
        "name": "hourly",
        "schedule": {"cron": "0 * * * *"},
        "target": {"type": "HTTP", "url": receiver.url},
    } | fields


def top_of_hour(when: datetime) -> datetime:
    return when.replace(minute=0, second=0, microsecond=0)


def runs_by_time(cloud: SchedulerHarness, job_id: str) -> dict[str, dict[str, Any]]:
    reply = cloud.call("GET", f"/v1/jobs/{job_id}/runs?limit=100")
    assert reply.status == 200, reply.body
    return {run["scheduled_for"]: run for run in reply.body["items"]}


def hour_by_hour(cloud: SchedulerHarness, clock: FrozenClock, until: datetime) -> None:
    """The poller and the workers, each minute before and at every hour up to `until`."""
    when = top_of_hour(clock.now()) + HOUR
    while when <= until:
        clock.move_to(when - timedelta(minutes=1))
        cloud.poll()
        clock.move_to(when)
        cloud.poll()
        run_until_quiet(cloud)
        when += HOUR


# --- backfill: a window reaching firings the poller has not claimed yet ------------------------


def test_a_backfill_window_reaching_a_future_firing_does_not_stop_the_job_for_good(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    """`JobControl.backfill` makes a BACKFILL run at every firing in [start, end] with no run
    yet, future ones included (nothing checks end <= now, or end < next_fire_at). The claim of
    such a firing (`_claim_on_its_own`) puts the run on the condition RUN_ABSENT: it fails, the
    dispatcher reads it as a lost race and breaks, and the job stays at that firing forever:
    no scheduled run, ever again (every later poll loses the same 'race')."""
    job = cloud.create(hourly_job(receiver))
    now = clock.now()  # 10:00:30
    start = top_of_hour(now) - 2 * HOUR
    reply = cloud.call(
        "POST", f"/v1/jobs/{job['job_id']}/backfill", {"start": iso(start), "end": iso(start + 4 * HOUR)}
    )
    if reply.status == 422:
        return  # refused, naming `end`: as good as a fix
    assert reply.status == 202, reply.body
    hour_by_hour(cloud, clock, top_of_hour(now) + 5 * HOUR)  # up to 15:00
    runs = runs_by_time(cloud, job["job_id"])
    after_window = iso(top_of_hour(now) + 4 * HOUR)  # 14:00, outside the backfill's window
    assert after_window in runs, cloud.call("GET", f"/v1/jobs/{job['job_id']}").body["next_fire_at"]
    assert runs[after_window]["trigger"] == "SCHEDULE"


def test_a_backfill_of_a_one_off_before_it_fires_leaves_it_to_complete(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    """A one-off's firing is claimed onto its job's item (`_claim_with_job`), whose condition
    does not look for a run item of its own at that time. A backfill that made one first
    (its window holds the `at`) leaves two runs with one id: the worker reads the run's own
    item first (`get_job_and_run`), finds the BACKFILL one ended and drops the message as a
    duplicate; the kept run stays PENDING, re-sent by the watchdog every minute, and the job
    is never COMPLETED (guarantees.md: 'One-off jobs become COMPLETED after their run ends')."""
    fire_at = clock.now() + timedelta(minutes=10)
    job = cloud.create(
        {"name": "once", "schedule": {"at": iso(fire_at)}, "target": {"type": "HTTP", "url": receiver.url}}
    )
    reply = cloud.call(
        "POST",
        f"/v1/jobs/{job['job_id']}/backfill",
        {"start": iso(fire_at - HOUR), "end": iso(fire_at + HOUR)},
    )
    if reply.status == 422:
        return  # refused, naming `end`: as good as a fix
    assert reply.status == 202, reply.body
    run_until_quiet(cloud)
    clock.move_to(fire_at - timedelta(minutes=1))
    cloud.poll()
    for minute in range(6):
        clock.move_to(fire_at + timedelta(minutes=minute))
        cloud.poll()
        run_until_quiet(cloud)
    assert cloud.call("GET", f"/v1/jobs/{job['job_id']}").body["status"] == "COMPLETED", runs_by_time(
        cloud, job["job_id"]
    )


# --- backfill: its runs queue for the slots, 'never SKIPPED' ------------------------------------


def test_a_backfill_runs_retry_is_not_skipped_while_the_next_backfill_run_holds_the_slot(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    """Backfill runs are `caught_up` and join the catch-up queue whatever the job's misfire
    policy (`queues = overlap is not ALLOW`), but admission treats a run out of the queue as
    caught up only when `queues_when_caught_up(job)`, i.e. misfire CATCH_UP. Under the default
    FIRE_ONCE, a backfill run whose first attempt failed gives its slot back (the next backfill
    run starts) and its retry then meets a taken slot: SKIPPED, against the docs ('queued for
    the running slots like a catch-up backlog (never SKIPPED)')."""
    job = cloud.create(hourly_job(receiver, retry={"backoff_seconds": 1}))
    job_id = job["job_id"]
    first = top_of_hour(clock.now()) - 3 * HOUR
    receiver.respond_with(500)  # the first backfill run's first attempt fails
    reply = cloud.call("POST", f"/v1/jobs/{job_id}/backfill", {"start": iso(first), "end": iso(first + HOUR)})
    assert reply.body == {"runs": 2, "already_run": 0}
    sqs, url = cloud.clients.sqs(), cloud.queue_url(Priority.NORMAL)

    def messages_of(when: datetime) -> list[RunMessage]:
        """The visible messages of the run at `when` (the others are left to come back)."""
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=0).get(
            "Messages", []
        )
        bodies = [RunMessage.model_validate_json(m["Body"]) for m in got]
        return [body for body in bodies if body.scheduled_for_ms == to_ms(when)]

    [second_waits] = messages_of(first + HOUR)
    cloud.executor.execute(second_waits)  # not its turn: it waits
    [first_message] = messages_of(first)
    cloud.executor.execute(first_message)  # its turn: starts, fails, RETRYING; wakes the second
    assert runs_by_time(cloud, job_id)[iso(first)]["status"] == "RETRYING"
    second = messages_of(first + HOUR)
    assert second, "a message of the second backfill run (woken, or its first one back)"
    with pytest.raises(WorkerDied):  # the second backfill run takes the slot and is under way
        dying_executor(cloud).execute(second[0])
    clock.advance(2)
    cloud.deliver()  # the first run's retry
    assert runs_by_time(cloud, job_id)[iso(first)]["status"] != "SKIPPED"


# --- a workflow that runs only when triggered ----------------------------------------------------


def test_pausing_and_resuming_a_workflow_with_no_schedule_leaves_it_usable(
    cloud: SchedulerHarness, receiver: WebhookReceiver
) -> None:
    """`plan_resume` finds no next firing (a trigger-only workflow has none) and no unfinished
    run that counts (its runs are all MANUAL/BACKFILL, BY_NAME): `done`, so the resume makes it
    COMPLETED. It can then never be triggered nor changed again (409)."""
    workflow = create(cloud, [task(receiver, "a")])
    workflow_id = workflow["workflow_id"]
    assert cloud.call("POST", f"/v1/workflows/{workflow_id}/pause").status == 200
    resumed = cloud.call("POST", f"/v1/workflows/{workflow_id}/resume")
    assert resumed.status == 200, resumed.body
    assert resumed.body["status"] == "SCHEDULED"
    assert cloud.call("POST", f"/v1/workflows/{workflow_id}/trigger").status == 202


# --- PATCH of a workflow's schedule near a claimed firing ---------------------------------------


def test_a_workflow_patched_with_its_schedule_after_its_next_firing_was_claimed_keeps_firing(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    """`WorkflowService.update` sets next_fire_at to `first_firing(schedule, now, now)` with no
    look at runs already claimed (a job's PATCH goes through `JobControl._reschedule`, which
    skips a firing a run holds). Within the lookahead before a firing, that firing is claimed:
    the workflow is put back on it, every later claim of it fails on RUN_ABSENT, and the
    workflow never fires again. Sending the same schedule back (a client PATCHing the whole
    object) is enough."""
    schedule = {"cron": "*/5 * * * *"}
    workflow = create(cloud, [task(receiver, "a")], schedule=schedule)
    workflow_id = workflow["workflow_id"]
    fire_at = datetime.fromisoformat(workflow["next_fire_at"].replace("Z", "+00:00"))
    clock.move_to(fire_at - timedelta(seconds=60))
    cloud.poll()  # the firing at fire_at is claimed
    patched = cloud.call("PATCH", f"/v1/workflows/{workflow_id}", {"schedule": schedule})
    assert patched.status == 200, patched.body
    for step in range(1, 4):  # three more firings
        clock.move_to(fire_at + timedelta(minutes=5 * step) - timedelta(seconds=60))
        cloud.poll()
        clock.move_to(fire_at + timedelta(minutes=5 * step))
        cloud.poll()
        run_until_quiet(cloud)
    runs = cloud.call("GET", f"/v1/workflows/{workflow_id}/runs").body["items"]
    times = {run["scheduled_for"] for run in runs}
    assert iso(fire_at + timedelta(minutes=15)) in times, (
        times,
        cloud.call("GET", f"/v1/workflows/{workflow_id}").body["next_fire_at"],
    )


# --- cancel of a workflow run ------------------------------------------------------------------


def test_a_cancelled_workflow_run_starts_no_new_attempt_of_a_task_that_was_under_way(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`WorkflowRunner.cancel` leaves a task whose run is RUNNING to end 'as it ends', but
    nothing stops that run's retry: its task item stays SCHEDULED (only a workflow's DELETE
    cancels task items), so when the attempt under way fails, the next attempt starts and
    calls the target again, after the cancel was answered 202."""
    workflow = create(
        cloud,
        [task(receiver, "a", statuses=(500,), retry={"backoff_seconds": 1}), task(receiver, "b", "a")],
    )
    workflow_id = workflow["workflow_id"]
    run_id = trigger(cloud, workflow_id)
    cloud.deliver((Priority.HIGH,))  # begun: a released
    deliver = cloud.worker_targets.deliver
    cancels: list[int] = []

    def cancel_while_a_calls(job: Any, run: Any) -> Any:
        if not cancels:
            cancels.append(cloud.call("POST", f"/v1/workflows/{workflow_id}/runs/{run_id}/cancel").status)
        return deliver(job, run)

    monkeypatch.setattr(cloud.worker_targets, "deliver", cancel_while_a_calls)
    for _ in range(5):
        run_until_quiet(cloud)
        clock.advance(2)
    assert cancels == [202]
    assert len(receiver.at("a")) == 1, [r.headers["x-scheduler-attempt"] for r in receiver.at("a")]
    assert workflow_run(cloud, workflow_id, run_id)["status"] == "CANCELLED"


def test_a_workflow_run_started_but_not_begun_can_be_cancelled(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A workflow run whose worker took its slot and died before `begin` (or is between its
    start and its begin) is RUNNING with no phases. `WorkflowRunner.cancel` answers False for
    it (only PENDING/RETRYING are 'not begun'), so the API says 409 'is RUNNING; there is
    nothing to cancel' (the docs: 'a workflow run not begun yet is cancelled whole'; 409 is for
    an ended one); at the lease's end the watchdog retries it, it begins and every task runs."""
    workflow = create(cloud, [task(receiver, "a")])
    workflow_id = workflow["workflow_id"]
    run_id = trigger(cloud, workflow_id)
    url = cloud.queue_url(Priority.HIGH)
    [message] = cloud.clients.sqs().receive_message(QueueUrl=url, MaxNumberOfMessages=1)["Messages"]

    def dies(*args: Any) -> Any:
        raise WorkerDied("before the begin")

    with monkeypatch.context() as patched:
        patched.setattr(WorkflowRunner, "begin", dies)
        with pytest.raises(WorkerDied):
            cloud.executor.execute(RunMessage.model_validate_json(message["Body"]))
    reply = cloud.call("POST", f"/v1/workflows/{workflow_id}/runs/{run_id}/cancel")
    clock.advance(cloud.settings.run_lease_seconds + 5)
    cloud.poll()
    clock.advance(60)
    cloud.poll()
    run_until_quiet(cloud)
    assert (reply.status, receiver.requests) == (202, []), reply.body


def test_a_workflow_run_cancelled_while_its_last_tasks_run_ends_cancelled(
    cloud: SchedulerHarness, receiver: WebhookReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The docs ('Cancel a workflow run'): 'Tasks already calling their targets end as they
    end; the workflow run is then CANCELLED.' `cancelled(phases)` only decides WAITING tasks:
    when every task left is under way there is nothing to decide, the cancel is answered 202
    and the workflow run then ends SUCCEEDED, as if never cancelled."""
    workflow = create(cloud, [task(receiver, "a")])
    workflow_id = workflow["workflow_id"]
    run_id = trigger(cloud, workflow_id)
    cloud.deliver((Priority.HIGH,))  # begun: a released
    deliver = cloud.worker_targets.deliver
    cancels: list[int] = []

    def cancel_while_a_calls(job: Any, run: Any) -> Any:
        if not cancels:
            cancels.append(cloud.call("POST", f"/v1/workflows/{workflow_id}/runs/{run_id}/cancel").status)
        return deliver(job, run)

    monkeypatch.setattr(cloud.worker_targets, "deliver", cancel_while_a_calls)
    run_until_quiet(cloud)
    assert cancels == [202]
    assert workflow_run(cloud, workflow_id, run_id)["status"] == "CANCELLED"


# --- a PATCH racing a DELETE --------------------------------------------------------------------


def test_a_patch_racing_a_delete_does_not_bring_the_cancelled_workflows_tasks_back(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`WorkflowService.update` writes the workflow (conditioned on its version), then each
    task's item as `_task_job` makes it: status SCHEDULED, conditioned only on the task item's
    own version. A DELETE landing between the two (it reads the workflow at its new version,
    cancels it and its task items) is undone for the tasks: they are SCHEDULED again under a
    CANCELLED workflow. A task run under way at the DELETE then retries and calls its target
    again (with the DELETE alone, its retry is cancelled by the worker)."""
    from scheduler_core.services.workflows import WorkflowService

    workflow = create(
        cloud,
        [task(receiver, "a", statuses=(500,), retry={"backoff_seconds": 1}), task(receiver, "b", "a")],
    )
    workflow_id = workflow["workflow_id"]
    tenant = cloud.api_store.get_job(workflow_id).tenant  # type: ignore[union-attr]
    service = cloud.jobs.workflows
    assert service is not None
    trigger(cloud, workflow_id)
    cloud.deliver((Priority.HIGH,))  # begun: a released
    write_tasks = WorkflowService._write_tasks

    def delete_lands_first(self: WorkflowService, *args: Any) -> None:
        service.cancel(tenant, workflow_id)  # the DELETE, between the two writes
        write_tasks(self, *args)

    deliver = cloud.worker_targets.deliver
    patches: list[int] = []

    def patch_while_a_calls(job: Any, run: Any) -> Any:
        if not patches:
            with monkeypatch.context() as patched:
                patched.setattr(WorkflowService, "_write_tasks", delete_lands_first)
                body = {"name": "renamed"}
                patches.append(cloud.call("PATCH", f"/v1/workflows/{workflow_id}", body).status)
        return deliver(job, run)

    monkeypatch.setattr(cloud.worker_targets, "deliver", patch_while_a_calls)
    for _ in range(5):
        run_until_quiet(cloud)
        clock.advance(2)
    assert patches == [200]
    assert cloud.call("GET", f"/v1/workflows/{workflow_id}").body["status"] == "CANCELLED"
    task_items = {t: cloud.api_store.get_job(f"{workflow_id}.{t}") for t in "ab"}
    attempts = [request.headers["x-scheduler-attempt"] for request in receiver.at("a")]
    assert attempts == ["1"], {t: str(job.status) for t, job in task_items.items() if job}


def test_control_a_delete_alone_stops_the_retry_of_a_task_under_way(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """(Control for the test above; passes.) The DELETE alone, during a's first call: a's
    retry finds its task item CANCELLED and is cancelled by the worker."""
    workflow = create(
        cloud,
        [task(receiver, "a", statuses=(500,), retry={"backoff_seconds": 1}), task(receiver, "b", "a")],
    )
    workflow_id = workflow["workflow_id"]
    trigger(cloud, workflow_id)
    cloud.deliver((Priority.HIGH,))
    deliver = cloud.worker_targets.deliver
    deletes: list[int] = []

    def delete_while_a_calls(job: Any, run: Any) -> Any:
        if not deletes:
            deletes.append(cloud.call("DELETE", f"/v1/workflows/{workflow_id}").status)
        return deliver(job, run)

    monkeypatch.setattr(cloud.worker_targets, "deliver", delete_while_a_calls)
    for _ in range(5):
        run_until_quiet(cloud)
        clock.advance(2)
    assert deletes == [200]
    assert [request.headers["x-scheduler-attempt"] for request in receiver.at("a")] == ["1"]


def test_a_backfill_of_past_firings_during_an_outage_does_not_stop_the_job_for_good(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    """The same as the first test with a window wholly in the past (end <= now): the poller
    has not claimed the job's next firing yet (an outage, or a poll behind), so the backfill
    makes the run of that firing, `next_fire_at`, and the claim of it fails on RUN_ABSENT for
    good. An `end <= now` check is not enough: firings from `next_fire_at` on are the
    schedule's, not the backfill's."""
    job = cloud.create(hourly_job(receiver))
    cloud.poll()  # the shards' first poll: their watermarks start here
    eleven = top_of_hour(clock.now()) + HOUR
    clock.move_to(eleven + timedelta(hours=2, minutes=30))  # 13:30, nothing polled since 10:00
    reply = cloud.call(
        "POST", f"/v1/jobs/{job['job_id']}/backfill", {"start": iso(eleven), "end": iso(eleven + 2 * HOUR)}
    )
    assert reply.status in (202, 422), reply.body  # 422 (or fewer runs): as good as a fix
    cloud.poll()
    run_until_quiet(cloud)
    hour_by_hour(cloud, clock, eleven + 4 * HOUR)  # 14:00, 15:00
    runs = runs_by_time(cloud, job["job_id"])
    assert iso(eleven + 4 * HOUR) in runs, cloud.call("GET", f"/v1/jobs/{job['job_id']}").body["next_fire_at"]


# --- the API's view of a workflow run that never began ------------------------------------------


def test_a_workflow_run_cancelled_before_it_began_does_not_show_its_tasks_pending(
    cloud: SchedulerHarness, receiver: WebhookReceiver
) -> None:
    """The run view (`WorkflowRunViews`) showed every task of a workflow run that never began
    as PENDING (`WAITING`), whatever the run's status: a CANCELLED (or SKIPPED, or FAILED
    before its begin) workflow run listed its tasks as PENDING for good, i.e. 'waiting for
    its upstream tasks'."""
    workflow = create(cloud, [task(receiver, "a")])
    run_id = trigger(cloud, workflow["workflow_id"])
    reply = cloud.call("POST", f"/v1/workflows/{workflow['workflow_id']}/runs/{run_id}/cancel")
    assert reply.body["status"] == "CANCELLED"
    assert statuses(reply.body) != {"a": "PENDING"}


# --- a DLQ re-drive of a failed task, and a worker that dies before its join ---------------------


def test_a_re_driven_tasks_success_is_joined_even_if_its_worker_dies_before_the_join(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A task re-driven from the DLQ (`make redrive`) carries its ended workflow run on only
    through the worker's `_join` (reopen). 'Nothing gets stuck' rests on the workflow run's
    timer, but an ended workflow run has none (its end removed it) and the re-drive does not
    reopen it: a worker that dies between the task's SUCCEEDED write and the join (or a join
    that gives up on contention, which is only logged) leaves the workflow run FAILED for good
    and `load` never runs, though its upstream succeeded."""
    from scheduler_core.composition import build_redriver
    from scheduler_core.services import workflow_runs

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
    build_redriver(cloud.settings, cloud.clients, cloud.clock, wait_seconds=0).redrive()
    with monkeypatch.context() as patched:
        patched.setattr(WorkflowRunner, "task_run_ended", lambda *args: None)  # the worker dies
        run_until_quiet(cloud)
    for _ in range(3):
        clock.advance(workflow_runs.RECHECK.total_seconds() + 1)
        cloud.poll()
        run_until_quiet(cloud)
    run = workflow_run(cloud, workflow_id, run_id)
    assert (run["status"], len(receiver.at("load"))) == ("SUCCEEDED", 1), statuses(run)


# --- a backfill of firings older than the run retention -----------------------------------------


def test_a_backfill_of_old_firings_does_not_make_runs_already_past_their_ttl(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    """`ItemCodec.run_item` sets a new run's TTL to `scheduled_for + retention` (30 days), right
    for a firing claimed on time; a backfill (no limit on how far back: 'a backfill may reach
    before the job was created') makes runs at old firings, and their task runs carry the
    workflow run's time, so each item is born already expired: DynamoDB's TTL may delete it
    at any time, waiting or under way (nothing refreshes `expires_at` before the end). A
    workflow run deleted while RUNNING is never ended (`_join` reads None: 'gone (TTL)'), so
    its running slot is never given back and every later scheduled run is SKIPPED; a task run
    deleted while released is made again by `reconcile` (its target called twice)."""
    from scheduler_core.domain.clock import from_ms

    workflow = create(cloud, [task(receiver, "a"), task(receiver, "b", "a")], schedule={"cron": "0 3 * * *"})
    workflow_id = workflow["workflow_id"]
    old = top_of_hour(clock.now() - timedelta(days=40)).replace(hour=3)
    reply = cloud.call("POST", f"/v1/workflows/{workflow_id}/backfill", {"start": iso(old), "end": iso(old)})
    assert reply.body == {"runs": 1, "already_run": 0}
    cloud.deliver((Priority.HIGH,))  # the workflow run begins (it holds the slot): a is released
    ddb = cloud.clients.dynamodb()

    def ttl_of(job_id: str) -> datetime:
        item = ddb.get_item(
            TableName=cloud.settings.jobs_table_name,
            Key={"pk": {"S": f"JOB#{job_id}"}, "sk": {"S": f"RUN#{to_ms(old):013d}"}},
            ConsistentRead=True,
        )["Item"]
        assert item["status"]["S"] in ("RUNNING", "PENDING"), item["status"]
        return from_ms(int(item["expires_at"]["N"]) * 1000)

    now = clock.now()
    assert {"workflow run": ttl_of(workflow_id) > now, "task a": ttl_of(f"{workflow_id}.a") > now} == {
        "workflow run": True,
        "task a": True,
    }


# --- existing jobs: the HTTP answer's body is now read for every job ----------------------------


def test_a_plain_jobs_http_target_that_answers_200_before_its_body_still_succeeds(
    cloud: SchedulerHarness, clock: FrozenClock
) -> None:
    """`TargetDelivery._deliver_http` now reads up to 64 KiB of every 2xx answer's body (a
    task's output), for plain jobs too, whose output is thrown away. Before the change the
    answer's status was the result and the body was never waited for; now a target that
    sends its 200 and then streams (or stalls on) its body holds the worker until the socket
    timeout: the run RETRYING with 'timed out', the target called again, though it answered
    200 at once."""
    import socket
    import threading
    import time

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    calls: list[float] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            conn.recv(65536)
            calls.append(time.monotonic())
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 10\r\n\r\n")
            time.sleep(2.5)  # the body comes later (a report being generated, a stream)
            try:
                conn.sendall(b"0123456789")
                conn.close()
            except OSError:
                pass

    threading.Thread(target=serve, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.getsockname()[1]}/report"
        job = cloud.create(
            {
                "name": "report",
                "schedule": {"at": iso(clock.now() + timedelta(seconds=5))},
                "target": {"type": "HTTP", "url": url, "timeout_seconds": 1},
            }
        )
        clock.advance(5)
        cloud.deliver()
        [run] = cloud.runs(job["job_id"])
        assert (run["status"], len(calls)) == ("SUCCEEDED", 1), run
    finally:
        server.close()
