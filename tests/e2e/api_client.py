"""The public API over plain HTTP (urllib), as any client would call the local cloud."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass
from typing import Any

from infra.local.api_gateway import CALLER_HEADER
from tests.support.receiver import Received, WebhookReceiver

REQUEST_TIMEOUT_SECONDS = 30
PRIORITIES = ("HIGH", "NORMAL", "LOW")


@dataclass(frozen=True)
class Reply:
    status: int
    headers: dict[str, str]  # names in lower case
    body: Any  # parsed JSON, or the text when it is not JSON


class ApiClient:
    def __init__(self, base_url: str) -> None:
        self.base_url = base_url

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        raw_body: bytes | None = None,
        caller: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> Reply:
        """One request; `caller` acts as another tenant (the local cloud's caller header)."""
        data = raw_body if raw_body is not None else None if body is None else json.dumps(body).encode()
        headers = ({"Content-Type": "application/json"} if data is not None else {}) | (headers or {})
        if caller is not None:
            headers[CALLER_HEADER] = caller
        request = urllib.request.Request(self.base_url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_SECONDS) as response:
                return _reply(response.status, dict(response.headers), response.read())
        except urllib.error.HTTPError as error:
            with error:
                return _reply(error.code, dict(error.headers), error.read())

    def create_job(self, body: dict[str, Any]) -> dict[str, Any]:
        reply = self.call("POST", "/v1/jobs", body)
        assert reply.status == 201, reply.body
        job: dict[str, Any] = reply.body
        return job

    def job(self, job_id: str) -> dict[str, Any]:
        reply = self.call("GET", f"/v1/jobs/{job_id}")
        assert reply.status == 200, reply.body
        job: dict[str, Any] = reply.body
        return job

    def runs(self, job_id: str) -> list[dict[str, Any]]:
        reply = self.call("GET", f"/v1/jobs/{job_id}/runs")
        assert reply.status == 200, reply.body
        runs: list[dict[str, Any]] = reply.body["items"]
        return runs

    def run(self, job_id: str, run_id: str) -> dict[str, Any]:
        reply = self.call("GET", f"/v1/jobs/{job_id}/runs/{run_id}")
        assert reply.status == 200, reply.body
        run: dict[str, Any] = reply.body
        return run

    def run_in_status(self, job_id: str, status: str, run_id: str | None = None) -> dict[str, Any] | None:
        """The job's (newest) run in `status` — that very run if `run_id` is given — or None."""
        runs = [self.run(job_id, run_id)] if run_id is not None else self.runs(job_id)
        return next((run for run in runs if run["status"] == status), None)

    def cancel(self, job_id: str) -> dict[str, Any]:
        reply = self.call("DELETE", f"/v1/jobs/{job_id}")
        assert reply.status == 200, reply.body
        job: dict[str, Any] = reply.body
        return job


def _reply(status: int, headers: dict[str, str], raw: bytes) -> Reply:
    text = raw.decode()
    try:
        body: Any = json.loads(text) if text else None
    except ValueError:
        body = text
    return Reply(status, {name.lower(): value for name, value in headers.items()}, body)


def unique_name(purpose: str) -> str:
    return f"e2e-{purpose}-{uuid.uuid4().hex[:10]}"


def http_job(
    receiver: WebhookReceiver, purpose: str, schedule: dict[str, str], **fields: Any
) -> dict[str, Any]:
    """A job with a unique name whose HTTP target is the test's receiver."""
    return {
        "name": unique_name(purpose),
        "schedule": schedule,
        "target": {"type": "HTTP", "url": receiver.url},
        "payload": {"purpose": purpose, "n": 1.5, "nested": {"ok": True}},
        **fields,
    }


def arrivals(receiver: WebhookReceiver, job_id: str) -> list[Received]:
    """What the receiver got for this job, in arrival order."""
    return [r for r in list(receiver.requests) if r.headers.get("x-scheduler-job-id") == job_id]


def assert_error_shape(reply: Reply, status: int, code: str) -> list[dict[str, str]]:
    """DESIGN §7's error body; returns its details."""
    assert reply.status == status, reply.body
    assert reply.headers.get("content-type", "").startswith("application/json")
    error = reply.body["error"]
    assert set(error) == {"code", "message", "details"}, error
    assert error["code"] == code
    assert isinstance(error["message"], str)
    assert error["message"]
    details: list[dict[str, str]] = error["details"]
    assert isinstance(details, list)
    return details
