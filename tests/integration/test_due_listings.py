"""Due listings (adapters/dynamodb/due_listings.py) on moto: the one-offs a batch makes wait in
the due index through one listing a minute, not an entry each, and every poll rule holds for
them as for a job's own entry: each firing claimed once and run on time, a lost message sent
again, a run watched until it ends, a change, pause or cancel obeyed, a retry's timer kept.
A job a listing names that was never written, or that has ended, is read and left alone."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import boto3
import pytest
from moto import mock_aws

from scheduler_core.adapters.aws import AwsClients
from scheduler_core.composition import build_store
from scheduler_core.domain import keys
from scheduler_core.domain.clock import to_ms
from scheduler_core.domain.vocabulary import Priority
from tests.support.builders import a_job
from tests.support.harness import FrozenClock, SchedulerHarness, create_scheduler_resources
from tests.support.helpers import iso
from tests.support.receiver import WebhookReceiver

LATER = timedelta(minutes=10)  # beyond the lookahead: found by a poll


def one_off(receiver: WebhookReceiver, at: datetime, name: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "schedule": {"at": iso(at)},
        "target": {"type": "HTTP", "url": receiver.url},
    } | extra


def make(cloud: SchedulerHarness, bodies: list[dict[str, Any]]) -> list[str]:
    reply = cloud.call("POST", "/v1/jobs/batch", {"jobs": bodies})
    assert reply.status == 201, reply.body
    return [job["job_id"] for job in reply.body["jobs"]]


def item(cloud: SchedulerHarness, job_id: str) -> dict[str, Any]:
    found: dict[str, Any] = cloud.clients.dynamodb().get_item(
        TableName=cloud.settings.jobs_table_name,
        Key={"pk": {"S": keys.job_pk(job_id)}, "sk": {"S": keys.JOB_SK}},
        ConsistentRead=True,
    )["Item"]
    return found


def due_entries(cloud: SchedulerHarness) -> list[dict[str, Any]]:
    """Every entry of the due index (keys only)."""
    ddb = cloud.clients.dynamodb()
    return ddb.scan(TableName=cloud.settings.jobs_table_name, IndexName="due")["Items"]


def listings(cloud: SchedulerHarness) -> dict[str, set[str]]:
    """Each due listing's bucket and the ids it names, by its key."""
    found = {}
    for entry in due_entries(cloud):
        if entry["pk"]["S"].startswith(keys.DUE_LISTING_PK_PREFIX):
            stored = cloud.clients.dynamodb().get_item(
                TableName=cloud.settings.jobs_table_name, Key={"pk": entry["pk"], "sk": entry["sk"]}
            )["Item"]
            found[entry["due_pk"]["S"]] = set(stored["job_ids"]["SS"])
    return found


def claimed(reports: list[Any]) -> list[str]:
    return sorted(run.job_id for report in reports for run in report.claimed)


def status(cloud: SchedulerHarness, job_id: str) -> str:
    body: dict[str, Any] = cloud.call("GET", f"/v1/jobs/{job_id}").body
    return str(body["status"])


