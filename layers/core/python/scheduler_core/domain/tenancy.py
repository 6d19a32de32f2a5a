"""Who owns a job: the caller's IAM principal as API Gateway reports it. Pure.

A tenant is the caller's **unique principal id** (`requestContext.identity.user`), not its
ARN: an IAM user's id (`AIDA...`), a role's id (`AROA...`), the account id for the root user.
A user or role deleted and made again under the same name gets a new id, so it does not
inherit the old one's jobs (an ARN would hand them over).

A role's sessions are one tenant (`AROA...:alice` and `AROA...:bob` share jobs): the session
is dropped, the role is the owner. A deployment may name roles whose sessions are tenants
each (`per_session_tenant_roles`, patterns of role names: SSO permission sets, a CI role
many people use): their tenant keeps the session, `AROA...:alice`. The session name is
chosen by whoever assumes the role, so this separates people only where AWS sets it (IAM
Identity Center sets it to the user) or the role's trust policy pins it
(`sts:RoleSessionName`): docs/security.md, "Tenants".

The tenant is also the `sts:ExternalId` of the tenant's execution roles
(domain/execution_roles.py); `GET /v1/tenant` shows it, and so does
`aws sts get-caller-identity` (its `UserId`, the `:session` dropped for a role).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

_ASSUMED_ROLE = ":assumed-role/"


def role_name(arn: str) -> str | None:
    """The role of an assumed-role session ARN (`arn:aws:sts::1:assumed-role/NAME/session`)."""
    if _ASSUMED_ROLE not in arn:
        return None
    return arn.partition(_ASSUMED_ROLE)[2].split("/", 1)[0] or None


def tenant_of(identity: Mapping[str, Any] | None, per_session_roles: Collection[str] = ()) -> str | None:
    """The tenant for an API Gateway `requestContext.identity`; None if there is no IAM caller.

    `per_session_roles`: role-name patterns (fnmatch, case-sensitive as IAM names compare)
    whose sessions are tenants each."""
    if not identity:
        return None
    principal = str(identity.get("user") or "")
    arn = str(identity.get("userArn") or "")
    if not principal or not arn:
        return None
    role = role_name(arn)
    if role is None or ":" not in principal:
        return principal
    if any(fnmatchcase(role, pattern) for pattern in per_session_roles):
        return principal
    return principal.split(":", 1)[0]


@dataclass(frozen=True)
class Tenancy:
    """A deployment's rule for tenants: `tenant_of` with its `per_session_tenant_roles`."""

    per_session_roles: tuple[str, ...] = ()

    def of(self, identity: Mapping[str, Any] | None) -> str | None:
        return tenant_of(identity, self.per_session_roles)


@dataclass(frozen=True)
class ArnTenant:
    """A tenant kept under its ARN, as releases before unique ids did (`kind`: user, role,
    root, federated), to be moved to its principal's id (services/tenant_migration.py)."""

    kind: str
    account: str
    name: str


def arn_tenant(tenant: str) -> ArnTenant | None:
    """What an ARN-keyed tenant names (`arn:aws:iam::1:user/path/alice`,
    `arn:aws:sts::1:assumed-role/Role`, `arn:aws:iam::1:root`,
    `arn:aws:sts::1:federated-user/carol`); None for a tenant that is already an id."""
    parts = tenant.split(":", 5)
    if len(parts) != 6 or parts[0] != "arn":
        return None
    account, resource = parts[4], parts[5]
    if resource == "root":
        return ArnTenant("root", account, "")
    kind, _, path = resource.partition("/")
    name = path.rsplit("/", 1)[-1]
    if not name:
        return None
    kinds = {"user": "user", "assumed-role": "role", "federated-user": "federated"}
    return ArnTenant(kinds[kind], account, name) if kind in kinds else None
