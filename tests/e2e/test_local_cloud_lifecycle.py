"""`LocalCloud.stop()` (what Ctrl-C calls) leaves no process behind. The suite's cloud is
checked the same way when the e2e tests end (`local_cloud` fixture); these tests stop
clouds of their own."""

from __future__ import annotations

import io
from datetime import timedelta
from functools import partial

import pytest

from infra.local.cloud import LocalCloud, LocalCloudOptions
from tests.e2e.api_client import ApiClient, arrivals, http_job
from tests.e2e.polling import API_POLL_INTERVAL_SECONDS, now_ms, seconds_until, wait_for
from tests.e2e.processes import (
    assert_no_local_cloud_processes_left,
    instances_starting,
    local_cloud_processes,
    proc_available,
)
from tests.support.helpers import iso
from tests.support.receiver import WebhookReceiver

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not proc_available(), reason="reads the process tree from Linux's /proc"),
]


def start_cloud() -> LocalCloud:
    return LocalCloud(LocalCloudOptions(api_port=0, moto_port=0, out=io.StringIO())).start()


def test_stopping_a_local_cloud_ends_moto_and_every_function_instance(receiver: WebhookReceiver) -> None:
    cloud = start_cloud()
    try:
        # Some work first, so each function has run (the worker only starts on a message).
        api = ApiClient(cloud.api_url)
        fire_at = now_ms() + timedelta(seconds=2)
        job_id = api.create_job(http_job(receiver, "lifecycle", {"at": iso(fire_at)}))["job_id"]
        wait_for(partial(arrivals, receiver, job_id), seconds_until(fire_at) + 10, "the delivery")
        wait_for(
            partial(api.run_in_status, job_id, "SUCCEEDED"),
            10,
            "the run to succeed",
            API_POLL_INTERVAL_SECONDS,
        )
        commands = [p.command for p in local_cloud_processes(cloud.moto_url)]
        assert sum("infra.local.moto_process" in c for c in commands) == 1, commands
        assert sum("infra.local.runtime" in c for c in commands) >= len(cloud.hosts), commands
    finally:
        cloud.stop()

    assert_no_local_cloud_processes_left(cloud.moto_url)


def test_stopping_a_local_cloud_while_function_instances_start_ends_them_too() -> None:
    # At start the EventBridge rules fire at once: one poller invocation per shard, more
    # than the one warm poller instance, so more instances are starting right after start().
    cloud = start_cloud()
    try:
        starting = wait_for(lambda: instances_starting(cloud) > 0, 10, "an instance to be starting")
    except AssertionError:
        starting = False
    finally:
        cloud.stop()
    if not starting:
        pytest.skip("every function instance had started before stop(): nothing to check")

    assert_no_local_cloud_processes_left(cloud.moto_url)
