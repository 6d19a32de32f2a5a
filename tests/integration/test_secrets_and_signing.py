"""Secret headers and signed webhooks, through the API and the worker on moto (KMS, DynamoDB,
SQS): a secret is never in a response, a stored item or a log line; deliveries verify with
the `standardwebhooks` package."""

from __future__ import annotations

import json
import logging
from datetime import timedelta
from typing import Any

import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from scheduler_core.domain.webhooks import ROTATION_OVERLAP
from tests.support.events import ALICE, BOB
from tests.support.harness import FrozenClock, SchedulerHarness
from tests.support.receiver import WebhookReceiver

TOKEN = "Bearer s3cr3t-t0ken-7f9c2a"


def hook(receiver: WebhookReceiver, clock: FrozenClock, **target: Any) -> dict[str, Any]:
    at = (clock.now() + timedelta(seconds=5)).isoformat()
    return {
        "name": "signed",
        "schedule": {"at": at},
        "target": {"type": "HTTP", "url": receiver.url, **target},
    }


def fire(cloud: SchedulerHarness, clock: FrozenClock, job: dict[str, Any]) -> None:
    clock.move_to(clock.now() + timedelta(seconds=6))
    cloud.poll()
    cloud.deliver()


def stored_items(cloud: SchedulerHarness) -> str:
    """Every item of the jobs table, as text."""
    items = cloud.clients.dynamodb().scan(TableName=cloud.settings.jobs_table_name)["Items"]
    return json.dumps(items)


# --- secret headers ---------------------------------------------------------------------------


