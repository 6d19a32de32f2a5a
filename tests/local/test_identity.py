"""The local cloud's stand-in for IAM's unique ids (infra/local/identity.py)."""

from __future__ import annotations

import boto3
from moto import mock_aws

from infra.local.identity import IamIds, made_up_id, principal_id

ACCOUNT = "123456789012"


def test_principals_iam_does_not_know_get_stable_ids_of_iams_form() -> None:
    user = principal_id(f"arn:aws:iam::{ACCOUNT}:user/alice")
    assert user == principal_id(f"arn:aws:iam::{ACCOUNT}:user/alice")
    assert user.startswith("AIDA")
    assert len(user) == 21
    assert user != principal_id(f"arn:aws:iam::{ACCOUNT}:user/bob")
    role = principal_id(f"arn:aws:sts::{ACCOUNT}:assumed-role/Deployer/ci-1")
    assert role.startswith("AROA")
    assert role.endswith(":ci-1")
    assert role == made_up_id("AROA", f"arn:aws:iam::{ACCOUNT}:role/Deployer") + ":ci-1"
    assert principal_id(f"arn:aws:iam::{ACCOUNT}:root") == ACCOUNT
    assert principal_id(f"arn:aws:sts::{ACCOUNT}:federated-user/carol") == f"{ACCOUNT}:carol"


@mock_aws
def test_principals_iam_knows_get_their_real_id_and_a_new_one_when_made_again() -> None:
    iam = boto3.client("iam", region_name="us-east-1")
    first = iam.create_user(UserName="alice")["User"]["UserId"]
    role = iam.create_role(RoleName="Deployer", AssumeRolePolicyDocument="{}")["Role"]["RoleId"]
    assert principal_id(f"arn:aws:iam::{ACCOUNT}:user/alice", IamIds(iam)) == first
    assert principal_id(f"arn:aws:sts::{ACCOUNT}:assumed-role/Deployer/s", IamIds(iam)) == f"{role}:s"
    iam.delete_user(UserName="alice")
    again = iam.create_user(UserName="alice")["User"]["UserId"]
    assert again != first
    assert principal_id(f"arn:aws:iam::{ACCOUNT}:user/alice", IamIds(iam)) == again
