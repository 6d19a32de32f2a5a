"""The unique principal id API Gateway reports as `requestContext.identity.user` for a caller
ARN, in the local cloud (the tenant is that id: scheduler_core.domain.tenancy).

A principal IAM (moto's) knows gets its real id (`AIDA...` for a user, `AROA...` for a role,
plus `:session` for a role's session), so a user deleted and made again gets a new one, as in
AWS (once the local cloud asks again: it remembers each caller found while it runs). Any
other ARN — the local cloud's default caller, an `X-Local-Caller` made up for a test — gets
a stable made-up id of the same form, derived from the ARN.
"""

from __future__ import annotations

import base64
import hashlib
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from scheduler_core.adapters.iam_roles import principal
from scheduler_core.domain.tenancy import role_name
from scheduler_core.tenant_move_ports import Principal

if TYPE_CHECKING:
    from mypy_boto3_iam import IAMClient

# AWS unique ids: a four-letter kind, then 17 of A-Z and 2-7 (21 characters).
USER_PREFIX = "AIDA"
ROLE_PREFIX = "AROA"

IdLookup = Callable[[str, str], Principal | None]  # (kind "user" | "role", name) → IAM's principal


def made_up_id(prefix: str, arn: str) -> str:
    """A stable id of IAM's form for an ARN IAM does not know."""
    digest = base64.b32encode(hashlib.sha256(arn.encode()).digest()).decode()
    return prefix + digest[:17]


def principal_id(arn: str, lookup: IdLookup | None = None) -> str:
    """`identity.user` for a caller ARN: an IAM user's id, an assumed role's id + `:session`,
    the account for the root user, `account:name` for a federated user."""
    parts = arn.split(":", 5)
    account, resource = (parts[4], parts[5]) if len(parts) == 6 else ("", arn)
    if resource == "root":
        return account
    role = role_name(arn)
    if role is not None:
        session = resource.rsplit("/", 1)[-1]
        role_arn = f"arn:aws:iam::{account}:role/{role}"
        found = lookup("role", role) if lookup else None
        # The session ARN does not carry the role's path: the account must match.
        known = found.unique_id if found and found.arn.split(":")[4] == account else None
        return f"{known or made_up_id(ROLE_PREFIX, role_arn)}:{session}"
    if resource.startswith("federated-user/"):
        return f"{account}:{resource.split('/', 1)[1]}"
    name = resource.rsplit("/", 1)[-1]
    found = lookup("user", name) if lookup and resource.startswith("user/") else None
    return found.unique_id if found and found.arn == arn else made_up_id(USER_PREFIX, arn)


class IamIds:
    """`IdLookup` on an IAM client (moto's), remembered per principal found: the local cloud
    asks once per caller, not once per request (a name IAM lacks is asked again: it may be
    made meanwhile)."""

    def __init__(self, iam: IAMClient) -> None:
        self._iam = iam
        self._known: dict[tuple[str, str], Principal] = {}
        self._lock = threading.Lock()

    def __call__(self, kind: str, name: str) -> Principal | None:
        with self._lock:
            if (kind, name) in self._known:
                return self._known[(kind, name)]
        found = principal(self._iam, kind, name)
        if found is not None:
            with self._lock:
                self._known[(kind, name)] = found
        return found
