"""The run state machine (DESIGN §3): which status a run may move to from which."""

from __future__ import annotations

import itertools

import pytest

from scheduler_core.domain.run_state import TERMINAL, can_transition, sources_of
from scheduler_core.domain.vocabulary import RunStatus

S = RunStatus


@pytest.mark.parametrize(
    ("source", "target"),
    [
        (S.PENDING, S.RUNNING),
        (S.RUNNING, S.SUCCEEDED),
        (S.RUNNING, S.FAILED),
        (S.RUNNING, S.RETRYING),
        (S.RETRYING, S.RUNNING),
        (S.FAILED, S.RETRYING),  # a manual re-drive
        (S.PENDING, S.CANCELLED),
        (S.PENDING, S.SKIPPED),
        (S.PENDING, S.FAILED),  # the watchdog gives up before the run ever started
        (S.RETRYING, S.CANCELLED),
        (S.RETRYING, S.FAILED),
        (S.RETRYING, S.SKIPPED),  # a retry that finds its job's running slots taken (overlap SKIP)
    ],
)
def test_allowed_transition(source: RunStatus, target: RunStatus) -> None:
    assert can_transition(source, target)


@pytest.mark.parametrize("target", list(RunStatus))
def test_a_succeeded_run_never_moves_again(target: RunStatus) -> None:
    assert not can_transition(S.SUCCEEDED, target)


@pytest.mark.parametrize("target", list(RunStatus))
def test_a_cancelled_run_never_moves_again(target: RunStatus) -> None:
    """A pause sets runs aside and never cancels them, so nothing brings a cancelled run back."""
    assert not can_transition(S.CANCELLED, target)


@pytest.mark.parametrize("target", list(RunStatus))
def test_a_skipped_run_never_moves_again(target: RunStatus) -> None:
    assert not can_transition(S.SKIPPED, target)


def test_a_running_run_goes_back_to_waiting_only_when_set_aside_before_its_call() -> None:
    """A worker that started a run early and then found its job paused sets it aside, same
    attempt (the store fences this by the worker's lease): PENDING, or RETRYING for a retry."""
    assert can_transition(S.RUNNING, S.PENDING)
    assert can_transition(S.RUNNING, S.RETRYING)


def test_a_pending_run_cannot_succeed_or_retry_without_running() -> None:
    assert not can_transition(S.PENDING, S.SUCCEEDED)
    assert not can_transition(S.PENDING, S.RETRYING)


def test_a_failed_run_can_only_be_re_driven() -> None:
    assert [t for t in RunStatus if can_transition(S.FAILED, t)] == [S.RETRYING]


@pytest.mark.parametrize("status", list(RunStatus))
def test_no_status_moves_to_itself(status: RunStatus) -> None:
    # RUNNING → RUNNING in particular would let two workers start the same attempt.
    assert not can_transition(status, status)


def test_a_run_starts_only_from_pending_or_retrying() -> None:
    assert sources_of(S.RUNNING) == {S.PENDING, S.RETRYING}


def test_only_a_run_set_aside_moves_back_to_pending() -> None:
    assert sources_of(S.PENDING) == {S.RUNNING}


def test_only_a_running_run_can_succeed() -> None:
    assert sources_of(S.SUCCEEDED) == {S.RUNNING}


@pytest.mark.parametrize(("source", "target"), list(itertools.product(RunStatus, RunStatus)))
def test_sources_of_agrees_with_can_transition(source: RunStatus, target: RunStatus) -> None:
    assert (source in sources_of(target)) == can_transition(source, target)


def test_terminal_statuses_are_the_ones_a_run_ends_in() -> None:
    assert {S.SUCCEEDED, S.FAILED, S.SKIPPED, S.CANCELLED} == TERMINAL


def test_a_run_can_be_cancelled_after_a_worker_took_it_but_before_it_called_the_target() -> None:
    assert can_transition(S.RUNNING, S.CANCELLED)