def test_a_secret_header_reaches_the_target_and_nothing_else(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    created = cloud.create(
        hook(receiver, clock, secret_headers={"Authorization": TOKEN}, headers={"X-Team": "a"})
    )

    assert created["target"]["secret_headers"] == {"Authorization": "***"}
    assert created["target"]["headers"] == {"X-Team": "a"}
    shown = cloud.call("GET", f"/v1/jobs/{created['job_id']}")
    assert shown.body["target"]["secret_headers"] == {"Authorization": "***"}
    listed = cloud.call("GET", "/v1/jobs")
    fire(cloud, clock, created)

    [request] = receiver.requests
    assert request.headers["authorization"] == TOKEN
    [run] = cloud.runs(created["job_id"])
    assert run["status"] == "SUCCEEDED"
    for text in (json.dumps(created), json.dumps(shown.body), json.dumps(listed.body), json.dumps(run)):
        assert "s3cr3t" not in text
    assert "s3cr3t" not in stored_items(cloud)
    assert "s3cr3t" not in caplog.text


def test_a_change_keeps_a_secret_sent_back_as_stars_and_takes_a_new_value(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    created = cloud.create(hook(receiver, clock, secret_headers={"Authorization": TOKEN}))
    target = created["target"] | {"timeout_seconds": 5}  # as read: secret headers shown "***"

    kept = cloud.call("PATCH", f"/v1/jobs/{created['job_id']}", {"target": target})
    assert kept.status == 200, kept.body
    fire(cloud, clock, created)
    assert receiver.requests[-1].headers["authorization"] == TOKEN

    again = cloud.create(hook(receiver, clock, secret_headers={"Authorization": TOKEN}))
    changed = cloud.call(
        "PATCH",
        f"/v1/jobs/{again['job_id']}",
        {"target": again["target"] | {"secret_headers": {"Authorization": "Bearer new"}}},
    )
    assert changed.status == 200, changed.body
    assert changed.body["target"]["secret_headers"] == {"Authorization": "***"}
    fire(cloud, clock, again)
    assert receiver.requests[-1].headers["authorization"] == "Bearer new"


def test_stars_for_a_header_the_job_does_not_hold_are_a_400_naming_it(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    created = cloud.create(hook(receiver, clock))

    reply = cloud.call(
        "PATCH",
        f"/v1/jobs/{created['job_id']}",
        {"target": created["target"] | {"secret_headers": {"X-Api-Key": "***"}}},
    )

    assert reply.status == 400
    assert reply.body["error"]["details"][0]["field"] == "target.secret_headers.X-Api-Key"


@pytest.mark.parametrize(
    ("target", "field"),
    [
        ({"headers": {"authorization": "a"}, "secret_headers": {"Authorization": "b"}}, "target"),
        ({"secret_headers": {"X-Scheduler-Run-Id": "x"}}, "target.secret_headers"),
        ({"secret_headers": {"webhook-signature": "v1,x"}}, "target.secret_headers"),
        ({"headers": {"Webhook-Id": "x"}}, "target.headers"),
        ({"secret_headers": {"Authorization": "a\r\nInjected: 1"}}, "target.secret_headers"),
    ],
)
def test_secret_headers_follow_the_rules_of_headers(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver, target: dict[str, Any], field: str
) -> None:
    reply = cloud.call("POST", "/v1/jobs", hook(receiver, clock, **target))

    assert reply.status == 400
    assert reply.body["error"]["details"][0]["field"].startswith(field)


def test_a_sealed_secret_copied_to_another_job_does_not_open(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    """Each value is sealed under its tenant, job and header: a copy (a bug, a restored
    backup, an edit of the table) fails to open instead of reaching another target."""
    first = cloud.create(hook(receiver, clock, secret_headers={"Authorization": TOKEN}))
    second = cloud.create(hook(receiver, clock, secret_headers={"Authorization": "Bearer other"}))
    ddb = cloud.clients.dynamodb()
    table = cloud.settings.jobs_table_name
    items = {
        job_id: ddb.get_item(TableName=table, Key={"pk": {"S": f"JOB#{job_id}"}, "sk": {"S": "JOB"}})["Item"]
        for job_id in (first["job_id"], second["job_id"])
    }
    spec = json.loads(items[second["job_id"]]["spec"]["S"])
    spec["sealed_headers"] = json.loads(items[first["job_id"]]["spec"]["S"])["sealed_headers"]
    ddb.update_item(
        TableName=table,
        Key={"pk": {"S": f"JOB#{second['job_id']}"}, "sk": {"S": "JOB"}},
        UpdateExpression="SET spec = :spec",
        ExpressionAttributeValues={":spec": {"S": json.dumps(spec)}},
    )
    clock.move_to(clock.now() + timedelta(seconds=6))
    cloud.poll()
    cloud.deliver()

    assert [r.headers["authorization"] for r in receiver.requests] == [TOKEN]
    [run] = cloud.runs(second["job_id"])
    assert run["status"] == "FAILED"
    assert "InvalidCiphertext" in run["error"]


def test_a_workflow_task_with_secret_headers_is_a_400_naming_the_task(
    cloud: SchedulerHarness, receiver: WebhookReceiver
) -> None:
    reply = cloud.call(
        "POST",
        "/v1/workflows",
        {
            "name": "wf",
            "tasks": [
                {
                    "task_id": "a",
                    "target": {"type": "HTTP", "url": receiver.url, "secret_headers": {"A": "b"}},
                }
            ],
        },
    )

    assert reply.status == 400
    assert reply.body["error"]["details"][0]["field"] == "tasks[0].target.secret_headers"


# --- signed webhooks --------------------------------------------------------------------------


def test_a_delivery_is_signed_with_the_tenants_secret_and_verifies(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    made = cloud.call("POST", "/v1/signing-secrets")
    assert made.status == 201, made.body
    secret = made.body["secret"]
    assert secret.startswith("whsec_")
    created = cloud.create(hook(receiver, clock))
    fire(cloud, clock, created)

    [request] = receiver.requests
    assert Webhook(secret).verify(request.raw, request.headers) == request.body
    [run] = cloud.runs(created["job_id"])
    assert request.headers["webhook-id"] == run["run_id"]
    shown = cloud.call("GET", "/v1/signing-secrets")
    assert shown.status == 200
    assert secret.removeprefix("whsec_") not in json.dumps(shown.body) + stored_items(cloud) + caplog.text


def test_another_tenants_secret_does_not_verify_its_deliveries(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    alices = cloud.call("POST", "/v1/signing-secrets", caller=ALICE).body["secret"]
    bobs = cloud.call("POST", "/v1/signing-secrets", caller=BOB).body["secret"]
    created = cloud.create(hook(receiver, clock), caller=BOB)
    fire(cloud, clock, created)

    [request] = receiver.requests
    Webhook(bobs).verify(request.raw, request.headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(alices).verify(request.raw, request.headers)


def test_every_attempt_carries_the_same_webhook_id_and_its_own_timestamp(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    secret = cloud.call("POST", "/v1/signing-secrets").body["secret"]
    receiver.respond_with(503)
    created = cloud.create(hook(receiver, clock) | {"retry": {"max_attempts": 2, "backoff_seconds": 10}})
    fire(cloud, clock, created)
    clock.advance(30)
    cloud.poll()
    cloud.deliver()

    first, second = receiver.requests
    assert first.headers["webhook-id"] == second.headers["webhook-id"]
    assert int(second.headers["webhook-timestamp"]) > int(first.headers["webhook-timestamp"])
    for request in (first, second):
        Webhook(secret).verify(request.raw, request.headers)


def test_a_rotation_signs_with_both_secrets_for_24_hours_then_the_new_one(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    old = cloud.call("POST", "/v1/signing-secrets").body["secret"]
    rotated = cloud.call("POST", "/v1/signing-secrets")
    new = rotated.body["secret"]
    assert new != old
    assert rotated.body["previous_expires_at"] is not None
    during = cloud.create(hook(receiver, clock))
    fire(cloud, clock, during)
    [request] = receiver.requests
    assert len(request.headers["webhook-signature"].split(" ")) == 2
    Webhook(old).verify(request.raw, request.headers)
    Webhook(new).verify(request.raw, request.headers)

    clock.advance(ROTATION_OVERLAP.total_seconds())
    after = cloud.create(hook(receiver, clock))
    fire(cloud, clock, after)
    last = receiver.requests[-1]
    assert len(last.headers["webhook-signature"].split(" ")) == 1
    Webhook(new).verify(last.raw, last.headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(old).verify(last.raw, last.headers)


def test_a_tenants_first_http_job_makes_a_secret_so_every_delivery_is_signed(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    """Made unseen; the tenant's first POST replaces it outright (nobody verifies with it)."""
    assert cloud.call("GET", "/v1/signing-secrets").body["created_at"] is None
    created = cloud.create(hook(receiver, clock))
    fire(cloud, clock, created)
    [request] = receiver.requests
    assert request.headers["webhook-signature"].startswith("v1,")

    made = cloud.call("POST", "/v1/signing-secrets").body
    assert made["previous_expires_at"] is None


def test_a_kept_secret_never_follows_the_target_to_another_host(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    """Whoever may change a job must not be able to send its secret, which they cannot read,
    to a host of their choosing: "***" keeps a value for the same scheme, host and port only."""
    created = cloud.create(hook(receiver, clock, secret_headers={"Authorization": TOKEN}))
    with WebhookReceiver() as elsewhere:
        moved = created["target"] | {"url": elsewhere.url}

        reply = cloud.call("PATCH", f"/v1/jobs/{created['job_id']}", {"target": moved})

        assert reply.status == 400
        assert reply.body["error"]["details"][0]["field"] == "target.secret_headers.Authorization"
        fire(cloud, clock, created)
        assert elsewhere.requests == []
    assert receiver.requests[-1].headers["authorization"] == TOKEN  # unchanged, where it was


@pytest.mark.parametrize("value", [" Bearer x", "Bearer x ", "Bearer x\t"])
def test_a_header_value_an_http_client_would_refuse_to_send_is_a_400(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver, value: str
) -> None:
    """(It used to pass, then fail at delivery with an error quoting the value: a secret's.)"""
    for field in ("secret_headers", "headers"):
        reply = cloud.call("POST", "/v1/jobs", hook(receiver, clock, **{field: {"Authorization": value}}))

        assert reply.status == 400
        assert reply.body["error"]["details"][0]["field"] == f"target.{field}.Authorization"
        assert value.strip() not in json.dumps(reply.body)
