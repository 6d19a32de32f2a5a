"""The public API over real HTTP: bad input gets a 4xx in the DESIGN §7 error shape,
tenants see only their own jobs, and the OpenAPI document is served."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from tests.e2e.api_client import ApiClient, assert_error_shape, http_job
from tests.e2e.polling import now_ms
from tests.support.helpers import iso
from tests.support.receiver import WebhookReceiver

pytestmark = pytest.mark.e2e

MAX_REQUEST_BYTES = 256 * 1024
ANOTHER_TENANT = "someone-else"


def far_future_job(receiver: WebhookReceiver, purpose: str, **fields: Any) -> dict[str, Any]:
    """A valid job that will not fire while the suite runs."""
    return http_job(receiver, purpose, {"at": iso(now_ms() + timedelta(days=1))}, **fields)


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        pytest.param({"surprise": 1}, "surprise", id="unknown field"),
        pytest.param({"priority": "URGENT"}, "priority", id="unknown priority"),
        pytest.param({"schedule": {"cron": "61 * * * *"}}, "schedule.cron", id="cron does not parse"),
    ],
)
def test_a_bad_job_is_a_400_naming_the_field(
    api: ApiClient, receiver: WebhookReceiver, changes: dict[str, Any], field: str
) -> None:
    reply = api.call("POST", "/v1/jobs", far_future_job(receiver, "bad") | changes)
    details = assert_error_shape(reply, 400, "VALIDATION_ERROR")
    assert field in [detail["field"] for detail in details], details


def test_invalid_json_is_a_400_naming_the_body(api: ApiClient) -> None:
    reply = api.call("POST", "/v1/jobs", raw_body=b'{"name": "x", ')
    details = assert_error_shape(reply, 400, "VALIDATION_ERROR")
    assert [detail["field"] for detail in details] == ["body"]
    assert "JSON" in details[0]["message"]


def test_a_request_over_256_kib_is_a_413(api: ApiClient, receiver: WebhookReceiver) -> None:
    body = far_future_job(receiver, "too-large", payload={"blob": "x" * MAX_REQUEST_BYTES})
    assert len(json.dumps(body)) > MAX_REQUEST_BYTES
    details = assert_error_shape(api.call("POST", "/v1/jobs", body), 413, "PAYLOAD_TOO_LARGE")
    assert [detail["field"] for detail in details] == ["body"]


def test_an_unknown_job_is_a_404(api: ApiClient) -> None:
    assert_error_shape(api.call("GET", "/v1/jobs/no-such-job"), 404, "NOT_FOUND")
    assert_error_shape(api.call("GET", "/v1/jobs/no-such-job/runs"), 404, "NOT_FOUND")
    assert_error_shape(api.call("DELETE", "/v1/jobs/no-such-job"), 404, "NOT_FOUND")


def test_an_unknown_route_gets_api_gateways_own_403(api: ApiClient) -> None:
    """No resource of the REST API matches: API Gateway answers itself, in its own shape,
    and the function is never called."""
    for method, path in [("GET", "/v1/nothing-here"), ("POST", "/v2/jobs"), ("DELETE", "/v1/jobs")]:
        reply = api.call(method, path)
        assert reply.status == 403, (method, path, reply.body)
        assert reply.body == {"message": "Missing Authentication Token"}


def test_another_tenants_job_is_a_404_for_every_route(api: ApiClient, receiver: WebhookReceiver) -> None:
    job = api.create_job(far_future_job(receiver, "tenancy"))
    job_id = job["job_id"]

    for method, path in [
        ("GET", f"/v1/jobs/{job_id}"),
        ("GET", f"/v1/jobs/{job_id}/runs"),
        ("DELETE", f"/v1/jobs/{job_id}"),
    ]:
        reply = api.call(method, path, caller=ANOTHER_TENANT)
        assert_error_shape(reply, 404, "NOT_FOUND")
        assert job["name"] not in json.dumps(reply.body)  # nothing of the job leaks
    listed = api.call("GET", "/v1/jobs?limit=100", caller=ANOTHER_TENANT)
    assert listed.status == 200
    assert job_id not in [item["job_id"] for item in listed.body["items"]]

    # Its owner still sees it, untouched by the other tenant's DELETE.
    assert api.job(job_id)["status"] == "SCHEDULED"
    assert api.cancel(job_id)["status"] == "CANCELLED"


def test_the_openapi_document_is_served(api: ApiClient) -> None:
    reply = api.call("GET", "/v1/openapi.json")
    assert reply.status == 200
    assert reply.headers["content-type"].startswith("application/json")
    document = reply.body
    assert document["openapi"].startswith("3.")
    assert document["info"]["title"] == "serverless-scheduler"
    assert {"post", "get"} <= set(document["paths"]["/v1/jobs"])
    assert {"get", "delete"} <= set(document["paths"]["/v1/jobs/{job_id}"])
    assert "/v1/jobs/{job_id}/runs" in document["paths"]
