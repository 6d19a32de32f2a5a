"""Overlap and concurrency (DESIGN §3, "Work"): whether a run due to start takes one of its
job's running slots, waits for one, or is skipped. Pure: the worker decides with `admit`, then
writes the decision conditionally on the job's counters as it read them (`running_count`,
`buffered_run_ms` on the job item), so a decision made on a stale read is refused and made
again.

- A slot is taken by an attempt's start, in the same transaction, and given back by every
  write that ends the attempt (succeeded, failed, retrying, cancelled, taken over by the
  watchdog at lease expiry), so a dead worker holds it no longer than its lease.
- A retry gave its slot back when its attempt failed; it takes one again at its next start,
  under the same policy as any run.
- ALLOW counts nothing: its runs neither take nor give back slots.
"""

from __future__ import annotations

from enum import StrEnum

from scheduler_core.model import ConcurrencyPolicy, Overlap


class Admission(StrEnum):
    START = "START"  # take a slot and run
    BUFFER = "BUFFER"  # wait for a slot, as the job's one buffered run
    SKIP = "SKIP"  # end SKIPPED, target not called


def waits_behind_another(policy: ConcurrencyPolicy, buffered_run_ms: int | None, run_ms: int) -> bool:
    """Whether another run of a BUFFER_ONE job already waits for a slot: it goes first."""
    return policy.overlap is Overlap.BUFFER_ONE and buffered_run_ms not in (None, run_ms)


def admit(policy: ConcurrencyPolicy, running: int, buffered_run_ms: int | None, run_ms: int) -> Admission:
    """What the run at `run_ms` does when it is due to start while `running` runs of its job hold
    a slot and the run at `buffered_run_ms` (if any) waits for one.

    - ALLOW: START, always.
    - SKIP: START while fewer than `max_running` run, else SKIP.
    - BUFFER_ONE: the waiting run goes first: any other run is SKIPPED while one waits (even
      with a slot free: the waiting one is about to take it). Otherwise START while fewer than
      `max_running` run, else BUFFER (this run becomes, or stays, the one that waits)."""
    if policy.overlap is Overlap.ALLOW or policy.max_running is None:
        return Admission.START
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
