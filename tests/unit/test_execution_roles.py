"""Execution roles, the pure rules and the credentials cache: the external id a tenant's
roles are assumed with, the session's name, how a trust policy is read, and when the worker
assumes a role again (STS answered by a botocore Stubber, time by a manual clock)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from scheduler_core.adapters.assumed_roles import AssumedRoles, RoleNotAssumed
from scheduler_core.adapters.aws import AwsClients
from scheduler_core.domain.clock import ManualClock
from scheduler_core.domain.execution_roles import (
    external_id,
    session_name,
    trust_allows,
    trust_requirement,
)

ACCOUNT = "123456789012"
WORKER = f"arn:aws:iam::{ACCOUNT}:role/ServerlessScheduler-WorkersWorkerRole"
ALICE = f"arn:aws:iam::{ACCOUNT}:user/alice"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/alice-delivery"
START = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)


# --- the external id and the session name ------------------------------------------------------------


@pytest.mark.parametrize(
    "tenant",
    [
        ALICE,
        f"arn:aws:iam::{ACCOUNT}:user/division_a/team-b/alice@example.com",
        f"arn:aws:sts::{ACCOUNT}:assumed-role/ci-deploy",
        f"arn:aws-us-gov:iam::{ACCOUNT}:root",
    ],
)
def test_a_tenant_sts_takes_as_it_is_is_its_own_external_id(tenant: str) -> None:
    assert external_id(tenant) == tenant


@pytest.mark.parametrize(
    "tenant",
    [f"arn:aws:iam::{ACCOUNT}:user/odd!path/alice", f"arn:aws:iam::{ACCOUNT}:user/a*b/alice", "x"],
)
def test_a_tenant_with_characters_sts_refuses_gets_a_hash_of_it(tenant: str) -> None:
    derived = external_id(tenant)

    assert re.fullmatch(r"tenant-sha256:[0-9a-f]{64}", derived)
    assert derived == external_id(tenant)  # deterministic
    assert derived != external_id(tenant + "x")


@pytest.mark.parametrize(
    "run_id",
    ["3bbdf81bf8fc4f91bf066b7012393de6:1795255232000", "wf-" + "x" * 80 + ":task/a:1795255232000"],
)
def test_a_session_is_named_after_the_scheduler_and_the_run_as_sts_takes_it(run_id: str) -> None:
    name = session_name(run_id)

    assert re.fullmatch(r"scheduler-[A-Za-z0-9_+=,.@-]{1,54}", name)
    assert name.endswith("-1795255232000")


# --- reading a trust policy --------------------------------------------------------------------------


def allow(principal: Any = WORKER, condition: Any = None, **more: Any) -> dict[str, Any]:
    statement = {"Effect": "Allow", "Principal": {"AWS": principal}, "Action": "sts:AssumeRole"}
    statement["Condition"] = {"StringEquals": {"sts:ExternalId": ALICE}} if condition is None else condition
    return {"Version": "2012-10-17", "Statement": [statement | more]}


@pytest.mark.parametrize(
    "policy",
    [
        allow(),
        allow(f"arn:aws:iam::{ACCOUNT}:root"),
        allow(ACCOUNT),
        allow(["arn:aws:iam::111122223333:root", WORKER]),
        allow(Action=["sts:TagSession", "sts:AssumeRole"]),
        allow(Action="sts:Assume*"),
        allow(Action="STS:ASSUMEROLE"),
        allow(condition={"StringEquals": {"sts:externalid": [ALICE, "someone-else"]}}),
        allow(condition={"StringEquals": {"sts:ExternalId": ALICE, "aws:SourceAccount": ACCOUNT}}),
        {"Statement": allow()["Statement"][0]},  # one statement, not a list
    ],
)
def test_trust_policies_that_let_the_worker_in_for_the_tenant(policy: dict[str, Any]) -> None:
    assert trust_allows(policy, WORKER, ALICE)


@pytest.mark.parametrize(
    "policy",
    [
        {},
        {"Statement": "nonsense"},
        allow(f"arn:aws:iam::{ACCOUNT}:role/another"),
        allow("*"),
        allow("arn:aws:iam::111122223333:root"),
        allow(condition={}),
        allow(condition={"StringEquals": {"sts:ExternalId": "bob"}}),
        allow(condition={"StringLike": {"sts:ExternalId": "*"}}),
        allow(condition={"StringEquals": {"sts:ExternalId": ALICE.upper()}}),
        allow(Effect="Deny"),
        allow(Action="sts:AssumeRoleWithWebIdentity"),
        {"Statement": [{"Effect": "Allow", "NotPrincipal": {"AWS": "x"}, "Action": "sts:AssumeRole"}]},
        {
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"Service": "lambda.amazonaws.com"},
                    "Action": "sts:AssumeRole",
                }
            ]
        },
    ],
)
def test_trust_policies_that_do_not(policy: dict[str, Any]) -> None:
    assert not trust_allows(policy, WORKER, ALICE)


def test_the_refusal_says_what_the_trust_policy_must_hold() -> None:
    assert trust_requirement(ROLE, WORKER, ALICE) == (
        f"the scheduler could not assume {ROLE}: its trust policy must let {WORKER} assume it "
        f"(sts:AssumeRole) with sts:ExternalId = {ALICE}"
    )
    assert "the scheduler's worker role assume it" in trust_requirement(ROLE, "", ALICE)


# --- the credentials cache ------------------------------------------------------------------------


def credentials(n: int, expires: datetime) -> dict[str, Any]:
    return {
        "Credentials": {
            "AccessKeyId": f"ASIAEXAMPLE{n:08d}",
            "SecretAccessKey": f"secret-{n}",
            "SessionToken": f"token-{n}",
            "Expiration": expires,
        },
        "AssumedRoleUser": {
            "AssumedRoleId": f"AROAEXAMPLE:{n}",
            "Arn": f"arn:aws:sts::{ACCOUNT}:assumed-role/r/{n}",
        },
    }


@pytest.fixture
def sts() -> Any:
    return boto3.session.Session(
        aws_access_key_id="worker", aws_secret_access_key="worker", region_name="us-east-1"
    ).client("sts")


def test_credentials_are_kept_until_five_minutes_before_they_expire(sts: Any) -> None:
    clock = ManualClock(START)
    roles = AssumedRoles(AwsClients(boto3.session.Session(region_name="us-east-1")), clock, sts=sts)
    expected = {
        "RoleArn": ROLE,
        "RoleSessionName": "scheduler-job-1",
        "ExternalId": ALICE,
        "DurationSeconds": 3600,
    }
    with Stubber(sts) as stubber:
        stubber.add_response("assume_role", credentials(1, START + timedelta(hours=1)), expected)
        first = roles.clients(ROLE, ALICE, "job:1")
        clock.advance(54 * 60 + 59)  # 5 min 1 s left
        assert roles.clients(ROLE, ALICE, "job:2") is first
        stubber.assert_no_pending_responses()

        clock.advance(1)  # 5 minutes left: assumed again, under the run that needed it
        stubber.add_response(
            "assume_role",
            credentials(2, clock.now() + timedelta(hours=1)),
            expected | {"RoleSessionName": "scheduler-job-3"},
        )
        second = roles.clients(ROLE, ALICE, "job:3")
        stubber.assert_no_pending_responses()

    assert second is not first


@pytest.mark.parametrize(
    ("code", "status", "retryable", "says"),
    [
        ("AccessDenied", 403, False, "its trust policy must let"),
        ("RegionDisabledException", 403, False, "STS RegionDisabledException"),
        ("Throttling", 400, True, "STS Throttling"),
        ("InternalFailure", 500, True, "STS InternalFailure"),
    ],
)
def test_a_refusal_by_sts_says_what_to_check_and_whether_to_try_again(
    sts: Any, code: str, status: int, retryable: bool, says: str
) -> None:
    roles = AssumedRoles(AwsClients(), ManualClock(START), worker_role_arn=WORKER, sts=sts)
    with Stubber(sts) as stubber:
        stubber.add_client_error("assume_role", code, "no", status)
        with pytest.raises(RoleNotAssumed) as refused:
            roles.clients(ROLE, ALICE, "job:1")

    assert refused.value.retryable is retryable
    assert str(refused.value).startswith(f"the scheduler could not assume {ROLE}: ")
    assert says in str(refused.value)
