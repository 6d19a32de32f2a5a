"""Every malformed request gets a 4xx naming the field, in the DESIGN §7 error shape —
never a 500."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.harness import SchedulerHarness

VALID: dict[str, Any] = {
    "name": "nightly-report",
    "schedule": {"cron": "0 2 * * *"},
    "target": {"type": "HTTP", "url": "https://example.com/hook"},
    "payload": {"report": "daily"},
}


def with_changes(**changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(json.dumps(VALID))
    for dotted, value in changes.items():
        *path, last = dotted.split("__")
        node = body
        for part in path:
            node = node[part]
        if value is DELETE:
            del node[last]
        else:
            node[last] = value
    return body


DELETE = object()


def assert_error(reply: Any, status: int, code: str, field: str) -> None:
    assert reply.status == status, reply.body
    error = reply.body["error"]
    assert error["code"] == code
    assert error["message"]
    assert field in [detail["field"] for detail in error["details"]], error


def test_a_valid_request_is_accepted(cloud: SchedulerHarness) -> None:
    assert cloud.call("POST", "/v1/jobs", VALID).status == 201


@pytest.mark.parametrize(
    ("body", "field"),
    [
        pytest.param(with_changes(surprise=1), "surprise", id="unknown top-level field"),
        pytest.param(with_changes(schedule__every="day"), "schedule.every", id="unknown schedule field"),
        pytest.param(with_changes(target__verb="POST"), "target.verb", id="unknown target field"),
        pytest.param(with_changes(schedule=DELETE), "schedule", id="missing schedule"),
        pytest.param(with_changes(target=DELETE), "target", id="missing target"),
        pytest.param(with_changes(name=DELETE), "name", id="missing name"),
        pytest.param(with_changes(schedule={}), "schedule", id="no schedule kind"),
        pytest.param(
            with_changes(schedule={"cron": "* * * * *", "rate": "5 minutes"}),
            "schedule",
            id="two schedule kinds",
        ),
        pytest.param(
            with_changes(schedule={"cron": "61 * * * *"}), "schedule.cron", id="cron does not parse"
        ),
        pytest.param(with_changes(schedule={"cron": "* * * *"}), "schedule.cron", id="cron with 4 fields"),
        pytest.param(
            with_changes(schedule={"at": "tomorrow at noon"}), "schedule.at", id="at does not parse"
        ),
        pytest.param(with_changes(schedule={"at": 1767225600}), "schedule.at", id="at as a number"),
        pytest.param(with_changes(schedule={"rate": "0 minutes"}), "schedule.rate", id="rate of 0"),
        pytest.param(
            with_changes(schedule={"rate": "5 fortnights"}), "schedule.rate", id="rate unit unknown"
        ),
        pytest.param(with_changes(priority="URGENT"), "priority", id="unknown priority"),
        pytest.param(
            with_changes(target={"type": "FTP", "url": "ftp://x"}), "target.type", id="unknown target type"
        ),
        pytest.param(with_changes(target={"url": "https://x"}), "target.type", id="target without type"),
        pytest.param(with_changes(target__url="ftp://example.com/x"), "target.url", id="non-http url"),
        pytest.param(with_changes(target__url="example.com/hook"), "target.url", id="relative url"),
        pytest.param(with_changes(target__timeout_seconds=0), "target.timeout_seconds", id="zero timeout"),
        pytest.param(with_changes(retry={"max_attempts": 0}), "retry.max_attempts", id="no attempts"),
        pytest.param(with_changes(name=""), "name", id="empty name"),
    ],
)
def test_bad_job_is_a_400_naming_the_field(cloud: SchedulerHarness, body: dict[str, Any], field: str) -> None:
    assert_error(cloud.call("POST", "/v1/jobs", body), 400, "VALIDATION_ERROR", field)


def test_invalid_json_is_a_400(cloud: SchedulerHarness) -> None:
    reply = cloud.call("POST", "/v1/jobs", raw_body='{"name": "x", ')
    assert_error(reply, 400, "VALIDATION_ERROR", "body")
    assert "JSON" in reply.body["error"]["details"][0]["message"]


def test_a_json_array_body_is_a_400(cloud: SchedulerHarness) -> None:
    assert cloud.call("POST", "/v1/jobs", raw_body="[1, 2]").status == 400


def test_a_payload_over_256_kib_is_a_413(cloud: SchedulerHarness) -> None:
    reply = cloud.call("POST", "/v1/jobs", with_changes(payload={"blob": "x" * (256 * 1024)}))
    assert_error(reply, 413, "PAYLOAD_TOO_LARGE", "body")


def test_a_cron_that_never_fires_is_a_422_with_the_reason(cloud: SchedulerHarness) -> None:
    reply = cloud.call("POST", "/v1/jobs", with_changes(schedule={"cron": "0 0 30 2 *"}))
    assert_error(reply, 422, "UNPROCESSABLE", "schedule.cron")
    assert "never fires" in reply.body["error"]["message"]


def test_an_at_long_past_is_a_422(cloud: SchedulerHarness) -> None:
    reply = cloud.call("POST", "/v1/jobs", with_changes(schedule={"at": "2020-01-01T00:00:00Z"}))
    assert_error(reply, 422, "UNPROCESSABLE", "schedule.at")


@pytest.mark.parametrize(
    ("query", "field"),
    [("limit=0", "limit"), ("limit=101", "limit"), ("limit=ten", "limit"), ("status=SLEEPING", "status")],
)
def test_bad_list_parameters_are_a_400(cloud: SchedulerHarness, query: str, field: str) -> None:
    assert_error(cloud.call("GET", f"/v1/jobs?{query}"), 400, "VALIDATION_ERROR", field)


@pytest.mark.parametrize("cursor", ["not-base64!", "bm90IGpzb24", "WzEsMl0"])
def test_a_cursor_this_api_did_not_issue_is_a_400(cloud: SchedulerHarness, cursor: str) -> None:
    assert_error(cloud.call("GET", f"/v1/jobs?cursor={cursor}"), 400, "VALIDATION_ERROR", "cursor")


def test_an_unknown_route_is_a_404_in_the_error_shape(cloud: SchedulerHarness) -> None:
    reply = cloud.call("GET", "/v1/nothing-here")
    assert reply.status == 404
    assert reply.body["error"]["code"] == "NOT_FOUND"


def test_an_unknown_job_is_a_404(cloud: SchedulerHarness) -> None:
    reply = cloud.call("GET", "/v1/jobs/does-not-exist")
    assert reply.status == 404
    assert reply.body["error"]["code"] == "NOT_FOUND"


def test_a_malformed_run_id_is_a_404_not_a_crash(cloud: SchedulerHarness) -> None:
    job = cloud.create(VALID)
    assert cloud.call("GET", f"/v1/jobs/{job['job_id']}/runs/garbage").status == 404


def test_a_request_without_an_iam_identity_is_a_403(cloud: SchedulerHarness) -> None:
    reply = cloud.call("POST", "/v1/jobs", VALID, caller=None)
    assert reply.status == 403
    assert "SigV4" in reply.body["error"]["message"]


def test_a_json_body_sent_as_form_data_is_read_as_json(cloud: SchedulerHarness) -> None:
    """`curl -d` says application/x-www-form-urlencoded; the API speaks only JSON."""
    reply = cloud.call(
        "POST", "/v1/jobs", VALID, headers={"Content-Type": "application/x-www-form-urlencoded"}
    )
    assert reply.status == 201, reply.body
