"""A batch's jobs are listed by one item (`ListingTable.list_together`), one tenant index
entry for them all instead of one each (a write unit a job: docs/architecture.md,
"Listing"): on moto, through the API, they list as every other job does — newest first,
in pages whose cursors may stop inside a batch, filtered, only to their tenant — and a
tenant move lists them under the new tenant."""

from __future__ import annotations

import base64
import json
from datetime import datetime, timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError

from scheduler_core.adapters.dynamodb import TENANT_INDEX
from scheduler_core.composition import build_tenant_migration
from scheduler_core.domain import keys
from scheduler_core.domain.api_shapes import JobCreate
from scheduler_core.domain.entities import Job
from tests.support.events import ACCOUNT, ALICE, ALICE_TENANT, BOB, BOB_TENANT
from tests.support.harness import FrozenClock, SchedulerHarness

RECURRING = {"schedule": {"rate": "1 hour"}, "target": {"type": "HTTP", "url": "https://example.com/hook"}}


def job(name: str) -> dict[str, Any]:
    return {"name": name, **RECURRING}


def make_batch(cloud: SchedulerHarness, names: list[str], key: str | None = None) -> list[str]:
    headers = {"Idempotency-Key": key} if key else {}
    reply = cloud.call("POST", "/v1/jobs/batch", {"jobs": [job(name) for name in names]}, headers=headers)
    assert reply.status == 201, reply.body
    return [made["job_id"] for made in reply.body["jobs"]]


def every_page(
    cloud: SchedulerHarness, query: str, limit: int, cursor_from: str | None = None, **kw: Any
) -> list[list[str]]:
    """The job ids of each page of `GET /v1/jobs?<query>` (from the cursor `cursor_from`, if
    given), following `next_cursor` to the end."""
    pages: list[list[str]] = []
    cursor = cursor_from
    while True:
        path = f"/v1/jobs?limit={limit}{query}" + (f"&cursor={cursor}" if cursor else "")
        reply = cloud.call("GET", path, **kw)
        assert reply.status == 200, reply.body
        pages.append([item["job_id"] for item in reply.body["items"]])
        cursor = reply.body["next_cursor"]
        if cursor is None:
            return pages


def index_entries(cloud: SchedulerHarness) -> list[str]:
    """The pks of the tenant index's entries for Alice."""
    entries = cloud.clients.dynamodb().query(
        TableName=cloud.settings.jobs_table_name,
        IndexName=TENANT_INDEX,
        KeyConditionExpression="tenant = :tenant",
        ExpressionAttributeValues={":tenant": {"S": ALICE_TENANT}},
    )["Items"]
    return [entry["pk"]["S"] for entry in entries]


def keys_read(cloud: SchedulerHarness, path: str) -> tuple[dict[str, Any], list[int]]:
    """`GET path`'s answer, and how many keys each of its `BatchGetItem`s asked for."""
    reads: list[int] = []

    def count(params: dict[str, Any], **_: Any) -> None:
        reads.append(sum(len(asked["Keys"]) for asked in params["RequestItems"].values()))

    client = cloud.clients.dynamodb()
    client.meta.events.register("provide-client-params.dynamodb.BatchGetItem", count)
    try:
        reply = cloud.call("GET", path)
    finally:
        client.meta.events.unregister("provide-client-params.dynamodb.BatchGetItem", count)
    assert reply.status == 200, reply.body
    return reply.body, reads


@pytest.fixture
def mixed(cloud: SchedulerHarness, clock: FrozenClock) -> list[str]:
    """Single jobs and batches made a second apart; every job id, newest first (a batch's
    jobs, made in the same millisecond, newest id first, as the index orders such jobs)."""
    made: list[list[str]] = []
    for step in (["a"], ["b1", "b2", "b3", "b4", "b5"], ["c"], ["d1", "d2", "d3"], ["e"]):
        if len(step) == 1:
            made.append([cloud.create(job(step[0]))["job_id"]])
        else:
            made.append(sorted(make_batch(cloud, step), reverse=True))
        clock.advance(1)
    return [job_id for step in reversed(made) for job_id in step]


