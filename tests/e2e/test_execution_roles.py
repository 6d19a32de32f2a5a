"""Execution roles through the whole local cloud (docs/security.md, "Execution roles"): a
tenant makes a role in the local cloud's IAM whose trust policy names the deployed worker's
role and the tenant's external id; a job to the tenant's queue through that role is
delivered. The api reads the role's trust policy as deployed (its WORKER_ROLE_ARN, its
iam:GetRole): another tenant naming the role is refused with 403, and a target with neither
a role nor a shared ARN (the local cloud lists none) with 400."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import boto3
import pytest

from infra.local.cloud import LocalCloud
from infra.local.deployment import REGION
from tests.e2e.api_client import ApiClient, assert_error_shape, unique_name
from tests.e2e.polling import API_POLL_INTERVAL_SECONDS, now_ms, seconds_until, wait_for
from tests.support.helpers import iso

pytestmark = pytest.mark.e2e

MARGIN_SECONDS = 15
TENANT = "arn:aws:iam::123456789012:user/roles-e2e"  # a tenant of this test's own
OTHER = "arn:aws:iam::123456789012:user/roles-e2e-other"


def tenant_aws(local_cloud: LocalCloud, name: str) -> Any:
    """A client of the local cloud's moto, as the tenant's own tooling would be."""
    session = boto3.session.Session(aws_access_key_id="e2e", aws_secret_access_key="e2e", region_name=REGION)
    return session.client(name, endpoint_url=local_cloud.moto_url)  # type: ignore[call-overload]


def worker_role_arn(local_cloud: LocalCloud) -> str:
    """The deployed worker's role, as the stack output a tenant reads it from."""
    cloudformation = tenant_aws(local_cloud, "cloudformation")
    [stack] = cloudformation.describe_stacks(StackName=local_cloud.options.stack_name)["Stacks"]
    [arn] = [output["OutputValue"] for output in stack["Outputs"] if output["OutputKey"] == "WorkerRoleArn"]
    return str(arn)


def external_id_of(api: ApiClient, caller: str) -> str:
    """The external id the API tells `caller` its roles must require (GET /v1/tenant)."""
    reply = api.call("GET", "/v1/tenant", caller=caller)
    assert reply.status == 200, reply.body
    assert reply.body["principal_arn"] == caller
    found: str = reply.body["external_id"]
    return found


def test_a_job_reaches_the_tenants_queue_through_the_tenants_role(
    api: ApiClient, local_cloud: LocalCloud
) -> None:
    iam, sqs = tenant_aws(local_cloud, "iam"), tenant_aws(local_cloud, "sqs")
    queue = sqs.create_queue(QueueName=unique_name("roles-e2e"))["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    trust = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"AWS": worker_role_arn(local_cloud)},
                "Action": "sts:AssumeRole",
                "Condition": {"StringEquals": {"sts:ExternalId": external_id_of(api, TENANT)}},
            }
        ],
    }
    name = unique_name("delivery")
    role = iam.create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"]
    permissions = {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": "sqs:SendMessage", "Resource": queue_arn}],
    }
    iam.put_role_policy(RoleName=name, PolicyName="deliveries", PolicyDocument=json.dumps(permissions))
    fire_at = now_ms() + timedelta(seconds=3)
    body = {
        "name": "through-my-role",
        "schedule": {"at": iso(fire_at)},
        "target": {"type": "SQS", "queue_url": queue, "role_arn": role},
        "payload": {"order": 11},
    }

    # Another tenant naming this role: its trust policy names TENANT's external id, not OTHER's.
    details = assert_error_shape(api.call("POST", "/v1/jobs", body, caller=OTHER), 403, "FORBIDDEN")
    assert details[0]["field"] == "target.role_arn"
    assert f"sts:ExternalId = {external_id_of(api, OTHER)}" in details[0]["message"]

    created = api.call("POST", "/v1/jobs", body, caller=TENANT)
    assert created.status == 201, created.body
    job_id = created.body["job_id"]
    [message] = wait_for(
        lambda: sqs.receive_message(QueueUrl=queue, WaitTimeSeconds=1, MessageAttributeNames=["All"]).get(
            "Messages"
        ),
        seconds_until(fire_at) + MARGIN_SECONDS,
        "the message sent through the role",
        interval=API_POLL_INTERVAL_SECONDS,
    )
    assert json.loads(message["Body"]) == {"order": 11}
    assert message["MessageAttributes"]["X-Scheduler-Job-Id"]["StringValue"] == job_id
    [run] = wait_for(
        lambda: [
            run
            for run in api.call("GET", f"/v1/jobs/{job_id}/runs", caller=TENANT).body["items"]
            if run["status"] == "SUCCEEDED"
        ],
        MARGIN_SECONDS,
        "the run to succeed",
        interval=API_POLL_INTERVAL_SECONDS,
    )
    assert run["attempt"] == 1


def test_a_role_of_another_account_reaches_a_queue_only_that_account_has(
    api: ApiClient, local_cloud: LocalCloud
) -> None:
    """moto acts in the account of the keys a call is signed with: the queue exists in the
    role's account only, so the message arrives only if the worker sent it as the role. (A
    role of another account is accepted at create; STS checks its trust policy, and moto's
    STS checks none.)"""
    other_account = "111122223333"
    setup = tenant_aws(local_cloud, "sts").assume_role(
        RoleArn=f"arn:aws:iam::{other_account}:role/setup", RoleSessionName="e2e-setup", ExternalId="setup"
    )["Credentials"]
    theirs = boto3.session.Session(
        aws_access_key_id=setup["AccessKeyId"],
        aws_secret_access_key=setup["SecretAccessKey"],
        aws_session_token=setup["SessionToken"],
        region_name=REGION,
    ).client("sqs", endpoint_url=local_cloud.moto_url)
    queue = theirs.create_queue(QueueName=unique_name("roles-e2e"))["QueueUrl"]
    assert f"/{other_account}/" in queue
    fire_at = now_ms() + timedelta(seconds=3)
    body = {
        "name": "through-another-accounts-role",
        "schedule": {"at": iso(fire_at)},
        "target": {
            "type": "SQS",
            "queue_url": queue,
            "role_arn": f"arn:aws:iam::{other_account}:role/delivery",
        },
        "payload": {"order": 12},
    }

    created = api.call("POST", "/v1/jobs", body, caller=TENANT)
    assert created.status == 201, created.body

    [message] = wait_for(
        lambda: theirs.receive_message(QueueUrl=queue, WaitTimeSeconds=1).get("Messages"),
        seconds_until(fire_at) + MARGIN_SECONDS,
        "the message sent as the other account's role",
        interval=API_POLL_INTERVAL_SECONDS,
    )
    assert json.loads(message["Body"]) == {"order": 12}


def test_a_target_with_neither_a_role_nor_a_shared_arn_is_refused(
    api: ApiClient, local_cloud: LocalCloud
) -> None:
    """The local cloud deploys cdk.json's defaults: no target is offered to every tenant."""
    queue = tenant_aws(local_cloud, "sqs").create_queue(QueueName=unique_name("roles-e2e"))["QueueUrl"]
    body = {
        "name": "no-role",
        "schedule": {"at": iso(now_ms() + timedelta(minutes=5))},
        "target": {"type": "SQS", "queue_url": queue},
    }

    details = assert_error_shape(api.call("POST", "/v1/jobs", body, caller=TENANT), 400, "VALIDATION_ERROR")

    assert details[0]["field"] == "target.role_arn"
    assert "Give role_arn" in details[0]["message"]
