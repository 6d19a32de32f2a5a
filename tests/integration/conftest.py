"""Integration fixtures: moto in-process, time frozen with freezegun (so SQS delays follow
the test's clock), a real HTTP receiver on loopback."""

from __future__ import annotations

from collections.abc import Iterator

import boto3
import pytest
from freezegun import freeze_time
from moto import mock_aws

from scheduler_core.adapters.aws import AwsClients
from scheduler_core.adapters.dynamodb import DynamoJobStore
from scheduler_core.ports import JobStore
from tests.support.fake_store import InMemoryJobStore
from tests.support.harness import (
    JOBS_TABLE,
    JOBS_TABLE_DEFINITION,
    FrozenClock,
    SchedulerHarness,
    create_scheduler_resources,
)
from tests.support.receiver import WebhookReceiver
from tests.support.store_contract import SHARDS

START = "2026-11-21T10:00:30Z"
# Our code reads time only through the injected clock; leaving these modules unpatched keeps
# pydantic building schemas for the real `datetime`.
NOT_FROZEN = ["scheduler_core", "functions", "pydantic", "aws_lambda_powertools"]


@pytest.fixture
def clock() -> Iterator[FrozenClock]:
    with freeze_time(START, ignore=NOT_FROZEN) as frozen:
        yield FrozenClock(frozen)


@pytest.fixture
def cloud(clock: FrozenClock) -> Iterator[SchedulerHarness]:
    with mock_aws():
        clients = AwsClients(boto3.session.Session(region_name="us-east-1"))
        yield SchedulerHarness(clients, create_scheduler_resources(clients), clock)


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    with WebhookReceiver() as server:
        yield server


@pytest.fixture(params=["dynamodb", "memory"])
def store(request: pytest.FixtureRequest) -> Iterator[JobStore]:
    """A jobs table for the ports' contract: the DynamoDB adapter on moto, or the fake."""
    if request.param == "memory":
        yield InMemoryJobStore(SHARDS)
        return
    with mock_aws():
        clients = AwsClients(boto3.session.Session(region_name="us-east-1"))
        clients.dynamodb().create_table(**JOBS_TABLE_DEFINITION)
        yield DynamoJobStore(clients, JOBS_TABLE, SHARDS, retention_days=30)
