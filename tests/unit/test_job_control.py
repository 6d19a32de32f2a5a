"""What a resume does (FIRE_ONCE), when a manual run's time is free, and the PATCH body."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from scheduler_core.domain.api_shapes import JobCreate, JobPatch
from scheduler_core.domain.clock import to_ms
from scheduler_core.domain.entities import Job, Run
from scheduler_core.domain.policies import RetryPolicy
from scheduler_core.domain.resume import is_firing, plan_resume
from scheduler_core.domain.schedule import ScheduleSpec
from scheduler_core.domain.vocabulary import JobStatus, Priority, RunStatus, Trigger

CREATED = datetime(2026, 11, 21, 10, 0, 30, tzinfo=UTC)
PAUSED_AT = datetime(2026, 11, 21, 10, 0, 40, tzinfo=UTC)
LOOKAHEAD = timedelta(minutes=2)  # how far ahead the poller sends work


def at(minute: int, second: int = 0) -> datetime:
    return datetime(2026, 11, 21, 10, minute, second, tzinfo=UTC)


def paused_job(next_fire_at: datetime | None, **schedule: Any) -> Job:
    return Job(
        job_id="job-1",
        tenant="alice",
        name="n",
        status=JobStatus.PAUSED,
        schedule=ScheduleSpec.model_validate(schedule),
        target={"type": "HTTP", "url": "https://example.com/"},
        priority=Priority.NORMAL,
        retry=RetryPolicy(),
        next_fire_at=next_fire_at,
        created_at=CREATED,
        updated_at=PAUSED_AT,
        version=4,
        paused_at=PAUSED_AT,
    )


def run(when: datetime, status: RunStatus = RunStatus.PENDING, trigger: Trigger = Trigger.SCHEDULE) -> Run:
    return Run(
        run_id=f"job-1:{to_ms(when)}",
        job_id="job-1",
        status=status,
        trigger=trigger,
        scheduled_for=when,
        priority=Priority.NORMAL,
    )


# A `* * * * *` job paused at 10:00:40, with 10:01 and 10:02 claimed: 10:03 is next.
CRON = paused_job(at(3), cron="* * * * *")
CLAIMED = [run(at(2)), run(at(1))]


def test_a_resume_before_the_claimed_runs_are_due_keeps_them_and_misses_nothing() -> None:
    plan = plan_resume(CRON, CLAIMED, at(0, 50), at(0, 50) + LOOKAHEAD)
    assert (plan.status, plan.next_fire_at, plan.catch_up, plan.stopped) == (
        JobStatus.SCHEDULED,
        at(3),
        False,
        [],
    )


def test_claimed_runs_not_due_yet_are_sent_again_as_planned_at_a_resume() -> None:
    # The worker may have set them aside (their messages come up to 10 s early).
    plan = plan_resume(CRON, CLAIMED, at(0, 50), at(0, 50) + LOOKAHEAD)
    assert [r.scheduled_for for r in plan.going_on] == [at(2), at(1)]
    far = run(at(9))  # beyond the horizon: its timer brings it, as always
    plan = plan_resume(CRON, [far], at(0, 50), at(0, 50) + LOOKAHEAD)
    assert plan.going_on == []


def test_a_run_due_before_the_pause_and_still_waiting_goes_on() -> None:
    late = run(at(0, 35))  # its message came after the pause: set aside
    plan = plan_resume(CRON, [late], at(5), at(5) + LOOKAHEAD)
    assert (plan.going_on, plan.stopped) == ([late], [])


def test_a_retry_due_while_paused_counts_as_missed_like_a_first_attempt() -> None:
    retrying = run(at(0, 20), RunStatus.RETRYING).model_copy(
        update={"attempt": 2, "next_attempt_at": at(1, 10)}
    )
    plan = plan_resume(CRON, [retrying], at(5), at(5) + LOOKAHEAD)
    assert plan.stopped == [retrying]  # FIRE_ONCE: one run now stands for it
    assert plan.catch_up


def test_a_claimed_run_due_while_paused_is_stopped_and_made_up_for_by_one_run() -> None:
    plan = plan_resume(CRON, CLAIMED, at(1, 30), at(1, 30) + LOOKAHEAD)
    assert plan.catch_up
    assert [r.scheduled_for for r in plan.stopped] == [at(1)]
    assert plan.next_fire_at == at(3)  # 10:02 is claimed and still ahead: it runs


def test_a_long_pause_fires_once_and_carries_on_after_now() -> None:
    cancelled = [run(at(2), RunStatus.CANCELLED), run(at(1), RunStatus.CANCELLED)]
    plan = plan_resume(CRON, cancelled, at(10, 15), at(10, 15) + LOOKAHEAD)
    assert (plan.status, plan.catch_up, plan.next_fire_at, plan.stopped) == (
        JobStatus.SCHEDULED,
        True,
        at(11),
        [],
    )


def test_a_firing_not_claimed_when_the_job_was_paused_counts_as_missed() -> None:
    job = paused_job(at(0, 35), rate="1 minute")  # a firing due before the pause, never claimed
    plan = plan_resume(job, [], at(0, 50), at(0, 50) + LOOKAHEAD)
    assert plan.catch_up
    assert plan.next_fire_at == at(1, 30)


def test_manual_runs_are_not_stopped_by_a_pause() -> None:
    manual = run(at(0, 45), trigger=Trigger.MANUAL)
    plan = plan_resume(CRON, [manual, *CLAIMED], at(0, 50), at(0, 50) + LOOKAHEAD)
    assert plan.stopped == []
    assert not plan.catch_up


def test_a_one_off_whose_time_passed_while_paused_fires_once() -> None:
    job = paused_job(at(5), at="2026-11-21T10:05:00Z")
    plan = plan_resume(job, [], at(9), at(9) + LOOKAHEAD)
    assert (plan.status, plan.catch_up, plan.next_fire_at) == (JobStatus.SCHEDULED, True, None)


def test_a_one_off_claimed_before_the_pause_and_resumed_before_its_time_waits_for_its_run() -> None:
    job = paused_job(None, at="2026-11-21T10:01:00Z")
    plan = plan_resume(job, [run(at(1))], at(0, 50), at(0, 50) + LOOKAHEAD)
    assert (plan.status, plan.catch_up, plan.stopped) == (JobStatus.SCHEDULED, False, [])


def test_a_one_off_whose_run_ended_while_paused_completes() -> None:
    job = paused_job(None, at="2026-11-21T10:00:35Z")
    plan = plan_resume(job, [run(at(0, 35), RunStatus.SUCCEEDED)], at(5), at(5) + LOOKAHEAD)
    assert (plan.status, plan.catch_up) == (JobStatus.COMPLETED, False)


def test_is_firing_is_true_only_at_the_schedules_instants() -> None:
    assert is_firing(CRON, at(7))
    assert not is_firing(CRON, at(7) + timedelta(milliseconds=1))
    assert not is_firing(CRON, at(7) - timedelta(milliseconds=1))


# --- the PATCH body ---------------------------------------------------------------------------


def test_a_patch_has_exactly_the_fields_of_a_create() -> None:
    """A field added to jobs must be patchable too (and validated the same way)."""
    assert set(JobPatch.model_fields) == set(JobCreate.model_fields)


def test_a_patch_knows_which_fields_it_was_given() -> None:
    patch = JobPatch.model_validate({"payload": None, "priority": "HIGH"})
    assert patch.changes() == {"payload": None, "priority": Priority.HIGH}
    assert JobPatch.model_validate({}).changes() == {}


@pytest.mark.parametrize("field", ["name", "schedule", "target", "priority", "retry"])
def test_a_patch_refuses_null_for_a_field_a_job_must_have(field: str) -> None:
    with pytest.raises(ValidationError) as raised:
        JobPatch.model_validate({field: None})
    assert [error["loc"] for error in raised.value.errors()] == [(field,)]
    assert "must not be null" in raised.value.errors()[0]["msg"]
