"""Every malformed request gets a 4xx naming the field, in the DESIGN §7 error shape —
never a 500."""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.exceptions import ClientError

from functions.api import handler as api
from scheduler_core.domain.errors import Conflict, NotFound
from scheduler_core.observability import logger
from scheduler_core.ports import StoreContention
from tests.support.events import LambdaContext, api_event
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
        pytest.param(with_changes(target__url="http://h/a b"), "target.url", id="space in url"),
        pytest.param(with_changes(target__url="http://h/ä"), "target.url", id="non-ASCII url"),
        pytest.param(with_changes(target__url="http://h:abc/"), "target.url", id="non-numeric port"),
        pytest.param(with_changes(target__url="http://h:99999/"), "target.url", id="port out of range"),
        pytest.param(
            with_changes(target__url="https://example.com/" + "a" * 2048), "target.url", id="url too long"
        ),
        pytest.param(
            with_changes(target__headers={"Content-Length": "5"}),
            "target.headers.Content-Length",
            id="Content-Length header",
        ),
        pytest.param(
            with_changes(target__headers={"x-scheduler-run-id": "forged"}),
            "target.headers.x-scheduler-run-id",
            id="X-Scheduler-* header",
        ),
        pytest.param(
            with_changes(target__headers={"X Custom": "1"}), "target.headers.X Custom", id="space in name"
        ),
        pytest.param(
            with_changes(target__headers={"X:Custom": "1"}), "target.headers.X:Custom", id="colon in name"
        ),
        pytest.param(
            with_changes(target__headers={"X-Note": "a\r\nInjected: 1"}),
            "target.headers.X-Note",
            id="CR LF in value",
        ),
        pytest.param(
            with_changes(target__headers={"X-Price": "5 €"}), "target.headers.X-Price", id="non-Latin-1 value"
        ),
        pytest.param(
            with_changes(target__headers={f"X-H{i}": "v" for i in range(51)}),
            "target.headers",
            id="51 headers",
        ),
        pytest.param(
            with_changes(target={"type": "SNS", "topic_arn": "arn:aws:sns:us-east-1:1:topic"}),
            "target.topic_arn",
            id="SNS topic ARN with a short account",
        ),
        # Keys that happen to be named like a target type are field names like any other.
        pytest.param(with_changes(HTTP=1), "HTTP", id="unknown field named HTTP"),
        pytest.param(with_changes(target__headers={"SQS": 5}), "target.headers.SQS", id="header named SQS"),
    ],
)
def test_bad_job_is_a_400_naming_the_field(cloud: SchedulerHarness, body: dict[str, Any], field: str) -> None:
    assert_error(cloud.call("POST", "/v1/jobs", body), 400, "VALIDATION_ERROR", field)


def test_invalid_json_is_a_400(cloud: SchedulerHarness) -> None:
    reply = cloud.call("POST", "/v1/jobs", raw_body='{"name": "x", ')
    assert_error(reply, 400, "VALIDATION_ERROR", "body")
    assert "JSON" in reply.body["error"]["details"][0]["message"]


def test_an_owned_header_is_refused_with_the_reason(cloud: SchedulerHarness) -> None:
    reply = cloud.call("POST", "/v1/jobs", with_changes(target__headers={"Idempotency-Key": "k"}))

    assert_error(reply, 400, "VALIDATION_ERROR", "target.headers.Idempotency-Key")
    assert "set by the scheduler" in reply.body["error"]["details"][0]["message"]


def test_an_unknown_target_type_lists_the_known_ones(cloud: SchedulerHarness) -> None:
    reply = cloud.call("POST", "/v1/jobs", with_changes(target={"type": "FTP"}))

    assert_error(reply, 400, "VALIDATION_ERROR", "target.type")
    [detail] = reply.body["error"]["details"]
    assert detail["message"] == "must be one of HTTP, SQS, SNS, EVENTBRIDGE, LAMBDA"


