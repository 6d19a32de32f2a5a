"""Execution roles (docs/security.md, "Execution roles"): an AWS target may name a role of the
tenant's that the worker assumes for the call, so the call can reach only what that role
reaches. Pure: what the worker asks STS for, and whether a role's trust policy lets the
worker's role assume it for a tenant.

The binding between a role and a tenant is the external id: the worker always sends the
tenant's (`external_id`), and a role's trust policy names the one tenant it serves in a
`StringEquals` condition on `sts:ExternalId`. That is AWS's guard against a confused deputy
(https://docs.aws.amazon.com/IAM/latest/UserGuide/confused-deputy.html): tenant A naming
tenant B's role gets AccessDenied, because the worker assumes it with A's external id.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any

from scheduler_core.domain.target_access import arn_matches

# STS: an ExternalId is 2-1224 characters of letters, digits and _+=,.@:/-; a RoleSessionName
# 2-64 of letters, digits and _+=,.@-.
_EXTERNAL_ID = re.compile(r"[A-Za-z0-9_+=,.@:/-]{2,1224}")
_NOT_IN_SESSION_NAMES = re.compile(r"[^A-Za-z0-9_+=,.@-]")
MAX_SESSION_NAME = 64
SESSION_PREFIX = "scheduler-"
HASHED_PREFIX = "tenant-sha256:"


def external_id(tenant: str) -> str:
    """The `sts:ExternalId` the worker assumes a tenant's roles with: the tenant itself (its
    unique principal id, domain/tenancy.py) whenever STS takes it as it is. A tenant with a
    character STS refuses in an external id (a session name may hold one; so did the ARN
    tenants of earlier releases: `!`, `*`, `#`, ...) gets `tenant-sha256:` and the SHA-256
    of the tenant, in hex."""
    if _EXTERNAL_ID.fullmatch(tenant):
        return tenant
    return HASHED_PREFIX + hashlib.sha256(tenant.encode()).hexdigest()


def session_name(run_id: str) -> str:
    """The RoleSessionName of an assume: the scheduler and the run it was made for (CloudTrail
    shows it), in the characters STS takes, at most 64 (the run's end kept: its time)."""
    name = SESSION_PREFIX + _NOT_IN_SESSION_NAMES.sub("-", run_id)
    if len(name) <= MAX_SESSION_NAME:
        return name
    return SESSION_PREFIX + name[-(MAX_SESSION_NAME - len(SESSION_PREFIX)) :]


def arn_account(arn: str) -> str:
    """The account an ARN names (its fifth part)."""
    parts = arn.split(":", 5)
    return parts[4] if len(parts) == 6 else ""


def trust_requirement(role_arn: str, worker_role_arn: str, tenant: str) -> str:
    """What a role's trust policy must say, in words: the one message for a role that does not
    let the worker in, whatever the reason (a role that does not exist included)."""
    worker = worker_role_arn or "the scheduler's worker role"
    return (
        f"the scheduler could not assume {role_arn}: its trust policy must let {worker} assume it "
        f"(sts:AssumeRole) with sts:ExternalId = {external_id(tenant)}"
    )


def trust_allows(policy: Mapping[str, Any], worker_role_arn: str, wanted_id: str) -> bool:
    """Whether a role's trust policy lets the worker's role assume it for one tenant: an
    Allow statement whose Action covers sts:AssumeRole, whose Principal names the worker role
    (by ARN, or its account: then IAM policies decide, and the worker's allows AssumeRole),
    and whose Condition holds `StringEquals` `sts:ExternalId` with `wanted_id`. Statements with
    NotPrincipal or NotAction, a wildcard principal and other condition operators do not
    count; Deny statements and further conditions are STS's to weigh at the first delivery."""
    statements = policy.get("Statement", [])
    if isinstance(statements, Mapping):
        statements = [statements]
    if not isinstance(statements, list):
        return False
    principals = _worker_principals(worker_role_arn)
    return any(
        isinstance(statement, Mapping) and _allows(statement, principals, wanted_id)
        for statement in statements
    )


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _worker_principals(worker_role_arn: str) -> set[str]:
    partition, account = worker_role_arn.split(":")[1], arn_account(worker_role_arn)
    return {worker_role_arn, f"arn:{partition}:iam::{account}:root", account}


def _allows(statement: Mapping[str, Any], principals: set[str], wanted_id: str) -> bool:
    if statement.get("Effect") != "Allow" or "NotPrincipal" in statement or "NotAction" in statement:
        return False
    actions = [str(action).lower() for action in _as_list(statement.get("Action"))]
    if not any(arn_matches(action, "sts:assumerole") for action in actions):
        return False
    principal = statement.get("Principal")
    named = _as_list(principal.get("AWS")) if isinstance(principal, Mapping) else []
    if not principals.intersection(str(name) for name in named):
        return False
    condition = statement.get("Condition")
    if not isinstance(condition, Mapping):
        return False
    equals = condition.get("StringEquals")
    if not isinstance(equals, Mapping):
        return False
    # Condition keys are case-insensitive; their values here, case-sensitive.
    wanted = [value for key, value in equals.items() if str(key).lower() == "sts:externalid"]
    return any(wanted_id in _as_list(value) for value in wanted)
