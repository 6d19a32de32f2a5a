"""What the backbone does when things go wrong around it: outages, contention, failed
sends, cancels racing the worker, input that is large or forged."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError

from scheduler_core.adapters.dynamodb import DynamoJobStore
from scheduler_core.composition import build_dispatcher
from scheduler_core.domain import keys
from scheduler_core.domain.clock import to_ms
from scheduler_core.domain.entities import Job, Run
from scheduler_core.domain.messages import RunMessage
from scheduler_core.ports import StoreContention
from scheduler_core.settings import Settings
from tests.support.harness import FrozenClock, SchedulerHarness
from tests.support.helpers import iso
from tests.support.receiver import WebhookReceiver

# Runs of one job that come due together (late ones with the current one) run side by side.
ALLOW_OVERLAP: dict[str, Any] = {"concurrency": {"overlap": "ALLOW"}}


def hook(receiver: WebhookReceiver, **schedule: str) -> dict[str, Any]:
    return {"name": "j", "schedule": schedule, "target": {"type": "HTTP", "url": receiver.url}}


def test_a_cron_missed_through_an_outage_fires_once_at_its_newest_mark(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    cloud.poll()  # the deployed poller has run: the shards' watermarks exist
    # 10:00:30; 10:01 and 10:02 claimed at create, then delivered together (ALLOW: both run).
    job = cloud.create(hook(receiver, cron="* * * * *") | ALLOW_OVERLAP)
    clock.move_to(datetime(2026, 11, 21, 10, 2, 5, tzinfo=UTC))
    cloud.deliver()
    assert len(receiver.requests) == 2
    clock.move_to(datetime(2026, 11, 21, 10, 33, 20, tzinfo=UTC))  # no poll for half an hour
    cloud.poll()
    cloud.deliver()

    late = [r.headers["x-scheduler-scheduled-for"] for r in receiver.requests[2:]]
    assert late == [iso(datetime(2026, 11, 21, 10, 33, tzinfo=UTC))]  # one run, not thirty
    # Then on schedule again: the next marks are claimed ahead as usual.
    assert cloud.call("GET", f"/v1/jobs/{job['job_id']}").body["next_fire_at"] == iso(
        datetime(2026, 11, 21, 10, 36, tzinfo=UTC)
    )
    runs = cloud.call("GET", f"/v1/jobs/{job['job_id']}/runs?limit=100").body["items"]
    late_run = next(r for r in runs if r["scheduled_for"] == iso(datetime(2026, 11, 21, 10, 33, tzinfo=UTC)))
    assert late_run["status"] == "SUCCEEDED"
    assert late_run["lateness_ms"] == 20_000


def test_a_first_poll_that_fails_does_not_let_its_window_slide(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    """The first poll pins the shard's watermark before reading, so jobs from before a long
    run of failing first polls are still found."""
    at = clock.now() + timedelta(minutes=5)
    cloud.create(hook(receiver, at=at.isoformat()))
    store = cloud.poll_store
    original = store.due_pages
    store.due_pages = lambda *args, **kwargs: (_ for _ in ()).throw(StoreContention("throttled"))  # type: ignore[method-assign]
    cloud.poll()  # every first poll fails ...
    clock.move_to(at + timedelta(hours=2))
    cloud.poll()  # ... for two hours
    store.due_pages = original  # type: ignore[method-assign]
    assert sum(len(report.claimed) for report in cloud.poll()) == 1
    cloud.deliver()
    assert len(receiver.requests) == 1


class ThrottledAfter(DynamoJobStore):
    """The real store, throttled after `allowed` claims (DynamoDB saying no, not a fake)."""

    allowed = 1

    def claim_if_unchanged(
        self, job: Job, run: Run, next_fire_at: datetime | None, now: datetime, catch_up: bool = False
    ) -> Run | None:
        if self.allowed <= 0:
            raise StoreContention("ProvisionedThroughputExceededException")
        self.allowed -= 1
        return super().claim_if_unchanged(job, run, next_fire_at, now, catch_up)


def test_claims_made_before_a_throttle_are_still_enqueued_and_the_rest_waits(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    start = clock.now()  # 10:00:30; the create claims 10:01:30 and 10:02:30
    job = cloud.create(hook(receiver, rate="1 minute") | {"name": "every-minute"} | ALLOW_OVERLAP)
    clock.move_to(start + timedelta(seconds=121))
    cloud.deliver()
    clock.move_to(start + timedelta(seconds=130))  # 10:03:30 and 10:04:30 are within the horizon
    settings = cloud.settings
    throttled = ThrottledAfter(cloud.clients, settings.jobs_table_name, settings.shard_count, 30)
    reports = [build_dispatcher(settings, cloud.clients, clock, throttled).poll_shard(s) for s in range(4)]
    assert [run.scheduled_for for r in reports for run in r.claimed] == [start + timedelta(minutes=3)]
    assert sum(r.contended for r in reports) >= 1
    assert sum(len(r.unsent) for r in reports) == 0

    cloud.poll()  # the next poll claims the firing the throttle left
    clock.move_to(start + timedelta(minutes=4))
    cloud.deliver()
    delivered = sorted(r.headers["x-scheduler-scheduled-for"] for r in receiver.requests)
    assert delivered == [iso(start + timedelta(minutes=k)) for k in (1, 2, 3, 4)]
    runs = cloud.call("GET", f"/v1/jobs/{job['job_id']}/runs").body["items"]
    assert len(runs) == 4  # every claimed run delivered, none lost, none twice


class ThrottledOnce(DynamoJobStore):
    """The real store; its first claim is throttled (a transient throttle or conflict)."""

    claims_tried = 0

    def claim_if_unchanged(
        self, job: Job, run: Run, next_fire_at: datetime | None, now: datetime, catch_up: bool = False
    ) -> Run | None:
        self.claims_tried += 1
        if self.claims_tried == 1:
            raise StoreContention("TransactionConflict")
        return super().claim_if_unchanged(job, run, next_fire_at, now, catch_up)


def test_a_transient_throttle_is_retried_in_the_same_poll_and_a_lost_race_is_not(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    cloud.poll()
    job = cloud.call(
        "POST", "/v1/jobs", hook(receiver, at=(clock.now() + timedelta(minutes=5)).isoformat())
    ).body
    clock.advance(4 * 60)
    settings = cloud.settings
    store = ThrottledOnce(cloud.clients, settings.jobs_table_name, settings.shard_count, 30)
    dispatcher = build_dispatcher(settings, cloud.clients, clock, store)
    reports = [dispatcher.poll_shard(shard) for shard in range(settings.shard_count)]
    assert [run.job_id for r in reports for run in r.claimed] == [job["job_id"]]
    assert sum(r.contended for r in reports) == 0
    assert store.claims_tried == 2

    # The same firing read again (a second poller with a stale read) loses its race once.
    stale = Job.model_validate(
        cloud.call("GET", f"/v1/jobs/{job['job_id']}").body
        | {"tenant": "t", "next_fire_at": clock.now() + timedelta(minutes=1), "version": 1}
    )
    assert dispatcher.claim_firings(stale, clock.now()).runs == []
    assert store.claims_tried == 3


def test_runs_that_cannot_be_sent_are_reported_not_raised(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    cloud.create(hook(receiver, at=(clock.now() + timedelta(minutes=5)).isoformat()))
    broken = Settings.model_validate(
        cloud.settings.model_dump()
        | {"queue_url_normal": "https://sqs.us-east-1.amazonaws.com/123456789012/gone"}
    )
    clock.advance(4 * 60)
    reports = [build_dispatcher(broken, cloud.clients, clock).poll_shard(s) for s in range(4)]
    assert sum(len(r.claimed) for r in reports) == 1
    assert sum(len(r.unsent) for r in reports) == 1


def test_a_cancel_that_lands_while_the_worker_waits_for_the_runs_second_stops_it(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    fire_at = clock.now() + timedelta(seconds=30)
    job = cloud.create(hook(receiver, at=fire_at.isoformat()))  # claimed and enqueued at create
    waiting = clock.sleep_until

    def cancel_meanwhile(when: datetime) -> None:  # the worker has read the job: still SCHEDULED
        cloud.call("DELETE", f"/v1/jobs/{job['job_id']}")
        waiting(when)

    clock.move_to(fire_at - timedelta(seconds=1))
    clock.sleep_until = cancel_meanwhile  # type: ignore[method-assign]
    assert cloud.deliver() == 1
    assert receiver.requests == []
    [run] = cloud.call("GET", f"/v1/jobs/{job['job_id']}/runs").body["items"]
    assert run["status"] == "CANCELLED"


def test_an_sqs_target_may_not_be_one_of_the_schedulers_own_queues(cloud: SchedulerHarness) -> None:
    for url in (cloud.settings.queue_url_high, cloud.settings.dlq_url):
        reply = cloud.call(
            "POST",
            "/v1/jobs",
            {"name": "sneaky", "schedule": {"rate": "1 hour"}, "target": {"type": "SQS", "queue_url": url}},
        )
        assert reply.status == 400
        assert reply.body["error"]["details"][0]["field"] == "target.queue_url"


def test_a_payload_of_non_ascii_text_near_the_limit_is_stored_and_delivered(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    text = "中" * 85_000  # 255,000 bytes of UTF-8: just under 256 KiB
    body = hook(receiver, at=clock.now().isoformat()) | {"payload": {"text": text}}
    reply = cloud.call("POST", "/v1/jobs", raw_body=json.dumps(body, ensure_ascii=False))
    assert reply.status == 201, reply.body
    job = reply.body
    cloud.deliver()
    assert receiver.requests[0].body == {"text": text}
    assert cloud.call("GET", f"/v1/jobs/{job['job_id']}").body["payload"] == {"text": text}


def cursor_of(key: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(key).encode()).decode()


def test_forged_cursors_are_a_400_naming_the_cursor(cloud: SchedulerHarness) -> None:
    for _ in range(2):
        cloud.create(
            {"name": "x", "schedule": {"rate": "1 hour"}, "target": {"type": "HTTP", "url": "http://e/h"}}
        )
    real = json.loads(base64.urlsafe_b64decode(cloud.call("GET", "/v1/jobs?limit=1").body["next_cursor"]))
    forged = [
        real | {"created_key": 1.5},  # a float the database cannot take as a key
        {k: v for k, v in real.items() if k != "sk"},  # a key missing
        real | {"extra": "x"},
        real | {"sk": None},
    ]
    for key in forged:
        reply = cloud.call("GET", f"/v1/jobs?cursor={cursor_of(key)}")
        assert reply.status == 400, (key, reply.body)
        assert reply.body["error"]["details"][0]["field"] == "cursor"
    job = cloud.call("GET", "/v1/jobs?limit=1").body["items"][0]
    reply = cloud.call(
        "GET", f"/v1/jobs/{job['job_id']}/runs?cursor={cursor_of({'pk': 'JOB#' + job['job_id']})}"
    )
    assert reply.status == 400


def test_an_at_slightly_in_the_past_fires_at_once_and_reports_its_lateness(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    at = clock.now() - timedelta(seconds=20)
    job = cloud.create(hook(receiver, at=at.isoformat()))
    cloud.deliver()
    [run] = cloud.call("GET", f"/v1/jobs/{job['job_id']}/runs").body["items"]
    assert run["scheduled_for"] == iso(at)
    assert run["run_id"] == f"{job['job_id']}:{to_ms(at)}"
    assert run["lateness_ms"] == 20_000


def test_one_unreadable_stored_job_does_not_stop_its_shards_poll(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    """A job stored under older, looser rules that no longer validates is skipped and logged;
    the other jobs of its bucket still fire."""
    fire_at = clock.now() + timedelta(minutes=5)
    ids = [cloud.create(hook(receiver, at=fire_at.isoformat()))["job_id"] for _ in range(12)]
    ddb, table = cloud.clients.dynamodb(), cloud.settings.jobs_table_name
    broken = ids[0]
    spec = json.loads(
        ddb.get_item(TableName=table, Key={"pk": {"S": f"JOB#{broken}"}, "sk": {"S": "JOB"}})["Item"]["spec"][
            "S"
        ]
    )
    spec["target"]["headers"] = {"Host": "forged"}  # refused by today's rules
    ddb.update_item(
        TableName=table,
        Key={"pk": {"S": f"JOB#{broken}"}, "sk": {"S": "JOB"}},
        UpdateExpression="SET spec = :spec",
        ExpressionAttributeValues={":spec": {"S": json.dumps(spec)}},
    )
    clock.move_to(fire_at - timedelta(seconds=60))
    assert sum(len(report.claimed) for report in cloud.poll()) == 11
    clock.move_to(fire_at)
    cloud.deliver()
    assert sorted(run.split(":")[0] for run in receiver.by_run()) == sorted(ids[1:])


def test_cancelling_a_runs_not_started_leaves_a_run_a_worker_holds_alone(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    job = cloud.create(hook(receiver, at=(clock.now() + timedelta(seconds=5)).isoformat()))
    store, now = cloud.poll_store, clock.now()
    fire_ms = to_ms(now + timedelta(seconds=5))
    message = RunMessage(
        job_id=job["job_id"], run_id=f"{job['job_id']}:{fire_ms}", scheduled_for_ms=fire_ms, attempt=1
    )
    assert store.start_run_if_waiting(message, now, now + timedelta(minutes=9), "worker-a") is not None
    assert store.cancel_run_if_not_started(message, now) is False
    run = store.get_run(job["job_id"], fire_ms)
    assert run is not None
    assert run.status == "RUNNING"


def test_a_claim_that_fails_costs_its_bucket_neither_the_other_claims_nor_their_sends(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A poll claims a bucket's jobs side by side; one claim failing for a reason that is not
    contention (an AWS error after botocore's retries) is logged, the others are claimed and
    sent, and the failed job stays in the bucket, which the next poll reads again."""
    fire_at = clock.now().replace(second=0, microsecond=0) + timedelta(minutes=30)
    ids = [cloud.create(hook(receiver, at=fire_at.isoformat()))["job_id"] for _ in range(12)]
    broken = ids[3]
    real = DynamoJobStore.claim_if_unchanged

    def claim(store: DynamoJobStore, job: Job, *args: Any, **kwargs: Any) -> Run | None:
        if job.job_id == broken:
            raise ClientError(
                {"Error": {"Code": "InternalServerError", "Message": "boom"}}, "TransactWriteItems"
            )
        return real(store, job, *args, **kwargs)

    monkeypatch.setattr(DynamoJobStore, "claim_if_unchanged", claim)
    clock.move_to(fire_at - timedelta(seconds=60))
    reports = cloud.poll()
    assert sum(len(report.claimed) for report in reports) == 11
    assert sum(report.contended for report in reports) == 1
    assert all(report.unsent == [] for report in reports)
    monkeypatch.undo()
    assert sum(len(report.claimed) for report in cloud.poll()) == 1  # the bucket was kept
    clock.move_to(fire_at)
    assert cloud.deliver() == 12
    assert sorted(request.headers["x-scheduler-job-id"] for request in receiver.requests) == sorted(ids)


