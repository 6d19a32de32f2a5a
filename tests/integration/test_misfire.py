"""Misfire policies through the real handlers on moto (issue 5): the handler-level proof.

Kept here is what the fakes cannot show: the misfire fields as the API reads and writes
them (JSON, 400s naming the field, PATCH's absent vs null), and caught-up firings end to end,
from a poller outage and from a resume over HTTP, through DynamoDB's conditional writes (the
claim's and the resume's transaction appending to the job's catch-up queue, the start that
takes the queue's front), SQS and a real webhook receiver.

The services' rules (FIRE_ONCE, SKIP, CATCH_UP and its window after an outage or a pause,
the catch-up queue and its corners) are specified on in-memory fakes in
`tests/unit/test_misfire_rules_on_fakes.py`; the pure math in `tests/unit/test_misfire.py`."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from scheduler_core.services.polls import PollReport
from tests.support.harness import FrozenClock, SchedulerHarness
from tests.support.helpers import iso
from tests.support.receiver import WebhookReceiver

# The clock starts at 10:00:30 (conftest): a */5 job's first firing is 10:05.


def t(hour: int, minute: int, second: int = 0) -> datetime:
    return datetime(2026, 11, 21, hour, minute, second, tzinfo=UTC)


def ms(when: datetime) -> int:
    return int(when.timestamp() * 1000)


def marks(first: datetime, last: datetime) -> list[datetime]:
    return [first + timedelta(minutes=5 * i) for i in range(int((last - first) / timedelta(minutes=5)) + 1)]


def every_five(receiver: WebhookReceiver, **fields: Any) -> dict[str, Any]:
    return {
        "name": "sync",
        "schedule": {"cron": "*/5 * * * *"},
        "target": {"type": "HTTP", "url": receiver.url},
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


def paused_across_the_half_hour(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver, **fields: Any
) -> str:
    """A */5 job paused at 10:04, with 10:05 claimed before the pause (its run is set aside
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
    [run] = cloud.runs(job_id, "?limit=100")
    assert (run["scheduled_for"], run["status"]) == (iso(t(10, 5)), "PENDING")
    reply = cloud.call("POST", f"/v1/jobs/{job_id}/resume")
    assert reply.status == 200, reply.body
    assert reply.body["status"] == "SCHEDULED"
    assert reply.body["next_fire_at"] == iso(t(10, 35))
    return job_id


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


# --- end to end: caught-up firings queue for the job's running slot --------------------------


def one_at_a_time(overlap: str) -> dict[str, Any]:
    return {"concurrency": {"max_running": 1, "overlap": overlap}}


def catch_up_queue(cloud: SchedulerHarness, job_id: str) -> list[int]:
    job = cloud.api_store.get_job(job_id)
    assert job is not None
    return job.catch_up_queue_ms


def started_one_after_another(runs: list[dict[str, Any]]) -> bool:
    ordered = sorted(runs, key=lambda run: run["scheduled_for"])
    return all(
        later["started_at"] >= earlier["finished_at"] for earlier, later in itertools.pairwise(ordered)
    )


@pytest.mark.parametrize("overlap", ["SKIP", "BUFFER_ONE"])
def test_caught_up_firings_wait_their_turn_and_run_one_at_a_time_oldest_first(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver, overlap: str
) -> None:
    """With one running slot, the six caught-up firings are not SKIPPED as they come due
    together: they queue, and each run's end sends the next one."""
    job_id = outage(
        cloud, clock, receiver, misfire="CATCH_UP", catch_up_window_seconds=1800, **one_at_a_time(overlap)
    )
    missed = marks(t(10, 35), t(11, 0))
    assert claimed(cloud.poll()) == [*missed, t(11, 5)]
    assert catch_up_queue(cloud, job_id) == [ms(when) for when in missed]  # not 11:05: on time

    cloud.deliver()
    assert scheduled_for(receiver) == [iso(when) for when in missed]  # in order, each once
    runs = [run for run in cloud.runs(job_id, "?limit=100") if run["scheduled_for"] != iso(t(11, 5))]
    assert [run["status"] for run in runs] == ["SUCCEEDED"] * 6
    assert started_one_after_another(runs)
    assert catch_up_queue(cloud, job_id) == []
    # The firing on time after it obeys the overlap policy as ever (the slot is free: it runs).
    clock.move_to(t(11, 5))
    cloud.deliver()
    assert scheduled_for(receiver, 6) == [iso(t(11, 5))]


def test_a_catch_up_resume_queues_the_missed_firings_for_the_slot(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    job_id = paused_across_the_half_hour(
        cloud, clock, receiver, misfire="CATCH_UP", catch_up_window_seconds=1800, **one_at_a_time("SKIP")
    )
    missed = marks(t(10, 5), t(10, 30))
    assert catch_up_queue(cloud, job_id) == [ms(when) for when in missed]
    cloud.deliver()
    assert scheduled_for(receiver) == [iso(when) for when in missed]
    runs = cloud.runs(job_id, "?limit=100")
    assert [run["status"] for run in runs] == ["SUCCEEDED"] * 6
    assert started_one_after_another(runs)
