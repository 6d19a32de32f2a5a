from __future__ import annotations

from typing import Any

import pytest

from scheduler_core.domain.tenancy import Tenancy, role_name, tenant_of

ACCOUNT = "123456789012"
USER_ARN = f"arn:aws:iam::{ACCOUNT}:user/alice"
ROLE_ID = "AROAEXAMPLEROLEID1234"


def session(role: str, name: str, role_id: str = ROLE_ID) -> dict[str, Any]:
    return {"userArn": f"arn:aws:sts::{ACCOUNT}:assumed-role/{role}/{name}", "user": f"{role_id}:{name}"}


def test_an_iam_user_is_its_unique_id_not_its_arn() -> None:
    assert tenant_of({"userArn": USER_ARN, "user": "AIDAEXAMPLEUSERID123"}) == "AIDAEXAMPLEUSERID123"


def test_a_user_made_again_under_the_same_name_is_another_tenant() -> None:
    before = tenant_of({"userArn": USER_ARN, "user": "AIDAEXAMPLEUSERID123"})
    after = tenant_of({"userArn": USER_ARN, "user": "AIDAANOTHERUSERID456"})
    assert before != after


def test_every_session_of_a_role_is_the_role() -> None:
    assert tenant_of(session("Deployer", "ci-run-1")) == tenant_of(session("Deployer", "ci-run-2")) == ROLE_ID


def test_a_role_made_again_is_another_tenant() -> None:
    assert tenant_of(session("Deployer", "s")) != tenant_of(session("Deployer", "s", "AROANEWROLEID5678901"))


def test_sessions_of_a_named_role_are_tenants_each() -> None:
    tenancy = Tenancy(("AWSReservedSSO_*", "ci-deployer"))
    alice = tenancy.of(session("AWSReservedSSO_Developers_0123abcd", "alice@example.com"))
    bob = tenancy.of(session("AWSReservedSSO_Developers_0123abcd", "bob@example.com"))
    assert alice == f"{ROLE_ID}:alice@example.com"
    assert bob == f"{ROLE_ID}:bob@example.com"
    assert tenancy.of(session("ci-deployer", "run-7")) == f"{ROLE_ID}:run-7"


def test_roles_not_named_keep_one_tenant_and_names_compare_case_sensitively() -> None:
    tenancy = Tenancy(("ci-deployer",))
    assert tenancy.of(session("ci-deployer-2", "x")) == ROLE_ID
    assert tenancy.of(session("CI-Deployer", "x")) == ROLE_ID


def test_the_root_user_is_the_account() -> None:
    assert tenant_of({"userArn": f"arn:aws:iam::{ACCOUNT}:root", "user": ACCOUNT}) == ACCOUNT


@pytest.mark.parametrize(
    "identity",
    [
        None,
        {},
        {"userArn": None},
        {"userArn": ""},
        {"sourceIp": "1.2.3.4"},
        {"userArn": USER_ARN},  # no unique id: not an IAM-authorized request
        {"user": "AIDAEXAMPLEUSERID123"},
    ],
)
def test_no_iam_caller_means_no_tenant(identity: dict[str, str] | None) -> None:
    assert tenant_of(identity) is None


def test_role_name_of_a_session_arn() -> None:
    assert role_name(f"arn:aws:sts::{ACCOUNT}:assumed-role/Deployer/s") == "Deployer"
    assert role_name(USER_ARN) is None
