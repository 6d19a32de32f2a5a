"""The run state machine. Pure: the store turns `sources_of(target)` into the condition of
its conditional write, so an illegal transition is refused by DynamoDB itself."""

from __future__ import annotations

from scheduler_core.domain.vocabulary import RunStatus

_TRANSITIONS: dict[RunStatus, frozenset[RunStatus]] = {
    RunStatus.PENDING: frozenset(
        {RunStatus.RUNNING, RunStatus.CANCELLED, RunStatus.SKIPPED, RunStatus.FAILED}
    ),
    # RUNNING → CANCELLED: a worker started the run (ALLOW: its start does not fence its job)
    # and found its job cancelled before the call, so the target was never called.
    # RUNNING → PENDING (or RETRYING, for a retry): set aside, the same attempt, when its
    # job was paused before the call.
    RunStatus.RUNNING: frozenset(
        {RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.RETRYING, RunStatus.CANCELLED, RunStatus.PENDING}
    ),
    # RETRYING → SKIPPED: a retry obeys its job's overlap policy at its start like any run.
    RunStatus.RETRYING: frozenset(
        {RunStatus.RUNNING, RunStatus.CANCELLED, RunStatus.FAILED, RunStatus.SKIPPED}
    ),
    RunStatus.FAILED: frozenset({RunStatus.RETRYING}),  # a manual re-drive
    RunStatus.SUCCEEDED: frozenset(),  # a succeeded run never runs again
    RunStatus.SKIPPED: frozenset(),
    RunStatus.CANCELLED: frozenset(),  # final: a pause sets runs aside, it never cancels them
}

# Waiting for a worker: claimed (PENDING) or between attempts (RETRYING).
WAITING = frozenset({RunStatus.PENDING, RunStatus.RETRYING})

# Ended: no worker acts on them again on its own (a FAILED run may be re-driven by hand).
TERMINAL = frozenset(
    status for status, nexts in _TRANSITIONS.items() if not nexts or status is RunStatus.FAILED
)


def can_transition(source: RunStatus, target: RunStatus) -> bool:
    return target in _TRANSITIONS[source]


def sources_of(target: RunStatus) -> frozenset[RunStatus]:
    """Every status a run may be in to move to `target`."""
    return frozenset(source for source, nexts in _TRANSITIONS.items() if target in nexts)
