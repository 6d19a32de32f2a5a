"""Misfire policies (issue 5): which missed firings run, and the job fields that choose."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from scheduler_core.domain.api_shapes import JobCreate, JobPatch
from scheduler_core.domain.clock import to_ms
from scheduler_core.domain.entities import Job, Run
from scheduler_core.domain.misfire import (
    MAX_CATCH_UP_RUNS,
    TOLERANCE,
    due_firings,
    firings_to_run,
    is_misfire,
    select,
)
from scheduler_core.domain.policies import RetryPolicy
from scheduler_core.domain.resume import ResumePlan, plan_resume
from scheduler_core.domain.schedule import ScheduleSpec, next_fire_after
from scheduler_core.domain.vocabulary import JobStatus, MisfirePolicy, Priority, RunStatus, Trigger

FIRE_ONCE, SKIP, CATCH_UP = MisfirePolicy.FIRE_ONCE, MisfirePolicy.SKIP, MisfirePolicy.CATCH_UP
HOUR = timedelta(hours=1)
LOOKAHEAD = timedelta(minutes=2)  # how far ahead the poller sends work
CREATED = datetime(2026, 11, 21, 9, 0, tzinfo=UTC)
EVERY_5 = ScheduleSpec(cron="*/5 * * * *")


def t(hour: int, minute: int, second: int = 0) -> datetime:
    return datetime(2026, 11, 21, hour, minute, second, tzinfo=UTC)


def marks(first: datetime, last: datetime, step: timedelta = timedelta(minutes=5)) -> list[datetime]:
    found = []
    while first <= last:
        found.append(first)
        first += step
    return found


# A */5 cron whose poller was down from 10:00:30 to 11:03:20: 10:05 ... 11:00 were missed.
NOW = t(11, 3, 20)
MISSED = marks(t(10, 5), t(11, 0))


# --- what counts as missed ------------------------------------------------------------------


def test_a_firing_claimed_within_the_tolerance_is_late_not_missed() -> None:
    assert timedelta(seconds=60) == TOLERANCE
    assert not is_misfire(NOW - TOLERANCE, NOW)
    assert not is_misfire(NOW - timedelta(seconds=5), NOW)  # a poll that came a little late
    assert is_misfire(NOW - TOLERANCE - timedelta(milliseconds=1), NOW)


# --- the pure decision ------------------------------------------------------------------------


def test_fire_once_runs_only_the_newest_missed_firing() -> None:
    assert select(MISSED, NOW, FIRE_ONCE, HOUR) == [t(11, 0)]


def test_skip_runs_none_of_the_missed_firings() -> None:
    assert select(MISSED, NOW, SKIP, HOUR) == []


def test_skip_still_runs_a_firing_that_is_only_late() -> None:
    late = [*MISSED, t(11, 2, 40)]  # 40 s before now: a late claim, not a misfire
    assert select(late, NOW, SKIP, HOUR) == [t(11, 2, 40)]


def test_catch_up_runs_each_firing_of_its_window_oldest_first() -> None:
    assert select(MISSED, NOW, CATCH_UP, timedelta(minutes=30)) == marks(t(10, 35), t(11, 0))


def test_catch_up_window_counts_back_from_now_inclusive() -> None:
    window = NOW - t(10, 35)  # exactly reaches 10:35
    assert select(MISSED, NOW, CATCH_UP, window)[0] == t(10, 35)
    assert select(MISSED, NOW, CATCH_UP, window - timedelta(milliseconds=1))[0] == t(10, 40)


def test_catch_up_with_a_window_wider_than_the_outage_runs_every_missed_firing() -> None:
    assert select(MISSED, NOW, CATCH_UP, timedelta(days=7)) == MISSED


def test_catch_up_runs_at_most_the_newest_hundred() -> None:
    minutely = marks(NOW - timedelta(hours=5), NOW, timedelta(minutes=1))
    chosen = select(minutely, NOW, CATCH_UP, timedelta(days=7))
    assert len(chosen) == MAX_CATCH_UP_RUNS == 100
    assert chosen == minutely[-100:]


@pytest.mark.parametrize("policy", list(MisfirePolicy))
def test_nothing_missed_runs_nothing(policy: MisfirePolicy) -> None:
    assert select([], NOW, policy, HOUR) == []


@settings(max_examples=200, deadline=None)
@given(
    offsets=st.lists(st.integers(min_value=0, max_value=10 * 86_400), min_size=1, max_size=150, unique=True),
    window=st.integers(min_value=60, max_value=7 * 86_400),
    policy=st.sampled_from(list(MisfirePolicy)),
)
def test_what_runs_is_a_newest_slice_of_what_was_missed(
    offsets: list[int], window: int, policy: MisfirePolicy
) -> None:
    """Whatever the policy, the runs are the newest missed firings, oldest first: never one
    older than a skipped one, never more than one for FIRE_ONCE or the cap for the others."""
    firings = sorted(NOW - timedelta(seconds=offset) for offset in offsets)
    chosen = select(firings, NOW, policy, timedelta(seconds=window))
    assert chosen == firings[len(firings) - len(chosen) :]
    if policy is FIRE_ONCE:
        assert chosen == firings[-1:]
    else:
        assert len(chosen) <= MAX_CATCH_UP_RUNS
        reach = TOLERANCE if policy is SKIP else timedelta(seconds=window)
        assert all(NOW - when <= reach for when in chosen)
        kept = [when for when in firings if NOW - when <= reach]
        assert len(chosen) == min(len(kept), MAX_CATCH_UP_RUNS)


# --- the firings of a schedule ------------------------------------------------------------------


def test_due_firings_are_the_schedules_firings_since_the_first_missed_one() -> None:
    assert due_firings(EVERY_5, CREATED, t(10, 5), NOW, CATCH_UP, timedelta(days=1)) == MISSED
    # Not before the job's next firing: the earlier ones were claimed.
    assert due_firings(EVERY_5, CREATED, t(10, 50), NOW, CATCH_UP, timedelta(days=1)) == marks(
        t(10, 50), t(11, 0)
    )


def test_due_firings_look_no_further_back_than_the_policy_reaches() -> None:
    assert due_firings(EVERY_5, CREATED, t(10, 5), NOW, FIRE_ONCE, HOUR) == [t(11, 0)]
    assert due_firings(EVERY_5, CREATED, t(10, 5), NOW, SKIP, HOUR) == []
    assert due_firings(EVERY_5, CREATED, t(10, 5), NOW, CATCH_UP, timedelta(minutes=30)) == marks(
        t(10, 35), t(11, 0)
    )


def test_a_long_outage_costs_no_more_than_the_runs_it_yields() -> None:
    minutely = ScheduleSpec(cron="* * * * *")
    since = NOW - timedelta(days=6)
    found = due_firings(minutely, CREATED, since, NOW, CATCH_UP, timedelta(days=7))
    assert len(found) == MAX_CATCH_UP_RUNS
    assert found[-1] == t(11, 3)
    assert found[0] == t(11, 3) - timedelta(minutes=99)


def test_due_firings_agree_with_the_schedule_walked_forward() -> None:
    """Walking back (`latest_fire_at_or_before`) finds what walking forward does, across a
    DST change in a time zone, and for a rate (which counts from the job's creation)."""
    for spec, since, now in [
        (
            ScheduleSpec(cron="30 * * * *", timezone="Europe/Berlin"),
            datetime(2026, 10, 24, 22, 0, tzinfo=UTC),
            datetime(2026, 10, 25, 4, 0, tzinfo=UTC),
        ),
        (ScheduleSpec(rate="7 minutes"), t(9, 30), NOW),
    ]:
        forward = []
        when = next_fire_after(spec, CREATED, since - timedelta(milliseconds=1))
        while when is not None and when <= now:
            forward.append(when)
            when = next_fire_after(spec, CREATED, when)
        assert due_firings(spec, CREATED, since, now, CATCH_UP, timedelta(days=7)) == forward


def test_a_one_off_missed_runs_under_catch_up_within_its_window_only() -> None:
    at = ScheduleSpec(at=t(10, 30))
    assert firings_to_run(at, CREATED, t(10, 30), NOW, CATCH_UP, HOUR) == [t(10, 30)]
    assert firings_to_run(at, CREATED, t(10, 30), NOW, CATCH_UP, timedelta(minutes=30)) == []
    assert firings_to_run(at, CREATED, t(10, 30), NOW, SKIP, HOUR) == []
    assert firings_to_run(at, CREATED, t(10, 30), NOW, FIRE_ONCE, HOUR) == [t(10, 30)]


def test_a_window_that_ended_bounds_the_catch_up() -> None:
    ended = ScheduleSpec(cron="*/5 * * * *", end_at=t(10, 40))
    assert firings_to_run(ended, CREATED, t(10, 5), NOW, CATCH_UP, HOUR) == marks(t(10, 5), t(10, 40))


# --- the job's fields -------------------------------------------------------------------------


def body(**fields: Any) -> dict[str, Any]:
    return {
        "name": "n",
        "schedule": {"cron": "*/5 * * * *"},
        "target": {"type": "HTTP", "url": "https://example.com/"},
        **fields,
    }


def test_a_job_fires_once_by_default_and_has_no_window() -> None:
    job = JobCreate.model_validate(body())
    assert (job.misfire, job.catch_up_window_seconds) == (FIRE_ONCE, None)


def test_catch_up_has_a_default_window_of_an_hour() -> None:
    job = JobCreate.model_validate(body(misfire="CATCH_UP"))
    assert (job.misfire, job.catch_up_window_seconds) == (CATCH_UP, 3600)
    job = JobCreate.model_validate(body(misfire="CATCH_UP", catch_up_window_seconds=1800))
    assert job.catch_up_window_seconds == 1800


@pytest.mark.parametrize(
    ("fields", "location"),
    [
        pytest.param({"misfire": "SOMETIMES"}, "misfire", id="unknown policy"),
        pytest.param({"misfire": "skip"}, "misfire", id="policy in lower case"),
        pytest.param({"misfire": None}, "misfire", id="null policy"),
        pytest.param({"misfire": "CATCH_UP", "catch_up_window_seconds": 59}, "catch_up_window_seconds"),
        pytest.param(
            {"misfire": "CATCH_UP", "catch_up_window_seconds": 7 * 86_400 + 1}, "catch_up_window_seconds"
        ),
        pytest.param(
            {"misfire": "CATCH_UP", "catch_up_window_seconds": "an hour"}, "catch_up_window_seconds"
        ),
        pytest.param({"misfire": "SKIP", "catch_up_window_seconds": 600}, "catch_up_window_seconds"),
        pytest.param({"catch_up_window_seconds": 600}, "catch_up_window_seconds", id="window with default"),
    ],
)
def test_bad_misfire_fields_name_the_field(fields: dict[str, Any], location: str) -> None:
    with pytest.raises(ValidationError) as raised:
        JobCreate.model_validate(body(**fields))
    assert [error["loc"] for error in raised.value.errors()] == [(location,)]


def test_a_window_with_another_policy_says_why() -> None:
    with pytest.raises(ValidationError) as raised:
        JobCreate.model_validate(body(misfire="SKIP", catch_up_window_seconds=600))
    assert "CATCH_UP only" in raised.value.errors()[0]["msg"]


def test_the_window_bounds_are_a_minute_and_a_week() -> None:
    for seconds in (60, 7 * 86_400):
        job = JobCreate.model_validate(body(misfire="CATCH_UP", catch_up_window_seconds=seconds))
        assert job.catch_up_window_seconds == seconds


def test_a_patch_may_reset_the_window_but_not_drop_the_policy() -> None:
    assert JobPatch.model_validate({"catch_up_window_seconds": None}).changes() == {
        "catch_up_window_seconds": None
    }
    with pytest.raises(ValidationError) as raised:
        JobPatch.model_validate({"misfire": None})
    assert [error["loc"] for error in raised.value.errors()] == [("misfire",)]


# --- a resume under each policy -----------------------------------------------------------------


PAUSED_AT = t(10, 4)  # 10:05 was claimed before the pause (the lookahead's worth)


def paused(next_fire_at: datetime | None, misfire: str, window: int | None = None, **schedule: Any) -> Job:
    return Job(
        job_id="job-1",
        tenant="alice",
        name="n",
        status=JobStatus.PAUSED,
        schedule=ScheduleSpec.model_validate(schedule or {"cron": "*/5 * * * *"}),
        target={"type": "HTTP", "url": "https://example.com/"},
        priority=Priority.NORMAL,
        retry=RetryPolicy(),
        misfire=MisfirePolicy(misfire),
        catch_up_window_seconds=window,
        next_fire_at=next_fire_at,
        created_at=CREATED,
        updated_at=PAUSED_AT,
        version=4,
        paused_at=PAUSED_AT,
    )


def run(when: datetime, status: RunStatus = RunStatus.PENDING, finished_at: datetime | None = None) -> Run:
    return Run(
        run_id=f"job-1:{to_ms(when)}",
        job_id="job-1",
        status=status,
        trigger=Trigger.SCHEDULE,
        scheduled_for=when,
        priority=Priority.NORMAL,
        finished_at=finished_at,
    )


# 10:05's run, set aside by the worker when its time came while the job was paused.
SET_ASIDE = run(t(10, 5))
RESUMED = t(10, 31, 20)


def resume_plan(job: Job, runs: list[Run], now: datetime) -> ResumePlan:
    return plan_resume(job, runs, now, now + LOOKAHEAD)


def test_skip_resumes_with_nothing_run_for_the_missed_firings() -> None:
    plan = resume_plan(paused(t(10, 10), "SKIP"), [SET_ASIDE], RESUMED)
    assert (plan.status, plan.next_fire_at, plan.catch_up) == (JobStatus.SCHEDULED, t(10, 35), False)
    assert (plan.kept, plan.missed, plan.stopped, plan.going_on) == ([], [], [SET_ASIDE], [])


def test_skip_runs_a_firing_the_resume_comes_only_seconds_after() -> None:
    plan = resume_plan(paused(t(10, 10), "SKIP"), [SET_ASIDE], t(10, 30, 40))
    assert plan.missed == [t(10, 30)]
    assert plan.next_fire_at == t(10, 35)


def test_catch_up_runs_each_firing_of_its_window_with_its_own_run() -> None:
    plan = resume_plan(paused(t(10, 10), "CATCH_UP", 1800), [SET_ASIDE], RESUMED)
    assert plan.kept == [SET_ASIDE]  # set aside by the worker: sent again
    assert plan.missed == marks(t(10, 10), t(10, 30))
    assert (plan.catch_up, plan.stopped, plan.next_fire_at) == (False, [], t(10, 35))


def test_catch_up_leaves_what_is_older_than_its_window() -> None:
    plan = resume_plan(paused(t(10, 10), "CATCH_UP", 600), [SET_ASIDE], RESUMED)
    assert (plan.kept, plan.stopped) == ([], [SET_ASIDE])
    assert plan.missed == [t(10, 25), t(10, 30)]


def test_catch_up_never_brings_back_a_cancelled_run_nor_runs_a_firing_twice() -> None:
    cancelled = run(t(10, 5), RunStatus.CANCELLED, finished_at=t(10, 3))
    plan = resume_plan(paused(t(10, 10), "CATCH_UP", 1800), [cancelled], RESUMED)
    assert (plan.kept, plan.stopped) == ([], [])
    assert t(10, 5) not in plan.missed
    ran = run(t(10, 5), RunStatus.SUCCEEDED, finished_at=t(10, 5, 1))
    plan = resume_plan(paused(t(10, 10), "CATCH_UP", 1800), [ran], RESUMED)
    assert (plan.kept, plan.missed[0]) == ([], t(10, 10))


def test_a_one_off_skipped_while_paused_completes_without_a_run() -> None:
    job = paused(t(10, 10), "SKIP", at="2026-11-21T10:10:00Z")
    plan = resume_plan(job, [], RESUMED)
    assert (plan.status, plan.missed, plan.catch_up) == (JobStatus.COMPLETED, [], False)


def test_a_one_off_caught_up_runs_at_its_own_time_and_completes_after() -> None:
    job = paused(t(10, 10), "CATCH_UP", 3600, at="2026-11-21T10:10:00Z")
    plan = resume_plan(job, [], RESUMED)
    assert (plan.status, plan.missed, plan.next_fire_at) == (JobStatus.SCHEDULED, [t(10, 10)], None)
