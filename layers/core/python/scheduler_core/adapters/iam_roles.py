"""`RoleDirectory` on IAM: a role's trust policy, read (iam:GetRole) with the api's own role,
which may read the roles of its account and no other's (services/target_check.py). And
`PrincipalIds`: the unique id of a user or role of the account (iam:GetUser, iam:GetRole)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from botocore.exceptions import ClientError

from scheduler_core.adapters.aws import AwsClients, error_code

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


def unique_id(iam: IAMClient, kind: str, name: str) -> str | None:
    """The unique id (`AIDA...`, `AROA...`) of the account's user or role named `name`; None
    when there is none (deleted)."""
    try:
        if kind == "user":
            return iam.get_user(UserName=name)["User"]["UserId"]
        if kind == "role":
            return iam.get_role(RoleName=name)["Role"]["RoleId"]
    except ClientError as error:
        if error_code(error) == "NoSuchEntity":
            return None
        raise
    raise ValueError(f"no unique id for a principal of kind {kind!r}")


class IamPrincipals:
    def __init__(self, clients: AwsClients) -> None:
        self._clients = clients

    def unique_id(self, kind: str, name: str) -> str | None:
        return unique_id(self._clients.iam(), kind, name)
