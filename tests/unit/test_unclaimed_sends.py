"""What a poll does with a job's next firing when one-offs are claimed at their start
(`unclaimed_sends.send_decision`): only a firing the start can claim alone is sent unclaimed,
once, within the poll's window; one sent earlier waits for its start until `resend_after`
after its time, then the poll claims it; anything else is claimed by the poll."""

from __future__ import annotations

from datetime import timedelta

import pytest

from scheduler_core.domain.clock import to_ms
from scheduler_core.domain.entities import Job
from scheduler_core.domain.schedule import ScheduleSpec
from scheduler_core.domain.vocabulary import JobKind, JobStatus
from scheduler_core.services.unclaimed_sends import (
    SEND_MARGIN,
    Send,
    SendWindow,
    claimable_by_start,
    send_decision,
)
from tests.support.builders import T0, a_job

RESEND = timedelta(seconds=60)
NOW = T0
FIRE = NOW + timedelta(seconds=90)
HORIZON = NOW + timedelta(seconds=120)


def one_off(**fields: object) -> Job:
    values: dict[str, object] = {"schedule": ScheduleSpec(at=FIRE), "next_fire_at": FIRE}
    return a_job("once", **(values | fields))


def test_a_one_offs_firing_can_be_claimed_by_its_start() -> None:
    assert claimable_by_start(one_off())


@pytest.mark.parametrize(
    "fields",
    [
        {"schedule": ScheduleSpec(cron="* * * * *")},  # a firing after this one
        {"schedule": ScheduleSpec(at=FIRE, jitter_seconds=30)},
        {"kind": JobKind.WORKFLOW},
        {"status": JobStatus.PAUSED},
        {"running_count": 1},
        {"buffered_run_ms": to_ms(FIRE)},
        {"catch_up_queue_ms": [to_ms(FIRE)]},
        {"next_fire_at": None},
    ],
    ids=["cron", "jittered", "workflow", "paused", "running", "buffered", "catching-up", "no-firing"],
)
def test_what_else_the_poll_claims(fields: dict[str, object]) -> None:
    job = one_off(**fields)
    assert not claimable_by_start(job)
    assert send_decision(job, NOW, SendWindow.of_poll(None, HORIZON), RESEND) is Send.CLAIM


def test_the_window_runs_from_what_was_sent_to_the_horizon_less_the_margin() -> None:
    assert SendWindow.of_poll(None, HORIZON) == SendWindow(0, to_ms(HORIZON - SEND_MARGIN))
    assert SendWindow.of_poll(to_ms(FIRE), HORIZON) == SendWindow(to_ms(FIRE), to_ms(HORIZON - SEND_MARGIN))
    # A mark past this poll's reach (a poll with a faster clock wrote it) sends nothing.
    later = to_ms(HORIZON + timedelta(minutes=1))
    assert SendWindow.of_poll(later, HORIZON) == SendWindow(
        to_ms(HORIZON - SEND_MARGIN), to_ms(HORIZON - SEND_MARGIN)
    )


def test_a_firing_within_the_window_is_sent_and_one_sent_before_waits() -> None:
    job = one_off()
    assert send_decision(job, NOW, SendWindow(to_ms(FIRE), to_ms(HORIZON)), RESEND) is Send.SEND
    assert send_decision(job, NOW, SendWindow(to_ms(FIRE) + 1, to_ms(HORIZON)), RESEND) is Send.WAIT


def test_a_firing_beyond_the_window_is_the_next_polls() -> None:
    job = one_off()
    assert send_decision(job, NOW, SendWindow(0, to_ms(FIRE)), RESEND) is Send.WAIT


def test_a_sent_firing_not_started_by_the_resend_timer_is_claimed() -> None:
    job = one_off()
    window = SendWindow(to_ms(FIRE) + 1, to_ms(HORIZON + RESEND))
    assert send_decision(job, FIRE + RESEND - timedelta(milliseconds=1), window, RESEND) is Send.WAIT
    assert send_decision(job, FIRE + RESEND, window, RESEND) is Send.LATE


def test_a_firing_past_that_no_poll_sent_goes_as_its_misfire_policy_says() -> None:
    job = one_off()
    assert (
        send_decision(job, FIRE + timedelta(seconds=1), SendWindow(0, to_ms(HORIZON)), RESEND) is Send.CLAIM
    )
