"""The audit log (docs/security.md): one line per mutating call that succeeded, in the audit
log group (moto's CloudWatch Logs): who, what, which, the request id; never a body."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from tests.support.events import BOB, BOB_TENANT
from tests.support.harness import AUDIT_LOG_GROUP, FrozenClock, SchedulerHarness
from tests.support.receiver import WebhookReceiver


def audit_lines(cloud: SchedulerHarness) -> list[dict[str, Any]]:
    logs = cloud.clients.logs()
    lines = []
    for stream in logs.describe_log_streams(logGroupName=AUDIT_LOG_GROUP)["logStreams"]:
        events = logs.get_log_events(logGroupName=AUDIT_LOG_GROUP, logStreamName=stream["logStreamName"])
        lines += [json.loads(event["message"]) for event in events["events"]]
    return lines


def test_every_mutating_call_that_succeeded_leaves_one_audit_line(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    at = (clock.now() + timedelta(minutes=10)).isoformat()
    body = {
        "name": "audited",
        "schedule": {"at": at},
        "target": {"type": "HTTP", "url": receiver.url, "secret_headers": {"Authorization": "Bearer t0p"}},
        "payload": {"card": "4111-1111"},
    }
    job = cloud.create(body, caller=BOB)
    job_id = job["job_id"]
    assert cloud.call("POST", f"/v1/jobs/{job_id}/pause", caller=BOB).status == 200
    assert cloud.call("GET", f"/v1/jobs/{job_id}", caller=BOB).status == 200  # a read: no line
    assert cloud.call("POST", "/v1/jobs", body | {"name": ""}, caller=BOB).status == 400  # refused: none
    assert cloud.call("DELETE", f"/v1/jobs/{job_id}", caller=BOB).status == 200

    lines = audit_lines(cloud)

    assert [(line["action"], line["ids"], line["status"]) for line in lines] == [
        ("POST /v1/jobs", {"job_id": job_id}, 201),
        ("POST /v1/jobs/{job_id}/pause", {"job_id": job_id}, 200),
        ("DELETE /v1/jobs/{job_id}", {"job_id": job_id}, 200),
    ]
    assert {(line["tenant"], line["principal_arn"]) for line in lines} == {(BOB_TENANT, BOB)}
    assert all(line["request_id"] for line in lines)
    assert "4111" not in json.dumps(lines)
    assert "t0p" not in json.dumps(lines)


def test_a_line_that_cannot_be_written_leaves_the_answer_standing(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver, caplog: Any
) -> None:
    cloud.clients.logs().delete_log_group(logGroupName=AUDIT_LOG_GROUP)  # say, a broken grant
    at = (clock.now() + timedelta(minutes=10)).isoformat()

    reply = cloud.call(
        "POST",
        "/v1/jobs",
        {"name": "j", "schedule": {"at": at}, "target": {"type": "HTTP", "url": receiver.url}},
    )

    assert reply.status == 201
    assert cloud.call("GET", f"/v1/jobs/{reply.body['job_id']}").status == 200
    assert "audit line not written" in caplog.text
