"""A cron job on the wall clock. Its job is created when the suite's local cloud starts
(`every_minute_job`) and this test runs after the other e2e tests, so the minute marks
pass while they run."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

import pytest

from tests.e2e.api_client import ApiClient, arrivals
from tests.e2e.polling import API_POLL_INTERVAL_SECONDS, seconds_until, wait_for
from tests.support.helpers import iso
from tests.support.receiver import WebhookReceiver

pytestmark = pytest.mark.e2e

ONE_MINUTE = timedelta(minutes=1)


def next_minute_mark(after: datetime) -> datetime:
    return after.replace(second=0, microsecond=0) + ONE_MINUTE


def test_an_every_minute_job_fires_once_at_each_of_two_consecutive_minute_marks(
    api: ApiClient, receiver: WebhookReceiver, every_minute_job: dict[str, Any]
) -> None:
    job_id = every_minute_job["job_id"]
    first_mark = next_minute_mark(datetime.fromisoformat(every_minute_job["created_at"]).astimezone(UTC))

    def two_arrivals() -> list[Any] | None:
        got = arrivals(receiver, job_id)
        return got if len(got) >= 2 else None

    first, second = wait_for(
        two_arrivals, seconds_until(first_mark + ONE_MINUTE) + 10, "two firings of the cron job"
    )[:2]
    cancelled = api.cancel(job_id)  # it fires no more
    assert (cancelled["status"], cancelled["next_fire_at"]) == ("CANCELLED", None)

    assert [first.headers["x-scheduler-scheduled-for"], second.headers["x-scheduler-scheduled-for"]] == [
        iso(first_mark),
        iso(first_mark + ONE_MINUTE),
    ]
    for request in (first, second):
        run_id = request.headers["x-scheduler-run-id"]
        assert request.headers["idempotency-key"] == run_id
        assert request.headers["x-scheduler-attempt"] == "1"
        assert request.body == every_minute_job["payload"]
        run = wait_for(
            partial(api.run_in_status, job_id, "SUCCEEDED", run_id),
            10,
            f"run {run_id} to succeed",
            API_POLL_INTERVAL_SECONDS,
        )
        assert run["trigger"] == "SCHEDULE"
        assert run["scheduled_for"] == request.headers["x-scheduler-scheduled-for"]
        # Once each: no other delivery of the same run, now that both are recorded.
        assert [r.headers["x-scheduler-run-id"] for r in arrivals(receiver, job_id)].count(run_id) == 1
