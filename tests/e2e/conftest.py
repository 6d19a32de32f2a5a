"""End-to-end fixtures: the local cloud started in this process on free ports (the
repository's `cdk.out`, synthesized only when the sources changed), a webhook receiver on
loopback, and a cron job created first so its minute marks pass while the rest runs.

They are package-scoped: they live while the e2e tests run and are gone before another
suite of the same pytest run starts (the integration suite freezes this process's clock,
which the local cloud's wall-clock schedules must never see).

The local cloud's console goes to a buffer; a failing e2e test shows what it printed
while the test ran (runs, function errors) as a "local cloud" report section."""

from __future__ import annotations

import io
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from infra.local.cloud import LocalCloud, LocalCloudOptions
from infra.local.deployment import REGION
from tests.e2e.api_client import PRIORITIES, ApiClient, http_job
from tests.e2e.processes import (
    assert_no_local_cloud_processes_left,
)
from tests.e2e.queue_tap import QueueTap
from tests.support.receiver import WebhookReceiver

HERE = Path(__file__).parent
EVERY_MINUTE_JOB = "every_minute_job"

_CLOUD_OUTPUT = pytest.StashKey[io.StringIO]()
_OUTPUT_AT_START = pytest.StashKey[int]()


# --- the local cloud -------------------------------------------------------------------


@pytest.fixture(scope="package")
def cloud_output(request: pytest.FixtureRequest) -> io.StringIO:
    """Everything the local cloud prints."""
    stream = io.StringIO()
    request.config.stash[_CLOUD_OUTPUT] = stream
    return stream


@pytest.fixture(scope="package")
def queue_tap() -> QueueTap:
    return QueueTap()


@pytest.fixture(scope="package")
def local_cloud(cloud_output: io.StringIO, queue_tap: QueueTap) -> Iterator[LocalCloud]:
    """The local cloud of the e2e suite, its functions observed by `queue_tap`; once stopped,
    none of its processes may be left running."""
    cloud = LocalCloud(LocalCloudOptions(api_port=0, moto_port=0, out=cloud_output)).start()
    try:
        queue_tap.attach(cloud)
        yield cloud
    finally:
        cloud.stop()
    assert_no_local_cloud_processes_left()


@pytest.fixture(scope="package")
def api(local_cloud: LocalCloud) -> ApiClient:
    return ApiClient(local_cloud.api_url)


@pytest.fixture(scope="package")
def queue_arns(local_cloud: LocalCloud) -> dict[str, str]:
    """Priority → the ARN of its queue, from the deployed stack: the template's
    `Queues{High,Normal,Low}` queues."""
    session = boto3.session.Session(aws_access_key_id="e2e", aws_secret_access_key="e2e", region_name=REGION)
    cloudformation = session.client("cloudformation", endpoint_url=local_cloud.moto_url)
    sqs = session.client("sqs", endpoint_url=local_cloud.moto_url)
    queue_urls = {
        summary["LogicalResourceId"]: summary["PhysicalResourceId"]
        for page in cloudformation.get_paginator("list_stack_resources").paginate(
            StackName=local_cloud.options.stack_name
        )
        for summary in page["StackResourceSummaries"]
        if summary["ResourceType"] == "AWS::SQS::Queue"
    }
    arns = {}
    for priority in PRIORITIES:
        [url] = [u for logical, u in queue_urls.items() if logical.startswith(f"Queues{priority.title()}")]
        arns[priority] = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
    return arns


# --- the webhook receiver ----------------------------------------------------------------


@pytest.fixture(scope="package")
def receiver() -> Iterator[WebhookReceiver]:
    """One receiver for the suite; tests tell their deliveries apart by job id."""
    with WebhookReceiver() as server:
        yield server
        delivered: dict[tuple[str, str], int] = {}
        for request in server.requests:
            key = (
                request.headers.get("x-scheduler-run-id", ""),
                request.headers.get("x-scheduler-attempt", ""),
            )
            delivered[key] = delivered.get(key, 0) + 1
        twice = {key: count for key, count in delivered.items() if count > 1}
        assert not twice, f"run attempts delivered more than once: {twice}"


# --- the cron job: created first, checked last ----------------------------------------------


@pytest.fixture(scope="package")
def every_minute_job(api: ApiClient, receiver: WebhookReceiver) -> Iterator[dict[str, Any]]:
    """A `* * * * *` job to the receiver; its two first minute marks take up to two
    minutes, so it is created before every other e2e test and checked after them."""
    job = api.create_job(http_job(receiver, "every-minute", {"cron": "* * * * *"}))
    yield job
    api.call("DELETE", f"/v1/jobs/{job['job_id']}")  # its test cancels it; this is for a failed test


@pytest.fixture(scope="package", autouse=True)
def _every_minute_job_starts_first(request: pytest.FixtureRequest) -> None:
    if any(EVERY_MINUTE_JOB in getattr(item, "fixturenames", ()) for item in request.session.items):
        request.getfixturevalue(EVERY_MINUTE_JOB)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The e2e tests that use the cron job run after the other e2e tests."""
    slots = [i for i, item in enumerate(items) if HERE in item.path.parents]
    ours = [items[i] for i in slots]
    later = [item for item in ours if EVERY_MINUTE_JOB in getattr(item, "fixturenames", ())]
    ordered = [item for item in ours if item not in later] + later
    for slot, item in zip(slots, ordered, strict=True):
        items[slot] = item


# --- a failing test shows what the local cloud printed --------------------------------------


def pytest_runtest_setup(item: pytest.Item) -> None:
    stream = item.config.stash.get(_CLOUD_OUTPUT, None)
    item.stash[_OUTPUT_AT_START] = len(stream.getvalue()) if stream is not None else 0


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    stream = item.config.stash.get(_CLOUD_OUTPUT, None)
    if report.failed and stream is not None:
        printed = stream.getvalue()[item.stash.get(_OUTPUT_AT_START, 0) :]
        report.sections.append(("local cloud", printed or "(nothing printed)"))
    return report
