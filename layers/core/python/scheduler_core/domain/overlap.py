"""Overlap and concurrency (DESIGN §3, "Work"): whether a run due to start takes one of its
job's running slots, waits for one, or is skipped. The rules, and how slots are taken and
given back, are written once in docs/concepts/overlap.md (and the catch-up queue's in
docs/concepts/misfires.md).

Pure, and why: the worker decides with `admit` on the job's counters as it read them
(`running_count`, `buffered_run_ms`, `catch_up_queue_ms`), then writes the decision
conditioned on those counters (`slots_as_read`), so a decision made on a stale read is
refused by the store and made again rather than locked against.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from scheduler_core.domain.entities import Job, Run
from scheduler_core.domain.policies import ConcurrencyPolicy
from scheduler_core.domain.vocabulary import MisfirePolicy, Overlap, Trigger


class Admission(StrEnum):
    START = "START"  # take a slot and run
    BUFFER = "BUFFER"  # wait for a slot, as the job's one buffered run
    SKIP = "SKIP"  # end SKIPPED, target not called
    WAIT_TURN = "WAIT_TURN"  # a caught-up firing: wait for its turn in the catch-up queue
    REJOIN = "REJOIN"  # a caught-up firing back for a slot (a retry): take the queue's front


def queues_when_caught_up(job: Job) -> bool:
    """Whether the job's caught-up firings queue for its running slots: under misfire
    CATCH_UP, when its concurrency is limited (ALLOW runs them all at once)."""
    return job.misfire is MisfirePolicy.CATCH_UP and job.concurrency.overlap is not Overlap.ALLOW


def queues_for_a_slot(job: Job, run: Run) -> bool:
    """Whether `run` waits its turn for a running slot rather than being skipped: a missed
    firing caught up (`queues_when_caught_up`), or a backfill's run, under a limited
    concurrency."""
    if not run.caught_up:
        return False
    backfilled = run.trigger is Trigger.BACKFILL and job.concurrency.overlap is not Overlap.ALLOW
    return backfilled or queues_when_caught_up(job)


def waits_behind_another(policy: ConcurrencyPolicy, buffered_run_ms: int | None, run_ms: int) -> bool:
    """Whether another run of a BUFFER_ONE job already waits for a slot: it goes first."""
    return policy.overlap is Overlap.BUFFER_ONE and buffered_run_ms not in (None, run_ms)


@dataclass(frozen=True)
class SlotsAsRead:
    """A job's running slots as the worker read them, for one run's admission: what a write
    conditioned on them (`ports.RunningSlots`) must still find. The policy is read here; the
    store only turns these into conditions."""

    version: int
    max_running: int
    running: int
    buffered_run_ms: int | None
    # The run buffered for a slot that this run waits behind (BUFFER_ONE: it goes first).
    waits_behind: int | None
    # BUFFER_ONE: a start must find no run but itself buffered for a slot.
    buffered_goes_first: bool
    # The first of the job's catch-up queue, if any.
    catch_up_front_ms: int | None


def slots_as_read(job: Job, run_ms: int) -> SlotsAsRead:
    """`job`'s running slots as read, for the admission of its run at `run_ms`."""
    policy = job.concurrency
    assert policy.overlap is not Overlap.ALLOW, "ALLOW counts no slots"
    assert policy.max_running is not None
    behind = waits_behind_another(policy, job.buffered_run_ms, run_ms)
    return SlotsAsRead(
        version=job.version,
        max_running=policy.max_running,
        running=job.running_count,
        buffered_run_ms=job.buffered_run_ms,
        waits_behind=job.buffered_run_ms if behind else None,
        buffered_goes_first=policy.overlap is Overlap.BUFFER_ONE,
        catch_up_front_ms=job.catch_up_queue_ms[0] if job.catch_up_queue_ms else None,
    )


def admit(
    policy: ConcurrencyPolicy,
    running: int,
    buffered_run_ms: int | None,
    run_ms: int,
    catch_up_queue: Sequence[int] = (),
    caught_up: bool = False,
) -> Admission:
    """What the run at `run_ms` does when it is due to start while `running` runs of its job hold
    a slot, the run at `buffered_run_ms` (if any) waits for one, and the caught-up firings of
    `catch_up_queue` wait their turn. `caught_up`: the run is a caught-up firing.

    - ALLOW: START, always.
    - A run of the catch-up queue: START if it is the queue's first, no run is buffered for a
      slot (BUFFER_ONE) and a slot is free; else WAIT_TURN.
    - A caught-up firing no longer in the queue (it started once: a retry, a run set aside by
      a pause): START if a slot is free and no run is buffered for one, else REJOIN.
      Caught-up firings are never SKIPPED.
    - SKIP: START while fewer than `max_running` run, else SKIP.
    - BUFFER_ONE: the waiting run goes first: any other run is SKIPPED while one waits (even
      with a slot free: the waiting one is about to take it). Otherwise START while fewer than
      `max_running` run, else BUFFER (this run becomes, or stays, the one that waits)."""
    if policy.overlap is Overlap.ALLOW or policy.max_running is None:
        return Admission.START
    buffered = waits_behind_another(policy, buffered_run_ms, run_ms)
    if run_ms in catch_up_queue:
        first = catch_up_queue[0] == run_ms
        if first and not buffered and running < policy.max_running:
            return Admission.START
        return Admission.WAIT_TURN
    if caught_up:
        return Admission.START if not buffered and running < policy.max_running else Admission.REJOIN
    if waits_behind_another(policy, buffered_run_ms, run_ms):
        return Admission.SKIP
    if running < policy.max_running:
        return Admission.START
    return Admission.BUFFER if policy.overlap is Overlap.BUFFER_ONE else Admission.SKIP


def skip_reason(policy: ConcurrencyPolicy, running: int, buffered_run_ms: int | None, run_ms: int) -> str:
    """The `error` of a SKIPPED run: why it did not run."""
    limits = f"concurrency.max_running {policy.max_running}, overlap {policy.overlap}"
    if waits_behind_another(policy, buffered_run_ms, run_ms):
        return f"skipped: another run of the job already waits for a slot ({limits})"
    runs = "run" if running == 1 else "runs"
    return f"skipped: {running} {runs} of the job running when it was due ({limits})"
