"""The state and the shared moves of the in-memory jobs table (`fake_store`): jobs and runs
as entities under one lock, and the run-end, retry and lease checks every transition uses."""

from __future__ import annotations

import threading
from collections.abc import Collection
from datetime import datetime
from typing import Any

from scheduler_core.domain import keys, run_state
from scheduler_core.domain.clock import to_ms
from scheduler_core.domain.entities import Attempt, Job, Run
from scheduler_core.domain.vocabulary import MAX_RUN_ERROR, JobStatus, RunStatus
from scheduler_core.poll_ports import PollResume
from scheduler_core.ports import RunRef

ENDED_FOR_GOOD = frozenset({RunStatus.SUCCEEDED, RunStatus.CANCELLED, RunStatus.SKIPPED})


class FakeTable:
    """The fake's state; see `fake_store.InMemoryJobStore`."""

    def __init__(self, shard_count: int = 4) -> None:
        self._shards = shard_count
        self._lock = threading.RLock()
        self._jobs: dict[str, Job] = {}
        self._runs: dict[tuple[str, int], Run] = {}
        self._owners: dict[tuple[str, int], str] = {}
        self._watermarks: dict[int, int] = {}
        self._resumes: dict[int, PollResume | None] = {}
        self._sent_until: dict[int, int] = {}

    # --- helpers ------------------------------------------------------------------------

    def _started(
        self,
        stored: Run,
        now: datetime,
        lease_until: datetime,
        owner: str,
        timer: datetime | None,
        slot: bool,
    ) -> Run:
        started = stored.model_copy(
            update={
                "status": RunStatus.RUNNING,
                "started_at": now,
                "lease_until": lease_until,
                "holds_slot": slot,
                "due_at": timer or stored.due_at,
            }
        )
        self._runs[self._key(stored)] = started
        self._owners[self._key(stored)] = owner
        return started

    @staticmethod
    def _key(run: RunRef) -> tuple[str, int]:
        return run.job_id, run.scheduled_for_ms

    def _due_pk(self, job_id: str, when: datetime) -> str:
        return keys.due_pk(to_ms(when), keys.shard_for(job_id, self._shards))

    def _waiting(self, run: RunRef, statuses: Collection[RunStatus]) -> Run | None:
        stored = self._runs.get(self._key(run))
        if stored is None or stored.status not in statuses or stored.attempt != run.attempt:
            return None
        return stored

    def _held(self, run: RunRef, owner: str, slot: bool = False) -> Run | None:
        stored = self._runs.get(self._key(run))
        if (
            stored is None
            or stored.status is not RunStatus.RUNNING
            or stored.attempt != run.attempt
            or self._owners.get(self._key(run)) != owner
            or (slot and not stored.holds_slot)
        ):
            return None
        return stored

    @staticmethod
    def _running_as_read(stored: Run | None, run: Run) -> bool:
        return (
            stored is not None
            and stored.status is RunStatus.RUNNING
            and stored.attempt == run.attempt
            and stored.lease_until == run.lease_until
        )

    def _paused(self, job_id: str) -> bool:
        job = self._jobs.get(job_id)
        return job is not None and job.status is JobStatus.PAUSED

    def _release(self, job_id: str, slot: bool) -> None:
        job = self._jobs.get(job_id)
        if slot and job is not None and job.running_count >= 1:
            self._jobs[job_id] = job.model_copy(update={"running_count": job.running_count - 1})

    def _end(self, stored: Run, changes: dict[str, Any], now: datetime, complete: bool, release: bool) -> Run:
        """A running attempt's end: its slot given back (`release`), its job completed if asked
        and it may (either part skipped when its own condition does not hold, as the adapter
        does)."""
        self._release(stored.job_id, release)
        job = self._jobs.get(stored.job_id)
        if complete and job is not None and may_complete(job):
            self._jobs[stored.job_id] = job.model_copy(
                update={"status": JobStatus.COMPLETED, "version": job.version + 1, "updated_at": now}
            )
        ended = run_ended(stored, changes)
        self._runs[self._key(stored)] = ended
        self._owners.pop(self._key(stored), None)
        return ended

    def _end_waiting(self, run: RunRef, status: RunStatus, now: datetime, error: str | None) -> bool:
        with self._lock:
            stored = self._waiting(run, run_state.WAITING)
            if stored is None:
                return False
            self._runs[self._key(run)] = run_ended(
                stored, {"status": status, "finished_at": now, "error": error}
            )
            return True

    def _to_retry(
        self,
        stored: Run,
        next_attempt_at: datetime,
        due_at: datetime,
        ended: Attempt,
        lateness_ms: int | None,
        release: bool,
        keep: bool = False,
    ) -> Run:
        self._release(stored.job_id, release)
        response_code = ended.response_code
        changes: dict[str, Any] = {
            "status": RunStatus.RETRYING,
            "attempt": stored.attempt + 1,
            "next_attempt_at": next_attempt_at,
            "due_at": due_at,
            "error": kept_error(ended.error),
            "lease_until": None,
            "holds_slot": False,
            # Appended: only a re-drive trims the list (`Run.past_attempts_with`).
            "past_attempts": [*stored.past_attempts, ended.as_kept()],
            "response_code": response_code,  # none if the attempt got no answer
        }
        if not keep:
            changes["lateness_ms"] = lateness_ms
        retried = stored.model_copy(
            update={k: v for k, v in changes.items() if v is not None or k in CLEARED}
        )
        self._runs[self._key(stored)] = retried
        self._owners.pop(self._key(stored), None)
        return retried


# Attributes a retry clears rather than leaves as they were when its value is None.


CLEARED = frozenset({"lease_until", "holds_slot", "response_code"})


def run_ended(run: Run, changes: dict[str, Any]) -> Run:
    cleared = {"due_at": None, "lease_until": None, "next_attempt_at": None, "holds_slot": False}
    kept = {name: value for name, value in changes.items() if value is not None}
    return run.model_copy(update=cleared | kept)


def may_complete(job: Job) -> bool:
    return job.status in (JobStatus.SCHEDULED, JobStatus.PAUSED) and job.next_fire_at is None


def holds_a_slot(run: RunRef) -> bool:
    return isinstance(run, Run) and run.holds_slot


def kept_error(error: str | None) -> str | None:
    return error[:MAX_RUN_ERROR] if error else None


def created_key(job: Job) -> str:
    return f"{to_ms(job.created_at):013d}#{job.job_id}"
