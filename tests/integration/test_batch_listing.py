"""A batch's jobs are listed by one item (`ListingTable.list_together`), one tenant index
entry for them all instead of one each (a write unit a job: docs/architecture.md,
"Listing"): on moto, through the API, they list as every other job does — newest first,
in pages whose cursors may stop inside a batch, filtered, only to their tenant — and a
tenant move lists them under the new tenant."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from scheduler_core.adapters.dynamodb import TENANT_INDEX
from scheduler_core.composition import build_tenant_migration
from scheduler_core.domain.api_shapes import JobCreate
from tests.support.events import ACCOUNT, ALICE, ALICE_TENANT, BOB
from tests.support.harness import FrozenClock, SchedulerHarness

RECURRING = {"schedule": {"rate": "1 hour"}, "target": {"type": "HTTP", "url": "https://example.com/hook"}}


def job(name: str) -> dict[str, Any]:
    return {"name": name, **RECURRING}


def make_batch(cloud: SchedulerHarness, names: list[str], key: str | None = None) -> list[str]:
    headers = {"Idempotency-Key": key} if key else {}
    reply = cloud.call("POST", "/v1/jobs/batch", {"jobs": [job(name) for name in names]}, headers=headers)
    assert reply.status == 201, reply.body
    return [made["job_id"] for made in reply.body["jobs"]]


def every_page(cloud: SchedulerHarness, query: str, limit: int, **kw: Any) -> list[list[str]]:
    """The job ids of each page of `GET /v1/jobs?<query>`, following `next_cursor` to the end."""
    pages: list[list[str]] = []
    cursor = None
    while True:
        path = f"/v1/jobs?limit={limit}{query}" + (f"&cursor={cursor}" if cursor else "")
        reply = cloud.call("GET", path, **kw)
        assert reply.status == 200, reply.body
        pages.append([item["job_id"] for item in reply.body["items"]])
        cursor = reply.body["next_cursor"]
        if cursor is None:
            return pages


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
    entries = cloud.clients.dynamodb().query(
        TableName=cloud.settings.jobs_table_name,
        IndexName=TENANT_INDEX,
        KeyConditionExpression="tenant = :tenant",
        ExpressionAttributeValues={":tenant": {"S": ALICE_TENANT}},
    )["Items"]
    assert len(mixed) == 11
    assert len(entries) == 5  # three jobs of their own, two batches


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
    assert "at" in json.loads(base64.urlsafe_b64decode(inside))
    reply = cloud.call("GET", f"/v1/jobs?cursor={inside}", caller=BOB)
    assert reply.status == 400
    [detail] = reply.body["error"]["details"]
    assert detail["field"] == "cursor"


@pytest.mark.parametrize("at", [0, -1, "1", True, None])
def test_a_forged_place_in_a_batch_is_a_400_naming_the_cursor(
    cloud: SchedulerHarness, mixed: list[str], at: Any
) -> None:
    inside = cloud.call("GET", "/v1/jobs?limit=2").body["next_cursor"]
    key = json.loads(base64.urlsafe_b64decode(inside)) | {"at": at}
    forged = base64.urlsafe_b64encode(json.dumps(key).encode()).decode()
    reply = cloud.call("GET", f"/v1/jobs?cursor={forged}")
    assert reply.status == 400, reply.body
    [detail] = reply.body["error"]["details"]
    assert detail["field"] == "cursor"


def test_a_place_in_a_batch_on_a_jobs_own_entry_is_a_400(cloud: SchedulerHarness, mixed: list[str]) -> None:
    own = cloud.call("GET", "/v1/jobs?limit=1").body["next_cursor"]  # after the newest single job
    key = json.loads(base64.urlsafe_b64decode(own)) | {"at": 1}
    forged = base64.urlsafe_b64encode(json.dumps(key).encode()).decode()
    reply = cloud.call("GET", f"/v1/jobs?cursor={forged}")
    assert reply.status == 400, reply.body
    assert "listing" in reply.body["error"]["details"][0]["message"]


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
    reads: list[int] = []

    def count(params: dict[str, Any], **_: Any) -> None:
        reads.append(sum(len(asked["Keys"]) for asked in params["RequestItems"].values()))

    client = cloud.clients.dynamodb()
    client.meta.events.register("provide-client-params.dynamodb.BatchGetItem", count)
    try:
        page = cloud.call("GET", "/v1/jobs?limit=3").body
    finally:
        client.meta.events.unregister("provide-client-params.dynamodb.BatchGetItem", count)
    assert len(page["items"]) == 3 and page["next_cursor"]
    assert reads == [1, 3]  # the newest batch's listing item, then three of its jobs
