"""Misfire policies through the real handlers on moto (issue 5): a poller outage and a pause
of a `*/5 * * * *` job, under FIRE_ONCE, SKIP and CATCH_UP; the fields on the API."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from scheduler_core.dispatch import PollReport
from tests.support.harness import FrozenClock, SchedulerHarness
from tests.support.receiver import WebhookReceiver

# The clock starts at 10:00:30 (conftest): a */5 job's first firing is 10:05.


def t(hour: int, minute: int, second: int = 0) -> datetime:
    return datetime(2026, 11, 21, hour, minute, second, tzinfo=UTC)


def iso(when: datetime) -> str:
    return when.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def ms(when: datetime) -> int:
    return int(when.timestamp() * 1000)


def marks(first: datetime, last: datetime) -> list[datetime]:
    return [first + timedelta(minutes=5 * i) for i in range(int((last - first) / timedelta(minutes=5)) + 1)]


def every_five(receiver: WebhookReceiver, **fields: Any) -> dict[str, Any]:
    return {
        "name": "sync",
        "schedule": {"cron": "*/5 * * * *"},
        "target": {"type": "HTTP", "url": receiver.url},
        # Catch-up runs are due together; let them run side by side (the default concurrency,
        # one running run, would skip the ones that overlap).
        "concurrency": {"overlap": "ALLOW"},
        **fields,
    }


def scheduled_for(receiver: WebhookReceiver, start: int = 0) -> list[str]:
    return [request.headers["x-scheduler-scheduled-for"] for request in receiver.requests[start:]]


def job_of(cloud: SchedulerHarness, job_id: str) -> dict[str, Any]:
    reply = cloud.call("GET", f"/v1/jobs/{job_id}")
    assert reply.status == 200, reply.body
    job: dict[str, Any] = reply.body
    return job


def runs_of(cloud: SchedulerHarness, job_id: str) -> list[dict[str, Any]]:
    reply = cloud.call("GET", f"/v1/jobs/{job_id}/runs?limit=100")
    assert reply.status == 200, reply.body
    runs: list[dict[str, Any]] = reply.body["items"]
    return runs


def claimed(reports: list[PollReport]) -> list[datetime]:
    return [run.scheduled_for for report in reports for run in report.claimed]


def outage(cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver, **fields: Any) -> str:
    """A */5 job created at 10:00:30; then no poll for an hour: 10:05 ... 11:00 are missed.
    The poller comes back at 11:03:20."""
    cloud.poll()  # the deployed poller has run: the shards' watermarks exist
    job = cloud.create(every_five(receiver, **fields))
    assert job["next_fire_at"] == iso(t(10, 5))
    clock.move_to(t(11, 3, 20))
    job_id: str = job["job_id"]
    return job_id


# --- a poller outage --------------------------------------------------------------------------


def test_fire_once_runs_one_late_run_for_an_outage(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    job_id = outage(cloud, clock, receiver)
    assert claimed(cloud.poll()) == [t(11, 0), t(11, 5)]  # 11:05 is within the lookahead
    cloud.deliver()
    assert scheduled_for(receiver) == [iso(t(11, 0))]  # one run, not twelve
    clock.move_to(t(11, 5))
    cloud.deliver()
    assert scheduled_for(receiver) == [iso(t(11, 0)), iso(t(11, 5))]
    assert job_of(cloud, job_id)["next_fire_at"] == iso(t(11, 10))


def test_skip_runs_nothing_for_an_outage_and_carries_on_on_time(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    job_id = outage(cloud, clock, receiver, misfire="SKIP")
    assert claimed(cloud.poll()) == [t(11, 5)]
    assert cloud.deliver() == 0
    assert receiver.requests == []
    clock.move_to(t(11, 5))
    cloud.deliver()
    assert scheduled_for(receiver) == [iso(t(11, 5))]
    [run] = runs_of(cloud, job_id)
    assert (run["scheduled_for"], run["status"], run["lateness_ms"]) == (iso(t(11, 5)), "SUCCEEDED", 0)


def test_skip_moves_a_job_with_nothing_due_soon_past_its_missed_firings(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    cloud.poll()
    job = cloud.create(every_five(receiver, schedule={"cron": "0 * * * *"}, misfire="SKIP"))
    clock.move_to(t(13, 30))  # 11:00, 12:00 and 13:00 missed; 14:00 is beyond the lookahead
    reports = cloud.poll()
    assert claimed(reports) == []
    assert sum(report.skipped for report in reports) == 1
    assert job_of(cloud, job["job_id"])["next_fire_at"] == iso(t(14, 0))
    clock.move_to(t(13, 58, 30))
    assert claimed(cloud.poll()) == [t(14, 0)]  # found in its new bucket


def test_skip_still_runs_a_firing_claimed_only_seconds_late(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    """A poll that comes late (here: 30 s after 10:05) is not an outage worth skipping."""
    cloud.poll()
    cloud.create(every_five(receiver, misfire="SKIP"))
    clock.move_to(t(10, 5, 30))
    assert claimed(cloud.poll()) == [t(10, 5)]
    cloud.deliver()
    assert scheduled_for(receiver) == [iso(t(10, 5))]


def test_a_one_off_skipped_through_an_outage_completes_without_a_run(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    cloud.poll()
    job = cloud.create(every_five(receiver, schedule={"at": iso(t(10, 30))}, misfire="SKIP"))
    clock.move_to(t(10, 45))
    assert claimed(cloud.poll()) == []
    assert job_of(cloud, job["job_id"])["status"] == "COMPLETED"
    assert runs_of(cloud, job["job_id"]) == []


def test_catch_up_runs_each_firing_of_its_window_once_oldest_first(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    job_id = outage(cloud, clock, receiver, misfire="CATCH_UP", catch_up_window_seconds=1800)
    # The last 30 minutes (from 10:33:20) held six firings; each is claimed, oldest first,
    # as its own run, and enqueued at once. Older ones are skipped; 11:05 is claimed ahead.
    missed = marks(t(10, 35), t(11, 0))
    assert claimed(cloud.poll()) == [*missed, t(11, 5)]
    assert cloud.deliver() == 6
    assert sorted(scheduled_for(receiver)) == [iso(when) for when in missed]
    assert sorted(r.headers["x-scheduler-run-id"] for r in receiver.requests) == [
        f"{job_id}:{ms(when)}" for when in missed
    ]
    runs = {run["scheduled_for"]: run for run in runs_of(cloud, job_id)}
    for when in missed:
        assert runs[iso(when)]["status"] == "SUCCEEDED"
        assert runs[iso(when)]["lateness_ms"] == ms(t(11, 3, 20)) - ms(when)
    # Nothing is delivered twice: the next poll finds nothing more to catch up.
    assert claimed(cloud.poll()) == []
    clock.move_to(t(11, 5))
    cloud.deliver()
    assert scheduled_for(receiver, 6) == [iso(t(11, 5))]
    assert len(receiver.requests) == 7


# --- pause and resume -------------------------------------------------------------------------


def paused_across_the_half_hour(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver, **fields: Any
) -> str:
    """A */5 job paused at 10:04, with 10:05 claimed before the pause (its run is cancelled
    by the worker at 10:05), resumed at 10:31:20: 10:05 ... 10:30 were missed."""
    job = cloud.create(every_five(receiver, **fields))
    job_id: str = job["job_id"]
    clock.move_to(t(10, 3, 30))
    assert claimed(cloud.poll()) == [t(10, 5)]
    clock.move_to(t(10, 4))
    assert cloud.call("POST", f"/v1/jobs/{job_id}/pause").status == 200
    clock.move_to(t(10, 5))
    assert cloud.deliver() == 1
    clock.move_to(t(10, 31, 20))
    cloud.poll()
    assert receiver.requests == []
    [run] = runs_of(cloud, job_id)
    assert (run["scheduled_for"], run["status"]) == (iso(t(10, 5)), "CANCELLED")
    reply = cloud.call("POST", f"/v1/jobs/{job_id}/resume")
    assert reply.status == 200, reply.body
    assert reply.body["status"] == "SCHEDULED"
    assert reply.body["next_fire_at"] == iso(t(10, 35))
    return job_id


def test_a_resume_under_fire_once_runs_one_run_at_the_resume(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    paused_across_the_half_hour(cloud, clock, receiver)
    assert cloud.deliver() == 1
    assert scheduled_for(receiver) == [iso(t(10, 31, 20))]


def test_a_resume_under_skip_runs_nothing_and_carries_on_on_time(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    job_id = paused_across_the_half_hour(cloud, clock, receiver, misfire="SKIP")
    assert cloud.deliver() == 0
    clock.move_to(t(10, 33, 30))
    assert claimed(cloud.poll()) == [t(10, 35)]
    clock.move_to(t(10, 35))
    cloud.deliver()
    assert scheduled_for(receiver) == [iso(t(10, 35))]
    assert [run["status"] for run in runs_of(cloud, job_id)] == ["SUCCEEDED", "CANCELLED"]


def test_a_resume_under_catch_up_runs_each_firing_of_its_window_with_its_own_id(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    job_id = paused_across_the_half_hour(
        cloud, clock, receiver, misfire="CATCH_UP", catch_up_window_seconds=1800
    )
    missed = marks(t(10, 5), t(10, 30))
    assert cloud.deliver() == 6
    assert sorted(scheduled_for(receiver)) == [iso(when) for when in missed]
    assert sorted(r.headers["x-scheduler-run-id"] for r in receiver.requests) == [
        f"{job_id}:{ms(when)}" for when in missed
    ]
    # 10:05, cancelled by the worker while paused, was brought back and ran.
    runs = {run["scheduled_for"]: run for run in runs_of(cloud, job_id)}
    assert [runs[iso(when)]["status"] for when in missed] == ["SUCCEEDED"] * 6
    assert cloud.deliver() == 0
    clock.move_to(t(10, 35))
    cloud.poll()
    cloud.deliver()
    assert len(receiver.requests) == 7


def test_a_resume_under_catch_up_leaves_what_is_older_than_its_window(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    job_id = paused_across_the_half_hour(
        cloud, clock, receiver, misfire="CATCH_UP", catch_up_window_seconds=600
    )
    assert cloud.deliver() == 2
    assert sorted(scheduled_for(receiver)) == [iso(t(10, 25)), iso(t(10, 30))]
    runs = {run["scheduled_for"]: run["status"] for run in runs_of(cloud, job_id)}
    assert runs == {iso(t(10, 5)): "CANCELLED", iso(t(10, 25)): "SUCCEEDED", iso(t(10, 30)): "SUCCEEDED"}


# --- the fields on the API --------------------------------------------------------------------


def test_a_job_shows_its_misfire_policy_and_window(
    cloud: SchedulerHarness, receiver: WebhookReceiver
) -> None:
    default = cloud.create(every_five(receiver))
    assert (default["misfire"], default["catch_up_window_seconds"]) == ("FIRE_ONCE", None)
    catch_up = cloud.create(every_five(receiver, misfire="CATCH_UP"))
    assert (catch_up["misfire"], catch_up["catch_up_window_seconds"]) == ("CATCH_UP", 3600)
    again = job_of(cloud, catch_up["job_id"])
    assert (again["misfire"], again["catch_up_window_seconds"]) == ("CATCH_UP", 3600)


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        pytest.param({"misfire": "NEVER"}, "misfire", id="unknown policy"),
        pytest.param({"misfire": "CATCH_UP", "catch_up_window_seconds": 30}, "catch_up_window_seconds"),
        pytest.param(
            {"misfire": "CATCH_UP", "catch_up_window_seconds": 8 * 86_400}, "catch_up_window_seconds"
        ),
        pytest.param({"misfire": "SKIP", "catch_up_window_seconds": 600}, "catch_up_window_seconds"),
    ],
)
def test_bad_misfire_fields_are_a_400_naming_the_field(
    cloud: SchedulerHarness, receiver: WebhookReceiver, fields: dict[str, Any], field: str
) -> None:
    reply = cloud.call("POST", "/v1/jobs", every_five(receiver, **fields))
    assert reply.status == 400, reply.body
    assert reply.body["error"]["code"] == "VALIDATION_ERROR"
    assert [detail["field"] for detail in reply.body["error"]["details"]] == [field]


def test_a_patch_changes_the_policy_and_its_window(
    cloud: SchedulerHarness, receiver: WebhookReceiver
) -> None:
    job_id = cloud.create(every_five(receiver))["job_id"]

    def patch(body: dict[str, Any], status: int = 200) -> dict[str, Any]:
        reply = cloud.call("PATCH", f"/v1/jobs/{job_id}", body)
        assert reply.status == status, reply.body
        result: dict[str, Any] = reply.body
        return result

    changed = patch({"misfire": "CATCH_UP"})
    assert (changed["misfire"], changed["catch_up_window_seconds"]) == ("CATCH_UP", 3600)
    assert patch({"catch_up_window_seconds": 900})["catch_up_window_seconds"] == 900
    assert patch({"name": "renamed"})["catch_up_window_seconds"] == 900  # kept
    assert patch({"misfire": "CATCH_UP"})["catch_up_window_seconds"] == 900  # the same policy keeps it
    assert patch({"catch_up_window_seconds": None})["catch_up_window_seconds"] == 3600  # the default
    skip = patch({"misfire": "SKIP"})  # leaving CATCH_UP drops the window
    assert (skip["misfire"], skip["catch_up_window_seconds"]) == ("SKIP", None)
    refused = patch({"catch_up_window_seconds": 600}, 400)
    assert [d["field"] for d in refused["error"]["details"]] == ["catch_up_window_seconds"]
    refused = patch({"misfire": "LATER"}, 400)
    assert [d["field"] for d in refused["error"]["details"]] == ["misfire"]
    assert job_of(cloud, job_id)["misfire"] == "SKIP"