def leave_unprocessed(cloud: SchedulerHarness, times: int | None) -> Any:
    """DynamoDB answering a BatchGetItem in part (throttled, or past 16 MB): the second half
    of a reply's items move to UnprocessedKeys, `times` times; with None, always all of them."""
    left = [times]

    def cut(parsed: dict[str, Any], model: Any, **_: Any) -> None:
        if left[0] == 0:
            return
        if left[0] is not None:
            left[0] -= 1
        for table, items in parsed.get("Responses", {}).items():
            if items:
                kept = len(items) // 2 if times is not None else 0
                keys = [{"pk": item["pk"], "sk": item["sk"]} for item in items[kept:]]
                parsed["Responses"][table] = items[:kept]
                parsed.setdefault("UnprocessedKeys", {})[table] = {"Keys": keys}

    cloud.clients.dynamodb().meta.events.register("after-call.dynamodb.BatchGetItem", cut)
    return cut


def test_keys_a_batch_read_leaves_unprocessed_are_asked_again(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    fire_at = clock.now().replace(second=0, microsecond=0) + timedelta(minutes=30)
    for _ in range(8):
        cloud.create(hook(receiver, at=fire_at.isoformat()))
    clock.move_to(fire_at - timedelta(seconds=60))
    cut = leave_unprocessed(cloud, times=3)
    try:
        assert sum(len(report.claimed) for report in cloud.poll()) == 8
    finally:
        cloud.clients.dynamodb().meta.events.unregister("after-call.dynamodb.BatchGetItem", cut)


def test_a_bucket_whose_batch_reads_stay_unprocessed_is_kept_for_the_next_poll(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    fire_at = clock.now().replace(second=0, microsecond=0) + timedelta(minutes=30)
    ids = [cloud.create(hook(receiver, at=fire_at.isoformat()))["job_id"] for _ in range(5)]
    clock.move_to(fire_at - timedelta(seconds=60))
    cut = leave_unprocessed(cloud, times=None)
    try:
        first = cloud.poll()
    finally:
        cloud.clients.dynamodb().meta.events.unregister("after-call.dynamodb.BatchGetItem", cut)
    # Every shard's bucket with a job could not be read: contended, nothing claimed, kept.
    assert sum(report.contended for report in first) == len(
        {keys.shard_for(i, cloud.settings.shard_count) for i in ids}
    )
    assert all(report.claimed == [] for report in first)
    assert sum(len(report.claimed) for report in cloud.poll()) == 5
    clock.move_to(fire_at)
    assert cloud.deliver() == 5
    assert sorted(request.headers["x-scheduler-job-id"] for request in receiver.requests) == sorted(ids)
