"""The conditions and update fragments the jobs table's writes share. Each condition says in
its name what a write expects to find; the state machine it follows is `run_state`'s."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from scheduler_core.adapters.dynamodb.codec import CATCH_UP_QUEUE
from scheduler_core.domain import run_state
from scheduler_core.domain.entities import Run
from scheduler_core.domain.vocabulary import RunStatus
from scheduler_core.ports import RunRef

# The claim's condition: the job is still scheduled, at the version and firing we read (its
# index entry's; a job a due listing holds has none: its next firing's).
UNCHANGED_SINCE_READ = (
    "version = :seen AND #status = :scheduled"
    " AND (due_sk = :seen_fire OR (attribute_not_exists(due_sk) AND next_fire_at_ms = :seen_fire))"
)
RUN_EXISTS = "attribute_exists(sk)"
RUN_ABSENT = "attribute_not_exists(sk)"
RUNNING_ATTEMPT = "#status = :running AND attempt = :attempt"
# A running attempt still held by the worker that started it: the fencing of every finish.
HELD_BY_OWNER = f"{RUNNING_ATTEMPT} AND lease_owner = :owner"
# A job its last run's end completes: SCHEDULED or PAUSED, with no next firing (what
# `lifecycle.is_last` reads as `next_fire_at`). A scheduled job's next firing is also its due
# index entry; a paused job keeps its next firing out of the index, so a job paused while its
# last run was calling its target completes too, and one with firings left stays PAUSED.
ACTIVE_WITH_NOTHING_LEFT_TO_FIRE = (
    "#status IN (:scheduled, :paused) AND attribute_not_exists(next_fire_at_ms)"
)
# A job none of whose runs holds or waits for a running slot (`:zero` is 0): then every
# concurrency policy starts its next run (`overlap.admit`). A start that needs no read of the
# job checks it (`start_kept_run_if_job_idle`, `claim_and_start_if_unchanged`).
NOTHING_RUNNING_OR_WAITING = [
    "(attribute_not_exists(running_count) OR running_count = :zero)",
    "attribute_not_exists(buffered_run_ms)",
    f"(attribute_not_exists({CATCH_UP_QUEUE}) OR size({CATCH_UP_QUEUE}) = :zero)",
]
LEASE_AND_TIMER = ("lease_until_ms", "lease_owner", "due_pk", "due_sk", "next_attempt_at_ms", "slot")
# A running attempt that holds one of its job's running slots (`slot`: see `overlap`).
HOLDS_SLOT = "attribute_exists(slot)"
JOIN_CATCH_UP_QUEUE = f"{CATCH_UP_QUEUE} = list_append(if_not_exists({CATCH_UP_QUEUE}, :no_runs), :queued)"


def status_one_of_values(statuses: Collection[RunStatus]) -> tuple[str, dict[str, Any]]:
    """`#status IN (...)` of `statuses`, with its (unserialized) values."""
    names = {f"src{i}": str(status) for i, status in enumerate(sorted(statuses))}
    return f"#status IN ({', '.join(':' + n for n in names)})", names


def status_in_values(target: RunStatus) -> tuple[str, dict[str, Any]]:
    """`#status IN (...)` of every status the run state machine lets move to `target`, with
    its (unserialized) values."""
    return status_one_of_values(run_state.sources_of(target))


def holds_slot(run: RunRef) -> bool:
    """Whether `run` is an attempt that holds one of its job's running slots (a queue message
    never says so: only a run as its start wrote it)."""
    return isinstance(run, Run) and run.holds_slot