@pytest.mark.parametrize("limit", [1, 2, 3, 4, 5, 7, 11, 12, 100])
def test_a_tenants_jobs_page_newest_first_batches_in_their_place_each_once(
    cloud: SchedulerHarness, mixed: list[str], limit: int
) -> None:
    pages = every_page(cloud, "", limit)
    assert [job_id for page in pages for job_id in page] == mixed
    assert all(len(page) == limit for page in pages[:-1])
    assert 0 < len(pages[-1]) <= limit  # the last page says it is the last: no empty page after it


def test_a_batch_is_one_entry_of_the_tenant_index(cloud: SchedulerHarness, mixed: list[str]) -> None:
    assert len(mixed) == 11
    assert len(index_entries(cloud)) == 5  # three jobs of their own, two batches


def test_filters_see_a_batchs_jobs(cloud: SchedulerHarness, mixed: list[str]) -> None:
    gone = mixed[1]  # one of the newest batch's jobs
    assert cloud.call("DELETE", f"/v1/jobs/{gone}").status in (200, 204)
    cancelled = every_page(cloud, "&status=CANCELLED", 2)
    assert [job_id for page in cancelled for job_id in page] == [gone]
    scheduled = every_page(cloud, "&status=SCHEDULED", 2)
    assert [job_id for page in scheduled for job_id in page] == [job_id for job_id in mixed if job_id != gone]
    named = every_page(cloud, "&name_prefix=b", 2)
    assert [job_id for page in named for job_id in page] == mixed[5:10]  # b1..b5


def test_another_tenant_sees_none_of_a_batch_and_cannot_use_its_cursor(
    cloud: SchedulerHarness, mixed: list[str]
) -> None:
    assert every_page(cloud, "", 5, caller=BOB) == [[]]
    inside = cloud.call("GET", "/v1/jobs?limit=2").body["next_cursor"]  # inside the newest batch
    assert "after" in json.loads(base64.urlsafe_b64decode(inside))
    reply = cloud.call("GET", f"/v1/jobs?cursor={inside}", caller=BOB)
    assert reply.status == 400
    [detail] = reply.body["error"]["details"]
    assert detail["field"] == "cursor"


def forged(cursor: str, **changes: Any) -> str:
    key = json.loads(base64.urlsafe_b64decode(cursor)) | changes
    return base64.urlsafe_b64encode(json.dumps(key).encode()).decode()


@pytest.mark.parametrize(
    "change", [{"after": 0}, {"after": True}, {"after": None}, {"sk": 1}, {"created_key": 5}, {"pk": 2}]
)
def test_a_forged_cursor_of_another_shape_is_a_400_naming_the_cursor(
    cloud: SchedulerHarness, mixed: list[str], change: dict[str, Any]
) -> None:
    inside = cloud.call("GET", "/v1/jobs?limit=2").body["next_cursor"]
    reply = cloud.call("GET", f"/v1/jobs?cursor={forged(inside, **change)}")
    assert reply.status == 400, reply.body
    [detail] = reply.body["error"]["details"]
    assert detail["field"] == "cursor"


def test_a_place_in_a_batch_on_a_jobs_own_entry_is_a_400(cloud: SchedulerHarness, mixed: list[str]) -> None:
    own = cloud.call("GET", "/v1/jobs?limit=1").body["next_cursor"]  # after the newest single job
    reply = cloud.call("GET", f"/v1/jobs?cursor={forged(own, after='f' * 32)}")
    assert reply.status == 400, reply.body
    assert "listing" in reply.body["error"]["details"][0]["message"]


def test_a_cursor_naming_another_tenants_batch_lists_none_of_it(
    cloud: SchedulerHarness, mixed: list[str]
) -> None:
    theirs = cloud.call("GET", "/v1/jobs?limit=2").body["next_cursor"]  # inside Alice's newest batch
    key = json.loads(base64.urlsafe_b64decode(theirs))
    reply = cloud.call("GET", f"/v1/jobs?cursor={forged(theirs, tenant=BOB_TENANT)}", caller=BOB)
    assert reply.status == 200, reply.body
    assert reply.body["items"] == []
    assert key["tenant"] == ALICE_TENANT


