"""Tenants kept under their ARN (releases before unique ids) move to their principal's id
(scheduler_core.services.tenant_migration, `python -m infra.migrate_tenants`): jobs, workflows
and tasks, secret headers (re-sealed under the new tenant), signing keys and quota counters.
On moto: IAM gives the ids, KMS re-encrypts, DynamoDB holds the items."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from standardwebhooks.webhooks import Webhook

from scheduler_core.composition import build_tenant_migration
from scheduler_core.domain.api_shapes import JobCreate, WorkflowCreate
from scheduler_core.domain.tenancy import Tenancy
from scheduler_core.services.tenant_migration import TenantMigration
from tests.support.events import ACCOUNT, ALICE, BOB
from tests.support.harness import FrozenClock, SchedulerHarness
from tests.support.receiver import WebhookReceiver

TOKEN = "Bearer m1grat3d-t0ken"
# How releases before unique ids kept these tenants: the caller's ARN.
OLD_ALICE, OLD_BOB = ALICE, BOB
OLD_ROLE = f"arn:aws:sts::{ACCOUNT}:assumed-role/Deployer"


def migration(cloud: SchedulerHarness) -> TenantMigration:
    return build_tenant_migration(cloud.settings, cloud.clients, ACCOUNT)


def hook(receiver: WebhookReceiver, clock: FrozenClock, **target: Any) -> dict[str, Any]:
    at = (clock.now() + timedelta(seconds=5)).isoformat()
    return {"name": "once", "schedule": {"at": at}, "target": {"type": "HTTP", "url": receiver.url, **target}}


def quota(cloud: SchedulerHarness, tenant: str) -> int | None:
    item = cloud.clients.dynamodb().get_item(
        TableName=cloud.settings.jobs_table_name,
        Key={"pk": {"S": f"QUOTA#{tenant}"}, "sk": {"S": "JOBS"}},
        ConsistentRead=True,
    )
    return int(item["Item"]["used"]["N"]) if "Item" in item else None


def listed(cloud: SchedulerHarness, path: str, principal: str, caller: str = ALICE) -> set[str]:
    reply = cloud.call("GET", path, caller=caller, principal=principal)
    assert reply.status == 200, reply.body
    return {item.get("job_id") or item["workflow_id"] for item in reply.body["items"]}


def test_a_tenant_kept_under_its_arn_moves_to_its_users_id_with_all_it_owns(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    alice_id = cloud.clients.iam().create_user(UserName="alice")["User"]["UserId"]
    assert cloud.jobs.signing is not None
    assert cloud.jobs.workflows is not None
    secret = cloud.jobs.signing.rotate(OLD_ALICE)["secret"]
    once = cloud.jobs.create(
        OLD_ALICE, JobCreate.model_validate(hook(receiver, clock, secret_headers={"Authorization": TOKEN}))
    )
    daily = cloud.jobs.create(
        OLD_ALICE,
        JobCreate.model_validate(
            {
                "name": "daily",
                "schedule": {"cron": "0 9 * * *"},
                "target": {"type": "HTTP", "url": receiver.url},
            }
        ),
    )
    tasks = [{"task_id": "a", "target": {"type": "HTTP", "url": receiver.url}}]
    workflow = cloud.jobs.workflows.create(
        OLD_ALICE, WorkflowCreate.model_validate({"name": "pipeline", "tasks": tasks})
    )
    workflow_id = workflow.job_id
    held = quota(cloud, OLD_ALICE)
    assert held == 2  # the recurring job and the workflow
    assert listed(cloud, "/v1/jobs", alice_id) == set()  # before the move: under the ARN, out of reach

    assert migration(cloud).run(dry_run=True)[0].new == alice_id
    assert listed(cloud, "/v1/jobs", alice_id) == set()  # a dry run moves nothing
    [move] = migration(cloud).run()

    assert (move.old, move.new, move.items, move.signing_keys) == (OLD_ALICE, alice_id, 4, "moved")
    assert listed(cloud, "/v1/jobs", alice_id) == {once.job_id, daily.job_id}
    assert listed(cloud, "/v1/workflows", alice_id) == {workflow_id}
    assert (quota(cloud, alice_id), quota(cloud, OLD_ALICE)) == (held, None)
    # The secret header was sealed again for the new tenant, and the signing key moved with it.
    clock.move_to(clock.now() + timedelta(seconds=6))
    cloud.poll()
    cloud.deliver()
    [request] = receiver.requests
    assert request.headers["authorization"] == TOKEN
    assert Webhook(secret).verify(request.raw, request.headers) == request.body
    [run] = cloud.call("GET", f"/v1/jobs/{once.job_id}/runs", principal=alice_id).body["items"]
    assert run["status"] == "SUCCEEDED"
    # The caller as API Gateway reports it now finds its tenant there.
    assert Tenancy().of({"userArn": ALICE, "user": alice_id}) == alice_id
    assert migration(cloud).run() == []  # run again: nothing left under an ARN


def test_a_tenant_whose_principal_is_gone_stays_and_a_role_becomes_its_role_id(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    role_id = cloud.clients.iam().create_role(RoleName="Deployer", AssumeRolePolicyDocument="{}")["Role"][
        "RoleId"
    ]
    kept = cloud.jobs.create(OLD_BOB, JobCreate.model_validate(hook(receiver, clock)))
    moved = cloud.jobs.create(OLD_ROLE, JobCreate.model_validate(hook(receiver, clock)))

    moves = {m.old: m for m in migration(cloud).run()}

    assert moves[OLD_BOB].new is None
    assert "no user named bob exists now" in moves[OLD_BOB].why
    assert moves[OLD_ROLE].new == role_id
    session = f"arn:aws:sts::{ACCOUNT}:assumed-role/Deployer/ci"
    assert listed(cloud, "/v1/jobs", f"{role_id}:ci", caller=session) == {moved.job_id}
    item = cloud.clients.dynamodb().get_item(
        TableName=cloud.settings.jobs_table_name, Key={"pk": {"S": f"JOB#{kept.job_id}"}, "sk": {"S": "JOB"}}
    )["Item"]
    assert item["tenant"]["S"] == OLD_BOB
    assert json.loads(item["spec"]["S"])["target"]["url"] == receiver.url
