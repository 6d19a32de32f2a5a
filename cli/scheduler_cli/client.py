"""Where `scheduler` and the console server send API calls, and how they are signed.

Three ways to name the API (the first given wins):
- `endpoint`: the local cloud (`make run` prints the URL). Calls are not signed: the local
  API Gateway treats every caller as its `--caller` (or the `X-Local-Caller` header).
- `api_url`: a deployed stack's API (its `ApiUrl` output). Calls are signed with SigV4 for
  `execute-api` by botocore, from the usual AWS credentials (profile, environment, SSO).
- `stack`: a deployed stack's name; its `ApiUrl` output is read from CloudFormation.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode, urlsplit

import boto3
import httpx
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.exceptions import BotoCoreError, ClientError

ENDPOINT_VARIABLE = "SCHEDULER_ENDPOINT"
API_URL_OUTPUT = "ApiUrl"  # infra/stack.py
DEFAULT_TIMEOUT_SECONDS = 30.0
# https://{api id}.execute-api.{region}.amazonaws.com/{stage}
_EXECUTE_API_HOST = re.compile(r"^[a-z0-9]+\.execute-api\.([a-z0-9-]+)\.amazonaws\.com$")
# Headers a signed request must not pass on: the signature covers what botocore signs, and
# these are the transport's to set.
_HOP_BY_HOP = frozenset({"host", "content-length", "connection", "transfer-encoding", "accept-encoding"})


class TargetNotFound(Exception):
    """The API could not be located (no endpoint, no such stack, no credentials)."""


@dataclass(frozen=True)
class ApiTarget:
    """An API's base URL (paths start at /v1) and, for a deployed one, how to sign."""

    base_url: str
    session: boto3.session.Session | None = None  # None: the local cloud, unsigned
    region: str | None = None

    @property
    def signed(self) -> bool:
        return self.session is not None


def resolve_target(
    *,
    endpoint: str | None = None,
    api_url: str | None = None,
    stack: str | None = None,
    profile: str | None = None,
    region: str | None = None,
) -> ApiTarget:
    """The API named by the first of `endpoint`, `api_url`, `stack` given."""
    if endpoint:
        return ApiTarget(endpoint.rstrip("/"))
    if not api_url and not stack:
        raise TargetNotFound(
            f"no API to talk to: pass --endpoint URL (or set {ENDPOINT_VARIABLE}) for the local "
            "cloud, or --stack NAME / --api-url URL for a deployed stack"
        )
    try:
        session = boto3.session.Session(profile_name=profile, region_name=region)
    except BotoCoreError as error:
        raise TargetNotFound(f"AWS credentials: {error}") from error
    if api_url:
        host = urlsplit(api_url).hostname or ""
        found = _EXECUTE_API_HOST.match(host)
        signing_region = found.group(1) if found else session.region_name
        if not signing_region:
            raise TargetNotFound("no AWS region: pass --region or set AWS_REGION")
        return ApiTarget(api_url.rstrip("/"), session, signing_region)
    assert stack is not None
    if not session.region_name:
        raise TargetNotFound("no AWS region: pass --region or set AWS_REGION")
    try:
        described = session.client("cloudformation").describe_stacks(StackName=stack)
    except (BotoCoreError, ClientError) as error:
        raise TargetNotFound(f"stack {stack!r} in {session.region_name}: {error}") from error
    outputs = {o["OutputKey"]: o["OutputValue"] for o in described["Stacks"][0].get("Outputs", [])}
    if API_URL_OUTPUT not in outputs:
        raise TargetNotFound(
            f"stack {stack!r} has no {API_URL_OUTPUT} output: is it a serverless-scheduler stack?"
        )
    return ApiTarget(outputs[API_URL_OUTPUT].rstrip("/"), session, session.region_name)


class ApiClient:
    """One API, over one keep-alive `httpx.Client`; every request signed when the target is."""

    def __init__(self, target: ApiTarget, http: httpx.Client | None = None) -> None:
        self.target = target
        self._http = http or httpx.Client(timeout=DEFAULT_TIMEOUT_SECONDS)

    def close(self) -> None:
        self._http.close()

    def send(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        json_body: Any = None,
        body: bytes | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> httpx.Response:
        """`path` starts with /v1 and may carry a query; `params` (None values left out) are
        added to it. `json_body` is serialized; `body` is sent as given."""
        url = self.target.base_url + path
        query = {k: str(v) for k, v in (params or {}).items() if v is not None}
        if query:
            url += ("&" if "?" in url else "?") + urlencode(query)
        sent = {k: v for k, v in (headers or {}).items() if k.lower() not in _HOP_BY_HOP}
        if json_body is not None:
            body = json.dumps(json_body).encode()
            sent.setdefault("Content-Type", "application/json")
        if self.target.session is not None:
            sent = self._signed(method, url, body or b"", sent)
        return self._http.request(method, url, content=body, headers=sent)

    def _signed(self, method: str, url: str, body: bytes, headers: dict[str, str]) -> dict[str, str]:
        assert self.target.session is not None
        assert self.target.region is not None
        credentials: Credentials | None = self.target.session.get_credentials()
        if credentials is None:
            raise TargetNotFound("no AWS credentials found (profile, environment or SSO login)")
        request = AWSRequest(method=method, url=url, data=body, headers=headers)
        SigV4Auth(credentials.get_frozen_credentials(), "execute-api", self.target.region).add_auth(request)
        return dict(request.headers.items())
