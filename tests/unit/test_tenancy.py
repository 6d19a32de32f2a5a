from __future__ import annotations

import pytest

from scheduler_core.domain.tenancy import tenant_of


def test_an_iam_user_is_its_own_tenant() -> None:
    assert (
        tenant_of({"userArn": "arn:aws:iam::123456789012:user/alice"})
        == "arn:aws:iam::123456789012:user/alice"
    )


def test_every_session_of_a_role_is_the_role() -> None:
    one = tenant_of({"userArn": "arn:aws:sts::123456789012:assumed-role/Deployer/ci-run-1"})
    two = tenant_of({"userArn": "arn:aws:sts::123456789012:assumed-role/Deployer/ci-run-2"})
    assert one == two == "arn:aws:sts::123456789012:assumed-role/Deployer"


def test_roles_of_different_accounts_are_different_tenants() -> None:
    assert tenant_of({"userArn": "arn:aws:sts::111111111111:assumed-role/R/s"}) != tenant_of(
        {"userArn": "arn:aws:sts::222222222222:assumed-role/R/s"}
    )


@pytest.mark.parametrize("identity", [None, {}, {"userArn": None}, {"userArn": ""}, {"sourceIp": "1.2.3.4"}])
def test_no_iam_caller_means_no_tenant(identity: dict[str, str] | None) -> None:
    assert tenant_of(identity) is None
