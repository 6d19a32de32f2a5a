"""Misfire policies through the real handlers on moto (issue 5): a poller outage and a pause
of a `*/5 * * * *` job, under FIRE_ONCE, SKIP and CATCH_UP; the fields on the API."""

from __future__ import annotations

import itertools
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from scheduler_core.domain.clock import from_ms
from scheduler_core.domain.entities import Job, Run
from scheduler_core.domain.overlap import slots_as_read
from scheduler_core.domain.vocabulary import Priority, RunStatus
from scheduler_core.ports import Delivery
from scheduler_core.services.dispatch import PollReport
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
        # Catch-up runs are due together; let them run side by side here (with a limit they
        # queue for the slots: see the tests at the end).
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
    [run] = cloud.runs(job_id, "?limit=100")
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
    assert cloud.runs(job["job_id"], "?limit=100") == []


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
    runs = {run["scheduled_for"]: run for run in cloud.runs(job_id, "?limit=100")}
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
    assert [run["status"] for run in cloud.runs(job_id, "?limit=100")] == ["SUCCEEDED", "CANCELLED"]


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
    # 10:05, set aside by the worker while paused, was sent again and ran.
    runs = {run["scheduled_for"]: run for run in cloud.runs(job_id, "?limit=100")}
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
    runs = {run["scheduled_for"]: run["status"] for run in cloud.runs(job_id, "?limit=100")}
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


