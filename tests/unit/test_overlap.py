"""Overlap and concurrency decisions (issue 5): what a run due to start does, given its job's
policy, the slots taken and the run waiting for one. Pure."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import ValidationError

from scheduler_core.domain.api_shapes import JobCreate, JobPatch
from scheduler_core.domain.entities import Job
from scheduler_core.domain.overlap import (
    Admission,
    SlotsAsRead,
    admit,
    skip_reason,
    slots_as_read,
    waits_behind_another,
)
from scheduler_core.domain.policies import ConcurrencyPolicy, RetryPolicy
from scheduler_core.domain.schedule import ScheduleSpec
from scheduler_core.domain.vocabulary import JobStatus, Overlap, Priority

ME = 1_000
OTHER = 2_000
A = Admission


def policy(overlap: str, max_running: int | None = None) -> ConcurrencyPolicy:
    fields: dict[str, Any] = {"overlap": overlap}
    if max_running is not None:
        fields["max_running"] = max_running
    return ConcurrencyPolicy.model_validate(fields)


@pytest.mark.parametrize(
    ("overlap", "max_running", "running", "buffered", "expected"),
    [
        # SKIP: start while a slot is free, else skip.
        ("SKIP", 1, 0, None, A.START),
        ("SKIP", 1, 1, None, A.SKIP),
        ("SKIP", 2, 1, None, A.START),
        ("SKIP", 2, 2, None, A.SKIP),
        ("SKIP", 2, 3, None, A.SKIP),  # more than the limit (it was lowered): still none free
        # A run left buffered by an earlier BUFFER_ONE policy does not hold SKIP runs back ...
        ("SKIP", 1, 0, OTHER, A.START),
        # ... and itself is decided like any run.
        ("SKIP", 1, 1, ME, A.SKIP),
        ("SKIP", 1, 0, ME, A.START),
        # BUFFER_ONE: start while a slot is free, else wait; skip while another waits.
        ("BUFFER_ONE", 1, 0, None, A.START),
        ("BUFFER_ONE", 1, 1, None, A.BUFFER),
        ("BUFFER_ONE", 1, 1, ME, A.BUFFER),  # still waiting
        ("BUFFER_ONE", 1, 0, ME, A.START),  # its slot came
        ("BUFFER_ONE", 1, 1, OTHER, A.SKIP),
        ("BUFFER_ONE", 1, 0, OTHER, A.SKIP),  # a slot is free, but the waiting run goes first
        ("BUFFER_ONE", 3, 2, None, A.START),
        ("BUFFER_ONE", 3, 3, None, A.BUFFER),
        # ALLOW: no limit.
        ("ALLOW", None, 0, None, A.START),
        ("ALLOW", None, 50, None, A.START),
        ("ALLOW", None, 5, OTHER, A.START),
    ],
)
def test_admit(
    overlap: str, max_running: int | None, running: int, buffered: int | None, expected: A
) -> None:
    assert admit(policy(overlap, max_running), running, buffered, ME) is expected


def test_only_another_run_waiting_under_buffer_one_holds_a_run_back() -> None:
    assert waits_behind_another(policy("BUFFER_ONE"), OTHER, ME)
    assert not waits_behind_another(policy("BUFFER_ONE"), ME, ME)
    assert not waits_behind_another(policy("BUFFER_ONE"), None, ME)
    assert not waits_behind_another(policy("SKIP"), OTHER, ME)


@pytest.mark.parametrize("overlap", ["SKIP", "BUFFER_ONE"])
@pytest.mark.parametrize(
    ("running", "queue", "expected"),
    [
        (0, [ME, OTHER], A.START),  # first in line, a slot free: it starts
        (1, [ME, OTHER], A.WAIT_TURN),  # first in line, no slot: it waits, never skipped
        (0, [OTHER, ME], A.WAIT_TURN),  # an older caught-up firing goes first
        (5, [ME], A.WAIT_TURN),  # over a lowered limit: still waits
    ],
)
def test_a_caught_up_firing_waits_its_turn_for_a_slot_and_is_never_skipped(
    overlap: str, running: int, queue: list[int], expected: Admission
) -> None:
    assert admit(policy(overlap, 1), running, None, ME, queue) is expected


def test_a_run_buffered_for_a_slot_goes_before_the_queue_only_under_buffer_one() -> None:
    assert admit(policy("BUFFER_ONE", 1), 0, OTHER, ME, [ME]) is A.WAIT_TURN
    # Left behind by an earlier BUFFER_ONE policy, it holds nothing back.
    assert admit(policy("SKIP", 1), 0, OTHER, ME, [ME]) is A.START


@pytest.mark.parametrize(
    ("overlap", "running", "buffered", "expected"),
    [
        ("SKIP", 0, None, A.START),
        ("SKIP", 1, None, A.REJOIN),  # its retry finds the slot taken: back to the front
        ("BUFFER_ONE", 1, None, A.REJOIN),
        ("BUFFER_ONE", 0, OTHER, A.REJOIN),  # the buffered run goes first
        ("SKIP", 0, OTHER, A.START),
    ],
)
def test_a_caught_up_firing_out_of_the_queue_takes_its_front_again_rather_than_be_skipped(
    overlap: str, running: int, buffered: int | None, expected: Admission
) -> None:
    assert admit(policy(overlap, 1), running, buffered, ME, [OTHER], caught_up=True) is expected


def test_the_catch_up_queue_does_not_change_a_run_that_is_not_in_it() -> None:
    assert admit(policy("SKIP", 1), 1, None, ME, [OTHER]) is A.SKIP
    assert admit(policy("SKIP", 2), 1, None, ME, [OTHER]) is A.START  # live runs use free slots
    assert admit(policy("ALLOW"), 9, None, ME, [ME]) is A.START  # ALLOW: nothing waits


def test_a_skipped_run_says_why() -> None:
    assert skip_reason(policy("SKIP"), 1, None, ME) == (
        "skipped: 1 run of the job running when it was due (concurrency.max_running 1, overlap SKIP)"
    )
    assert skip_reason(policy("SKIP", 2), 2, None, ME).startswith("skipped: 2 runs of the job running")
    assert skip_reason(policy("BUFFER_ONE"), 1, OTHER, ME) == (
        "skipped: another run of the job already waits for a slot "
        "(concurrency.max_running 1, overlap BUFFER_ONE)"
    )


# --- the policy as a request gives it ---------------------------------------------------------


def test_the_default_is_one_run_at_a_time_skipping_the_others() -> None:
    assert ConcurrencyPolicy() == ConcurrencyPolicy(overlap=Overlap.SKIP, max_running=1)
    request = JobCreate.model_validate(
        {"name": "n", "schedule": {"cron": "* * * * *"}, "target": {"type": "HTTP", "url": "https://x.io"}}
    )
    assert request.concurrency.model_dump(mode="json") == {"overlap": "SKIP", "max_running": 1}


def test_buffer_one_defaults_to_one_running_and_allow_has_no_limit() -> None:
    assert policy("BUFFER_ONE").max_running == 1
    assert policy("ALLOW").max_running is None
    assert policy("SKIP", 5).max_running == 5


def errors_of(body: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(ValidationError) as caught:
        ConcurrencyPolicy.model_validate(body)
    return [(".".join(str(part) for part in error["loc"]), error["msg"]) for error in caught.value.errors()]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"max_running": 0}, "max_running"),
        ({"max_running": -1}, "max_running"),
        ({"max_running": 1001}, "max_running"),
        ({"overlap": "QUEUE"}, "overlap"),
        ({"overlap": "skip"}, "overlap"),  # enum values are upper case
        ({"overlap": "ALLOW", "max_running": 1}, "max_running"),
        ({"parallel": 2}, "parallel"),
    ],
)
def test_a_bad_policy_names_its_field(body: dict[str, Any], field: str) -> None:
    assert [loc for loc, _ in errors_of(body)] == [field]


def test_a_limit_given_with_allow_is_refused_for_what_it_is() -> None:
    [(_, message)] = errors_of({"overlap": "ALLOW", "max_running": 3})
    assert "ALLOW starts every run without a limit" in message


def test_a_patch_may_not_null_the_policy() -> None:
    with pytest.raises(ValidationError) as caught:
        JobPatch.model_validate({"concurrency": None})
    assert [error["loc"] for error in caught.value.errors()] == [("concurrency",)]


def job_with(concurrency: ConcurrencyPolicy, running: int, buffered: int | None, queue: list[int]) -> Job:
    when = datetime(2026, 11, 26, 9, 0, tzinfo=UTC)
    return Job(
        job_id="job-1",
        tenant="alice",
        name="n",
        status=JobStatus.SCHEDULED,
        schedule=ScheduleSpec(cron="* * * * *"),
        target={"type": "HTTP", "url": "https://example.com/"},
        priority=Priority.NORMAL,
        retry=RetryPolicy(),
        next_fire_at=when,
        concurrency=concurrency,
        created_at=when,
        updated_at=when,
        version=7,
        running_count=running,
        buffered_run_ms=buffered,
        catch_up_queue_ms=queue,
    )


def test_the_slots_a_write_relies_on_carry_the_policy_s_decisions_not_the_policy() -> None:
    """The store conditions its writes on `SlotsAsRead` alone: which run goes first is decided
    here, from the policy."""
    buffer_one = job_with(policy("BUFFER_ONE", 2), running=2, buffered=500, queue=[300, 400])
    assert slots_as_read(buffer_one, 600) == SlotsAsRead(
        version=7,
        max_running=2,
        running=2,
        buffered_run_ms=500,
        waits_behind=500,  # another run waits for a slot: it goes first
        buffered_goes_first=True,
        catch_up_front_ms=300,
    )
    assert slots_as_read(buffer_one, 500).waits_behind is None  # the buffered run itself
    skip = slots_as_read(job_with(policy("SKIP", 1), running=1, buffered=None, queue=[]), 600)
    assert (skip.waits_behind, skip.buffered_goes_first, skip.catch_up_front_ms) == (None, False, None)


def test_allow_has_no_slots_to_read() -> None:
    with pytest.raises(AssertionError):
        slots_as_read(job_with(policy("ALLOW"), running=0, buffered=None, queue=[]), 600)