def raw_job(payload: str) -> str:
    """The valid job as raw JSON text, with `payload` spliced in as it is."""
    return json.dumps(VALID).replace('{"report": "daily"}', payload)


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        pytest.param(raw_job("NaN"), "NaN is not JSON", id="NaN"),
        pytest.param(raw_job("Infinity"), "Infinity is not JSON", id="Infinity"),
        pytest.param(raw_job("[1, -Infinity]"), "-Infinity is not JSON", id="-Infinity"),
        pytest.param(raw_job("1e999"), "out of range", id="float overflow"),
        pytest.param(raw_job("1" * 4301), "4301 digits", id="integer over 4300 digits"),
        pytest.param(raw_job("-" + "9" * 5000), "5000 digits", id="negative integer over 4300 digits"),
        pytest.param(raw_job("[" * 101 + "]" * 101), "deeper than 100 levels", id="nesting over 100"),
        pytest.param(raw_job("[" * 5000 + "]" * 5000), "deeper than 100 levels", id="deeper than recursion"),
        pytest.param("[" * 100_000, "deeper than 100 levels", id="unclosed and deeper than recursion"),
    ],
)
def test_json_python_accepts_but_json_does_not_is_a_400_naming_the_body(
    cloud: SchedulerHarness, raw: str, reason: str
) -> None:
    reply = cloud.call("POST", "/v1/jobs", raw_body=raw)

    assert_error(reply, 400, "VALIDATION_ERROR", "body")
    assert reason in reply.body["error"]["details"][0]["message"]


def test_a_payload_nested_100_deep_and_a_4300_digit_number_are_accepted(cloud: SchedulerHarness) -> None:
    deep = "[" * 98 + "]" * 98  # the body object and `payload` make 100
    assert cloud.call("POST", "/v1/jobs", raw_body=raw_job(deep)).status == 201
    assert cloud.call("POST", "/v1/jobs", raw_body=raw_job("9" * 4300)).status == 201


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


# --- anything unexpected still answers in the error shape -------------------------------------


def throttled(code: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": "slow down"}}, "GetItem")


def failing_get(monkeypatch: pytest.MonkeyPatch, cloud: SchedulerHarness, error: Exception) -> None:
    def get(tenant: str, job_id: str) -> Any:
        raise error

    monkeypatch.setattr(cloud.jobs, "get", get)


def test_an_unexpected_error_is_a_500_naming_the_request_id_and_is_logged(
    cloud: SchedulerHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    bees = RuntimeError("the disk is full of bees")
    failing_get(monkeypatch, cloud, bees)
    logged: list[tuple[str, Any]] = []
    monkeypatch.setattr(logger, "exception", lambda message, **kw: logged.append((message, kw)))
    event = api_event("GET", "/v1/jobs/job-1")

    reply = api.handler(event, LambdaContext(), jobs=cloud.jobs)

    assert reply["statusCode"] == 500
    error = json.loads(reply["body"])["error"]
    assert error["code"] == "INTERNAL_ERROR"
    assert event["requestContext"]["requestId"] in error["message"]
    assert "bees" not in error["message"]  # internals stay in the log
    assert logged == [("unhandled error", {"exc_info": bees})]


@pytest.mark.parametrize(
    "error",
    [
        throttled("ProvisionedThroughputExceededException"),
        throttled("ThrottlingException"),
        throttled("RequestLimitExceeded"),
        StoreContention("transaction conflict"),
    ],
    ids=["ProvisionedThroughputExceeded", "Throttling", "RequestLimitExceeded", "StoreContention"],
)
def test_throttling_is_a_503_asking_to_try_again(
    cloud: SchedulerHarness, monkeypatch: pytest.MonkeyPatch, error: Exception
) -> None:
    failing_get(monkeypatch, cloud, error)

    reply = cloud.call("GET", "/v1/jobs/job-1")

    assert reply.status == 503
    assert reply.body["error"]["code"] == "SERVICE_UNAVAILABLE"
    assert "try again" in reply.body["error"]["message"]


def test_any_other_aws_error_is_a_500(cloud: SchedulerHarness, monkeypatch: pytest.MonkeyPatch) -> None:
    failing_get(monkeypatch, cloud, throttled("AccessDeniedException"))

    reply = cloud.call("GET", "/v1/jobs/job-1")

    assert reply.status == 500
    assert reply.body["error"]["code"] == "INTERNAL_ERROR"


@pytest.mark.parametrize(
    ("error", "status", "code"),
    [(NotFound("job 'job-1' not found"), 404, "NOT_FOUND"), (Conflict("job is cancelled"), 409, "CONFLICT")],
)
def test_scheduler_errors_keep_their_own_status_beside_the_catch_all(
    cloud: SchedulerHarness, monkeypatch: pytest.MonkeyPatch, error: Exception, status: int, code: str
) -> None:
    failing_get(monkeypatch, cloud, error)

    reply = cloud.call("GET", "/v1/jobs/job-1")

    assert (reply.status, reply.body["error"]["code"]) == (status, code)


def test_validation_errors_and_unknown_routes_keep_their_own_status_beside_the_catch_all(
    cloud: SchedulerHarness,
) -> None:
    assert_error(cloud.call("POST", "/v1/jobs", with_changes(name="")), 400, "VALIDATION_ERROR", "name")
    assert cloud.call("GET", "/v1/nothing-here").status == 404
