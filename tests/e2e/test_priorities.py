"""Each priority has its own queue (and its own worker concurrency): a run must travel on
the queue of its job's priority."""

from __future__ import annotations

from datetime import timedelta
from functools import partial

import pytest

from tests.e2e.api_client import PRIORITIES, ApiClient, arrivals, http_job
from tests.e2e.polling import API_POLL_INTERVAL_SECONDS, now_ms, seconds_until, wait_for
from tests.e2e.queue_tap import QueueTap
from tests.support.helpers import iso
from tests.support.receiver import WebhookReceiver

pytestmark = pytest.mark.e2e


def test_each_priority_reaches_its_target_through_its_own_queue(
    api: ApiClient, receiver: WebhookReceiver, queue_tap: QueueTap, queue_arns: dict[str, str]
) -> None:
    """Which queue a run travelled on is read where Lambda reads it: the `eventSourceARN`
    of the SQS record the event source mapping handed to the worker (`queue_tap`), compared
    with the ARNs of the stack's `QueuesHigh/Normal/Low` queues (CloudFormation on moto).

    Counting messages on the queues instead (ApproximateNumberOfMessages[Delayed]) would
    not be robust: the mappings long-poll every queue all the time, so a message is visible
    only for an instant, and the suite's cron job adds and removes a delayed message on
    its queue every minute."""
    fire_at = now_ms() + timedelta(seconds=4)
    jobs = {
        priority: api.create_job(
            http_job(receiver, f"priority-{priority}", {"at": iso(fire_at)}, priority=priority)
        )
        for priority in PRIORITIES
    }

    for priority, job in jobs.items():
        job_id = job["job_id"]
        assert job["priority"] == priority
        [request] = wait_for(
            partial(arrivals, receiver, job_id), seconds_until(fire_at) + 10, f"the {priority} delivery"
        )
        run_id = request.headers["x-scheduler-run-id"]
        [record] = queue_tap.records_of(job_id)  # one message, received once
        assert record.run_id == run_id
        assert record.queue_arn == queue_arns[priority], f"the {priority} run came from {record.queue_arn}"
        run = wait_for(
            partial(api.run_in_status, job_id, "SUCCEEDED", run_id),
            10,
            f"the {priority} run to succeed",
            API_POLL_INTERVAL_SECONDS,
        )
        assert run["priority"] == priority
