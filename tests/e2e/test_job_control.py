"""Changing a job over HTTP through the local cloud: PATCH, pause, a manual trigger (which
runs even while its job is paused) and resume."""

from __future__ import annotations

import pytest

from tests.e2e.api_client import ApiClient, arrivals, http_job
from tests.e2e.polling import API_POLL_INTERVAL_SECONDS, wait_for
from tests.support.receiver import WebhookReceiver

pytestmark = pytest.mark.e2e

MARGIN_SECONDS = 10


def test_a_paused_job_runs_when_triggered_by_hand_and_resumes_its_schedule(
    api: ApiClient, receiver: WebhookReceiver
) -> None:
    job = api.create_job(http_job(receiver, "control", {"cron": "0 3 * * *"}))  # far away
    job_id = job["job_id"]
    patched = api.call("PATCH", f"/v1/jobs/{job_id}", {"payload": {"patched": True}})
    assert patched.status == 200, patched.body
    assert patched.body["version"] == job["version"] + 1

    paused = api.call("POST", f"/v1/jobs/{job_id}/pause")
    assert paused.status == 200, paused.body
    assert (paused.body["status"], paused.body["next_fire_at"]) == ("PAUSED", None)

    triggered = api.call("POST", f"/v1/jobs/{job_id}/trigger")
    assert triggered.status == 202, triggered.body
    assert triggered.body["trigger"] == "MANUAL"
    run_id = triggered.body["run_id"]
    [request] = wait_for(lambda: arrivals(receiver, job_id), MARGIN_SECONDS, "the manual run")
    assert request.headers["x-scheduler-run-id"] == run_id
    assert request.body == {"patched": True}
    run = wait_for(
        lambda: api.run_in_status(job_id, "SUCCEEDED", run_id),
        MARGIN_SECONDS,
        "the manual run to succeed",
        API_POLL_INTERVAL_SECONDS,
    )
    assert run["trigger"] == "MANUAL"
    assert api.job(job_id)["status"] == "PAUSED"  # the schedule was left alone

    resumed = api.call("POST", f"/v1/jobs/{job_id}/resume")
    assert resumed.status == 200, resumed.body
    assert resumed.body["status"] == "SCHEDULED"
    assert resumed.body["next_fire_at"] == job["next_fire_at"]  # nothing was missed
    assert [r["run_id"] for r in api.runs(job_id)] == [run_id]
    api.cancel(job_id)
