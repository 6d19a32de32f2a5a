"""Fair share between tenants on moto (domain/fairness.py): a poll sends one tenant's flood
and another tenant's few runs due in the same second interleaved, each message in its
tenant's group (SQS fair queues on AWS; moto keeps the group but does not reorder by it)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta

import boto3
import pytest
from moto import mock_aws

from scheduler_core.adapters.aws import AwsClients
from scheduler_core.domain.messages import fifo_id
from scheduler_core.domain.vocabulary import Priority
from tests.support.events import ALICE, ALICE_TENANT, BOB, BOB_TENANT
from tests.support.harness import FrozenClock, SchedulerHarness, create_scheduler_resources
from tests.support.receiver import WebhookReceiver


@pytest.fixture
def one_shard(clock: FrozenClock) -> Iterator[SchedulerHarness]:
    """One shard: one poll sends everything due (several shards' polls run side by side); and
    one claim at a time, so the sends keep the claims' order exactly (side by side, claims
    that finish out of turn would shuffle it within CLAIM_PARALLELISM, more so under load)."""
    with mock_aws():
        clients = AwsClients(boto3.session.Session(region_name="us-east-1"))
        settings = create_scheduler_resources(clients, shard_count=1).model_copy(
            update={"claim_parallelism": 1}
        )
        yield SchedulerHarness(clients, settings, clock)


def test_a_polls_sends_go_round_robin_by_tenant_each_in_its_tenants_message_group(
    one_shard: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    cloud = one_shard
    due = (clock.now() + timedelta(minutes=5)).replace(microsecond=0)  # beyond the lookahead
    body = {"schedule": {"at": due.isoformat()}, "target": {"type": "HTTP", "url": receiver.url}}
    flood = [cloud.create(body | {"name": f"a{i}"}, caller=ALICE)["job_id"] for i in range(200)]
    few = [cloud.create(body | {"name": f"b{i}"}, caller=BOB)["job_id"] for i in range(4)]
    clock.move_to(due - timedelta(seconds=90))
    cloud.poll()

    sqs = cloud.clients.sqs()
    clock.move_to(due)
    received: list[tuple[str, str]] = []
    while messages := sqs.receive_message(
        QueueUrl=cloud.queue_url(Priority.NORMAL), MaxNumberOfMessages=10, AttributeNames=["MessageGroupId"]
    ).get("Messages", []):
        received += [(json.loads(m["Body"])["job_id"], m["Attributes"]["MessageGroupId"]) for m in messages]

    assert sorted(job_id for job_id, _ in received) == sorted(flood + few)
    groups = {job_id: group for job_id, group in received}
    assert {groups[j] for j in flood} == {fifo_id(ALICE_TENANT)}
    assert {groups[j] for j in few} == {fifo_id(BOB_TENANT)}
    # The few go out among the first: one of theirs beside each of the flood's first ones, in
    # each of the first four pairs. Within a pair, the order is the due index's (job ids are
    # random): bob's first comes first about one run in fifty.
    positions = [index for index, (job_id, _) in enumerate(received) if job_id in few]
    assert [position // 2 for position in positions] == [0, 1, 2, 3], positions
