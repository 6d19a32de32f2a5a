"""Small helpers the tests share."""

from __future__ import annotations

import io
import zipfile
from datetime import UTC, datetime
from typing import Any, Protocol


class HasUrl(Protocol):
    @property
    def url(self) -> str: ...


def iso(when: datetime) -> str:
    """`when` as the API writes times: ISO-8601 UTC with milliseconds and `Z`."""
    return when.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def http_job(receiver: HasUrl, *, name: str = "ping", payload: Any = None, **schedule: Any) -> dict[str, Any]:
    """The body of a job posting `payload` to `receiver` on `schedule` (at=, cron=, rate=, ...)."""
    body: dict[str, Any] = {
        "name": name,
        "schedule": schedule,
        "target": {"type": "HTTP", "url": receiver.url},
    }
    return body | ({"payload": payload} if payload is not None else {})


def a_function(cloud: Any, name: str) -> str:
    """A Lambda function in moto, through `cloud.clients` (its code is never run: that needs
    Docker; moto's Lambda only answers 202); returns its ARN."""
    role = cloud.clients.client("iam").create_role(RoleName=f"{name}-role", AssumeRolePolicyDocument="{}")
    code = io.BytesIO()
    with zipfile.ZipFile(code, "w") as archive:
        archive.writestr("handler.py", "def handler(event, context):\n    return event\n")
    created = cloud.clients.lambda_().create_function(
        FunctionName=name,
        Runtime="python3.12",
        Role=role["Role"]["Arn"],
        Handler="handler.handler",
        Code={"ZipFile": code.getvalue()},
    )
    return str(created["FunctionArn"])
