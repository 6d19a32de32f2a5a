"""Every answer is the one the OpenAPI document the API serves describes: each route's
success status and body, and its errors, validated against the document's schema for that
route and status. (The API fuzzer of the e2e suite checks the same on whatever it sends;
these requests reach the states it seldom does: runs that ran, failed and were retried.)"""

from __future__ import annotations

import json
import re
from typing import Any

import jsonschema_rs
import pytest

from functions.api.handler import API_TITLE, API_VERSION, app
from tests.integration.test_api_bad_input import VALID, with_changes
from tests.integration.test_workflows import run_until_quiet, task
from tests.support.harness import ApiReply, SchedulerHarness
from tests.support.receiver import WebhookReceiver


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    served: dict[str, Any] = json.loads(app.get_openapi_json_schema(title=API_TITLE, version=API_VERSION))
    return served


class DocumentedCalls:
    """Calls the API, checking each answer against the document; the answer's body back."""

    def __init__(self, cloud: SchedulerHarness, document: dict[str, Any]) -> None:
        self._cloud = cloud
        self._document = document

    def __call__(self, method: str, path: str, status: int, body: Any = None, **kw: Any) -> Any:
        reply = self._cloud.call(method, path, body, **kw)
        assert reply.status == status, (method, path, reply.body)
        self.assert_documented(method, path, reply)
        return reply.body

    def assert_documented(self, method: str, path: str, reply: ApiReply) -> None:
        route = self._route(path.split("?")[0])
        responses = self._document["paths"][route][method.lower()]["responses"]
        assert str(reply.status) in responses, f"{method} {route} does not document {reply.status}"
        schema = responses[str(reply.status)]["content"]["application/json"]["schema"]
        validator = jsonschema_rs.validator_for({**schema, "components": self._document["components"]})
        errors = [f"{error.instance_path}: {error.message}" for error in validator.iter_errors(reply.body)]
        assert not errors, f"{method} {route} {reply.status} answers off its schema: {errors}"

    def _route(self, path: str) -> str:
        for route in self._document["paths"]:
            if re.fullmatch(re.sub(r"\{[^/]+\}", "[^/]+", route), path):
                return str(route)
        raise AssertionError(f"no documented route for {path}")


@pytest.fixture
def call(cloud: SchedulerHarness, document: dict[str, Any]) -> DocumentedCalls:
    return DocumentedCalls(cloud, document)


def test_a_jobs_answers_through_its_life_are_documented(
    call: DocumentedCalls, cloud: SchedulerHarness, receiver: WebhookReceiver
) -> None:
    body = with_changes(target={"type": "HTTP", "url": receiver.url}, retry={"max_attempts": 1})
    job = call("POST", "/v1/jobs", 201, body)
    job_id = job["job_id"]
    call("GET", "/v1/jobs?limit=10", 200)
    call("GET", f"/v1/jobs/{job_id}", 200)
    call("PATCH", f"/v1/jobs/{job_id}", 200, {"payload": [1, "two", None]}, headers={"If-Match": "1"})
    call("POST", f"/v1/jobs/{job_id}/pause", 200)
    call("POST", f"/v1/jobs/{job_id}/resume", 200)

    receiver.respond_with(500)
    run = call("POST", f"/v1/jobs/{job_id}/trigger", 202)
    cloud.deliver()
    failed = call("GET", f"/v1/jobs/{job_id}/runs/{run['run_id']}", 200)
    assert (failed["status"], failed["response_code"]) == ("FAILED", 500)
    call("POST", f"/v1/jobs/{job_id}/runs/{run['run_id']}/retry", 202)
    cloud.deliver()
    call("GET", f"/v1/jobs/{job_id}/runs", 200)
    call(
        "POST",
        f"/v1/jobs/{job_id}/backfill",
        202,
        {"start": "2026-11-20T00:00:00Z", "end": "2026-11-21T00:00:00Z"},
    )
    call("DELETE", f"/v1/jobs/{job_id}", 200)


def test_a_workflows_answers_through_its_life_are_documented(
    call: DocumentedCalls, cloud: SchedulerHarness, receiver: WebhookReceiver
) -> None:
    tasks = [
        task(receiver, "a", body={"rows": 3}),
        task(receiver, "b", "a", statuses=(500,), retry={"max_attempts": 1}),
    ]
    workflow = call("POST", "/v1/workflows", 201, {"name": "pipeline", "tasks": tasks})
    workflow_id = workflow["workflow_id"]
    call("GET", "/v1/workflows", 200)
    call("GET", f"/v1/workflows/{workflow_id}", 200)
    call("PATCH", f"/v1/workflows/{workflow_id}", 200, {"schedule": {"cron": "0 3 * * *"}})
    call("POST", f"/v1/workflows/{workflow_id}/pause", 200)
    call("POST", f"/v1/workflows/{workflow_id}/resume", 200)

    run_id = call("POST", f"/v1/workflows/{workflow_id}/trigger", 202)["workflow_run_id"]
    run_until_quiet(cloud)
    failed = call("GET", f"/v1/workflows/{workflow_id}/runs/{run_id}", 200)
    assert failed["tasks"]["b"]["status"] == "FAILED"
    call("POST", f"/v1/workflows/{workflow_id}/runs/{run_id}/tasks/b/retry", 202)
    call("POST", f"/v1/workflows/{workflow_id}/runs/{run_id}/cancel", 202)
    call("GET", f"/v1/workflows/{workflow_id}/runs", 200)
    call(
        "POST",
        f"/v1/workflows/{workflow_id}/backfill",
        202,
        {"start": "2026-11-20T00:00:00Z", "end": "2026-11-21T00:00:00Z"},
    )
    call("DELETE", f"/v1/workflows/{workflow_id}", 200)


def test_the_errors_are_documented(call: DocumentedCalls, cloud: SchedulerHarness) -> None:
    job_id = cloud.create(VALID)["job_id"]

    call("POST", "/v1/jobs", 400, with_changes(surprise=1))
    call("POST", "/v1/jobs", 400, raw_body="not json")
    call("GET", "/v1/jobs?cursor=garbage", 400)
    call("GET", "/v1/workflows?cursor=garbage", 400)
    call("GET", "/v1/jobs", 403, caller=None)
    call("GET", "/v1/jobs/no-such-job", 404)
    call("PATCH", f"/v1/jobs/{job_id}", 412, {"name": "renamed"}, headers={"If-Match": "99"})
    call("POST", "/v1/jobs", 413, with_changes(payload="x" * 300_000))
    call("POST", "/v1/jobs", 422, with_changes(schedule={"cron": "0 0 30 2 *"}))
    call("DELETE", f"/v1/jobs/{job_id}", 200)
    call("POST", f"/v1/jobs/{job_id}/pause", 409)


def test_every_route_documents_its_success_body_and_the_error_shape(document: dict[str, Any]) -> None:
    """A route declared without `answers(...)` gets Powertools' defaults: a 200 with no schema
    and a 422 in a shape the API never answers."""
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            responses = operation["responses"]
            successes = [status for status in responses if status.startswith("2")]
            assert len(successes) == 1, (method, path, successes)
            assert "schema" in responses[successes[0]]["content"]["application/json"], (method, path)
            for status in ("400", "404", "422", "500"):
                schema = responses[status]["content"]["application/json"]["schema"]
                assert schema == {"$ref": "#/components/schemas/ErrorBody"}, (method, path, status)
