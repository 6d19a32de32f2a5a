"""Failures through the whole local cloud: a retried attempt, a final error with its DLQ
record, and a manual re-drive over the API."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import boto3
import pytest

from infra.local.cloud import LocalCloud
from scheduler_cli.operator import Operator
from tests.e2e.api_client import ApiClient, arrivals, http_job
from tests.e2e.polling import API_POLL_INTERVAL_SECONDS, now_ms, seconds_until, wait_for
from tests.support.helpers import iso
from tests.support.receiver import WebhookReceiver

pytestmark = pytest.mark.e2e

MARGIN_SECONDS = 15
FAST_RETRY = {"max_attempts": 3, "backoff_seconds": 1, "max_backoff_seconds": 1}
SESSION = boto3.session.Session(aws_access_key_id="e2e", aws_secret_access_key="e2e", region_name="us-east-1")


@pytest.fixture
def own_receiver() -> Iterator[WebhookReceiver]:
    """A receiver of this test's own: its scripted failures must not reach other tests' jobs."""
    with WebhookReceiver() as server:
        yield server


def dead_letters(cloud: LocalCloud, run_id: str) -> list[dict[str, Any]]:
    """The DLQ records of one run (the CLI's peek at the whole DLQ, which the e2e suite
    shares: every message is put back at once)."""
    return [
        letter["body"]
        for letter in Operator.for_stack(SESSION, cloud.options.stack_name, cloud.moto_url).dead_letters(1000)
        if letter["run_id"] == run_id
    ]


def test_a_failing_attempt_is_retried_and_the_run_succeeds(
    api: ApiClient, own_receiver: WebhookReceiver
) -> None:
    own_receiver.respond_with(503)
    fire_at = now_ms() + timedelta(seconds=3)
    job = api.create_job(http_job(own_receiver, "retried", {"at": iso(fire_at)}, retry=FAST_RETRY))
    job_id = job["job_id"]

    run = wait_for(
        lambda: api.run_in_status(job_id, "SUCCEEDED"),
        seconds_until(fire_at) + MARGIN_SECONDS,
        "the retried run to succeed",
        API_POLL_INTERVAL_SECONDS,
    )
    assert run["attempt"] == 2
    assert run["response_code"] == 200
    first, second = run["attempts"]  # every attempt, with how it ended
    # The first attempt's lateness, not the retry's (which started a backoff after it ended).
    retry_late_ms = (datetime.fromisoformat(second["started_at"]) - fire_at) / timedelta(milliseconds=1)
    assert 0 <= run["lateness_ms"] < retry_late_ms
    assert (first["attempt"], first["status"], first["response_code"]) == (1, "FAILED", 503)
    assert "503" in first["error"]
    assert (second["attempt"], second["status"], second["response_code"], second["error"]) == (
        2,
        "SUCCEEDED",
        200,
        None,
    )
    assert first["finished_at"] <= second["started_at"]
    calls = arrivals(own_receiver, job_id)
    assert [request.headers["x-scheduler-attempt"] for request in calls] == ["1", "2"]
    assert {request.headers["idempotency-key"] for request in calls} == {run["run_id"]}
    assert api.job(job_id)["status"] == "COMPLETED"


def test_a_final_error_fails_the_run_with_a_dlq_record_and_a_retry_redrives_it(
    api: ApiClient, own_receiver: WebhookReceiver, local_cloud: LocalCloud
) -> None:
    own_receiver.respond_with(404)
    fire_at = now_ms() + timedelta(seconds=3)
    job = api.create_job(http_job(own_receiver, "not-found", {"at": iso(fire_at)}, retry=FAST_RETRY))
    job_id = job["job_id"]

    failed = wait_for(
        lambda: api.run_in_status(job_id, "FAILED"),
        seconds_until(fire_at) + MARGIN_SECONDS,
        "the run to fail",
        API_POLL_INTERVAL_SECONDS,
    )
    assert failed["attempt"] == 1  # a 404 is final: no retry
    assert failed["response_code"] == 404
    assert "HTTP 404" in failed["error"]
    [record] = wait_for(lambda: dead_letters(local_cloud, failed["run_id"]), MARGIN_SECONDS, "the DLQ record")
    assert record["kind"] == "RUN_FAILED"
    assert record["attempts"] == 1
    assert record["message"]["run_id"] == failed["run_id"]

    reply = api.call("POST", f"/v1/jobs/{job_id}/runs/{failed['run_id']}/retry")
    assert reply.status == 202, reply.body
    assert reply.body["status"] == "RETRYING"
    assert reply.body["trigger"] == "RETRY"
    run = wait_for(
        lambda: api.run_in_status(job_id, "SUCCEEDED"),
        MARGIN_SECONDS,
        "the re-driven run",
        API_POLL_INTERVAL_SECONDS,
    )
    assert run["attempt"] == 2
    assert len(arrivals(own_receiver, job_id)) == 2
    assert [(a["attempt"], a["status"], a["response_code"]) for a in run["attempts"]] == [
        (1, "FAILED", 404),  # the failed attempt the re-drive followed
        (2, "SUCCEEDED", 200),
    ]
    assert "HTTP 404" in run["attempts"][0]["error"]

    again = api.call("POST", f"/v1/jobs/{job_id}/runs/{failed['run_id']}/retry")
    assert again.status == 409
    assert "only a FAILED run" in again.body["error"]["message"]
