"""Where a starting run's timer goes (`RunLifecycle.start_timer`): it stays when it comes
before the lease ends, so a run that ends in time never rewrites its index entry."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from scheduler_core.domain.entities import Run
from scheduler_core.domain.vocabulary import Priority, RunStatus, Trigger
from scheduler_core.services.lifecycle import RunLifecycle

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
LEASE_END = NOW + timedelta(seconds=540)


def waiting(due_at: datetime | None) -> Run:
    return Run(
        run_id="job:1",
        job_id="job",
        status=RunStatus.PENDING,
        trigger=Trigger.SCHEDULE,
        scheduled_for=NOW,
        priority=Priority.NORMAL,
        due_at=due_at,
    )


@pytest.mark.parametrize(
    ("due_at", "moved_to"),
    [
        pytest.param(NOW + timedelta(seconds=60), None, id="re-send timer ahead: stays"),
        pytest.param(LEASE_END, None, id="at the lease's end: stays"),
        pytest.param(LEASE_END + timedelta(seconds=1), LEASE_END, id="after the lease: moves to it"),
        pytest.param(NOW, LEASE_END, id="up now: moves to the lease"),
        pytest.param(NOW - timedelta(seconds=5), LEASE_END, id="already past: moves to the lease"),
        pytest.param(None, LEASE_END, id="no timer: gets the lease"),
    ],
)
def test_a_starting_runs_timer_stays_only_while_it_comes_before_the_lease_ends(
    due_at: datetime | None, moved_to: datetime | None
) -> None:
    assert RunLifecycle.start_timer(waiting(due_at), NOW, LEASE_END) == moved_to
