"""Tenants kept under their ARN (releases before unique ids) move to their principal's id
(scheduler_core.services.tenant_migration, `python -m infra.migrate_tenants`): jobs, workflows
and tasks, secret headers (re-sealed under the new tenant), signing keys and quota counters;
and the tenants that must stay where they are. On moto: IAM gives the ids and creation
times, KMS re-encrypts, DynamoDB holds the items."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from standardwebhooks.webhooks import Webhook

from scheduler_core.composition import build_job_service, build_tenant_migration
from scheduler_core.domain.api_shapes import JobCreate, WorkflowCreate
from scheduler_core.domain.entities import Job
from scheduler_core.domain.execution_roles import external_id
from scheduler_core.services.tenant_migration import TenantMigration
from tests.support.events import ACCOUNT, ALICE, BOB
from tests.support.harness import FrozenClock, SchedulerHarness
from tests.support.receiver import WebhookReceiver

TOKEN = "Bearer m1grat3d-t0ken"
# How releases before unique ids kept these tenants: the caller's ARN.
OLD_ALICE, OLD_BOB = ALICE, BOB
OLD_ROLE = f"arn:aws:sts::{ACCOUNT}:assumed-role/Deployer"
ROLE_ARN = f"arn:aws:iam::{ACCOUNT}:role/alice-delivery"


def migration(
    cloud: SchedulerHarness, clock: FrozenClock, per_session: tuple[str, ...] = ()
) -> TenantMigration:
    settings = cloud.settings.model_copy(update={"per_session_tenant_roles": per_session})
    return build_tenant_migration(settings, cloud.clients, clock, ACCOUNT)


def hook(receiver: WebhookReceiver, clock: FrozenClock, **target: Any) -> dict[str, Any]:
    at = (clock.now() + timedelta(seconds=5)).isoformat()
    return {"name": "once", "schedule": {"at": at}, "target": {"type": "HTTP", "url": receiver.url, **target}}


def create(cloud: SchedulerHarness, tenant: str, body: dict[str, Any]) -> Job:
    return cloud.jobs.create(tenant, JobCreate.model_validate(body))


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


def fire(cloud: SchedulerHarness, clock: FrozenClock) -> None:
    clock.move_to(clock.now() + timedelta(seconds=6))
    cloud.poll()
    cloud.deliver()


def test_a_tenant_kept_under_its_arn_moves_to_its_users_id_with_all_it_owns(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    alice_id = cloud.clients.iam().create_user(UserName="alice")["User"]["UserId"]
    assert cloud.jobs.signing is not None
    assert cloud.jobs.workflows is not None
    secret = cloud.jobs.signing.rotate(OLD_ALICE)["secret"]
    once = create(cloud, OLD_ALICE, hook(receiver, clock, secret_headers={"Authorization": TOKEN}))
    daily = create(
        cloud,
        OLD_ALICE,
        {"name": "daily", "schedule": {"cron": "0 9 * * *"}, "target": {"type": "HTTP", "url": receiver.url}},
    )
    tasks = [{"task_id": "a", "target": {"type": "HTTP", "url": receiver.url}}]
    workflow = cloud.jobs.workflows.create(
        OLD_ALICE, WorkflowCreate.model_validate({"name": "dag", "tasks": tasks})
    )
    held = quota(cloud, OLD_ALICE)
    assert held == 2  # the recurring job and the workflow
    assert listed(cloud, "/v1/jobs", alice_id) == set()  # before the move: under the ARN, out of reach

    [planned] = migration(cloud, clock).run(dry_run=True)
    assert (planned.new, planned.external_id, planned.moved) == (alice_id, external_id(alice_id), 0)
    assert listed(cloud, "/v1/jobs", alice_id) == set()  # a dry run moves nothing
    [move] = migration(cloud, clock).run()

    assert (move.old, move.new, move.items, move.moved, move.signing_keys) == (
        OLD_ALICE,
        alice_id,
        4,
        4,
        "moved",
    )
    assert move.failed == {}
    assert listed(cloud, "/v1/jobs", alice_id) == {once.job_id, daily.job_id}
    assert listed(cloud, "/v1/workflows", alice_id) == {workflow.job_id}
    assert (quota(cloud, alice_id), quota(cloud, OLD_ALICE)) == (held, None)
    assert cloud.jobs.signing.describe(OLD_ALICE)["created_at"] is None  # the old keys are gone
    # The secret header was sealed again for the new tenant, and the signing key moved with it.
    fire(cloud, clock)
    [request] = receiver.requests
    assert request.headers["authorization"] == TOKEN
    assert Webhook(secret).verify(request.raw, request.headers) == request.body
    [run] = cloud.call("GET", f"/v1/jobs/{once.job_id}/runs", principal=alice_id).body["items"]
    assert run["status"] == "SUCCEEDED"
    assert migration(cloud, clock).run() == []  # run again: nothing left under an ARN


def test_a_dry_run_lists_the_jobs_whose_roles_need_the_new_external_id(
    cloud: SchedulerHarness, clock: FrozenClock
) -> None:
    alice_id = cloud.clients.iam().create_user(UserName="alice")["User"]["UserId"]
    queue = cloud.clients.sqs().create_queue(QueueName="alice-orders")["QueueUrl"]
    # The role as releases before ids had it trusted: for the tenant's ARN.
    allow = {
        "Effect": "Allow",
        "Principal": {"AWS": cloud.settings.worker_role_arn},
        "Action": "sts:AssumeRole",
        "Condition": {"StringEquals": {"sts:ExternalId": OLD_ALICE}},
    }
    cloud.clients.iam().create_role(
        RoleName="alice-delivery",
        AssumeRolePolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": [allow]}),
    )
    sent = create(
        cloud,
        OLD_ALICE,
        {
            "name": "to-queue",
            "schedule": {"rate": "1 hour"},
            "target": {"type": "SQS", "queue_url": queue, "role_arn": ROLE_ARN},
        },
    )

    [planned] = migration(cloud, clock).plan()

    assert planned.role_targets == [sent.job_id]
    assert planned.external_id == external_id(alice_id)


def test_a_write_that_read_the_job_before_the_move_is_refused_and_reads_it_again(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    """The poller (say) read the job before the move; its conditional write comes after: the
    move gave the job a new version, so the write fails instead of putting the old tenant's
    sealed headers back."""
    cloud.clients.iam().create_user(UserName="alice")
    job = create(cloud, OLD_ALICE, hook(receiver, clock, secret_headers={"Authorization": TOKEN}))
    read_before = cloud.poll_store.get_job(job.job_id)
    assert read_before is not None

    migration(cloud, clock).run()

    late = read_before.model_copy(update={"name": "renamed-late"})
    assert cloud.poll_store.update_job_if_unchanged(read_before, late, clock.now()) is False
    moved = cloud.poll_store.get_job(job.job_id)
    assert moved is not None
    assert moved.version == read_before.version + 1
    assert moved.sealed_headers != read_before.sealed_headers


def test_moving_again_after_a_partial_move_counts_nothing_twice(
    cloud: SchedulerHarness, clock: FrozenClock
) -> None:
    alice_id = cloud.clients.iam().create_user(UserName="alice")["User"]["UserId"]
    create(
        cloud,
        OLD_ALICE,
        {
            "name": "r",
            "schedule": {"rate": "1 hour"},
            "target": {"type": "HTTP", "url": "https://example.com/h"},
        },
    )
    records = cloud.api_store
    # A move that stopped after the counters: they are moved whole (one transaction each) ...
    assert records.move_quota_counters(OLD_ALICE, alice_id) == 1
    assert records.move_quota_counters(OLD_ALICE, alice_id) == 0
    # ... and the move run afterwards moves the rest and no counter twice.
    [move] = migration(cloud, clock).run()
    assert (move.moved, move.quota_counters) == (1, 0)
    assert quota(cloud, alice_id) == 1


def test_keys_the_new_tenant_was_shown_are_kept_and_unshown_ones_replaced(
    cloud: SchedulerHarness, clock: FrozenClock
) -> None:
    assert cloud.jobs.signing is not None
    alice_id = cloud.clients.iam().create_user(UserName="alice")["User"]["UserId"]
    bob_id = cloud.clients.iam().create_user(UserName="bob")["User"]["UserId"]
    for tenant in (OLD_ALICE, OLD_BOB):
        cloud.jobs.signing.rotate(tenant)
    shown = cloud.jobs.signing.rotate(alice_id)["secret"]  # alice made one after the deploy
    cloud.jobs.signing.ensure(bob_id)  # bob's first HTTP job after the deploy made one, unshown
    old_bob = cloud.jobs.signing.signing(OLD_BOB)

    moves = {m.old: m for m in migration(cloud, clock).run()}

    fresh = build_fresh_signing(cloud, clock)
    assert moves[OLD_ALICE].signing_keys == "kept the new tenant's"
    assert fresh.signing(alice_id) == [shown]
    assert moves[OLD_BOB].signing_keys == "replaced the new tenant's unshown"
    assert fresh.signing(bob_id) == old_bob


def build_fresh_signing(cloud: SchedulerHarness, clock: FrozenClock) -> Any:
    """A signing service without the harness service's minute of cached keys."""
    signing = build_job_service(cloud.settings, cloud.clients, clock).signing
    assert signing is not None
    return signing


