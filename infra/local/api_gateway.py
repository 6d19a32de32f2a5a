"""API Gateway (REST, Lambda proxy integration) as an HTTP server on loopback.

Routes come from the deployed REST API's resources and methods. A request becomes a v1
proxy event for the integrated function. Methods with AWS_IAM authorization get the
local caller as their IAM identity: `--caller` by default, or the `X-Local-Caller` header
(an ARN, or a bare name for `arn:aws:iam::<account>:user/<name>`) to act as someone else.

A request no route takes, whatever its path and method (TRACE, CONNECT, DELETE on a
collection, ...), gets API Gateway's own 403 `{"message": "Missing Authentication Token"}`;
an `ANY` method takes the seven methods API Gateway knows, as in AWS.
"""

from __future__ import annotations

import base64
import json
import re
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from infra.local.functions import FunctionError, FunctionHost
from infra.local.identity import IdLookup, principal_id
from scheduler_cli.console.server import Answer, http_server

CALLER_HEADER = "X-Local-Caller"
# What an `ANY` method stands for in API Gateway.
METHODS = frozenset({"DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT"})
_INTEGRATION = re.compile(r"functions/(arn:[^/]+)/invocations")


@dataclass(frozen=True)
class Route:
    api_id: str
    resource: str  # e.g. /v1/jobs/{job_id}
    method: str  # GET, POST, ..., ANY
    function_arn: str
    authorization: str
    pattern: re.Pattern[str]
    specificity: tuple[int, int]  # literal segments, then non-greedy parameters

    def matches(self, path: str) -> dict[str, str] | None:
        match = self.pattern.fullmatch(path)
        return None if match is None else {k: unquote(v) for k, v in match.groupdict().items()}


def route_for(api_id: str, resource: str, method: str, function_arn: str, authorization: str) -> Route:
    parts, literal, params = [], 0, 0
    for segment in resource.strip("/").split("/") if resource != "/" else []:
        if segment.startswith("{") and segment.endswith("+}"):
            parts.append(f"(?P<{segment[1:-2]}>.+)")
        elif segment.startswith("{") and segment.endswith("}"):
            parts.append(f"(?P<{segment[1:-1]}>[^/]+)")
            params += 1
        else:
            parts.append(re.escape(segment))
            literal += 1
    pattern = re.compile("/" + "/".join(parts))
    return Route(api_id, resource, method, function_arn, authorization, pattern, (literal, params))


def deployed_routes(aws: Any) -> list[Route]:
    gateway = aws.client("apigateway")
    routes = []
    for api in gateway.get_rest_apis()["items"]:
        for resource in gateway.get_resources(restApiId=api["id"], limit=500)["items"]:
            for method in resource.get("resourceMethods") or {}:
                detail = gateway.get_method(restApiId=api["id"], resourceId=resource["id"], httpMethod=method)
                found = _INTEGRATION.search((detail.get("methodIntegration") or {}).get("uri", ""))
                if found:
                    routes.append(
                        route_for(
                            api["id"], resource["path"], method, found.group(1), detail["authorizationType"]
                        )
                    )
    return routes


def caller_arn(value: str, account: str) -> str:
    return value if value.startswith("arn:") else f"arn:aws:iam::{account}:user/{value}"


