"""Per-tenant quotas through the API and the worker on moto (docs/security.md, "Quotas"):
429 QUOTA_EXCEEDED naming the limit; counts given back on cancel, completion and change."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import boto3
import pytest
from moto import mock_aws

from scheduler_core.adapters.aws import AwsClients
from tests.support.events import ALICE, BOB
from tests.support.harness import FrozenClock, SchedulerHarness, create_scheduler_resources
from tests.support.receiver import WebhookReceiver


@pytest.fixture
def limited(clock: FrozenClock) -> Iterator[SchedulerHarness]:
    """The scheduler with small quotas: 2 recurring jobs, 2 one-offs a minute, hourly at most."""
    with mock_aws():
        clients = AwsClients(boto3.session.Session(region_name="us-east-1"))
        settings = create_scheduler_resources(clients).model_copy(
            update={"tenant_max_jobs": 2, "tenant_max_firings_per_minute": 2, "min_interval_seconds": 3600}
        )
        yield SchedulerHarness(clients, settings, clock)


def cron(receiver: WebhookReceiver, name: str = "hourly", expression: str = "0 * * * *") -> dict[str, Any]:
    return {"name": name, "schedule": {"cron": expression}, "target": {"type": "HTTP", "url": receiver.url}}


def one_off(receiver: WebhookReceiver, clock: FrozenClock, seconds: int) -> dict[str, Any]:
    at = (clock.now() + timedelta(seconds=seconds)).isoformat()
    return {"name": "once", "schedule": {"at": at}, "target": {"type": "HTTP", "url": receiver.url}}


def refused(reply: Any, limit: str) -> None:
    assert reply.status == 429, reply.body
    assert reply.body["error"]["code"] == "QUOTA_EXCEEDED"
    [detail] = reply.body["error"]["details"]
    assert detail["field"] == limit
    assert f"CDK context {limit}" in detail["message"]


def test_a_tenant_holds_at_most_its_recurring_jobs_and_workflows(
    limited: SchedulerHarness, receiver: WebhookReceiver
) -> None:
    limited.create(cron(receiver, "a"))
    limited.call(
        "POST",
        "/v1/workflows",
        {"name": "wf", "tasks": [{"task_id": "t", "target": cron(receiver)["target"]}]},
    )

    refused(limited.call("POST", "/v1/jobs", cron(receiver, "c")), "tenant_max_jobs")
    refused(
        limited.call(
            "POST",
            "/v1/workflows",
            {"name": "w2", "tasks": [{"task_id": "t", "target": cron(receiver)["target"]}]},
        ),
        "tenant_max_jobs",
    )
    assert limited.call("POST", "/v1/jobs", cron(receiver, "bobs"), caller=BOB).status == 201  # per tenant


def test_a_cancelled_job_gives_its_place_back(limited: SchedulerHarness, receiver: WebhookReceiver) -> None:
    first = limited.create(cron(receiver, "a"))
    limited.create(cron(receiver, "b"))
    refused(limited.call("POST", "/v1/jobs", cron(receiver, "c")), "tenant_max_jobs")

    assert limited.call("DELETE", f"/v1/jobs/{first['job_id']}").status == 200
    assert limited.call("DELETE", f"/v1/jobs/{first['job_id']}").status == 200  # again: not given back twice

    assert limited.call("POST", "/v1/jobs", cron(receiver, "c")).status == 201
    refused(limited.call("POST", "/v1/jobs", cron(receiver, "d")), "tenant_max_jobs")


def test_one_offs_count_by_the_minute_they_fire_in(
    limited: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    limited.create(one_off(receiver, clock, 300))
    limited.create(one_off(receiver, clock, 300))
    refused(limited.call("POST", "/v1/jobs", one_off(receiver, clock, 300)), "tenant_max_firings_per_minute")

    assert limited.call("POST", "/v1/jobs", one_off(receiver, clock, 360)).status == 201  # the next minute
    limited.create(cron(receiver, "a"))  # one-offs do not take recurring places
    limited.create(cron(receiver, "b"))


def test_a_one_off_that_fired_keeps_its_minute_a_recurring_job_that_completed_gives_its_place_back(
    limited: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    ending = cron(receiver, "ending")  # hourly, its window holds one firing (11:00)
    ending["schedule"] |= {"end_at": (clock.now() + timedelta(minutes=61)).isoformat()}
    made = limited.create(ending)
    limited.create(cron(receiver, "b"))
    refused(limited.call("POST", "/v1/jobs", cron(receiver, "c")), "tenant_max_jobs")

    clock.advance(60 * 60)
    limited.poll()
    limited.deliver()
    assert limited.call("GET", f"/v1/jobs/{made['job_id']}").body["status"] == "COMPLETED"

    assert limited.call("POST", "/v1/jobs", cron(receiver, "c")).status == 201


def test_a_change_of_schedule_moves_the_count(
    limited: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    recurring = limited.create(cron(receiver, "a"))
    limited.create(cron(receiver, "b"))
    at = (clock.now() + timedelta(minutes=10)).isoformat()

    moved = limited.call("PATCH", f"/v1/jobs/{recurring['job_id']}", {"schedule": {"at": at}})
    assert moved.status == 200, moved.body

    assert limited.call("POST", "/v1/jobs", cron(receiver, "c")).status == 201  # its place was given back
    back = limited.call("PATCH", f"/v1/jobs/{recurring['job_id']}", {"schedule": {"cron": "0 * * * *"}})
    refused(back, "tenant_max_jobs")
    assert limited.call("GET", f"/v1/jobs/{recurring['job_id']}").body["schedule"]["at"] is not None


@pytest.mark.parametrize(
    "schedule", [{"rate": "30 minutes"}, {"cron": "*/30 * * * *"}, {"cron": "0,10 * * * *"}]
)
def test_a_schedule_more_frequent_than_the_deployment_allows_is_refused(
    limited: SchedulerHarness, receiver: WebhookReceiver, schedule: dict[str, str]
) -> None:
    body = cron(receiver) | {"schedule": schedule}

    refused(limited.call("POST", "/v1/jobs", body), "min_interval_seconds")


def test_a_refused_create_takes_no_count(limited: SchedulerHarness, receiver: WebhookReceiver) -> None:
    bad = cron(receiver) | {"target": {"type": "HTTP", "url": "ftp://x"}}
    for _ in range(3):
        assert limited.call("POST", "/v1/jobs", bad).status == 400

    limited.create(cron(receiver, "a"))
    limited.create(cron(receiver, "b"))


def test_default_limits_leave_an_ordinary_tenant_alone(
    cloud: SchedulerHarness, receiver: WebhookReceiver
) -> None:
    for index in range(5):
        cloud.create(cron(receiver, f"job-{index}", "* * * * *"))
    assert cloud.call("GET", "/v1/jobs", caller=ALICE).status == 200


def completed_by_a_failed_last_run(
    limited: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> tuple[str, str]:
    """A recurring job whose window holds one firing (11:00), whose target refuses it (400,
    final): the job completes, its run FAILED. (job id, run id)."""
    ending = cron(receiver, "ending") | {"retry": {"max_attempts": 1}}
    ending["schedule"] |= {"end_at": (clock.now() + timedelta(minutes=61)).isoformat()}
    made = limited.create(ending)
    receiver.respond_with(400)
    clock.advance(60 * 60)
    limited.poll()
    limited.deliver()
    assert limited.call("GET", f"/v1/jobs/{made['job_id']}").body["status"] == "COMPLETED"
    [run] = limited.runs(made["job_id"])
    assert run["status"] == "FAILED"
    return made["job_id"], run["run_id"]


def test_a_completed_jobs_place_is_given_back_once_however_often_its_last_run_ends(
    limited: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    """Retrying the failed last run of a completed job ends that run again (and again): its
    place went back when the job completed, never again."""
    job_id, run_id = completed_by_a_failed_last_run(limited, clock, receiver)
    limited.create(cron(receiver, "a"))
    limited.create(cron(receiver, "b"))
    for _ in range(3):
        receiver.respond_with(400)
        assert limited.call("POST", f"/v1/jobs/{job_id}/runs/{run_id}/retry").status == 202
        limited.deliver()
        assert limited.runs(job_id)[0]["status"] == "FAILED"

    refused(limited.call("POST", "/v1/jobs", cron(receiver, "c")), "tenant_max_jobs")


def test_a_resume_that_completes_the_job_gives_its_place_back(
    limited: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    ending = cron(receiver, "ending") | {"misfire": "SKIP"}
    ending["schedule"] |= {"end_at": (clock.now() + timedelta(minutes=61)).isoformat()}
    made = limited.create(ending)
    limited.create(cron(receiver, "b"))
    assert limited.call("POST", f"/v1/jobs/{made['job_id']}/pause").status == 200
    clock.advance(2 * 60 * 60)  # its one firing passes while it is paused

    resumed = limited.call("POST", f"/v1/jobs/{made['job_id']}/resume")

    assert resumed.body["status"] == "COMPLETED"
    assert limited.call("POST", "/v1/jobs", cron(receiver, "c")).status == 201


def test_a_workflow_refused_by_its_quota_writes_no_task_items(
    limited: SchedulerHarness, receiver: WebhookReceiver
) -> None:
    limited.create(cron(receiver, "a"))
    limited.create(cron(receiver, "b"))
    tasks = [{"task_id": f"t{i}", "target": cron(receiver)["target"]} for i in range(3)]

    refused(limited.call("POST", "/v1/workflows", {"name": "wf", "tasks": tasks}), "tenant_max_jobs")

    items = limited.clients.dynamodb().scan(TableName=limited.settings.jobs_table_name)["Items"]
    assert [item for item in items if item.get("kind", {}).get("S") == "TASK"] == []
