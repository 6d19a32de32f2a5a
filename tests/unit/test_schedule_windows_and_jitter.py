"""A schedule's window (`start_at`, `end_at`) and `jitter_seconds`: pure, no AWS."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from scheduler_core.domain.entities import Job, Run
from scheduler_core.domain.schedule import (
    ScheduleSpec,
    first_fire_at,
    jittered,
    latest_fire_at_or_before,
    next_fire_after,
)
from scheduler_core.domain.vocabulary import MAX_JITTER_SECONDS, JobStatus, RunStatus, Trigger
from scheduler_core.domain.wallclock import NeverFires, NoFiringInWindow, smallest_cron_gap
from scheduler_core.services.lifecycle import is_last

NOON = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)  # a Monday
MINUTE = timedelta(minutes=1)
MS = timedelta(milliseconds=1)


def spec(**fields: Any) -> ScheduleSpec:
    return ScheduleSpec.model_validate(fields)


def error_of(**fields: Any) -> tuple[str, str]:
    with pytest.raises(ValidationError) as caught:
        ScheduleSpec.model_validate(fields)
    [error] = caught.value.errors()
    return ".".join(map(str, error["loc"])), error["msg"]


def iso(when: datetime) -> str:
    return when.isoformat().replace("+00:00", "Z")


# --- the window -------------------------------------------------------------------------


def test_a_cron_fires_no_earlier_than_start_at() -> None:
    schedule = spec(cron="*/5 * * * *", start_at=iso(NOON + timedelta(hours=2)))

    assert next_fire_after(schedule, anchor=NOON, after=NOON) == NOON + timedelta(hours=2)
    assert first_fire_at(schedule, anchor=NOON, now=NOON) == NOON + timedelta(hours=2)


def test_a_start_at_between_two_marks_fires_at_the_next_mark() -> None:
    schedule = spec(cron="*/5 * * * *", start_at=iso(NOON + timedelta(minutes=7)))

    assert first_fire_at(schedule, anchor=NOON, now=NOON) == NOON + timedelta(minutes=10)


def test_a_start_at_in_the_past_changes_nothing() -> None:
    schedule = spec(cron="*/5 * * * *", start_at=iso(NOON - timedelta(days=3)))

    assert first_fire_at(schedule, anchor=NOON, now=NOON) == NOON + timedelta(minutes=5)


def test_a_cron_fires_at_end_at_but_not_after_it() -> None:
    schedule = spec(cron="*/5 * * * *", end_at=iso(NOON + timedelta(minutes=10)))

    assert next_fire_after(schedule, anchor=NOON, after=NOON + timedelta(minutes=5)) == NOON + timedelta(
        minutes=10
    )
    assert next_fire_after(schedule, anchor=NOON, after=NOON + timedelta(minutes=10)) is None


def test_the_firing_before_end_at_is_the_last_one() -> None:
    schedule = spec(cron="*/5 * * * *", end_at=iso(NOON + timedelta(minutes=12)))

    assert next_fire_after(schedule, anchor=NOON, after=NOON + timedelta(minutes=10)) is None


def test_a_rate_with_start_at_fires_at_start_at_and_every_interval_after_it() -> None:
    start = NOON + timedelta(hours=1, minutes=17)
    schedule = spec(rate="1 hour", start_at=iso(start))

    assert first_fire_at(schedule, anchor=NOON, now=NOON) == start
    assert next_fire_after(schedule, anchor=NOON, after=start) == start + timedelta(hours=1)


def test_a_rate_with_start_at_in_the_past_keeps_its_phase() -> None:
    start = NOON - timedelta(days=2, minutes=20)
    schedule = spec(rate="1 hour", start_at=iso(start))

    assert first_fire_at(schedule, anchor=NOON, now=NOON) == NOON + timedelta(minutes=40)


def test_a_rate_without_start_at_still_counts_from_creation() -> None:
    assert first_fire_at(spec(rate="1 hour"), anchor=NOON, now=NOON) == NOON + timedelta(hours=1)


def test_a_rate_stops_at_end_at() -> None:
    schedule = spec(rate="1 hour", end_at=iso(NOON + timedelta(hours=2, minutes=30)))

    assert next_fire_after(schedule, anchor=NOON, after=NOON + timedelta(hours=1)) == NOON + timedelta(
        hours=2
    )
    assert next_fire_after(schedule, anchor=NOON, after=NOON + timedelta(hours=2)) is None


def test_a_window_that_ends_before_the_first_firing_has_no_firing() -> None:
    schedule = spec(cron="0 0 1 * *", end_at=iso(NOON + timedelta(days=3)))

    with pytest.raises(NoFiringInWindow, match="no firing between now and end_at"):
        first_fire_at(schedule, anchor=NOON, now=NOON)


def test_a_window_in_the_past_has_no_firing() -> None:
    schedule = spec(
        cron="* * * * *", start_at=iso(NOON - timedelta(days=2)), end_at=iso(NOON - timedelta(days=1))
    )

    with pytest.raises(NoFiringInWindow):
        first_fire_at(schedule, anchor=NOON, now=NOON)


def test_a_window_without_a_matching_date_names_start_at() -> None:
    schedule = spec(
        cron="0 9 * * SAT",
        start_at=iso(NOON + timedelta(days=1)),
        end_at=iso(NOON + timedelta(days=3)),  # Tuesday to Thursday
    )

    with pytest.raises(NoFiringInWindow, match="between start_at and end_at"):
        first_fire_at(schedule, anchor=NOON, now=NOON)


def test_no_firing_in_the_window_is_a_never_fires() -> None:
    assert issubclass(NoFiringInWindow, NeverFires)


def test_the_newest_missed_firing_is_never_past_end_at() -> None:
    schedule = spec(cron="*/5 * * * *", end_at=iso(NOON + timedelta(minutes=12)))

    assert latest_fire_at_or_before(
        schedule, anchor=NOON, when=NOON + timedelta(hours=5)
    ) == NOON + timedelta(minutes=10)


def test_there_is_no_missed_firing_before_start_at() -> None:
    schedule = spec(cron="*/5 * * * *", start_at=iso(NOON + timedelta(minutes=12)))

    assert latest_fire_at_or_before(schedule, anchor=NOON, when=NOON + timedelta(minutes=11)) is None
    assert latest_fire_at_or_before(
        schedule, anchor=NOON, when=NOON + timedelta(minutes=16)
    ) == NOON + timedelta(minutes=15)


def test_a_rate_window_bounds_the_newest_missed_firing_too() -> None:
    schedule = spec(rate="1 hour", start_at=iso(NOON), end_at=iso(NOON + timedelta(hours=3)))

    assert latest_fire_at_or_before(schedule, anchor=NOON, when=NOON - MINUTE) is None
    assert latest_fire_at_or_before(schedule, anchor=NOON, when=NOON) == NOON
    assert latest_fire_at_or_before(schedule, anchor=NOON, when=NOON + timedelta(days=1)) == NOON + timedelta(
        hours=3
    )


def test_a_window_without_offsets_is_read_in_the_time_zone() -> None:
    schedule = spec(
        cron="0 9 * * *", timezone="Europe/Berlin", start_at="2026-12-01T00:00", end_at="2026-12-24T23:59:59"
    )

    assert schedule.start_at == datetime(2026, 11, 30, 23, 0, tzinfo=UTC)
    assert schedule.end_at == datetime(2026, 12, 24, 22, 59, 59, tzinfo=UTC)


def test_end_at_before_start_at_is_refused_naming_end_at() -> None:
    field, message = error_of(cron="0 9 * * *", start_at=iso(NOON), end_at=iso(NOON - MINUTE))

    assert field == "end_at"
    assert "must not be before start_at" in message


def test_end_at_equal_to_start_at_is_a_window_of_one_instant() -> None:
    schedule = spec(cron="0 12 * * *", start_at=iso(NOON), end_at=iso(NOON))

    assert first_fire_at(schedule, anchor=NOON - MINUTE, now=NOON - MINUTE) == NOON
    assert next_fire_after(schedule, anchor=NOON, after=NOON) is None


@pytest.mark.parametrize("name", ["start_at", "end_at"])
def test_a_window_on_a_one_off_is_refused(name: str) -> None:
    field, message = error_of(at=iso(NOON), **{name: iso(NOON)})

    assert field == name
    assert "cron and rate schedules only" in message


@pytest.mark.parametrize("value", [12, "yesterday", "2026-13-01T00:00:00Z"])
def test_a_window_must_be_an_iso_time(value: object) -> None:
    field, _ = error_of(cron="* * * * *", start_at=value)

    assert field == "start_at"


# --- jitter -----------------------------------------------------------------------------------


def test_jitter_defaults_to_none() -> None:
    schedule = spec(cron="*/5 * * * *")

    assert schedule.jitter_seconds == 0
    assert jittered(schedule, "job", NOON, NOON + 5 * MINUTE) == NOON


@settings(max_examples=200, deadline=None)
@given(
    job_id=st.text(min_size=1, max_size=40), minutes=st.integers(0, 10_000_000), jitter=st.integers(1, 300)
)
def test_jitter_is_within_zero_and_jitter_seconds_and_the_same_every_time(
    job_id: str, minutes: int, jitter: int
) -> None:
    schedule = spec(cron="*/5 * * * *", jitter_seconds=jitter)
    fire_at = datetime(2000, 1, 1, tzinfo=UTC) + 5 * minutes * MINUTE

    moved = jittered(schedule, job_id, fire_at, fire_at + 5 * MINUTE)

    assert fire_at <= moved < fire_at + timedelta(seconds=jitter)
    assert moved == jittered(schedule, job_id, fire_at, fire_at + 5 * MINUTE)


def test_jitter_spreads_jobs_and_firings() -> None:
    schedule = spec(cron="* * * * *", jitter_seconds=60)

    by_job = {jittered(schedule, f"job-{n}", NOON, NOON + MINUTE) for n in range(50)}
    by_firing = {jittered(schedule, "job", NOON + n * MINUTE, None) - n * MINUTE for n in range(50)}

    assert len(by_job) > 40
    assert len(by_firing) > 40


def test_jitter_never_reaches_the_following_firing() -> None:
    schedule = spec(rate="1 hour", jitter_seconds=3600)
    following = NOON + timedelta(seconds=10)  # closer than usual (e.g. a DST night)

    moves = [jittered(schedule, f"job-{n}", NOON, following) for n in range(50)]

    assert all(NOON <= moved <= following - MS for moved in moves)
    assert following - MS in moves  # some were clamped


def test_jitter_of_the_last_firing_never_passes_end_at() -> None:
    end = NOON + timedelta(seconds=5)
    schedule = spec(rate="1 hour", jitter_seconds=3600, end_at=iso(end))

    assert all(NOON <= jittered(schedule, f"job-{n}", NOON, None) <= end for n in range(50))


def test_jitter_of_a_one_off_is_not_clamped() -> None:
    schedule = spec(at=iso(NOON), jitter_seconds=MAX_JITTER_SECONDS)

    moves = [jittered(schedule, f"job-{n}", NOON, None) for n in range(20)]

    assert all(NOON <= moved < NOON + timedelta(days=1) for moved in moves)
    assert max(moves) > NOON + timedelta(hours=6)


@pytest.mark.parametrize(
    ("fields", "limit"),
    [
        ({"rate": "5 minutes"}, 300),
        ({"rate": "2 days"}, MAX_JITTER_SECONDS),
        ({"cron": "*/5 * * * *"}, 300),
        ({"cron": "0,10 * * * *"}, 600),
        ({"cron": "0 9 * * MON-FRI"}, 86_400),
        ({"cron": "0 9 * * *", "timezone": "Europe/Berlin"}, 86_400),
        ({"cron": "0 0 1 * *"}, MAX_JITTER_SECONDS),
        ({"at": "2030-01-01T00:00:00Z"}, MAX_JITTER_SECONDS),
    ],
)
def test_jitter_may_reach_the_schedules_interval_and_no_further(fields: dict[str, Any], limit: int) -> None:
    assert spec(**fields, jitter_seconds=limit).jitter_seconds == limit

    field, message = error_of(**fields, jitter_seconds=limit + 1)
    assert field == "jitter_seconds"
    assert "at most" in message or "less than or equal to 86400" in message


@pytest.mark.parametrize("value", [-1, 1.5, "soon"])
def test_jitter_is_a_whole_number_of_seconds_not_below_zero(value: object) -> None:
    field, _ = error_of(cron="* * * * *", jitter_seconds=value)

    assert field == "jitter_seconds"


def test_jitter_on_a_cron_that_never_fires_is_left_to_the_422() -> None:
    assert spec(cron="0 0 30 2 *", jitter_seconds=60).jitter_seconds == 60


@pytest.mark.parametrize(
    ("cron", "gap"),
    [
        ("*/5 * * * *", timedelta(minutes=5)),
        ("0 9,17 * * *", timedelta(hours=8)),
        ("0 9 * * MON-FRI", timedelta(days=1)),
        ("0 0 29 2 *", timedelta(days=4 * 365 + 1)),
    ],
)
def test_the_smallest_gap_of_a_cron(cron: str, gap: timedelta) -> None:
    assert smallest_cron_gap(cron) == gap


# --- the API shows it all ---------------------------------------------------------------------------


def test_the_api_echoes_the_schedule_with_its_time_zone_window_and_jitter() -> None:
    schedule = spec(
        cron="0 9 * * MON-FRI",
        timezone="America/New_York",
        start_at="2026-12-01T09:00",
        end_at="2027-01-01T00:00:00+00:00",
        jitter_seconds=90,
    )
    job = Job(
        job_id="j",
        tenant="t",
        name="n",
        status=JobStatus.SCHEDULED,
        schedule=schedule,
        target={"type": "HTTP", "url": "https://example.com/"},
        priority="NORMAL",
        retry={},
        next_fire_at=datetime(2026, 12, 1, 14, 0, tzinfo=UTC),
        created_at=NOON,
        updated_at=NOON,
    )

    body = job.to_api()

    assert body["schedule"] == {
        "at": None,
        "cron": "0 9 * * MON-FRI",
        "rate": None,
        "timezone": "America/New_York",
        "start_at": "2026-12-01T14:00:00.000Z",
        "end_at": "2027-01-01T00:00:00.000Z",
        "jitter_seconds": 90,
    }
    assert body["next_fire_at"] == "2026-12-01T14:00:00.000Z"


def test_a_stored_schedule_reads_back_the_same() -> None:
    schedule = spec(
        cron="30 2 * * *", timezone="Europe/Berlin", start_at="2026-03-29T02:30", jitter_seconds=600
    )

    again = ScheduleSpec.model_validate_json(schedule.model_dump_json())

    assert again == schedule


# --- which run completes a job -------------------------------------------------------------------


def ended_cron_job(**schedule: Any) -> Job:
    return Job(
        job_id="j",
        tenant="t",
        name="n",
        status=JobStatus.SCHEDULED,
        schedule=spec(**schedule),
        target={"type": "HTTP", "url": "https://example.com/"},
        priority="NORMAL",
        retry={},
        next_fire_at=None,  # the last firing is claimed
        created_at=NOON,
        updated_at=NOON,
    )


def run_for(fire_at: datetime, trigger: Trigger = Trigger.SCHEDULE) -> Run:
    return Run(
        run_id=f"j:{int(fire_at.timestamp() * 1000)}",
        job_id="j",
        status=RunStatus.RUNNING,
        trigger=trigger,
        scheduled_for=fire_at,
        priority="NORMAL",
    )


def test_the_run_of_the_last_firing_before_end_at_completes_the_job() -> None:
    job = ended_cron_job(cron="*/5 * * * *", end_at=iso(NOON + timedelta(minutes=12)))

    assert is_last(job, run_for(NOON + timedelta(minutes=10)))


def test_an_earlier_firing_ending_after_the_last_was_claimed_does_not_complete_the_job() -> None:
    # e.g. the 12:05 run retried, or jittered, until after 12:10 was claimed.
    job = ended_cron_job(cron="*/5 * * * *", end_at=iso(NOON + timedelta(minutes=12)))

    assert not is_last(job, run_for(NOON + timedelta(minutes=5)))


def test_a_manual_run_never_completes_a_job() -> None:
    job = ended_cron_job(cron="*/5 * * * *", end_at=iso(NOON + timedelta(minutes=12)))

    assert not is_last(job, run_for(NOON + timedelta(minutes=10), Trigger.MANUAL))


def test_a_job_with_a_firing_left_is_never_completed_by_a_run() -> None:
    job = ended_cron_job(cron="*/5 * * * *").model_copy(update={"next_fire_at": NOON + timedelta(minutes=15)})

    assert not is_last(job, run_for(NOON + timedelta(minutes=10)))


def test_a_pause_changes_nothing_of_which_run_is_the_last() -> None:
    """The store completes a paused job too (`_ACTIVE_WITH_NOTHING_LEFT_TO_FIRE`): a paused job
    keeps its next firing, so its status has no say in the decision."""
    ended = ended_cron_job(cron="*/5 * * * *", end_at=iso(NOON + timedelta(minutes=12)))
    pause = {"status": JobStatus.PAUSED, "paused_at": NOON + timedelta(minutes=11)}
    paused = ended.model_copy(update=pause)
    with_firing_left = ended_cron_job(cron="*/5 * * * *").model_copy(
        update=pause | {"next_fire_at": NOON + timedelta(minutes=15)}
    )

    assert is_last(paused, run_for(NOON + timedelta(minutes=10)))
    assert not is_last(paused, run_for(NOON + timedelta(minutes=5)))
    assert not is_last(paused, run_for(NOON + timedelta(minutes=10), Trigger.MANUAL))
    assert not is_last(with_firing_left, run_for(NOON + timedelta(minutes=10)))