def test_a_batchs_one_offs_wait_through_one_listing_a_minute_and_its_cron_by_its_own_entry(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    at = (clock.now() + LATER).replace(second=10, microsecond=0)
    hourly = {
        "name": "hourly",
        "schedule": {"cron": "0 * * * *"},
        "target": {"type": "HTTP", "url": receiver.url},
    }
    ids = make(
        cloud,
        [one_off(receiver, at, f"a{i}") for i in range(4)]
        + [one_off(receiver, at + timedelta(minutes=1), f"b{i}") for i in range(2)]
        + [hourly],
    )

    for job_id in ids[:6]:  # no entry of their own: two write units less each
        assert "due_pk" not in item(cloud, job_id)
        assert "due_sk" not in item(cloud, job_id)
    assert "due_pk" in item(cloud, ids[6])
    by_bucket = listings(cloud)
    assert sorted(by_bucket.values(), key=len) == [set(ids[4:6]), set(ids[:4])]
    for bucket, named in by_bucket.items():
        minute = at if named == set(ids[:4]) else at + timedelta(minutes=1)
        assert bucket.split("#")[0] == f"{minute:%Y%m%d%H%M}"
    own = [e for e in due_entries(cloud) if e["pk"]["S"].startswith("JOB#")]
    assert [e["pk"]["S"] for e in own] == [keys.job_pk(ids[6])]


def test_fewer_than_three_one_offs_each_have_an_entry_of_their_own(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    at = clock.now() + LATER
    ids = make(cloud, [one_off(receiver, at, "a"), one_off(receiver, at, "b")])

    assert listings(cloud) == {}
    assert all("due_pk" in item(cloud, job_id) for job_id in ids)


def test_each_listed_firing_is_claimed_once_runs_on_time_and_leaves_nothing_to_watch(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    at = clock.now() + LATER
    ids = make(cloud, [one_off(receiver, at + timedelta(milliseconds=i), f"j{i}") for i in range(5)])

    clock.move_to(at - timedelta(seconds=90))
    assert claimed(cloud.poll()) == sorted(ids)
    clock.advance(30)
    assert claimed(cloud.poll()) == []  # a second poll of the bucket claims nothing more
    clock.move_to(at + timedelta(milliseconds=4))
    assert cloud.deliver() == 5
    assert sorted(r.headers["x-scheduler-job-id"] for r in receiver.requests) == sorted(ids)
    for job_id in ids:
        [run] = cloud.runs(job_id)
        assert (run["status"], run["attempt"]) == ("SUCCEEDED", 1)
        assert status(cloud, job_id) == "COMPLETED"
    # Its jobs ended: the next poll reads them, leaves them be and deletes the listing, so
    # that the polls re-reading the bucket (its grace) do not read them again.
    assert len(listings(cloud)) == 1
    clock.advance(61)
    reports = cloud.poll()
    assert claimed(reports) == []
    assert all(report.watched == {} for report in reports)
    assert listings(cloud) == {}
    clock.advance(180)
    cloud.poll()
    for shard in range(cloud.settings.shard_count):
        mark = cloud.poll_store.get_watermark(shard)
        assert mark is not None
        assert mark.bucket_ms > keys.bucket_of(to_ms(at))


def test_a_listed_run_whose_message_is_lost_is_sent_again_at_its_timer(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    at = clock.now() + timedelta(seconds=30)  # due soon: claimed and sent by the create
    ids = make(cloud, [one_off(receiver, at, f"j{i}") for i in range(3)])
    assert all("r_due_ms" in item(cloud, job_id) and "due_pk" not in item(cloud, job_id) for job_id in ids)
    cloud.clients.sqs().purge_queue(QueueUrl=cloud.queue_url(Priority.NORMAL))

    clock.move_to(at + timedelta(seconds=cloud.settings.resend_after_seconds - 1))
    cloud.poll()
    assert cloud.deliver() == 0  # within its timer the polls wait for its start
    clock.advance(2)
    cloud.poll()
    assert cloud.deliver() == 3
    for job_id in ids:
        [run] = cloud.runs(job_id)
        assert run["status"] == "SUCCEEDED"
    assert len(receiver.requests) == 3


def test_a_listed_one_off_changed_paused_or_cancelled_is_obeyed(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    at = (clock.now() + LATER).replace(second=0, microsecond=0)
    pause_ends = at + timedelta(seconds=50)  # in the same minute, so in the same listing
    moved, cancelled, kept = make(cloud, [one_off(receiver, at, name) for name in "mck"])[:3]
    second = ((at, "x"), (at, "y"), (pause_ends, "p"))
    made = make(cloud, [one_off(receiver, when, name) for when, name in second])
    paused = made[2]
    for other in made[:2]:
        assert cloud.call("DELETE", f"/v1/jobs/{other}").status == 200
    later = at + timedelta(minutes=30)
    reply = cloud.call("PATCH", f"/v1/jobs/{moved}", {"schedule": {"at": iso(later)}})
    assert reply.status == 200, reply.body
    assert "due_pk" in item(cloud, moved)  # its change gave it an entry of its own
    assert cloud.call("POST", f"/v1/jobs/{paused}/pause").status == 200
    assert cloud.call("DELETE", f"/v1/jobs/{cancelled}").status == 200

    clock.move_to(at - timedelta(seconds=90))
    assert claimed(cloud.poll()) == [kept]
    # The second batch's listing holds none that waits (two cancelled, one paused): deleted.
    assert list(listings(cloud).values()) == [{moved, cancelled, kept}]
    clock.move_to(at)
    assert cloud.deliver() == 1
    clock.advance(5)
    assert claimed(cloud.poll()) == []
    assert listings(cloud) == {}  # none of their jobs waits through them any more
    assert status(cloud, paused) == "PAUSED"
    assert status(cloud, cancelled) == "CANCELLED"
    # Resumed after its listing went, the paused one has an entry of its own: it fires once.
    assert cloud.call("POST", f"/v1/jobs/{paused}/resume").status == 200
    assert "due_pk" in item(cloud, paused)  # (due soon: the resume claimed it itself)
    clock.move_to(pause_ends)
    assert cloud.deliver() == 1
    clock.move_to(later - timedelta(seconds=90))
    assert claimed(cloud.poll()) == [moved]
    clock.move_to(later)
    assert cloud.deliver() == 1
    assert [r.headers["x-scheduler-job-id"] for r in receiver.requests] == [kept, paused, moved]


def test_a_listed_run_that_fails_is_retried_at_its_own_timer(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    receiver.respond_with(500)
    at = clock.now() + timedelta(seconds=5)
    retry = {"retry": {"backoff_seconds": 1}}
    ids = make(cloud, [one_off(receiver, at, f"j{i}", **(retry if i == 0 else {})) for i in range(3)])
    clock.move_to(at)
    assert cloud.deliver_batches() == 3
    failed = [job_id for job_id in ids if cloud.runs(job_id)[0]["status"] == "RETRYING"]
    assert len(failed) == 1
    [run] = cloud.runs(failed[0])
    assert "due_pk" in item(cloud, failed[0])  # the retry's timer is an entry of its own
    clock.move_to(datetime.fromisoformat(run["next_attempt_at"]))
    assert cloud.deliver_batches() == 1
    [run] = cloud.runs(failed[0])
    assert (run["status"], run["attempt"]) == ("SUCCEEDED", 2)
    assert len(receiver.requests) == 4


def test_a_listing_naming_a_job_never_written_is_read_and_left_alone(
    cloud: SchedulerHarness, clock: FrozenClock
) -> None:
    at = clock.now() + LATER
    ghosts = [a_job(job_id=f"ghost{i}", next_fire_at=at) for i in range(3)]  # a batch failed part-way
    cloud.api_store.list_due_together("failed", ghosts)

    clock.move_to(at - timedelta(seconds=90))
    assert claimed(cloud.poll()) == []
    clock.move_to(at + timedelta(minutes=3))
    assert claimed(cloud.poll()) == []
    assert list(listings(cloud).values()) == [{"ghost0", "ghost1", "ghost2"}]  # kept: it expires
    for shard in range(cloud.settings.shard_count):
        mark = cloud.poll_store.get_watermark(shard)
        assert mark is not None
        assert mark.bucket_ms > keys.bucket_of(to_ms(at))


@pytest.fixture
def small_pages(clock: FrozenClock) -> Iterator[SchedulerHarness]:
    with mock_aws():
        clients = AwsClients(boto3.session.Session(region_name="us-east-1"))
        settings = create_scheduler_resources(clients).model_copy(update={"shard_count": 1})
        yield SchedulerHarness(clients, settings, clock)


def test_a_listings_entry_weighs_in_a_page_as_the_jobs_it_names(
    small_pages: SchedulerHarness, clock: FrozenClock
) -> None:
    cloud = small_pages
    at = clock.now() + LATER
    for listing in ("first", "second"):
        cloud.api_store.list_due_together(
            listing, [a_job(job_id=f"{listing}{i}", next_fire_at=at) for i in range(3)]
        )
    store = build_store(cloud.settings, cloud.clients, due_page=3)

    pages = list(store.due_pages(0, to_ms(at), to_ms(at)))
    assert len(pages) == 2  # one listing a page, as three entries would be
    assert all(page.resume_after is not None for page in pages[:1])


def test_a_resume_point_never_passes_a_listing_with_jobs_not_due_yet(
    small_pages: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    cloud = small_pages
    minute = (clock.now() + LATER).replace(second=0, microsecond=0)
    listed = make(cloud, [one_off(receiver, minute + timedelta(seconds=s), f"l{s}") for s in (0, 20, 50)])
    own = [
        cloud.create(one_off(receiver, minute + timedelta(seconds=s), f"o{s}"))["job_id"]
        for s in range(5, 11)
    ]
    store = build_store(cloud.settings, cloud.clients, due_page=3)
    until = minute + timedelta(seconds=40)

    pages = list(store.due_pages(0, to_ms(minute), to_ms(until)))
    assert (
        [sorted(job.job_id for job in page.jobs) for page in pages]
        == [
            sorted(listed[:2]),  # the listing's jobs due by then; the one at :50 is not
            sorted(own[:3]),
            sorted(own[3:]),
        ]
    )
    # The listing's entry is at its first firing: the page read the index that far, however
    # late the jobs it led to fire.
    assert pages[0].read_to_ms == to_ms(minute)
    # A poll stopped after any of these pages takes the bucket up from its start next time,
    # not after the listing: its job at :50 was never tried.
    assert [page.resume_after for page in pages] == [None, None, None]
    # Due by then, every job of it is read and the resume points move on as usual.
    later = list(store.due_pages(0, to_ms(minute), to_ms(minute + timedelta(seconds=59))))
    assert sorted(job.job_id for job in later[0].jobs) == sorted(listed)
    assert later[0].resume_after is not None


def test_a_job_two_listings_name_is_read_once(small_pages: SchedulerHarness, clock: FrozenClock) -> None:
    cloud = small_pages
    at = clock.now() + LATER
    jobs = [a_job(job_id=f"twice{i}", next_fire_at=at, schedule={"at": at}) for i in range(3)]
    for job in jobs:
        assert cloud.api_store.put_job_if_absent(job, due_listed=True)
    cloud.api_store.list_due_together("first", jobs)
    cloud.api_store.list_due_together("again", jobs)  # a batch sent again that missed them

    [page] = list(cloud.poll_store.due_pages(0, to_ms(at), to_ms(at)))
    assert sorted(job.job_id for job in page.jobs) == ["twice0", "twice1", "twice2"]
