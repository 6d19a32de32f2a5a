"""The local API Gateway over HTTP answers as API Gateway does: a request no route takes,
whatever its method, gets the 403 `Missing Authentication Token` JSON without calling the
function; `ANY` takes API Gateway's seven methods; a HEAD answer has no body; a body that is
not UTF-8 reaches the function base64-encoded."""

from __future__ import annotations

import base64
import http.client
import json
from collections.abc import Iterator
from typing import Any, cast

import pytest

from infra.local.api_gateway import METHODS, ApiGateway, route_for
from infra.local.functions import FunctionHost

ARN = "arn:aws:lambda:us-east-1:123456789012:function:api"
# The deployed API's resources (infra/api.py), for jobs.
RESOURCES = [
    ("/v1/jobs", "GET"),
    ("/v1/jobs", "POST"),
    ("/v1/jobs/{job_id}", "GET"),
    ("/v1/jobs/{job_id}", "PATCH"),
    ("/v1/jobs/{job_id}", "DELETE"),
    ("/v1/jobs/{job_id}/{proxy+}", "ANY"),
    ("/v1/openapi.json", "GET"),
]
MISSING_TOKEN = {"message": "Missing Authentication Token"}


class RecordingFunction:
    """Stands in for the api function: records each event, answers 200 with a JSON body."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def invoke(self, event: dict[str, Any]) -> dict[str, Any]:
        self.events.append(event)
        return {"statusCode": 200, "headers": {"Content-Type": "application/json"}, "body": '{"ok": true}'}


@pytest.fixture(scope="module")
def recorder() -> RecordingFunction:
    return RecordingFunction()


@pytest.fixture
def function(recorder: RecordingFunction) -> RecordingFunction:
    """The function, with no event recorded yet."""
    recorder.events.clear()
    return recorder


@pytest.fixture(scope="module")
def gateway(recorder: RecordingFunction) -> Iterator[ApiGateway]:
    """One server for the module: stopping one takes half a second."""
    routes = [route_for("api", path, method, ARN, "AWS_IAM") for path, method in RESOURCES]
    server = ApiGateway(
        routes,
        {ARN: cast(FunctionHost, recorder)},
        host="127.0.0.1",
        port=0,
        stage="prod",
        default_caller="local-user",
        account="123456789012",
        on_error=lambda arn, error: None,
    )
    server.start()
    yield server
    server.stop()


@pytest.fixture
def connection(gateway: ApiGateway) -> Iterator[http.client.HTTPConnection]:
    host, port = gateway.url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    yield conn
    conn.close()


def request(
    conn: http.client.HTTPConnection, method: str, path: str, body: bytes | None = None
) -> tuple[int, dict[str, str], bytes]:
    conn.request(method, path, body=body)
    response = conn.getresponse()
    return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()


@pytest.mark.parametrize(
    ("method", "path"),
    [
        pytest.param("TRACE", "/v1/jobs", id="TRACE"),
        pytest.param("CONNECT", "/v1/jobs", id="CONNECT"),
        pytest.param("PROPFIND", "/v1/jobs/job-1", id="a method HTTP does not define"),
        pytest.param("DELETE", "/v1/jobs", id="DELETE on the collection"),
        pytest.param("PUT", "/v1/jobs/job-1", id="PUT on an item"),
        pytest.param("OPTIONS", "/v1/jobs", id="OPTIONS without CORS"),
        pytest.param("TRACE", "/v1/jobs/job-1/pause", id="TRACE where ANY is"),
        pytest.param("GET", "/v1/nothing-here", id="unknown path"),
        pytest.param("GET", "/v1/jobs/", id="trailing slash"),
        pytest.param("GET", "/prod/v2/jobs", id="unknown path under the stage"),
    ],
)
def test_a_request_no_route_takes_gets_api_gateways_403_json(
    connection: http.client.HTTPConnection, function: RecordingFunction, method: str, path: str
) -> None:
    status, headers, body = request(connection, method, path)

    assert status == 403
    assert headers["content-type"] == "application/json"
    assert headers["x-amzn-errortype"] == "MissingAuthenticationTokenException"
    assert json.loads(body) == MISSING_TOKEN
    assert function.events == []


@pytest.mark.parametrize("method", sorted(METHODS))
def test_any_takes_the_seven_methods_api_gateway_knows(
    connection: http.client.HTTPConnection, function: RecordingFunction, method: str
) -> None:
    status, _, _ = request(connection, method, "/v1/jobs/job-1/runs")

    assert status == 200
    [event] = function.events
    assert (event["httpMethod"], event["resource"]) == (method, "/v1/jobs/{job_id}/{proxy+}")
    assert event["pathParameters"] == {"job_id": "job-1", "proxy": "runs"}


def test_a_head_answer_has_no_body_and_the_connection_stays_usable(
    connection: http.client.HTTPConnection, function: RecordingFunction
) -> None:
    status, headers, body = request(connection, "HEAD", "/v1/jobs/job-1/runs")
    assert (status, body) == (200, b"")
    assert headers["content-length"] == str(len('{"ok": true}'))

    # Had the body been sent, it would be read as the start of this answer.
    status, _, body = request(connection, "GET", "/v1/jobs/job-1")
    assert (status, json.loads(body)) == (200, {"ok": True})


def test_the_403_answers_a_head_request_without_a_body(connection: http.client.HTTPConnection) -> None:
    assert request(connection, "HEAD", "/v1/jobs")[::2] == (403, b"")
    assert request(connection, "GET", "/v1/nothing-here")[0] == 403


def test_a_body_that_is_not_utf8_reaches_the_function_base64_encoded(
    connection: http.client.HTTPConnection, function: RecordingFunction
) -> None:
    raw = b'{"name": "caf\xe9"}'

    request(connection, "POST", "/v1/jobs", raw)
    request(connection, "POST", "/v1/jobs", "café".encode())

    not_text, text = function.events
    assert (not_text["isBase64Encoded"], base64.b64decode(not_text["body"])) == (True, raw)
    assert (text["isBase64Encoded"], text["body"]) == (False, "café")
