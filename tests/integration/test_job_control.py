"""Changing a job after its creation, through the real handlers on moto: what only the
handlers, DynamoDB and a real webhook receiver show. The rules of job control themselves
(pause, resume, a pause during a run's call, trigger, PATCH of a job with claimed firings or
waiting and running runs, If-Match, the cancel of waiting runs, the refusals) are tested on
in-memory fakes in `tests/unit/test_job_control_rules_on_fakes.py`; here stays their
handler-level proof: status codes and JSON bodies (202, 409, 412, 404 for another tenant),
If-Match as a header, the headers and body a webhook receives, DynamoDB's conditions under a
claim racing a PATCH and a worker interleaved with a pause and a resume. Also here: the run
history's and job listing's filters, bad input, and the API's metrics."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from scheduler_core.adapters.dynamodb import DynamoJobStore
from scheduler_core.adapters.dynamodb import job_listing as listing_module
from scheduler_core.domain.entities import Job
from tests.support.events import BOB
from tests.support.harness import FrozenClock, SchedulerHarness
from tests.support.helpers import http_job, iso
from tests.support.receiver import WebhookReceiver

MINUTE = timedelta(minutes=1)


def ms(when: datetime) -> int:
    return int(when.timestamp() * 1000)


def job_of(cloud: SchedulerHarness, job_id: str) -> dict[str, Any]:
    reply = cloud.call("GET", f"/v1/jobs/{job_id}")
    assert reply.status == 200, reply.body
    job: dict[str, Any] = reply.body
    return job


def post(cloud: SchedulerHarness, job_id: str, action: str, status: int = 200) -> Any:
    reply = cloud.call("POST", f"/v1/jobs/{job_id}/{action}")
    assert reply.status == status, reply.body
    return reply.body


# --- pause, resume, trigger and PATCH through the handlers ------------------------------------


def test_pausing_a_cancelled_or_completed_job_is_a_409(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    cancelled = cloud.create(http_job(receiver, payload={"n": 1}, cron="0 * * * *"))
    cloud.call("DELETE", f"/v1/jobs/{cancelled['job_id']}")
    fire_at = clock.now() + timedelta(seconds=10)
    completed = cloud.create(http_job(receiver, payload={"n": 1}, at=iso(fire_at)))
    clock.move_to(fire_at)
    cloud.deliver()
    assert job_of(cloud, completed["job_id"])["status"] == "COMPLETED"

    for job in (cancelled, completed):
        for action in ("pause", "resume", "trigger"):
            reply = cloud.call("POST", f"/v1/jobs/{job['job_id']}/{action}")
            assert reply.status == 409, (action, reply.body)
            assert reply.body["error"]["code"] == "CONFLICT"


def test_trigger_runs_the_job_now_through_the_queue_and_leaves_its_schedule(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    job = cloud.create(http_job(receiver, payload={"n": 1}, cron="0 * * * *") | {"priority": "HIGH"})
    clock.advance(5)
    now = clock.now()

    run = post(cloud, job["job_id"], "trigger", status=202)
    assert run["run_id"] == f"{job['job_id']}:{ms(now)}"
    assert run["trigger"] == "MANUAL"
    assert run["status"] == "PENDING"
    assert run["scheduled_for"] == iso(now)
    after = job_of(cloud, job["job_id"])
    assert (after["next_fire_at"], after["version"]) == (job["next_fire_at"], job["version"])

    assert cloud.deliver() == 1
    [request] = receiver.requests
    assert request.headers["x-scheduler-run-id"] == run["run_id"]
    assert request.headers["idempotency-key"] == run["run_id"]
    done = cloud.call("GET", f"/v1/jobs/{job['job_id']}/runs/{run['run_id']}").body
    assert (done["status"], done["trigger"], done["attempt"]) == ("SUCCEEDED", "MANUAL", 1)
    assert done["lateness_ms"] == 0
    assert job_of(cloud, job["job_id"])["status"] == "SCHEDULED"


def test_a_run_in_flight_delivers_the_job_as_patched(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    fire_at = clock.now() + timedelta(seconds=30)
    job = cloud.create(
        http_job(receiver, payload={"n": 1}, at=iso(fire_at))
    )  # its run is on the queue already
    patch = {
        "payload": {"n": 2},
        "target": {"type": "HTTP", "url": f"{receiver.url}/v2", "method": "PUT"},
        "name": "renamed",
    }
    reply = cloud.call("PATCH", f"/v1/jobs/{job['job_id']}", patch)
    assert reply.status == 200, reply.body
    assert reply.body["version"] == job["version"] + 1
    assert reply.body["name"] == "renamed"
    assert reply.body["schedule"] == job["schedule"]

    clock.move_to(fire_at)
    assert cloud.deliver() == 1
    [request] = receiver.requests
    assert (request.method, request.path, request.body) == ("PUT", "/hook/v2", {"n": 2})
    assert job_of(cloud, job["job_id"])["status"] == "COMPLETED"


def test_a_patch_racing_a_claim_neither_loses_nor_doubles_it(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = cloud.create(http_job(receiver, payload={"n": 1}, cron="*/5 * * * *"))  # next 10:05
    clock.move_to(datetime(2026, 11, 21, 10, 3, 30, tzinfo=UTC))
    store = cloud.api_store
    original = store.update_job_if_unchanged
    writes: list[int] = []

    def claim_first(*args: Any, **kwargs: Any) -> bool:
        writes.append(1)
        if len(writes) == 1:
            cloud.poll()  # a poller claims 10:05 between the PATCH's read and its write
        return original(*args, **kwargs)

    monkeypatch.setattr(store, "update_job_if_unchanged", claim_first)
    reply = cloud.call("PATCH", f"/v1/jobs/{job['job_id']}", {"payload": {"n": 3}})

    assert reply.status == 200, reply.body
    assert len(writes) == 2  # the first write lost to the claim; read again, it won
    assert reply.body["version"] == job["version"] + 2
    assert reply.body["next_fire_at"] == iso(datetime(2026, 11, 21, 10, 10, tzinfo=UTC))
    clock.move_to(datetime(2026, 11, 21, 10, 5, tzinfo=UTC))
    cloud.poll()
    cloud.deliver()
    assert [r.body for r in receiver.requests] == [{"n": 3}]


def test_if_match_names_the_version_the_patch_applies_to(
    cloud: SchedulerHarness, receiver: WebhookReceiver
) -> None:
    job = cloud.create(http_job(receiver, payload={"n": 1}, cron="0 * * * *"))
    path = f"/v1/jobs/{job['job_id']}"

    stale = cloud.call("PATCH", path, {"name": "b"}, headers={"If-Match": f'"{job["version"] - 1}"'})
    assert stale.status == 412, stale.body
    assert stale.body["error"]["code"] == "PRECONDITION_FAILED"
    fresh = cloud.call("PATCH", path, {"name": "b"}, headers={"If-Match": f'"{job["version"]}"'})
    assert fresh.status == 200, fresh.body
    assert fresh.body["name"] == "b"
    assert cloud.call("PATCH", path, {"name": "c"}, headers={"if-match": "*"}).status == 200


def test_another_tenant_cannot_change_a_job(cloud: SchedulerHarness, receiver: WebhookReceiver) -> None:
    job = cloud.create(http_job(receiver, payload={"n": 1}, cron="0 * * * *"))
    path = f"/v1/jobs/{job['job_id']}"
    assert cloud.call("PATCH", path, {"name": "x"}, caller=BOB).status == 404
    for action in ("pause", "resume", "trigger"):
        assert cloud.call("POST", f"{path}/{action}", caller=BOB).status == 404
    assert job_of(cloud, job["job_id"]) == job


# --- run history and listing filters ----------------------------------------------------------


def test_runs_filter_by_status_newest_first_across_pages(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    job = cloud.create(
        http_job(receiver, payload={"n": 1}, cron="0 * * * *") | {"retry": {"max_attempts": 1}}
    )
    job_id = job["job_id"]
    triggered = []
    for status in (500, 200, 500, 200, 200):
        receiver.respond_with(status)
        triggered.append((post(cloud, job_id, "trigger", status=202)["run_id"], status))
        cloud.deliver()
        clock.advance(1)

    failed = cloud.runs(job_id, "?status=FAILED")
    assert [r["run_id"] for r in failed] == [run for run, code in reversed(triggered) if code == 500]
    assert all(r["response_code"] == 500 and r["error"] for r in failed)
    succeeded: list[str] = []
    cursor = None
    while True:
        page = cloud.call(
            "GET",
            f"/v1/jobs/{job_id}/runs?status=SUCCEEDED&limit=2" + (f"&cursor={cursor}" if cursor else ""),
        ).body
        succeeded += [r["run_id"] for r in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert succeeded == [run for run, code in reversed(triggered) if code == 200]
    first = cloud.runs(job_id, "?status=SUCCEEDED")[0]
    shown = ("scheduled_for", "started_at", "finished_at", "lateness_ms", "attempt", "trigger", "error")
    assert set(shown) <= set(first)


def test_jobs_filter_by_name_prefix_and_status(cloud: SchedulerHarness, clock: FrozenClock) -> None:
    def create(name: str) -> str:
        clock.advance(1)
        job_id: str = cloud.create(
            {
                "name": name,
                "schedule": {"rate": "1 hour"},
                "target": {"type": "HTTP", "url": "https://x.test/"},
            }
        )["job_id"]
        return job_id

    billing = [create(f"billing-{i}") for i in range(3)]
    create("reports-1")
    cloud.call("POST", f"/v1/jobs/{billing[1]}/pause")

    names = [j["name"] for j in cloud.call("GET", "/v1/jobs?name_prefix=billing-").body["items"]]
    assert names == ["billing-2", "billing-1", "billing-0"]
    paused = cloud.call("GET", "/v1/jobs?name_prefix=billing&status=PAUSED").body["items"]
    assert [j["job_id"] for j in paused] == [billing[1]]
    assert cloud.call("GET", "/v1/jobs?name_prefix=Billing").body["items"] == []  # case matters


def test_a_filtered_listing_reads_a_bounded_number_of_items_per_page(
    cloud: SchedulerHarness, clock: FrozenClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in range(8):
        clock.advance(1)
        name = "match" if i in (1, 6) else f"other-{i}"
        cloud.create(
            {
                "name": name,
                "schedule": {"rate": "1 hour"},
                "target": {"type": "HTTP", "url": "https://x.test/"},
            }
        )
    monkeypatch.setattr(listing_module, "FILTERED_READ_BUDGET", 3)

    pages: list[list[str]] = []
    cursor = None
    while True:
        page = cloud.call(
            "GET", "/v1/jobs?name_prefix=match&limit=10" + (f"&cursor={cursor}" if cursor else "")
        ).body
        pages.append([j["name"] for j in page["items"]])
        cursor = page["next_cursor"]
        if cursor is None:
            break
    # 8 items, 3 read per page: short pages (even empty ones) until the listing ends.
    assert len(pages) == 3
    assert [name for page in pages for name in page] == ["match", "match"]


# --- bad input --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "field"),
    [
        pytest.param({"name": ""}, "name", id="empty name"),
        pytest.param({"name": None}, "name", id="null name"),
        pytest.param({"schedule": None}, "schedule", id="null schedule"),
        pytest.param({"surprise": 1}, "surprise", id="unknown field"),
        pytest.param({"schedule": {"cron": "61 * * * *"}}, "schedule.cron", id="bad cron"),
        pytest.param({"schedule": {}}, "schedule", id="no schedule kind"),
        pytest.param({"target": {"type": "FTP"}}, "target.type", id="unknown target type"),
        pytest.param({"target": {"type": "HTTP", "url": "ftp://x"}}, "target.url", id="non-http url"),
        pytest.param({"priority": "URGENT"}, "priority", id="unknown priority"),
        pytest.param({"retry": {"max_attempts": 0}}, "retry.max_attempts", id="no attempts"),
    ],
)
def test_a_bad_patch_is_a_400_naming_the_field(
    cloud: SchedulerHarness, receiver: WebhookReceiver, body: dict[str, Any], field: str
) -> None:
    job = cloud.create(http_job(receiver, payload={"n": 1}, cron="0 * * * *"))
    reply = cloud.call("PATCH", f"/v1/jobs/{job['job_id']}", body)
    assert reply.status == 400, reply.body
    assert reply.body["error"]["code"] == "VALIDATION_ERROR"
    assert field in [d["field"] for d in reply.body["error"]["details"]], reply.body
    assert job_of(cloud, job["job_id"]) == job


def test_a_patch_the_service_refuses_names_the_field(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    job = cloud.create(http_job(receiver, payload={"n": 1}, cron="0 * * * *"))
    path = f"/v1/jobs/{job['job_id']}"
    cases = [
        ({"schedule": {"at": "2020-01-01T00:00:00Z"}}, 422, "schedule.at"),
        ({"schedule": {"cron": "0 0 30 2 *"}}, 422, "schedule.cron"),
        ({"target": {"type": "SQS", "queue_url": cloud.settings.queue_url_normal}}, 400, "target.queue_url"),
    ]
    for body, status, field in cases:
        reply = cloud.call("PATCH", path, body)
        assert reply.status == status, (body, reply.body)
        assert field in [d["field"] for d in reply.body["error"]["details"]], reply.body
    bad_tag = cloud.call("PATCH", path, {"name": "x"}, headers={"If-Match": "yesterday"})
    assert bad_tag.status == 400
    assert [d["field"] for d in bad_tag.body["error"]["details"]] == ["If-Match"]
    assert job_of(cloud, job["job_id"]) == job


@pytest.mark.parametrize(
    ("path", "field"),
    [
        ("/runs?status=SLEEPING", "status"),
        ("/runs?limit=0", "limit"),
    ],
)
def test_bad_run_filters_are_a_400(
    cloud: SchedulerHarness, receiver: WebhookReceiver, path: str, field: str
) -> None:
    job = cloud.create(http_job(receiver, payload={"n": 1}, cron="0 * * * *"))
    reply = cloud.call("GET", f"/v1/jobs/{job['job_id']}{path}")
    assert reply.status == 400, reply.body
    assert field in [d["field"] for d in reply.body["error"]["details"]]


def test_a_name_prefix_longer_than_a_name_is_a_400(cloud: SchedulerHarness) -> None:
    reply = cloud.call("GET", "/v1/jobs?name_prefix=" + "n" * 201)
    assert reply.status == 400, reply.body
    assert "name_prefix" in [d["field"] for d in reply.body["error"]["details"]]


# --- found in review: corners where a job could end stuck ----------------------------------


def test_one_run_the_watchdog_cannot_handle_does_not_stop_its_shards_poll(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    store = cloud.poll_store
    assert isinstance(store, DynamoJobStore)
    broken = cloud.create(http_job(receiver, payload={"n": 1}, at=iso(clock.now() + timedelta(seconds=30))))
    # Its job item becomes unreadable (stored under older, looser rules, say) while its run waits.
    cloud.clients.dynamodb().update_item(
        TableName=cloud.settings.jobs_table_name,
        Key={"pk": {"S": f"JOB#{broken['job_id']}"}, "sk": {"S": "JOB"}},
        UpdateExpression="SET spec = :bad",
        ExpressionAttributeValues={":bad": {"S": "{not json"}},
    )
    later = cloud.create(http_job(receiver, payload={"n": 1}, at=iso(clock.now() + timedelta(minutes=5))))
    clock.advance(4 * 60)  # the broken run's resend timer is up; the later job is within reach

    reports = cloud.poll()
    assert sum(r.watched.get("error", 0) for r in reports) == 1
    assert [run.job_id for r in reports for run in r.claimed] == [later["job_id"]]


def test_a_firing_paused_while_its_worker_waits_and_resumed_as_it_looks_again_runs_once(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    """A worker gets 10:05's message early and waits for 10:05; the job is paused meanwhile, so
    its start (conditioned on the job as read) fails; it reads the job again, PAUSED, but the
    resume lands (at 10:05:30) before it sets the run aside. Setting aside is conditioned on
    the job still being paused, so the worker reads again and tries to start; the resume
    found the run not started, past its time, so FIRE_ONCE replaced it with one run now.
    Either way the firing runs once: no second call, nothing skipped."""
    job_id = cloud.create(http_job(receiver, payload={"n": 1}, cron="*/5 * * * *"))["job_id"]
    five = datetime(2026, 11, 21, 10, 5, tzinfo=UTC)
    clock.move_to(five - timedelta(seconds=90))
    cloud.poll()
    store = cloud.worker_store
    real_get_job, real_sleep = store.get_job, cloud.clock.sleep_until
    slept = False
    reads_after = 0

    def sleep_until(when: datetime) -> None:  # the worker waits for 10:05: the pause lands
        nonlocal slept
        if not slept:
            slept = True
            post(cloud, job_id, "pause")
        real_sleep(when)

    def get_job(job_id_read: str) -> Job | None:
        nonlocal reads_after
        job = real_get_job(job_id_read)
        if slept:
            reads_after += 1
            if reads_after == 1:  # the worker's read after its start failed: PAUSED; then a resume
                assert job is not None
                assert job.status == "PAUSED"
                clock.move_to(five + timedelta(seconds=30))
                post(cloud, job_id, "resume")
        return job

    store.get_job = get_job  # type: ignore[method-assign, assignment]
    cloud.clock.sleep_until = sleep_until  # type: ignore[method-assign]
    clock.move_to(five - timedelta(seconds=2))
    cloud.deliver()
    store.get_job = real_get_job  # type: ignore[method-assign]
    cloud.clock.sleep_until = real_sleep  # type: ignore[method-assign]
    cloud.deliver()
    clock.move_to(five + timedelta(minutes=16))
    cloud.poll()
    cloud.deliver()
    called = [r.headers["x-scheduler-scheduled-for"] for r in receiver.requests]
    assert len(called) == len(set(called))  # no firing twice
    stand_in = five + timedelta(seconds=30)
    assert [c for c in called if iso(five) <= c < iso(five + MINUTE)] == [iso(stand_in)]
    runs = {r["scheduled_for"]: r for r in cloud.runs(job_id, "?limit=100")}
    assert runs[iso(five)]["status"] == "CANCELLED"  # replaced by the resume's run, never called
    # Called at once (at the resume), not left aside for the watchdog 15 min later.
    assert (runs[iso(stand_in)]["status"], runs[iso(stand_in)]["lateness_ms"]) == ("SUCCEEDED", 0)
    assert {run["status"] for run in runs.values()} == {"SUCCEEDED", "CANCELLED"}  # none SKIPPED


def test_the_api_flushes_the_metrics_its_requests_count(
    cloud: SchedulerHarness, receiver: WebhookReceiver, capsys: pytest.CaptureFixture[str]
) -> None:
    """A trigger counts RunsTriggered: the API prints it as CloudWatch EMF with its response;
    a request that counts nothing prints no metrics document (and no warning about it)."""
    job = cloud.create(http_job(receiver, payload={"n": 1}, cron="0 * * * *"))
    capsys.readouterr()
    assert cloud.call("GET", f"/v1/jobs/{job['job_id']}").status == 200
    assert "_aws" not in capsys.readouterr().out
    post(cloud, job["job_id"], "trigger", status=202)
    documents = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]
    assert [document["RunsTriggered"] for document in documents] == [[1.0]]
