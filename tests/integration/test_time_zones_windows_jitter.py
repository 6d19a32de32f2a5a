"""Time zones, windows and jitter through the real handlers on moto: the runs reach the
receiver at the UTC instants the rules say."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from scheduler_core.domain.schedule import ScheduleSpec, jittered
from scheduler_core.domain.vocabulary import Priority
from tests.support.harness import FrozenClock, SchedulerHarness
from tests.support.helpers import http_job, iso
from tests.support.receiver import WebhookReceiver


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC)


def fire(cloud: SchedulerHarness, clock: FrozenClock, when: datetime) -> None:
    """A poll shortly before `when` (as EventBridge would), then the queues at `when`."""
    clock.move_to(when - timedelta(seconds=90))
    cloud.poll()
    clock.move_to(when)
    cloud.deliver()


def arrivals(receiver: WebhookReceiver, job_id: str) -> list[tuple[str, datetime]]:
    """(scheduled for, received at) of each delivery of one job."""
    return [
        (request.headers["x-scheduler-scheduled-for"], request.received_at)
        for request in receiver.requests
        if request.headers["x-scheduler-job-id"] == job_id
    ]


def runs(cloud: SchedulerHarness, job_id: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = cloud.call("GET", f"/v1/jobs/{job_id}/runs?limit=100").body["items"]
    return items


def queued(cloud: SchedulerHarness, priority: Priority = Priority.NORMAL) -> int:
    """Messages on a queue, visible or still delayed."""
    attributes = cloud.clients.sqs().get_queue_attributes(
        QueueUrl=cloud.queue_url(priority),
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesDelayed"],
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"]) + int(
        attributes["ApproximateNumberOfMessagesDelayed"]
    )


# --- a Berlin cron across the spring-forward night (2027-03-28, 02:00 CET → 03:00 CEST) -------------


def test_berlin_crons_across_the_spring_forward_night_fire_at_the_right_instants(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    clock.move_to(utc(2027, 3, 27, 23, 50))  # 00:50 CET
    daily = cloud.create(http_job(receiver, name="tz", cron="30 2 * * *", timezone="Europe/Berlin"))
    hourly = cloud.create(http_job(receiver, name="tz", cron="0 * * * *", timezone="Europe/Berlin"))
    # 02:30 does not exist that night: it fires at 03:00 CEST, the first instant after it.
    assert daily["next_fire_at"] == "2027-03-28T01:00:00.000Z"
    assert hourly["next_fire_at"] == "2027-03-28T00:00:00.000Z"
    assert daily["schedule"]["timezone"] == "Europe/Berlin"

    for when in (utc(2027, 3, 28, 0), utc(2027, 3, 28, 1), utc(2027, 3, 28, 2)):
        fire(cloud, clock, when)

    # Hourly in real time: 01:00 CET, 03:00 CEST, 04:00 CEST.
    assert arrivals(receiver, hourly["job_id"]) == [
        ("2027-03-28T00:00:00.000Z", utc(2027, 3, 28, 0)),
        ("2027-03-28T01:00:00.000Z", utc(2027, 3, 28, 1)),
        ("2027-03-28T02:00:00.000Z", utc(2027, 3, 28, 2)),
    ]
    assert arrivals(receiver, daily["job_id"]) == [("2027-03-28T01:00:00.000Z", utc(2027, 3, 28, 1))]
    # The next night is summer time: 02:30 CEST.
    assert cloud.call("GET", f"/v1/jobs/{daily['job_id']}").body["next_fire_at"] == "2027-03-29T00:30:00.000Z"
    assert all(
        run["lateness_ms"] == 0 for run in runs(cloud, hourly["job_id"]) + runs(cloud, daily["job_id"])
    )


def test_a_berlin_daily_time_repeated_by_fall_back_fires_once(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    clock.move_to(utc(2026, 10, 24, 23, 0))  # 01:00 CEST; clocks go back at 03:00 CEST
    job = cloud.create(http_job(receiver, name="tz", cron="30 2 * * *", timezone="Europe/Berlin"))
    assert job["next_fire_at"] == "2026-10-25T00:30:00.000Z"  # 02:30 CEST, the first pass

    fire(cloud, clock, utc(2026, 10, 25, 0, 30))
    fire(cloud, clock, utc(2026, 10, 25, 1, 30))  # 02:30 CET, the second pass: nothing

    assert [scheduled for scheduled, _ in arrivals(receiver, job["job_id"])] == ["2026-10-25T00:30:00.000Z"]
    assert cloud.call("GET", f"/v1/jobs/{job['job_id']}").body["next_fire_at"] == "2026-10-26T01:30:00.000Z"


# --- end_at ----------------------------------------------------------------------------------


def test_a_cron_job_completes_after_its_last_run_before_end_at(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    start = clock.now()  # 10:00:30
    job = cloud.create(
        http_job(receiver, name="tz", cron="*/5 * * * *", end_at=iso(utc(2026, 11, 21, 10, 12)))
    )
    assert job["schedule"]["end_at"] == "2026-11-21T10:12:00.000Z"

    fire(cloud, clock, utc(2026, 11, 21, 10, 5))
    clock.move_to(utc(2026, 11, 21, 10, 8, 40))
    cloud.poll()  # claims 10:10, the last firing: nothing is left to fire
    after_claim = cloud.call("GET", f"/v1/jobs/{job['job_id']}").body
    assert after_claim["status"] == "SCHEDULED"
    assert after_claim["next_fire_at"] is None

    clock.move_to(utc(2026, 11, 21, 10, 10))
    cloud.deliver()
    done = cloud.call("GET", f"/v1/jobs/{job['job_id']}").body
    assert done["status"] == "COMPLETED"

    for minutes in range(15, 60, 5):
        fire(cloud, clock, start.replace(second=0) + timedelta(minutes=minutes))
    assert [scheduled for scheduled, _ in arrivals(receiver, job["job_id"])] == [
        "2026-11-21T10:05:00.000Z",
        "2026-11-21T10:10:00.000Z",
    ]
    assert [run["status"] for run in runs(cloud, job["job_id"])] == ["SUCCEEDED", "SUCCEEDED"]


def test_a_cron_job_whose_last_firing_is_claimed_at_create_completes_after_that_run(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    job = cloud.create(
        http_job(receiver, name="tz", cron="* * * * *", end_at=iso(utc(2026, 11, 21, 10, 1, 45)))
    )
    assert job["next_fire_at"] is None  # 10:01 was claimed at once, and it is the last
    assert job["status"] == "SCHEDULED"

    clock.move_to(utc(2026, 11, 21, 10, 1))
    cloud.deliver()

    assert cloud.call("GET", f"/v1/jobs/{job['job_id']}").body["status"] == "COMPLETED"
    assert len(receiver.requests) == 1


def test_a_cron_job_whose_last_two_firings_are_claimed_together_completes_after_the_second(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    job = cloud.create(
        http_job(receiver, name="tz", cron="* * * * *", end_at=iso(utc(2026, 11, 21, 10, 2, 30)))
    )
    assert job["next_fire_at"] is None  # 10:01 and 10:02 were both within the lookahead

    clock.move_to(utc(2026, 11, 21, 10, 1))
    cloud.deliver()
    assert cloud.call("GET", f"/v1/jobs/{job['job_id']}").body["status"] == "SCHEDULED"  # 10:02 is to come

    clock.move_to(utc(2026, 11, 21, 10, 2))
    cloud.deliver()
    assert cloud.call("GET", f"/v1/jobs/{job['job_id']}").body["status"] == "COMPLETED"
    assert len(receiver.requests) == 2


def test_a_cron_job_whose_last_run_fails_completes_too(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    receiver.respond_with(404)
    job = cloud.create(
        http_job(receiver, name="tz", cron="* * * * *", end_at=iso(utc(2026, 11, 21, 10, 1, 45)))
    )

    clock.move_to(utc(2026, 11, 21, 10, 1))
    cloud.deliver()

    assert [run["status"] for run in runs(cloud, job["job_id"])] == ["FAILED"]
    assert cloud.call("GET", f"/v1/jobs/{job['job_id']}").body["status"] == "COMPLETED"


def test_a_rate_job_with_a_window_fires_from_start_at_until_end_at(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    job = cloud.create(
        http_job(
            receiver,
            rate="10 minutes",
            timezone="America/New_York",
            start_at="2026-11-21T05:15:00",  # 10:15 UTC
            end_at="2026-11-21T05:40:00",
        )
    )
    assert job["next_fire_at"] == "2026-11-21T10:15:00.000Z"

    for minutes in range(15, 70, 5):
        fire(cloud, clock, utc(2026, 11, 21, 10) + timedelta(minutes=minutes))

    assert [scheduled for scheduled, _ in arrivals(receiver, job["job_id"])] == [
        "2026-11-21T10:15:00.000Z",
        "2026-11-21T10:25:00.000Z",
        "2026-11-21T10:35:00.000Z",
    ]
    assert cloud.call("GET", f"/v1/jobs/{job['job_id']}").body["status"] == "COMPLETED"


# --- jitter ----------------------------------------------------------------------------------------


def test_jitter_delivers_within_the_window_and_lateness_counts_from_the_jittered_time(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    job = cloud.create(http_job(receiver, name="tz", cron="*/5 * * * *", jitter_seconds=120))
    assert job["schedule"]["jitter_seconds"] == 120
    nominal = utc(2026, 11, 21, 10, 5)
    spec = ScheduleSpec.model_validate(job["schedule"])
    starts = jittered(spec, job["job_id"], nominal, nominal + timedelta(minutes=5))
    assert nominal <= starts < nominal + timedelta(seconds=120)

    clock.move_to(utc(2026, 11, 21, 10, 3, 30))
    cloud.poll()
    [run] = runs(cloud, job["job_id"])
    # The run keeps its nominal time (and id); its first attempt is due at the jittered time.
    assert run["run_id"] == f"{job['job_id']}:{int(nominal.timestamp() * 1000)}"
    assert run["scheduled_for"] == iso(nominal)
    assert run["next_attempt_at"] == iso(starts)

    clock.move_to(starts - timedelta(seconds=3))
    assert cloud.deliver() == 0  # not visible before the delivery lead
    clock.move_to(starts + timedelta(seconds=3))  # the worker is 3 s late
    assert cloud.deliver() == 1

    [(scheduled_for, received_at)] = arrivals(receiver, job["job_id"])
    assert scheduled_for == iso(nominal)
    assert received_at == starts + timedelta(seconds=3)
    [run] = runs(cloud, job["job_id"])
    assert run["status"] == "SUCCEEDED"
    assert run["lateness_ms"] == 3000  # from the jittered time, not the nominal one


def test_a_firing_jittered_further_than_sqs_can_delay_waits_in_the_due_index(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    at = clock.now() + timedelta(seconds=60)
    # The offset is a hash of the (random) job id: take a job whose offset is beyond 900 s
    # (SQS's longest delay) and the lookahead after it.
    for _ in range(10):
        job = cloud.create(http_job(receiver, name="tz", at=iso(at), jitter_seconds=86_400))
        starts = jittered(ScheduleSpec.model_validate(job["schedule"]), job["job_id"], at, None)
        if starts - at > timedelta(seconds=1100):
            break
        cloud.call("DELETE", f"/v1/jobs/{job['job_id']}")
    else:
        pytest.fail("no job with an offset beyond 1100 s in 10 tries")
    # Past every delay SQS allows: the runs (cancelled) of the jobs deleted above, sent at
    # their creation delayed up to 900 s, have all arrived and are dropped.
    clock.move_to(at + timedelta(seconds=901))
    cloud.deliver()
    receiver.requests.clear()

    [run] = runs(cloud, job["job_id"])
    assert run["status"] == "PENDING"
    assert run["next_attempt_at"] == iso(starts)
    assert queued(cloud) == 0  # claimed, but not on the queue yet

    clock.move_to(starts - timedelta(seconds=cloud.settings.lookahead_seconds))
    cloud.poll()  # the run's timer: sent now, delayed until its time
    assert queued(cloud) == 1
    clock.move_to(starts)
    assert cloud.deliver() == 1

    [(scheduled_for, received_at)] = arrivals(receiver, job["job_id"])
    assert (scheduled_for, received_at) == (iso(at), starts)
    [run] = runs(cloud, job["job_id"])
    assert (run["status"], run["lateness_ms"]) == ("SUCCEEDED", 0)
    assert cloud.call("GET", f"/v1/jobs/{job['job_id']}").body["status"] == "COMPLETED"


# --- the API: what it shows, what it refuses ------------------------------------------------------------


def test_the_job_shows_its_time_zone_window_and_jitter(
    cloud: SchedulerHarness, receiver: WebhookReceiver
) -> None:
    job = cloud.create(
        http_job(
            receiver,
            cron="0 9 * * MON-FRI",
            timezone="America/New_York",
            start_at="2026-12-01T00:00:00",
            end_at="2027-06-30T17:00:00-04:00",
            jitter_seconds=300,
        )
    )

    assert job["schedule"] == {
        "at": None,
        "cron": "0 9 * * MON-FRI",
        "rate": None,
        "timezone": "America/New_York",
        "start_at": "2026-12-01T05:00:00.000Z",
        "end_at": "2027-06-30T21:00:00.000Z",
        "jitter_seconds": 300,
    }
    assert job["next_fire_at"] == "2026-12-01T14:00:00.000Z"  # Tuesday 09:00 EST
    assert cloud.call("GET", f"/v1/jobs/{job['job_id']}").body["schedule"] == job["schedule"]


def test_an_at_without_an_offset_is_read_in_its_time_zone(
    cloud: SchedulerHarness, receiver: WebhookReceiver
) -> None:
    job = cloud.create(http_job(receiver, name="tz", at="2026-11-21T12:00:00", timezone="Europe/Berlin"))

    assert job["next_fire_at"] == "2026-11-21T11:00:00.000Z"


def assert_error(reply: Any, status: int, field: str) -> str:
    assert reply.status == status, reply.body
    error = reply.body["error"]
    assert field in [detail["field"] for detail in error["details"]], error
    message: str = error["message"]
    return message


@pytest.mark.parametrize(
    ("schedule", "field"),
    [
        pytest.param(
            {"cron": "0 9 * * *", "timezone": "Europe/Atlantis"}, "schedule.timezone", id="unknown zone"
        ),
        pytest.param({"cron": "0 9 * * *", "timezone": 1}, "schedule.timezone", id="zone not text"),
        pytest.param(
            {"cron": "0 9 * * *", "start_at": "2027-01-02T00:00:00Z", "end_at": "2027-01-01T00:00:00Z"},
            "schedule.end_at",
            id="end before start",
        ),
        pytest.param({"cron": "0 9 * * *", "start_at": "soon"}, "schedule.start_at", id="start not a time"),
        pytest.param(
            {"at": "2027-01-01T00:00:00Z", "end_at": "2027-01-02T00:00:00Z"},
            "schedule.end_at",
            id="window on at",
        ),
        pytest.param(
            {"cron": "0 9 * * *", "jitter_seconds": -1}, "schedule.jitter_seconds", id="negative jitter"
        ),
        pytest.param(
            {"rate": "5 minutes", "jitter_seconds": 301}, "schedule.jitter_seconds", id="jitter over rate"
        ),
        pytest.param(
            {"cron": "*/10 * * * *", "jitter_seconds": 601}, "schedule.jitter_seconds", id="jitter over cron"
        ),
        pytest.param(
            {"at": "2027-01-01T00:00:00Z", "jitter_seconds": 86_401},
            "schedule.jitter_seconds",
            id="jitter over a day",
        ),
    ],
)
def test_bad_time_zones_windows_and_jitter_are_400s_naming_the_field(
    cloud: SchedulerHarness, receiver: WebhookReceiver, schedule: dict[str, Any], field: str
) -> None:
    assert_error(cloud.call("POST", "/v1/jobs", http_job(receiver, name="tz", **schedule)), 400, field)


def test_an_at_in_the_past_in_its_time_zone_is_a_422(
    cloud: SchedulerHarness, receiver: WebhookReceiver
) -> None:
    # 10:30 in Tokyo is 01:30 UTC, long before now (10:00:30 UTC); in UTC it would be ahead.
    reply = cloud.call(
        "POST", "/v1/jobs", http_job(receiver, name="tz", at="2026-11-21T10:30:00", timezone="Asia/Tokyo")
    )
    assert_error(reply, 422, "schedule.at")
    assert (
        cloud.call("POST", "/v1/jobs", http_job(receiver, name="tz", at="2026-11-21T10:30:00")).status == 201
    )


@pytest.mark.parametrize(
    ("schedule", "field", "reason"),
    [
        pytest.param(
            {"cron": "0 9 * * *", "end_at": "2026-11-21T09:30:00Z"},
            "schedule.end_at",
            "now and end_at",
            id="ended",
        ),
        pytest.param(
            {"cron": "0 9 * * SAT", "start_at": "2026-11-23T00:00:00Z", "end_at": "2026-11-27T00:00:00Z"},
            "schedule.end_at",
            "start_at and end_at",
            id="no match in window",
        ),
        pytest.param(
            {"rate": "1 day", "end_at": "2026-11-21T12:00:00Z"},
            "schedule.end_at",
            "now and end_at",
            id="rate",
        ),
        pytest.param(
            {"cron": "0 0 30 2 *", "end_at": "2030-01-01T00:00:00Z"},
            "schedule.cron",
            "never fires",
            id="never",
        ),
    ],
)
def test_a_schedule_with_no_firing_in_its_window_is_a_422_with_the_reason(
    cloud: SchedulerHarness, receiver: WebhookReceiver, schedule: dict[str, Any], field: str, reason: str
) -> None:
    message = assert_error(
        cloud.call("POST", "/v1/jobs", http_job(receiver, name="tz", **schedule)), 422, field
    )
    assert reason in message


def test_a_time_zone_with_a_rate_is_accepted(cloud: SchedulerHarness, receiver: WebhookReceiver) -> None:
    job = cloud.create(http_job(receiver, name="tz", rate="1 hour", timezone="Asia/Kolkata"))

    assert job["next_fire_at"] == "2026-11-21T11:00:30.000Z"  # elapsed time: one hour after creation
