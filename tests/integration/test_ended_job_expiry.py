"""A job that has ended (COMPLETED, CANCELLED) is kept for the run retention after its last
change, then expires with the history its item keeps: every write that ends it sets its
item's `expires_at`, the table's TTL attribute (docs/concepts/guarantees.md, "Run
history"). Without it a million one-offs a day would each keep an item forever. Here, on
moto, each way a job ends: its last run's end (kept with the job, or on an item of its own),
a cancel, a skip of its last firing, and a change that leaves it nothing to fire; a job
that has not ended has no expiry. moto keeps expired items (it runs no TTL sweeper), so what
is shown is the attribute each write leaves."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from scheduler_core.domain.policies import RetryPolicy
from scheduler_core.domain.retry import longest_round
from tests.support.harness import FrozenClock, SchedulerHarness
from tests.support.helpers import iso
from tests.support.receiver import WebhookReceiver


def status_of(cloud: SchedulerHarness, job_id: str) -> str:
    reply = cloud.call("GET", f"/v1/jobs/{job_id}")
    assert reply.status == 200, reply.body
    status: str = reply.body["status"]
    return status


def one_off(receiver: WebhookReceiver, at: datetime, **fields: Any) -> dict[str, Any]:
    return {
        "name": "once",
        "schedule": {"at": iso(at)},
        "target": {"type": "HTTP", "url": receiver.url},
        **fields,
    }


def failed_one_off(cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver) -> tuple[str, str]:
    """A one-off whose only attempt failed: COMPLETED, its run FAILED (job id, run id)."""
    receiver.respond_with(500)
    fire_at = clock.now() + timedelta(seconds=30)
    job_id = cloud.create(one_off(receiver, fire_at, retry={"max_attempts": 1}))["job_id"]
    clock.move_to(fire_at)
    assert cloud.deliver() == 1
    [run] = cloud.runs(job_id)
    assert (run["status"], status_of(cloud, job_id)) == ("FAILED", "COMPLETED")
    return job_id, run["run_id"]


@pytest.mark.parametrize(
    "due_in",
    [
        # Due within the lookahead: claimed at its create, its run kept on the job's item, so
        # the run's end and the job's completion are one update of that item.
        pytest.param(timedelta(seconds=30), id="claimed at its create"),
        pytest.param(timedelta(minutes=10), id="claimed by a poll"),
    ],
)
def test_a_one_off_completed_by_its_run_expires_a_retention_after_the_run_ended(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver, due_in: timedelta
) -> None:
    fire_at = clock.now() + due_in
    job_id = cloud.create(one_off(receiver, fire_at))["job_id"]
    clock.move_to(max(clock.now(), fire_at - timedelta(seconds=90)))
    cloud.poll()
    assert cloud.job_expiry(job_id) is None  # claimed, not ended
    clock.move_to(fire_at)
    assert cloud.deliver() == 1

    assert status_of(cloud, job_id) == "COMPLETED"
    assert cloud.job_expiry(job_id) == cloud.kept_until(fire_at)


def test_a_one_off_whose_run_failed_for_good_expires_with_its_history(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    job_id, _ = failed_one_off(cloud, clock, receiver)
    assert cloud.job_expiry(job_id) == cloud.kept_until(clock.now())


def test_a_cancelled_job_expires_a_retention_after_its_cancel(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    job_id = cloud.create(
        {"name": "hourly", "schedule": {"rate": "1 hour"}, "target": {"type": "HTTP", "url": receiver.url}}
    )["job_id"]
    clock.advance(600)
    cancelled_at = clock.now()
    assert cloud.call("DELETE", f"/v1/jobs/{job_id}").status == 200

    assert status_of(cloud, job_id) == "CANCELLED"
    assert cloud.job_expiry(job_id) == cloud.kept_until(cancelled_at)


def test_a_job_that_has_not_ended_is_kept_however_it_changes(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    job_id = cloud.create(
        {"name": "hourly", "schedule": {"rate": "1 hour"}, "target": {"type": "HTTP", "url": receiver.url}}
    )["job_id"]
    assert cloud.call("POST", f"/v1/jobs/{job_id}/pause").status == 200
    assert cloud.job_expiry(job_id) is None
    assert cloud.call("POST", f"/v1/jobs/{job_id}/resume").status == 200
    assert cloud.call("PATCH", f"/v1/jobs/{job_id}", {"name": "renamed"}).status == 200
    assert cloud.job_expiry(job_id) is None


def test_a_window_whose_last_firing_was_missed_expires_from_the_poll_that_ended_it(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    """A cron with an `end_at` whose firings were all missed while no poll ran, `SKIP`: the
    poll that finds them completes the job with a versioned write of the whole job, which
    carries the expiry as the targeted writes do."""
    cloud.poll()  # the deployed poller has run: the shards' watermarks exist
    end_at = clock.now() + timedelta(minutes=20)
    job_id = cloud.create(
        {
            "name": "window",
            "schedule": {"cron": "*/5 * * * *", "end_at": iso(end_at)},
            "target": {"type": "HTTP", "url": receiver.url},
            "misfire": "SKIP",
        }
    )["job_id"]
    clock.move_to(end_at + timedelta(minutes=40))
    polled_at = clock.now()
    cloud.poll()

    assert (status_of(cloud, job_id), receiver.requests) == ("COMPLETED", [])
    assert cloud.job_expiry(job_id) == cloud.kept_until(polled_at)


def test_a_re_driven_run_keeps_its_ended_job_for_the_retention_after_its_longest_round(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    """A day before the job would expire, its failed run is re-driven (`POST …/retry`, as `make
    redrive` does): the job is kept until the retention after the most its new round can
    take, so the run cannot lose its job (and the history on its item) while it runs."""
    job_id, run_id = failed_one_off(cloud, clock, receiver)
    clock.advance(29 * 86_400)
    retried_at = clock.now()
    assert cloud.call("POST", f"/v1/jobs/{job_id}/runs/{run_id}/retry").status == 202

    round_ = longest_round(RetryPolicy(max_attempts=1))
    assert cloud.job_expiry(job_id) == cloud.kept_until(retried_at + round_)
    assert cloud.deliver() == 1  # answered 200 now
    assert cloud.runs(job_id)[0]["status"] == "SUCCEEDED"
    assert cloud.job_expiry(job_id) == cloud.kept_until(retried_at + round_)  # its end moves nothing back


def completed_window(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver, **fields: Any
) -> str:
    """A */5 window of three firings, each claimed by a poll and run: COMPLETED."""
    end_at = clock.now() + timedelta(minutes=12)
    job_id: str = cloud.create(
        {
            "name": "window",
            "schedule": {"cron": "*/5 * * * *", "end_at": iso(end_at)},
            "target": {"type": "HTTP", "url": receiver.url},
            **fields,
        }
    )["job_id"]
    for _ in range(3):
        clock.advance(300)
        cloud.poll()
        cloud.deliver()
    assert status_of(cloud, job_id) == "COMPLETED"
    return job_id


def backfill(cloud: SchedulerHarness, job_id: str, start: datetime) -> int:
    """Backfill the hour from `start`: the runs it made (the hour's twelve firings)."""
    reply = cloud.call(
        "POST",
        f"/v1/jobs/{job_id}/backfill",
        {"start": iso(start), "end": iso(start + timedelta(hours=1))},
    )
    assert reply.status == 202, reply.body
    made: int = reply.body["runs"]
    assert made == 12
    return made


def test_a_backfill_of_a_completed_window_keeps_it_for_its_queued_runs_and_those_before_them(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    """A window that completed is backfilled near its expiry: it is kept for the retention
    after the most its queued runs can take, one after another; a second backfill, its runs
    queued behind the first's, keeps it for all of them (its write of the job leaves the
    first keep as it is)."""
    created = clock.now()
    job_id = completed_window(cloud, clock, receiver)
    round_ = longest_round(RetryPolicy())
    clock.advance(29 * 86_400)
    first_at = clock.now()
    assert backfill(cloud, job_id, created - timedelta(hours=2)) == 12
    assert cloud.job_expiry(job_id) == cloud.kept_until(first_at + round_ * 12)

    clock.advance(60)
    second_at = clock.now()
    assert backfill(cloud, job_id, created - timedelta(hours=1)) == 12
    assert cloud.job_expiry(job_id) == cloud.kept_until(second_at + round_ * 24)


def test_a_backfill_whose_runs_all_start_at_once_keeps_the_job_for_one_round(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    created = clock.now()
    job_id = completed_window(cloud, clock, receiver, concurrency={"overlap": "ALLOW"})
    clock.advance(29 * 86_400)
    backfilled_at = clock.now()
    assert backfill(cloud, job_id, created - timedelta(hours=1)) == 12
    assert cloud.job_expiry(job_id) == cloud.kept_until(backfilled_at + longest_round(RetryPolicy()))


def test_a_write_of_an_ended_job_that_leaves_it_ended_keeps_its_expiry_as_stored(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    """A versioned write of a job ended before and after (a backfill's catch-up queue) does
    not bring a longer keep back to its last change."""
    body = {"name": "hourly", "schedule": {"rate": "1 hour"}, "target": {"type": "HTTP", "url": receiver.url}}
    job_id = cloud.create(body)["job_id"]
    assert cloud.call("DELETE", f"/v1/jobs/{job_id}").status == 200
    store, now = cloud.api_store, clock.now()
    assert store.keep_ended_job_until(job_id, now + timedelta(days=5))
    cancelled = store.get_job(job_id)
    assert cancelled is not None
    touched = cancelled.model_copy(update={"version": cancelled.version + 1, "updated_at": now})
    assert store.update_job_if_unchanged(cancelled, touched, now)
    assert cloud.job_expiry(job_id) == cloud.kept_until(now + timedelta(days=5))


def test_an_ended_job_is_only_ever_kept_longer(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    """`keep_ended_job_until`'s condition: an ended job, kept until later than it is; never
    a job that has not ended (it would expire with its firings left), nor one that is gone."""
    store, now = cloud.api_store, clock.now()
    body = {"name": "hourly", "schedule": {"rate": "1 hour"}, "target": {"type": "HTTP", "url": receiver.url}}
    active, ended = cloud.create(body)["job_id"], cloud.create(body)["job_id"]
    assert cloud.call("DELETE", f"/v1/jobs/{ended}").status == 200

    assert not store.keep_ended_job_until(active, now + timedelta(days=5))
    assert cloud.job_expiry(active) is None
    assert not store.keep_ended_job_until(ended, now - timedelta(days=1))  # sooner than it is
    assert cloud.job_expiry(ended) == cloud.kept_until(now)
    assert store.keep_ended_job_until(ended, now + timedelta(days=5))
    assert cloud.job_expiry(ended) == cloud.kept_until(now + timedelta(days=5))
    assert not store.keep_ended_job_until("0" * 32, now + timedelta(days=5))  # no such job
