"""The events AWS hands our functions: API Gateway REST proxy (v1) requests, SQS batches
and the Lambda context."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from infra.local.identity import principal_id
from scheduler_core.domain.tenancy import tenant_of

ACCOUNT = "123456789012"
ALICE = f"arn:aws:iam::{ACCOUNT}:user/alice"
BOB = f"arn:aws:iam::{ACCOUNT}:user/bob"


def identity_of(caller: str, user: str | None = None) -> dict[str, Any]:
    """`requestContext.identity` for an IAM-signed request by `caller` (an ARN); `user`, its
    unique principal id, made up from the ARN unless given (a principal made again)."""
    user = user or principal_id(caller)
    return {"userArn": caller, "caller": user, "user": user, "accountId": ACCOUNT}


def tenant(caller: str) -> str:
    """The tenant the API takes `caller` for (no per-session roles)."""
    found = tenant_of(identity_of(caller))
    assert found is not None
    return found


ALICE_TENANT = tenant(ALICE)
BOB_TENANT = tenant(BOB)


@dataclass
class LambdaContext:
    function_name: str = "test-function"
    function_version: str = "$LATEST"
    memory_limit_in_mb: int = 256
    invoked_function_arn: str = f"arn:aws:lambda:us-east-1:{ACCOUNT}:function:test-function"
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))

    def get_remaining_time_in_millis(self) -> int:
        return 60_000


def api_event(
    method: str,
    path: str,
    body: Any = None,
    *,
    caller: str | None = ALICE,
    principal: str | None = None,
    raw_body: str | None = None,
    headers: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A REST API proxy event as API Gateway sends it for an IAM-signed request by `caller`
    (an ARN) whose unique id is `principal` (made up from the ARN unless given)."""
    parts = urlsplit(path)
    query = dict(parse_qsl(parts.query))
    text = raw_body if raw_body is not None else (json.dumps(body) if body is not None else None)
    all_headers = {"Content-Type": "application/json", **(headers or {})}
    identity: dict[str, Any] = {"sourceIp": "127.0.0.1", "userAgent": "tests"}
    if caller is not None:
        identity |= identity_of(caller, principal)
    return {
        "resource": parts.path,
        "path": parts.path,
        "httpMethod": method,
        "headers": all_headers,
        "multiValueHeaders": {name: [value] for name, value in all_headers.items()},
        "queryStringParameters": query or None,
        "multiValueQueryStringParameters": {k: [v] for k, v in query.items()} or None,
        "pathParameters": None,
        "stageVariables": None,
        "requestContext": {
            "accountId": ACCOUNT,
            "resourcePath": parts.path,
            "httpMethod": method,
            "path": f"/prod{parts.path}",
            "stage": "prod",
            "requestId": str(uuid.uuid4()),
            "identity": identity,
        },
        "body": text,
        "isBase64Encoded": False,
    }


def sqs_event(messages: list[dict[str, Any]], queue_arn: str) -> dict[str, Any]:
    """An SQS event source mapping batch built from `receive_message` results."""
    return {
        "Records": [
            {
                "messageId": message["MessageId"],
                "receiptHandle": message["ReceiptHandle"],
                "body": message["Body"],
                "attributes": message.get("Attributes", {}),
                "messageAttributes": {},
                "md5OfBody": message.get("MD5OfBody", ""),
                "eventSource": "aws:sqs",
                "eventSourceARN": queue_arn,
                "awsRegion": "us-east-1",
            }
            for message in messages
        ]
    }