def test_a_keyed_batch_sent_again_lists_its_jobs_once(cloud: SchedulerHarness) -> None:
    first = make_batch(cloud, ["x1", "x2", "x3"], key="renewals")
    again = make_batch(cloud, ["x1", "x2", "x3"], key="renewals")
    assert first == again
    assert sorted(job_id for page in every_page(cloud, "", 10) for job_id in page) == sorted(first)


def test_a_tenant_move_lists_a_batchs_jobs_under_the_new_tenant_only(
    cloud: SchedulerHarness, clock: FrozenClock
) -> None:
    old = ALICE  # kept under its ARN, as releases before unique ids kept tenants
    alice_id = cloud.clients.iam().create_user(UserName="alice")["User"]["UserId"]
    made = cloud.jobs.create_batch(old, [JobCreate.model_validate(job(f"m{i}")) for i in range(3)])
    single = cloud.jobs.create(old, JobCreate.model_validate(job("single")))
    [move] = build_tenant_migration(cloud.settings, cloud.clients, clock, ACCOUNT).run()
    assert (move.old, move.new, move.moved, move.failed) == (old, alice_id, 4, {})

    now_listed = every_page(cloud, "", 2, principal=alice_id)
    assert sorted(job_id for page in now_listed for job_id in page) == sorted(
        [job.job_id for job in made] + [single.job_id]
    )
    # The old tenant's listing item is left behind, listing nothing: its jobs are the new one's.
    assert cloud.jobs.list(old, limit=10, cursor=None, status=None).items == []
    moved = cloud.call("GET", f"/v1/jobs/{made[0].job_id}", principal=alice_id).body
    assert moved["name"] == "m0"


def test_a_page_reads_only_the_listings_it_reaches(cloud: SchedulerHarness) -> None:
    for n in range(3):
        make_batch(cloud, [f"batch{n}-{i}" for i in range(5)])
    page, reads = keys_read(cloud, "/v1/jobs?limit=3")
    assert len(page["items"]) == 3
    assert page["next_cursor"]
    assert reads == [1, 3]  # the newest batch's listing item, then three of its jobs


def one_off(at: datetime, name: str) -> dict[str, Any]:
    return {"name": name, "schedule": {"at": at.isoformat()}, "target": RECURRING["target"]}


def minute_count(cloud: SchedulerHarness, at: datetime) -> int:
    item = cloud.clients.dynamodb().get_item(
        TableName=cloud.settings.jobs_table_name,
        Key={"pk": {"S": keys.quota_pk(ALICE_TENANT)}, "sk": {"S": f"MINUTE#{at:%Y%m%d%H%M}"}},
    )
    return int(item["Item"]["used"]["N"]) if "Item" in item else 0


def failing_for(cloud: SchedulerHarness, monkeypatch: pytest.MonkeyPatch, names: set[str]) -> None:
    """The api's writes of the jobs named in `names` fail (a throttle botocore gave up on)."""
    put = cloud.api_store.put_job_if_absent

    def failing(job: Job, listed: bool = True, due_listed: bool = False) -> bool:
        if job.name in names:
            raise RuntimeError("ProvisionedThroughputExceededException, retries exhausted")
        return put(job, listed, due_listed)

    monkeypatch.setattr(cloud.api_store, "put_job_if_absent", failing)


