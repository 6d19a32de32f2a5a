"""Bodies the API refuses before it parses them, and cursors it did not hand out: each a
4xx naming the field, on every route that takes one — never a 500 (what an API fuzzer found).

API Gateway passes a body it does not take for text base64-encoded (`isBase64Encoded`);
the local cloud's gateway does so for a body that is not UTF-8."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from functions.api import handler as api
from tests.integration.test_api_bad_input import VALID, assert_error
from tests.support.events import LambdaContext, api_event
from tests.support.harness import ApiReply, SchedulerHarness

MAX_REQUEST_BYTES = 256 * 1024
NOT_UTF8 = b'{"name": "caf\xe9"}'  # Latin-1, as a client that ignores the charset sends it
WORKFLOW = {
    "name": "pipeline",
    "tasks": [{"task_id": "only", "target": {"type": "HTTP", "url": "https://example.com/hook"}}],
}


def send_bytes(cloud: SchedulerHarness, method: str, path: str, raw: bytes) -> ApiReply:
    """A request whose body API Gateway passed base64-encoded."""
    event = api_event(method, path) | {"body": base64.b64encode(raw).decode(), "isBase64Encoded": True}
    reply = api.handler(event, LambdaContext(), jobs=cloud.jobs)
    return ApiReply(reply["statusCode"], json.loads(reply["body"] or "null"), reply.get("headers") or {})


def routes_with_a_body(cloud: SchedulerHarness) -> list[tuple[str, str]]:
    job_id = cloud.create(VALID)["job_id"]
    workflow = cloud.call("POST", "/v1/workflows", WORKFLOW)
    assert workflow.status == 201, workflow.body
    workflow_id = workflow.body["workflow_id"]
    return [
        ("POST", "/v1/jobs"),
        ("PATCH", f"/v1/jobs/{job_id}"),
        ("POST", f"/v1/jobs/{job_id}/backfill"),
        ("POST", "/v1/workflows"),
        ("PATCH", f"/v1/workflows/{workflow_id}"),
        ("POST", f"/v1/workflows/{workflow_id}/backfill"),
    ]


def test_a_body_that_is_not_utf8_is_a_400_naming_the_body_on_every_route(cloud: SchedulerHarness) -> None:
    for method, path in routes_with_a_body(cloud):
        reply = send_bytes(cloud, method, path, NOT_UTF8)

        assert_error(reply, 400, "VALIDATION_ERROR", "body")
        [detail] = reply.body["error"]["details"]
        assert (
            detail["message"] == "must be JSON encoded as UTF-8; the byte 0xe9 at offset 13 is not UTF-8"
        ), (method, path)


def test_a_text_body_with_a_lone_surrogate_is_not_utf8_either(cloud: SchedulerHarness) -> None:
    reply = cloud.call("POST", "/v1/jobs", raw_body='{"name": "\ud800"}')

    assert_error(reply, 400, "VALIDATION_ERROR", "body")
    assert "UTF-8" in reply.body["error"]["details"][0]["message"]


def test_a_utf8_body_passed_base64_encoded_is_read_as_its_text(cloud: SchedulerHarness) -> None:
    job: dict[str, Any] = VALID | {"name": "café"}

    reply = send_bytes(cloud, "POST", "/v1/jobs", json.dumps(job, ensure_ascii=False).encode())

    assert reply.status == 201, reply.body
    assert reply.body["name"] == "café"


def test_the_size_limit_counts_the_bodys_bytes_not_its_base64_text(cloud: SchedulerHarness) -> None:
    fits = json.dumps(VALID | {"payload": {"blob": "x" * (MAX_REQUEST_BYTES - 1024)}}).encode()
    assert len(fits) <= MAX_REQUEST_BYTES < len(base64.b64encode(fits))
    assert send_bytes(cloud, "POST", "/v1/jobs", fits).status == 201

    too_large = send_bytes(cloud, "POST", "/v1/jobs", fits + b" " * 2048)
    assert_error(too_large, 413, "PAYLOAD_TOO_LARGE", "body")


@pytest.mark.parametrize("cursor", ["null", "not-base64!", "bm90IGpzb24", "WzEsMl0", "ng"])
def test_a_workflow_listing_cursor_this_api_did_not_issue_is_a_400(
    cloud: SchedulerHarness, cursor: str
) -> None:
    workflow_id = cloud.call("POST", "/v1/workflows", WORKFLOW).body["workflow_id"]

    for path in ("/v1/workflows", f"/v1/workflows/{workflow_id}/runs"):
        reply = cloud.call("GET", f"{path}?cursor={cursor}")
        assert_error(reply, 400, "VALIDATION_ERROR", "cursor")
        assert "next_cursor" in reply.body["error"]["message"]