@pytest.mark.parametrize(
    ("setup", "tenant", "why"),
    [
        (lambda iam, clock: None, OLD_BOB, "no user named bob exists now"),
        (
            lambda iam, clock: (clock.advance(60), iam.create_user(UserName="bob")),
            OLD_BOB,
            "a new principal under an old name",
        ),
        (
            lambda iam, clock: iam.create_user(UserName="bob", Path="/team/"),
            OLD_BOB,
            "another principal",
        ),
        (
            lambda iam, clock: iam.create_role(
                RoleName="AWSReservedSSO_Dev_1", AssumeRolePolicyDocument="{}"
            ),
            f"arn:aws:sts::{ACCOUNT}:assumed-role/AWSReservedSSO_Dev_1",
            "sessions are tenants each",
        ),
        (lambda iam, clock: None, "arn:aws:iam::444455556666:user/carol", "in account 444455556666"),
    ],
    ids=["deleted", "made again after its jobs", "another path", "per-session role", "another account"],
)
def test_a_tenant_that_cannot_be_given_to_its_principal_stays_and_says_why(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver, setup: Any, tenant: str, why: str
) -> None:
    kept = create(cloud, tenant, hook(receiver, clock))
    setup(cloud.clients.iam(), clock)

    [move] = migration(cloud, clock, per_session=("AWSReservedSSO_*",)).run()

    assert move.new is None
    assert why in move.why
    item = cloud.clients.dynamodb().get_item(
        TableName=cloud.settings.jobs_table_name, Key={"pk": {"S": f"JOB#{kept.job_id}"}, "sk": {"S": "JOB"}}
    )["Item"]
    assert item["tenant"]["S"] == tenant