def test_a_key_sent_again_with_other_jobs_lists_each_once_and_keeps_cursors(
    cloud: SchedulerHarness, clock: FrozenClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    failing_for(cloud, monkeypatch, {"k2"})
    failed = cloud.call(
        "POST",
        "/v1/jobs/batch",
        {"jobs": [job("k1"), job("k2"), job("k3")]},
        headers={"Idempotency-Key": "K"},
    )
    assert failed.status == 500, failed.body
    clock.advance(60)
    single = cloud.create(job("single"))["job_id"]
    first = cloud.call("GET", "/v1/jobs?limit=2").body  # the single job, then one of K's
    clock.advance(60)
    others = make_batch(cloud, ["n1", "n2", "n3", "n4"], key="K")  # the key again, with other jobs

    # The key's one listing lists them too, at the first request's time: the walk begun
    # before them goes on from its place, each job once (those listed before its place, not).
    follow = every_page(cloud, "", 10, cursor_from=first["next_cursor"])
    walked = [item["job_id"] for item in first["items"]] + [job_id for page in follow for job_id in page]
    assert len(walked) == len(set(walked))
    everything = [job_id for page in every_page(cloud, "", 3) for job_id in page]
    assert everything[0] == single
    assert len(everything) == len(set(everything)) == 7  # k2, never made, left out
    assert set(others) < set(everything)


def test_a_key_sent_again_with_some_of_the_same_jobs_lists_each_once(
    cloud: SchedulerHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    failing_for(cloud, monkeypatch, {"a", "b", "c"})
    body = {"jobs": [job("a"), job("b"), job("c")]}
    assert cloud.call("POST", "/v1/jobs/batch", body, headers={"Idempotency-Key": "K"}).status == 500
    monkeypatch.undo()
    made = make_batch(
        cloud, ["a", "b", "c", "d"], key="K"
    )  # the same three first (the same ids), and one more
    listed = [job_id for page in every_page(cloud, "", 2) for job_id in page]
    assert sorted(listed) == sorted(made)  # each once


def test_a_listing_that_cannot_be_written_makes_none_of_the_batch(
    cloud: SchedulerHarness, clock: FrozenClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    def throttled(*_: Any) -> None:
        raise ClientError(
            {"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "slow down"}},
            "UpdateItem",
        )

    monkeypatch.setattr(cloud.api_store, "list_together", throttled)
    at = clock.now() + timedelta(hours=1)
    reply = cloud.call("POST", "/v1/jobs/batch", {"jobs": [one_off(at, f"o{i}") for i in range(3)]})
    assert reply.status >= 500, reply.body
    assert every_page(cloud, "", 10) == [[]]
    assert minute_count(cloud, at) == 0  # the counts taken for it given back


def test_a_batchs_one_offs_due_soon_are_listed_through_its_listing(
    cloud: SchedulerHarness, clock: FrozenClock
) -> None:
    soon = clock.now() + timedelta(seconds=30)
    reply = cloud.call("POST", "/v1/jobs/batch", {"jobs": [one_off(soon, f"s{i}") for i in range(3)]})
    assert reply.status == 201, reply.body
    made = sorted((made["job_id"] for made in reply.body["jobs"]), reverse=True)
    assert [job_id for page in every_page(cloud, "", 2) for job_id in page] == made
    [entry] = index_entries(cloud)
    assert entry.startswith(keys.LISTING_PK_PREFIX)


def test_a_batch_of_two_lists_each_job_on_its_own(cloud: SchedulerHarness) -> None:
    made = make_batch(cloud, ["p1", "p2"])  # a listing and its entry would cost as much
    assert sorted(index_entries(cloud)) == sorted(keys.job_pk(job_id) for job_id in made)
    assert sorted(job_id for page in every_page(cloud, "", 1) for job_id in page) == sorted(made)


def test_a_page_over_many_small_batches_reads_their_listings_a_few_reads_at_a_time(
    cloud: SchedulerHarness, clock: FrozenClock
) -> None:
    for n in range(20):
        make_batch(cloud, [f"b{n}-{i}" for i in range(3)])
        clock.advance(1)
    page, calls = keys_read(cloud, "/v1/jobs?limit=50")
    assert len(page["items"]) == 50
    assert page["next_cursor"]
    # The 17 listings this page reaches are read 1, 2, 4, 8 at a time, then the 5 left of its
    # index page of 20; then its 50 jobs, in one read (one read for each listing: 18 reads).
    assert calls == [1, 2, 4, 8, 5, 50]
