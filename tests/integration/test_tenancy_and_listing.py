"""Every job belongs to its caller: another tenant sees a 404, never the job."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from functions.api.handler import handler as api_handler
from scheduler_core.composition import build_job_service
from scheduler_core.domain.execution_roles import external_id
from tests.support.events import ACCOUNT, ALICE, ALICE_TENANT, BOB, LambdaContext, api_event
from tests.support.harness import FrozenClock, SchedulerHarness

JOB = {
    "name": "mine",
    "schedule": {"rate": "1 hour"},
    "target": {"type": "HTTP", "url": "https://example.com/hook"},
}


def test_another_tenant_gets_404_for_get_delete_and_runs(cloud: SchedulerHarness) -> None:
    job = cloud.create(JOB, caller=ALICE)
    for method, path in [
        ("GET", f"/v1/jobs/{job['job_id']}"),
        ("DELETE", f"/v1/jobs/{job['job_id']}"),
        ("GET", f"/v1/jobs/{job['job_id']}/runs"),
        ("GET", f"/v1/jobs/{job['job_id']}/runs/{job['job_id']}:0"),
    ]:
        reply = cloud.call(method, path, caller=BOB)
        assert reply.status == 404, (method, path, reply.body)
    assert cloud.call("GET", "/v1/jobs", caller=BOB).body == {"items": [], "next_cursor": None}
    assert cloud.call("GET", f"/v1/jobs/{job['job_id']}", caller=ALICE).body["status"] == "SCHEDULED"


def test_sessions_of_one_role_share_its_jobs(cloud: SchedulerHarness) -> None:
    deployer = f"arn:aws:sts::{ACCOUNT}:assumed-role/Deployer"
    job = cloud.create(JOB, caller=f"{deployer}/session-1")
    assert cloud.call("GET", f"/v1/jobs/{job['job_id']}", caller=f"{deployer}/session-2").status == 200


def test_a_caller_learns_its_tenant_and_the_external_id_of_its_roles(cloud: SchedulerHarness) -> None:
    reply = cloud.call("GET", "/v1/tenant", caller=ALICE)
    assert reply.status == 200
    assert reply.body == {
        "tenant": ALICE_TENANT,
        "principal_arn": ALICE,
        "external_id": external_id(ALICE_TENANT),
    }
    assert ALICE_TENANT.startswith("AIDA")  # the user's unique id, not its ARN


def test_a_user_made_again_under_the_same_name_does_not_inherit_the_old_ones_jobs(
    cloud: SchedulerHarness,
) -> None:
    job = cloud.create(JOB, caller=ALICE)  # by the first alice (its made-up id)
    again = "AIDANEWALICEUSERID789"  # IAM's id for a user made again under the same name

    assert cloud.call("GET", f"/v1/jobs/{job['job_id']}", caller=ALICE, principal=again).status == 404
    assert cloud.call("GET", "/v1/jobs", caller=ALICE, principal=again).body["items"] == []


def test_sessions_of_a_role_named_per_session_are_tenants_each(
    cloud: SchedulerHarness, clock: FrozenClock
) -> None:
    settings = cloud.settings.model_copy(update={"per_session_tenant_roles": ("AWSReservedSSO_*",)})
    jobs = build_job_service(settings, cloud.clients, clock)
    role = f"arn:aws:sts::{ACCOUNT}:assumed-role/AWSReservedSSO_Developers_0a1b2c3d"

    def call(method: str, path: str, session: str, body: Any = None) -> Any:
        event = api_event(
            method, path, body, caller=f"{role}/{session}", principal=f"AROASSOROLEID1234567:{session}"
        )
        reply = api_handler(event, LambdaContext(), jobs=jobs)
        return reply["statusCode"], json.loads(reply["body"])

    status, job = call("POST", "/v1/jobs", "alice@example.com", JOB)
    assert status == 201
    assert call("GET", f"/v1/jobs/{job['job_id']}", "alice@example.com")[0] == 200
    assert call("GET", f"/v1/jobs/{job['job_id']}", "bob@example.com")[0] == 404
    assert call("GET", "/v1/tenant", "bob@example.com")[1]["tenant"] == "AROASSOROLEID1234567:bob@example.com"


def test_listing_pages_through_every_job_newest_first(cloud: SchedulerHarness, clock: FrozenClock) -> None:
    created = []
    for i in range(7):
        created.append(cloud.create(JOB | {"name": f"job-{i}"})["job_id"])
        clock.advance(1)
    seen: list[str] = []
    cursor = None
    while True:
        query = "?limit=3" + (f"&cursor={cursor}" if cursor else "")
        page = cloud.call("GET", f"/v1/jobs{query}").body
        assert len(page["items"]) <= 3
        seen += [job["job_id"] for job in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == list(reversed(created))


def test_listing_filters_by_status(cloud: SchedulerHarness) -> None:
    keep = cloud.create(JOB)
    gone = cloud.create(JOB)
    cloud.call("DELETE", f"/v1/jobs/{gone['job_id']}")
    scheduled = cloud.call("GET", "/v1/jobs?status=SCHEDULED").body["items"]
    cancelled = cloud.call("GET", "/v1/jobs?status=CANCELLED").body["items"]
    assert [job["job_id"] for job in scheduled] == [keep["job_id"]]
    assert [job["job_id"] for job in cancelled] == [gone["job_id"]]


def test_a_cursor_cannot_be_used_by_another_tenant(cloud: SchedulerHarness) -> None:
    for _ in range(3):
        cloud.create(JOB)
    cursor = cloud.call("GET", "/v1/jobs?limit=1").body["next_cursor"]
    assert cursor
    reply = cloud.call("GET", f"/v1/jobs?cursor={cursor}", caller=BOB)
    assert reply.status == 400
    [detail] = reply.body["error"]["details"]
    assert detail["field"] == "cursor"
    assert "another tenant's" in detail["message"]


def test_a_runs_cursor_of_one_job_is_refused_on_another(cloud: SchedulerHarness) -> None:
    first, second = cloud.create(JOB), cloud.create(JOB)
    for _ in range(2):
        assert cloud.call("POST", f"/v1/jobs/{first['job_id']}/trigger").status == 202
    cursor = cloud.call("GET", f"/v1/jobs/{first['job_id']}/runs?limit=1").body["next_cursor"]
    assert cursor
    reply = cloud.call("GET", f"/v1/jobs/{second['job_id']}/runs?cursor={cursor}")
    assert reply.status == 400
    [detail] = reply.body["error"]["details"]
    assert detail["field"] == "cursor"
    assert "another job's" in detail["message"]


def test_a_job_reads_back_as_it_was_created(cloud: SchedulerHarness, clock: FrozenClock) -> None:
    job = cloud.create(JOB | {"payload": {"a": [1, 2.5, None, True]}, "priority": "LOW"})
    read = cloud.call("GET", f"/v1/jobs/{job['job_id']}").body
    assert read == job
    assert set(read) >= {
        "job_id",
        "name",
        "status",
        "schedule",
        "target",
        "payload",
        "priority",
        "next_fire_at",
        "created_at",
        "version",
        "retry",
    }
    assert "tenant" not in read
    assert read["next_fire_at"] == (clock.now() + timedelta(hours=1)).isoformat(
        timespec="milliseconds"
    ).replace("+00:00", "Z")


def test_cancelling_twice_is_harmless(cloud: SchedulerHarness) -> None:
    job = cloud.create(JOB)
    first = cloud.call("DELETE", f"/v1/jobs/{job['job_id']}")
    second = cloud.call("DELETE", f"/v1/jobs/{job['job_id']}")
    assert first.status == second.status == 200
    assert second.body["status"] == "CANCELLED"
    assert second.body["version"] == first.body["version"]


def test_the_openapi_document_describes_the_routes(cloud: SchedulerHarness) -> None:
    reply = cloud.call("GET", "/v1/openapi.json")
    assert reply.status == 200
    assert reply.body["openapi"].startswith("3.")
    assert {"/v1/jobs", "/v1/jobs/{job_id}", "/v1/jobs/{job_id}/runs"} <= set(reply.body["paths"])
    assert "JobCreate" in reply.body["components"]["schemas"]


def test_a_filtered_listing_reads_whole_only_the_jobs_it_returns(cloud: SchedulerHarness) -> None:
    """The tenant index holds keys only; a filter reads just the attributes it looks at, and
    only the jobs of the page are read whole (a page may look at up to 1,000 jobs of up to
    256 KiB each)."""
    for n in range(30):
        cloud.create(JOB | {"name": f"{'billing' if n % 6 == 0 else 'other'}-{n}"})
    reads: list[tuple[bool, int]] = []

    def count(params: dict[str, Any], **_: Any) -> None:
        for request in params["RequestItems"].values():
            reads.append(("ProjectionExpression" in request, len(request["Keys"])))

    events = cloud.clients.dynamodb().meta.events
    events.register("provide-client-params.dynamodb.BatchGetItem", count)
    try:
        page = cloud.call("GET", "/v1/jobs?name_prefix=billing-&limit=2").body
    finally:
        events.unregister("provide-client-params.dynamodb.BatchGetItem", count)
    assert [item["name"][:8] for item in page["items"]] == ["billing-"] * 2
    assert page["next_cursor"] is not None
    assert reads == [(True, 30), (False, 2)]  # the filter's attributes of all, two jobs whole