class ApiGateway:
    def __init__(
        self,
        routes: list[Route],
        hosts: dict[str, FunctionHost],
        host: str,
        port: int,
        stage: str,
        default_caller: str,
        account: str,
        on_error: Callable[[str, str], None],
        principal_ids: IdLookup | None = None,
    ) -> None:
        # Most specific first, as API Gateway matches: literal segments, then {param}, then {proxy+}.
        self._routes = sorted(routes, key=lambda r: r.specificity, reverse=True)
        self._hosts = hosts
        self._stage = stage
        self._default_caller = default_caller
        self._account = account
        self._on_error = on_error
        # The unique id of a caller IAM knows (infra/local/identity.py).
        self._principal_ids = principal_ids
        # Path prefix → what answers under it instead of the routes (the console, at /console/).
        self._mounts: dict[str, Answer] = {}
        self._server = http_server(self.handle, port, host)
        self.url = f"http://{host}:{self._server.server_address[1]}"

    def start(self) -> None:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def mount(self, prefix: str, handler: Answer) -> None:
        """Answer requests for `prefix` (e.g. /console/, and /console) with `handler`, before
        any route: what API Gateway would not serve, beside the API on the same origin."""
        self._mounts[prefix] = handler

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _match(self, method: str, path: str) -> tuple[Route, dict[str, str]] | None:
        for route in self._routes:
            if route.method == method or (route.method == "ANY" and method in METHODS):
                params = route.matches(path)
                if params is not None:
                    return route, params
        return None

    def handle(
        self, method: str, raw_path: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        url = urlsplit(raw_path)
        path = url.path
        for prefix, mounted in self._mounts.items():
            if path == prefix.rstrip("/") or path.startswith(prefix):
                return mounted(method, raw_path, headers, body)
        # Both /v1/... and /<stage>/v1/... work, so URLs copied from AWS work locally too.
        if path == f"/{self._stage}" or path.startswith(f"/{self._stage}/"):
            path = path[len(self._stage) + 1 :] or "/"
        found = self._match(method, path)
        if found is None:
            status, out_headers, payload = _json(403, {"message": "Missing Authentication Token"})
            return status, out_headers | {"x-amzn-ErrorType": "MissingAuthenticationTokenException"}, payload
        route, params = found
        event = self._event(route, method, path, url.query, headers, body, params)
        try:
            reply = self._hosts[route.function_arn].invoke(event)
        except FunctionError as error:
            self._on_error(route.function_arn, str(error))
            return _json(502, {"message": "Internal server error"})
        if not isinstance(reply, dict) or "statusCode" not in reply:
            self._on_error(route.function_arn, "malformed Lambda proxy response")
            return _json(502, {"message": "Internal server error"})
        out_headers = {k: str(v) for k, v in (reply.get("headers") or {}).items()}
        for name, values in (reply.get("multiValueHeaders") or {}).items():
            out_headers[name] = ", ".join(str(v) for v in values)
        text = reply.get("body") or ""
        payload = base64.b64decode(text) if reply.get("isBase64Encoded") else str(text).encode()
        return int(reply["statusCode"]), out_headers, payload

    def _event(
        self,
        route: Route,
        method: str,
        path: str,
        query: str,
        headers: dict[str, str],
        body: bytes,
        params: dict[str, str],
    ) -> dict[str, Any]:
        caller = headers.pop(CALLER_HEADER, None) or headers.pop(CALLER_HEADER.lower(), None)
        identity: dict[str, Any] = {"sourceIp": "127.0.0.1", "userAgent": headers.get("User-Agent")}
        if route.authorization == "AWS_IAM":
            arn = caller_arn(caller or self._default_caller, self._account)
            user = principal_id(arn, self._principal_ids)
            identity |= {"userArn": arn, "caller": user, "user": user, "accountId": self._account}
        return proxy_event(
            method,
            path,
            route.resource,
            headers,
            body,
            identity,
            query=query,
            params=params,
            stage=self._stage,
            account=self._account,
            api_id=route.api_id,
        )


def proxy_event(
    method: str,
    path: str,
    resource: str,
    headers: dict[str, str],
    body: bytes,
    identity: dict[str, Any],
    *,
    query: str = "",
    params: dict[str, str] | None = None,
    stage: str,
    account: str,
    api_id: str = "local",
) -> dict[str, Any]:
    """A REST API (v1) proxy request as API Gateway hands it to a Lambda function."""
    multi_query = parse_qs(query, keep_blank_values=True)
    try:
        text, encoded = body.decode(), False
    except UnicodeDecodeError:
        text, encoded = base64.b64encode(body).decode(), True
    return {
        "resource": resource,
        "path": path,
        "httpMethod": method,
        "headers": headers,
        "multiValueHeaders": {k: [v] for k, v in headers.items()},
        "queryStringParameters": {k: v[-1] for k, v in multi_query.items()} or None,
        "multiValueQueryStringParameters": multi_query or None,
        "pathParameters": params or None,
        "stageVariables": None,
        "requestContext": {
            "accountId": account,
            "apiId": api_id,
            "resourcePath": resource,
            "httpMethod": method,
            "path": f"/{stage}{path}",
            "stage": stage,
            "requestId": str(uuid.uuid4()),
            "requestTimeEpoch": int(time.time() * 1000),
            "identity": identity,
            "protocol": "HTTP/1.1",
        },
        "body": text if body else None,
        "isBase64Encoded": encoded,
    }


def _json(status: int, body: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
    return status, {"Content-Type": "application/json"}, json.dumps(body).encode()