def test_a_retry_due_while_paused_is_set_aside_and_caught_up_at_the_resume(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    """A retry is a run waiting for its time like a first attempt: its time comes while the
    job is paused, the watchdog sets it aside (sends nothing), the resume's CATCH_UP sends it
    again, same run, next attempt."""
    job_id = cloud.create(every_five(receiver, misfire="CATCH_UP"))["job_id"]
    clock.move_to(t(10, 3, 30))
    assert claimed(cloud.poll()) == [t(10, 5)]
    clock.move_to(t(10, 5))
    receiver.respond_with(500)  # the first attempt fails: the run waits for its retry
    assert cloud.deliver_batches() == 1  # attempt 1 only: a retry within 2 s shows at once
    [run] = cloud.runs(job_id, "?limit=100")
    assert (run["status"], run["attempt"]) == ("RETRYING", 2)
    assert cloud.call("POST", f"/v1/jobs/{job_id}/pause").status == 200

    # Past the retry's time and its timer: the watchdog finds the job paused.
    clock.move_to(t(10, 9))
    watched = [report.watched for report in cloud.poll() if report.watched]
    assert watched == [{"paused": 1}]
    [run] = cloud.runs(job_id, "?limit=100")
    assert (run["status"], run["attempt"]) == ("RETRYING", 2)

    clock.move_to(t(10, 9, 30))
    assert cloud.call("POST", f"/v1/jobs/{job_id}/resume").status == 200
    cloud.deliver()
    runs = {run["scheduled_for"]: run for run in cloud.runs(job_id, "?limit=100")}
    assert (runs[iso(t(10, 5))]["status"], runs[iso(t(10, 5))]["attempt"]) == ("SUCCEEDED", 2)
    assert scheduled_for(receiver) == [iso(t(10, 5))] * 2


# --- caught-up firings queue for the job's running slots -------------------------------------


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


def test_a_caught_up_run_that_ended_before_its_turn_does_not_hold_up_the_queue(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    job_id = outage(
        cloud, clock, receiver, misfire="CATCH_UP", catch_up_window_seconds=1800, **one_at_a_time("SKIP")
    )
    missed = marks(t(10, 35), t(11, 0))
    cloud.poll()
    first = cloud.api_store.get_run(job_id, ms(missed[0]))
    assert first is not None
    assert cloud.api_store.cancel_run_if_not_started(first, clock.now())  # as a change of the job cancels

    cloud.deliver()
    assert scheduled_for(receiver) == [iso(when) for when in missed[1:]]
    assert catch_up_queue(cloud, job_id) == []


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


# --- found in review: corners of the catch-up queue ------------------------------------------


def caught_up_every_five(receiver: WebhookReceiver, **fields: Any) -> dict[str, Any]:
    return every_five(receiver, misfire="CATCH_UP", catch_up_window_seconds=1800, **fields)


def test_a_run_buffered_under_an_earlier_policy_does_not_hold_up_the_catch_up_queue(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    """A BUFFER_ONE run that started after a change to ALLOW leaves `buffered_run_ms` behind;
    under SKIP it holds nothing back, and the caught-up firings of an outage all run."""
    cloud.poll()
    job_id = cloud.create(caught_up_every_five(receiver, **one_at_a_time("BUFFER_ONE")))["job_id"]
    store = cloud.api_store
    clock.move_to(t(10, 3, 30))
    cloud.poll()
    clock.move_to(t(10, 5))
    job, first = store.get_job(job_id), store.get_run(job_id, ms(t(10, 5)))
    assert job is not None
    assert first is not None
    owner = "a-slow-worker"
    started = store.start_run_in_slot(
        first,
        slots_as_read(job, first.scheduled_for_ms),
        clock.now(),
        clock.now() + timedelta(minutes=9),
        owner,
    )
    assert started is not None  # a worker calling a slow target holds the slot
    cloud.deliver()  # 10:05's own message: a duplicate
    clock.move_to(t(10, 8, 30))
    cloud.poll()
    clock.move_to(t(10, 10))
    cloud.deliver()  # 10:10 buffered
    patch: dict[str, Any] = {"concurrency": {"overlap": "ALLOW"}}
    assert cloud.call("PATCH", f"/v1/jobs/{job_id}", patch).status == 200
    clock.move_to(t(10, 11, 1))
    cloud.poll()  # 10:10's timer: sent again, it starts under ALLOW
    cloud.deliver()
    assert store.finish_run_if_held(started, owner, RunStatus.SUCCEEDED, clock.now())
    patch = {"concurrency": {"overlap": "SKIP", "max_running": 1}}
    assert cloud.call("PATCH", f"/v1/jobs/{job_id}", patch).status == 200
    assert cloud.api_store.get_job(job_id).buffered_run_ms == ms(t(10, 10))  # type: ignore[union-attr]

    clock.move_to(t(11, 3, 20))  # an outage: 10:15 ... 11:00 missed, the last 30 min caught up
    cloud.poll()
    cloud.deliver()
    missed = marks(t(10, 35), t(11, 0))
    assert scheduled_for(receiver)[-6:] == [iso(when) for when in missed]
    assert catch_up_queue(cloud, job_id) == []


def test_a_caught_up_runs_retry_waits_for_the_slot_instead_of_being_skipped(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    """The first caught-up run fails once; its slot goes to the next of the queue, and its
    retry, no longer in the queue, takes the queue's front again: it runs, it is not SKIPPED."""
    cloud.poll()
    retry = {"max_attempts": 3, "backoff_seconds": 1, "max_backoff_seconds": 1}
    job_id = cloud.create(caught_up_every_five(receiver, retry=retry, **one_at_a_time("SKIP")))["job_id"]
    clock.move_to(t(11, 3, 20))
    cloud.poll()
    receiver.respond_with(500)
    real_deliver = cloud.worker_targets.deliver
    calls = 0

    def deliver(job: Job, run: Run) -> Delivery:
        nonlocal calls
        calls += 1
        if calls == 2:  # the next caught-up run holds the slot: the first one's retry comes now
            clock.advance(2)
            cloud.deliver()
        return real_deliver(job, run)

    cloud.worker_targets.deliver = deliver  # type: ignore[method-assign]
    cloud.deliver()
    cloud.worker_targets.deliver = real_deliver  # type: ignore[method-assign]
    cloud.deliver()
    first = cloud.api_store.get_run(job_id, ms(t(10, 35)))
    assert first is not None
    assert (first.status, first.attempt) == (RunStatus.SUCCEEDED, 2)
    runs = [run for run in cloud.runs(job_id, "?limit=100") if run["scheduled_for"] != iso(t(11, 5))]
    assert [run["status"] for run in runs] == ["SUCCEEDED"] * 6


def test_two_slots_given_back_together_start_two_caught_up_runs(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    """max_running 2: A and B hold both slots, C, D, E queue. A ends and wakes C; C's worker
    reads the job, then B ends, and its wake-up (C is still first) sends C again. C starts and,
    reading the job after its start, finds a slot still free: it wakes D, so D does not wait
    for its timer while a slot sits idle."""
    cloud.poll()
    job_id = cloud.create(caught_up_every_five(receiver, concurrency={"max_running": 2}))["job_id"]
    store, lifecycle = cloud.api_store, cloud.worker_lifecycle
    clock.move_to(t(11, 3, 20))
    cloud.poll()
    job = store.get_job(job_id)
    assert job is not None
    queue = list(job.catch_up_queue_ms)
    a_ms, b_ms, _, d_ms = queue[:4]
    owners: dict[int, str] = {}
    for run_ms in (a_ms, b_ms):  # two workers calling the target
        job, run = store.get_job(job_id), store.get_run(job_id, run_ms)
        assert job is not None
        assert run is not None
        owners[run_ms] = f"worker-{run_ms}"
        assert store.start_run_in_slot(
            run, slots_as_read(job, run_ms), clock.now(), clock.now() + timedelta(minutes=9), owners[run_ms]
        )
    sqs = cloud.clients.sqs()
    url = cloud.queue_url(Priority.NORMAL)
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]

    def receive(count: int = 10, visibility: int = 30) -> list[Any]:
        reply = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=count, VisibilityTimeout=visibility)
        return reply.get("Messages", [])

    while messages := receive():  # the other caught-up runs come and wait their turn
        cloud.invoke_worker(messages, url, arn)

    def end(run_ms: int) -> None:
        job_now, run = store.get_job(job_id), store.get_run(job_id, run_ms)
        assert run is not None
        assert store.finish_run_if_held(run, owners[run_ms], RunStatus.SUCCEEDED, clock.now())
        lifecycle.wake_next_in_line(job_now, run)

    end(a_ms)  # wakes C
    real_get_job = cloud.worker_store.get_job
    b_ended = False

    def get_job(job_id_read: str) -> Job | None:
        nonlocal b_ended
        read = real_get_job(job_id_read)
        if not b_ended:
            b_ended = True
            end(b_ms)  # right after C's worker read the job: its wake-up sends C again
        return read

    waiting_while_c_runs: list[str] = []
    real_deliver = cloud.worker_targets.deliver

    def deliver(job_now: Job, run: Run) -> Delivery:
        waiting_while_c_runs.extend(json.loads(m["Body"])["run_id"] for m in receive(visibility=0))
        return real_deliver(job_now, run)

    cloud.worker_store.get_job = get_job  # type: ignore[method-assign, assignment]
    cloud.worker_targets.deliver = deliver  # type: ignore[method-assign, assignment]
    cloud.invoke_worker(receive(count=1), url, arn)  # C's first wake-up message
    cloud.worker_store.get_job = real_get_job  # type: ignore[method-assign]
    cloud.worker_targets.deliver = real_deliver  # type: ignore[method-assign]
    assert f"{job_id}:{d_ms}" in waiting_while_c_runs
    cloud.deliver()
    assert catch_up_queue(cloud, job_id) == []
    assert sorted(scheduled_for(receiver)) == [iso(from_ms(run_ms)) for run_ms in queue[2:]]
