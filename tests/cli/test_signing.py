"""A deployed stack's API takes SigV4-signed requests (execute-api): the command line signs
each one with botocore from the user's credentials (environment or profile) and the region
of the API's host (or --region). Checked here by recomputing the signature with botocore's
own signer from what reached the server, and by a wrong key failing that check."""

from __future__ import annotations

import hmac
import json
import re
from typing import Any

import httpx
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from typer.testing import CliRunner

from scheduler_cli.client import ApiClient, resolve_target
from scheduler_cli.main import app
from tests.cli.loopback import JOB_ID, LoopbackApi, job_body

KEY, SECRET, TOKEN = "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "session-token-example"
CREDENTIALS: dict[str, str | None] = {
    "AWS_ACCESS_KEY_ID": KEY,
    "AWS_SECRET_ACCESS_KEY": SECRET,
    "AWS_SESSION_TOKEN": TOKEN,
    "AWS_SECURITY_TOKEN": None,  # botocore's older name for it, which tests/conftest.py sets
}
_AUTHORIZATION = re.compile(
    r"^AWS4-HMAC-SHA256 "
    r"Credential=(?P<key>[^/]+)/(?P<date>\d{8})/(?P<region>[^/]+)/(?P<service>[^/]+)/aws4_request, "
    r"SignedHeaders=(?P<signed>[^,]+), Signature=(?P<signature>[0-9a-f]{64})$"
)


def signature_holds(
    method: str, url: str, headers: dict[str, str], body: bytes, secret: str, token: str | None = TOKEN
) -> dict[str, str]:
    """The Authorization header's parts, after checking its signature as botocore computes it
    for these headers (those it names as signed), body and time; AssertionError if it differs."""
    found = _AUTHORIZATION.match(headers["authorization"])
    assert found, headers["authorization"]
    parts = found.groupdict()
    signed = {name: headers[name] for name in parts["signed"].split(";") if name != "host"}
    request = AWSRequest(method=method, url=url, data=body, headers=signed)
    request.context["timestamp"] = headers["x-amz-date"]
    signer = SigV4Auth(Credentials(parts["key"], secret, token), parts["service"], parts["region"])
    expected = signer.signature(signer.string_to_sign(request, signer.canonical_request(request)), request)
    assert hmac.compare_digest(expected, parts["signature"]), "the signature does not hold"
    return parts


def test_api_url_requests_are_signed_with_the_environments_credentials(
    runner: CliRunner, api: LoopbackApi
) -> None:
    """The API's URL on loopback: not an execute-api host, so the region is --region's."""
    api.answer("GET", f"/prod/v1/jobs/{JOB_ID}", 200, job_body())

    result = runner.invoke(
        app, ["--api-url", f"{api.url}/prod", "--region", "eu-west-1", "-o", "json", "jobs", "get", JOB_ID],
        env=CREDENTIALS,
    )  # fmt: skip

    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == job_body()
    [request] = api.requests
    url = f"{api.url}/prod/v1/jobs/{JOB_ID}"
    parts = signature_holds("GET", url, request.headers, request.body, SECRET)
    assert (parts["key"], parts["region"], parts["service"]) == (KEY, "eu-west-1", "execute-api")
    assert {"host", "x-amz-date", "x-amz-security-token"} <= set(parts["signed"].split(";"))
    assert request.headers["x-amz-security-token"] == TOKEN
    with pytest.raises(AssertionError, match="does not hold"):  # the check can fail
        signature_holds("GET", url, request.headers, request.body, "another-secret")


def test_a_signed_body_is_covered_by_the_signature(runner: CliRunner, api: LoopbackApi) -> None:
    api.answer("POST", "/prod/v1/jobs", 201, job_body())

    result = runner.invoke(
        app,
        ["--api-url", f"{api.url}/prod/", "--region", "us-west-2", "jobs", "create",
         "--name", "n", "--rate", "5 minutes", "--url", "https://example.com/h"],
        env=CREDENTIALS,
    )  # fmt: skip

    assert result.exit_code == 0, result.output
    [request] = api.requests
    url = f"{api.url}/prod/v1/jobs"
    signature_holds("POST", url, request.headers, request.body, SECRET)
    with pytest.raises(AssertionError, match="does not hold"):
        signature_holds("POST", url, request.headers, request.body.replace(b'"n"', b'"m"'), SECRET)


def test_a_profile_signs_with_its_own_key(runner: CliRunner, api: LoopbackApi, tmp_path) -> None:
    (tmp_path / "credentials").write_text(
        "[ops]\naws_access_key_id = AKIDPROFILE\naws_secret_access_key = s3cret\n"
    )
    (tmp_path / "config").write_text("[profile ops]\nregion = ap-southeast-2\n")
    api.answer("GET", "/v1/jobs", 200, {"items": [], "next_cursor": None})
    env = {
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "credentials"),
        "AWS_CONFIG_FILE": str(tmp_path / "config"),
        "AWS_DEFAULT_REGION": None,  # it would win over the profile's
        "AWS_REGION": None,
    }

    result = runner.invoke(app, ["--api-url", api.url, "--profile", "ops", "jobs", "list"], env=env)

    assert result.exit_code == 0, result.output
    [request] = api.requests
    parts = signature_holds("GET", f"{api.url}/v1/jobs", request.headers, request.body, "s3cret", None)
    assert (parts["key"], parts["region"]) == ("AKIDPROFILE", "ap-southeast-2")  # the profile's region


def test_an_execute_api_url_is_signed_for_the_region_in_its_host(monkeypatch: pytest.MonkeyPatch) -> None:
    """The deployed API's own URL, its requests caught by httpx's transport (never sent)."""
    for name, value in CREDENTIALS.items():
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-central-1")  # not the host's: the host wins
    sent: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(202, json={"run_id": f"{JOB_ID}:1", "status": "PENDING"})

    target = resolve_target(api_url="https://abc123.execute-api.us-east-1.amazonaws.com/prod")
    client = ApiClient(target, http=httpx.Client(transport=httpx.MockTransport(answer)))
    response = client.send("POST", f"/v1/jobs/{JOB_ID}/trigger", params={"x": "1 2"}, json_body={"a": 1})

    assert response.status_code == 202
    [request] = sent
    headers: dict[str, Any] = {k.lower(): v for k, v in request.headers.items()}
    url = f"https://abc123.execute-api.us-east-1.amazonaws.com/prod/v1/jobs/{JOB_ID}/trigger?x=1+2"
    assert str(request.url) == url
    parts = signature_holds("POST", url, headers, request.content, SECRET)
    assert (parts["region"], parts["service"]) == ("us-east-1", "execute-api")