def test_a_role_becomes_its_role_id_and_its_sessions_find_its_jobs(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    role_id = cloud.clients.iam().create_role(RoleName="Deployer", AssumeRolePolicyDocument="{}")["Role"][
        "RoleId"
    ]
    moved = create(cloud, OLD_ROLE, hook(receiver, clock))

    [move] = migration(cloud, clock).run()

    assert move.new == role_id
    session = f"arn:aws:sts::{ACCOUNT}:assumed-role/Deployer/ci"
    assert listed(cloud, "/v1/jobs", f"{role_id}:ci", caller=session) == {moved.job_id}


def test_an_item_that_cannot_be_moved_is_reported_and_the_rest_move(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    cloud.clients.iam().create_user(UserName="alice")
    assert cloud.jobs.signing is not None
    cloud.jobs.signing.rotate(OLD_ALICE)
    broken = create(cloud, OLD_ALICE, hook(receiver, clock, secret_headers={"Authorization": TOKEN}))
    fine = create(cloud, OLD_ALICE, hook(receiver, clock))
    # A sealed value that no longer opens (say, copied from another job): KMS refuses it.
    table, key = cloud.settings.jobs_table_name, {"pk": {"S": f"JOB#{broken.job_id}"}, "sk": {"S": "JOB"}}
    spec = cloud.clients.dynamodb().get_item(TableName=table, Key=key)["Item"]["spec"]["S"]
    other = create(cloud, OLD_BOB, hook(receiver, clock, secret_headers={"Authorization": TOKEN}))
    other_spec = cloud.clients.dynamodb().get_item(
        TableName=table, Key={"pk": {"S": f"JOB#{other.job_id}"}, "sk": {"S": "JOB"}}
    )["Item"]["spec"]["S"]
    copied = json.loads(spec) | {"sealed_headers": json.loads(other_spec)["sealed_headers"]}
    cloud.clients.dynamodb().update_item(
        TableName=table,
        Key=key,
        UpdateExpression="SET spec = :spec",
        ExpressionAttributeValues={":spec": {"S": json.dumps(copied)}},
    )

    moves = {m.old: m for m in migration(cloud, clock).run()}

    move = moves[OLD_ALICE]
    assert set(move.failed) == {broken.job_id}
    assert "InvalidCiphertext" in move.failed[broken.job_id]
    assert move.moved == 1
    assert fine.job_id not in move.failed
    # The old keys stay while one of its jobs is still under the old tenant.
    assert cloud.jobs.signing.describe(OLD_ALICE)["created_at"] is not None
