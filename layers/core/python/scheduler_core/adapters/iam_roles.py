"""`RoleDirectory` on IAM: a role's trust policy, read (iam:GetRole) with the api's own role,
which may read the roles of its account and no other's (services/target_check.py). And
`PrincipalDirectory`: a user or role of the account (iam:GetUser, iam:GetRole)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from botocore.exceptions import ClientError

from scheduler_core.adapters.aws import AwsClients, error_code
from scheduler_core.tenant_move_ports import Principal

if TYPE_CHECKING:
    from mypy_boto3_iam import IAMClient


class IamRoles:
    def __init__(self, clients: AwsClients) -> None:
        self._clients = clients

    def trust_policy(self, role_arn: str) -> Mapping[str, Any] | None:
        """The role's trust policy; None when the account has no role of that ARN (no role of
        its name, or one of its name under another path)."""
        try:
            role = self._clients.iam().get_role(RoleName=role_arn.rsplit("/", 1)[-1])["Role"]
        except ClientError as error:
            if error_code(error) == "NoSuchEntity":
                return None
            raise
        if role["Arn"] != role_arn:
            return None
        document: Any = role.get("AssumeRolePolicyDocument") or {}
        if isinstance(document, str):  # boto3 decodes it; as IAM sends it: URL-encoded JSON
            document = json.loads(unquote(document))
        return document if isinstance(document, Mapping) else None


def principal(iam: IAMClient, kind: str, name: str) -> Principal | None:
    """The account's user or role named `name` (kind "user" or "role"): its unique id
    (`AIDA...`, `AROA...`), ARN and creation time; None when there is none (deleted)."""
    try:
        if kind == "user":
            user = iam.get_user(UserName=name)["User"]
            return Principal(user["UserId"], user["Arn"], user["CreateDate"])
        if kind == "role":
            role = iam.get_role(RoleName=name)["Role"]
            return Principal(role["RoleId"], role["Arn"], role["CreateDate"])
    except ClientError as error:
        if error_code(error) == "NoSuchEntity":
            return None
        raise
    raise ValueError(f"no IAM principal of kind {kind!r}")


class IamPrincipals:
    def __init__(self, clients: AwsClients) -> None:
        self._clients = clients

    def principal(self, kind: str, name: str) -> Principal | None:
        return principal(self._clients.iam(), kind, name)
