"""An in-memory fake of every port of the jobs table (`scheduler_core.ports.JobStore`), for
service tests that need no moto. It keeps jobs and runs as the entities themselves and
applies each write's condition as the port states it, under one lock (the poll claims on
threads). `tests/integration/test_store_contract.py` runs the same cases against it and
the DynamoDB adapter, so the two cannot drift."""

from __future__ import annotations

import threading
from collections.abc import Collection, Iterator, Sequence
from datetime import datetime
from typing import Any

from scheduler_core import keys, run_state
from scheduler_core.clock import to_ms
from scheduler_core.cursors import decode_cursor, encode_cursor
from scheduler_core.entities import Job, Run
from scheduler_core.overlap import SlotsAsRead
from scheduler_core.ports import CursorNotValid, DueItems, Page, RunRef, SlotsChanged
from scheduler_core.vocabulary import JobStatus, RunStatus, Trigger

MAX_ERROR = 2000  # the longest `error` a run keeps, as the adapter does
_ENDED_FOR_GOOD = frozenset({RunStatus.SUCCEEDED, RunStatus.CANCELLED, RunStatus.SKIPPED})


class InMemoryJobStore:
    """`JobStore` in memory. `shard_count` places jobs and runs in the due index as the
    adapter does (`keys.shard_for`)."""

    def __init__(self, shard_count: int = 4) -> None:
        self._shards = shard_count
        self._lock = threading.RLock()
        self._jobs: dict[str, Job] = {}
        self._runs: dict[tuple[str, int], Run] = {}
        self._owners: dict[tuple[str, int], str] = {}
        self._watermarks: dict[int, int] = {}

    # --- JobRecords ---------------------------------------------------------------------

    def put_job_if_absent(self, job: Job) -> bool:
        with self._lock:
            if job.job_id in self._jobs:
                return False
            self._jobs[job.job_id] = job
            return True

    def get_job(self, job_id: str) -> Job | None:
        with self._lock:
            return self._jobs.get(job_id)

    def update_job_if_unchanged(
        self, before: Job, after: Job, now: datetime, run: Run | None = None, catch_up: Sequence[int] = ()
    ) -> bool:
        with self._lock:
            stored = self._jobs.get(before.job_id)
            if stored is None or stored.version != before.version or stored.status != before.status:
                return False
            if run is not None and self._key(run) in self._runs:
                return False
            kept = {
                "tenant": stored.tenant,
                "created_at": stored.created_at,
                "running_count": stored.running_count,
                "buffered_run_ms": stored.buffered_run_ms,
                "catch_up_queue_ms": [*stored.catch_up_queue_ms, *catch_up],
            }
            self._jobs[before.job_id] = after.model_copy(update=kept)
            if run is not None:
                self._runs[self._key(run)] = run
            return True

    def cancel_job_if_active(self, job_id: str, now: datetime) -> bool:
        with self._lock:
            job = self._jobs.get(job_id)
            if job is None or job.status not in (JobStatus.SCHEDULED, JobStatus.PAUSED):
                return False
            self._jobs[job_id] = job.model_copy(
                update={
                    "status": JobStatus.CANCELLED,
                    "version": job.version + 1,
                    "updated_at": now,
                    "next_fire_at": None,
                }
            )
            return True

    # --- Listing ------------------------------------------------------------------------

    def list_jobs(
        self,
        tenant: str,
        limit: int,
        cursor: str | None,
        status: JobStatus | None,
        name_prefix: str | None = None,
    ) -> Page:
        after = decode_cursor(cursor, ("tenant", "created_key")) if cursor else None
        if after is not None and after["tenant"] != tenant:
            raise CursorNotValid("another tenant's")
        with self._lock:
            jobs = sorted(
                (job for job in self._jobs.values() if job.tenant == tenant), key=_created_key, reverse=True
            )
        if after is not None:
            jobs = [job for job in jobs if _created_key(job) < after["created_key"]]
        kept = [
            job
            for job in jobs
            if (status is None or job.status is status)
            and (name_prefix is None or job.name.startswith(name_prefix))
        ]
        page = kept[:limit]
        more = len(kept) > limit
        return Page(
            page, encode_cursor({"tenant": tenant, "created_key": _created_key(page[-1])}) if more else None
        )

    def list_runs(self, job_id: str, limit: int, cursor: str | None, status: RunStatus | None = None) -> Page:
        after = decode_cursor(cursor, ("job_id", "scheduled_for_ms")) if cursor else None
        if after is not None and after["job_id"] != job_id:
            raise CursorNotValid("another job's")
        runs = self._runs_of(job_id)
        if after is not None:
            runs = [run for run in runs if run.scheduled_for_ms < after["scheduled_for_ms"]]
        kept = [run for run in runs if status is None or run.status is status]
        page = kept[:limit]
        more = len(kept) > limit
        cursor_out = {"job_id": job_id, "scheduled_for_ms": page[-1].scheduled_for_ms} if more else None
        return Page(page, encode_cursor(cursor_out) if cursor_out else None)

    def recent_runs(
        self,
        job_id: str,
        limit: int,
        *,
        after: datetime | None = None,
        statuses: Collection[RunStatus] | None = None,
    ) -> list[Run]:
        runs = [run for run in self._runs_of(job_id) if after is None or run.scheduled_for > after][:limit]
        return [run for run in runs if statuses is None or run.status in statuses]

    def _runs_of(self, job_id: str) -> list[Run]:
        with self._lock:
            mine = [run for (owner, _), run in self._runs.items() if owner == job_id]
        return sorted(mine, key=lambda run: run.scheduled_for_ms, reverse=True)

    # --- RunRecords ---------------------------------------------------------------------

    def get_run(self, job_id: str, scheduled_for_ms: int) -> Run | None:
        with self._lock:
            return self._runs.get((job_id, scheduled_for_ms))

    def get_job_and_run(self, job_id: str, scheduled_for_ms: int) -> tuple[Job | None, Run | None]:
        with self._lock:
            return self._jobs.get(job_id), self._runs.get((job_id, scheduled_for_ms))

    def put_run_if_absent(self, run: Run, now: datetime) -> bool:
        with self._lock:
            if self._key(run) in self._runs:
                return False
            self._runs[self._key(run)] = run
            return True

    # --- DueIndex and Watermarks --------------------------------------------------------

    def due_pages(
        self, shard: int, bucket_ms: int, until_ms: int, runs_until_ms: int | None = None
    ) -> Iterator[DueItems]:
        bucket = keys.due_pk(bucket_ms, shard)
        with self._lock:
            jobs = [
                job
                for job in self._jobs.values()
                if job.status is JobStatus.SCHEDULED
                and job.next_fire_at is not None
                and self._due_pk(job.job_id, job.next_fire_at) == bucket
                and to_ms(job.next_fire_at) <= until_ms
            ]
            timed = [
                run
                for run in self._runs.values()
                if run.due_at is not None
                and self._due_pk(run.job_id, run.due_at) == bucket
                and to_ms(run.due_at) <= until_ms
            ]
        runs = [
            run
            for run in timed
            if runs_until_ms is None or to_ms(run.due_at or run.scheduled_for) <= runs_until_ms
        ]
        later = len(timed) - len(runs)
        if jobs or runs or later:
            yield DueItems(
                sorted(jobs, key=lambda job: to_ms(job.next_fire_at or job.created_at)),
                sorted(runs, key=lambda run: to_ms(run.due_at or run.scheduled_for)),
                later,
            )

    def claim_if_unchanged(
        self, job: Job, run: Run, next_fire_at: datetime | None, now: datetime, catch_up: bool = False
    ) -> bool:
        with self._lock:
            stored = self._jobs.get(job.job_id)
            if (
                stored is None
                or stored.version != job.version
                or stored.next_fire_at != job.next_fire_at
                or stored.status is not JobStatus.SCHEDULED
                or self._key(run) in self._runs
            ):
                return False
            queue = (
                [*stored.catch_up_queue_ms, run.scheduled_for_ms] if catch_up else stored.catch_up_queue_ms
            )
            self._jobs[job.job_id] = stored.model_copy(
                update={
                    "version": stored.version + 1,
                    "updated_at": now,
                    "next_fire_at": next_fire_at,
                    "catch_up_queue_ms": queue,
                }
            )
            self._runs[self._key(run)] = run
            return True

    def get_watermark(self, shard: int) -> int | None:
        with self._lock:
            return self._watermarks.get(shard)

    def advance_watermark(self, shard: int, bucket_ms: int) -> None:
        with self._lock:
            if self._watermarks.get(shard, -1) < bucket_ms:
                self._watermarks[shard] = bucket_ms

    # --- RunTransitions: the worker's ---------------------------------------------------

    def start_run_if_waiting(
        self, run: RunRef, now: datetime, lease_until: datetime, owner: str, timer: datetime | None = None
    ) -> Run | None:
        with self._lock:
            stored = self._waiting(run, run_state.sources_of(RunStatus.RUNNING))
            if stored is None:
                return None
            return self._started(stored, now, lease_until, owner, timer, slot=False)

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

    def extend_lease_if_held(self, run: RunRef, owner: str, lease_until: datetime) -> bool:
        with self._lock:
            stored = self._held(run, owner)
            if stored is None:
                return False
            self._runs[self._key(run)] = stored.model_copy(
                update={"lease_until": lease_until, "due_at": lease_until}
            )
            return True

    def finish_run_if_held(
        self,
        run: RunRef,
        owner: str,
        status: RunStatus,
        now: datetime,
        error: str | None = None,
        response_code: int | None = None,
        lateness_ms: int | None = None,
        complete_job: bool = False,
    ) -> bool:
        with self._lock:
            stored = self._held(run, owner, slot=_holds_slot(run))
            if stored is None:
                return False
            changes: dict[str, Any] = {"status": status, "finished_at": now, "error": _error(error)}
            changes |= {"response_code": response_code, "lateness_ms": lateness_ms}
            self._end(stored, changes, now, complete_job, release=_holds_slot(run))
            return True

    def record_late_success_if_may_run_again(
        self, run: RunRef, response_code: int | None, now: datetime
    ) -> bool:
        with self._lock:
            stored = self._runs.get(self._key(run))
            if stored is None or stored.status in _ENDED_FOR_GOOD:
                return False
            self._runs[self._key(run)] = stored.model_copy(
                update={"delivered_at": now, "delivered_code": response_code}
            )
            return True

    def retry_run_if_held(
        self,
        run: RunRef,
        owner: str,
        error: str | None,
        response_code: int | None,
        next_attempt_at: datetime,
        due_at: datetime,
        lateness_ms: int | None = None,
    ) -> Run | None:
        with self._lock:
            stored = self._held(run, owner)
            if stored is None:
                return None
            return self._to_retry(
                stored,
                next_attempt_at,
                due_at,
                _error(error),
                response_code,
                lateness_ms,
                release=_holds_slot(run),
            )

    # --- RunTransitions: the timers', the API's -----------------------------------------

    def move_timer_to_lease_if_unchanged(self, run: Run) -> bool:
        with self._lock:
            stored = self._runs.get(self._key(run))
            if not self._running_as_read(stored, run):
                return False
            assert stored is not None
            self._runs[self._key(run)] = stored.model_copy(update={"due_at": stored.lease_until})
            return True

    def take_over_expired_lease(
        self,
        run: Run,
        now: datetime,
        status: RunStatus,
        error: str,
        next_attempt_at: datetime | None = None,
        due_at: datetime | None = None,
        complete_job: bool = False,
    ) -> Run | None:
        with self._lock:
            stored = self._runs.get(self._key(run))
            if not self._running_as_read(stored, run) or run.lease_until is None or run.lease_until > now:
                return None
            assert stored is not None
            if run.holds_slot and not stored.holds_slot:
                return None
            if status is RunStatus.RETRYING:
                assert next_attempt_at is not None
                assert due_at is not None
                return self._to_retry(
                    stored, next_attempt_at, due_at, _error(error), None, None, run.holds_slot, keep=True
                )
            changes = {"status": status, "error": _error(error), "finished_at": now}
            return self._end(stored, changes, now, complete_job, release=run.holds_slot)

    def resend_if_unchanged(self, run: Run, due_at: datetime, caught_up: bool = False) -> bool:
        with self._lock:
            stored = self._waiting(run, run_state.WAITING)
            if stored is None or stored.due_at != run.due_at:
                return False
            self._runs[self._key(run)] = stored.model_copy(
                update={"due_at": due_at, "caught_up": stored.caught_up or caught_up}
            )
            return True

    def fail_waiting_run(self, run: Run, now: datetime, error: str) -> bool:
        return self._end_waiting(run, RunStatus.FAILED, now, _error(error))

    def cancel_run_if_not_started(self, run: RunRef, now: datetime) -> bool:
        return self._end_waiting(run, RunStatus.CANCELLED, now, None)

    def redrive_run_if_failed(self, run: Run, now: datetime, due_at: datetime) -> Run | None:
        with self._lock:
            stored = self._runs.get(self._key(run))
            if stored is None or stored.status is not RunStatus.FAILED or stored.attempt != run.attempt:
                return None
            redriven = stored.model_copy(
                update={
                    "status": RunStatus.RETRYING,
                    "trigger": Trigger.RETRY,
                    "attempt": stored.attempt + 1,
                    "first_attempt": stored.attempt + 1,
                    "next_attempt_at": now,
                    "due_at": due_at,
                    "finished_at": None,
                }
            )
            self._runs[self._key(run)] = redriven
            return redriven

    def wait_turn_if_waiting(self, run: RunRef, due_at: datetime) -> bool:
        with self._lock:
            stored = self._waiting(run, run_state.WAITING)
            if stored is None:
                return False
            self._runs[self._key(run)] = stored.model_copy(update={"due_at": due_at})
            return True

    def set_aside_while_paused(self, run: RunRef, due_at: datetime) -> bool | None:
        with self._lock:
            stored = self._waiting(run, run_state.WAITING)
            if stored is None:
                return False
            if not self._paused(run.job_id):
                return None
            self._runs[self._key(run)] = stored.model_copy(update={"due_at": due_at})
            return True

    def set_aside_if_held(self, run: Run, owner: str, due_at: datetime) -> bool | None:
        with self._lock:
            stored = self._held(run, owner, slot=run.holds_slot)
            if stored is None:
                return False
            job = self._jobs.get(run.job_id)
            if (
                job is None
                or job.status is not JobStatus.PAUSED
                or (run.holds_slot and job.running_count < 1)
            ):
                return None
            status = RunStatus.RETRYING if stored.attempt > stored.first_attempt else RunStatus.PENDING
            self._release(run.job_id, run.holds_slot)
            self._runs[self._key(run)] = stored.model_copy(
                update={
                    "status": status,
                    "due_at": due_at,
                    "lease_until": None,
                    "started_at": None,
                    "holds_slot": False,
                }
            )
            self._owners.pop(self._key(run), None)
            return True

    # --- RunningSlots -------------------------------------------------------------------

    def start_run_in_slot(
        self,
        run: Run,
        slots: SlotsAsRead,
        now: datetime,
        lease_until: datetime,
        owner: str,
        timer: datetime | None = None,
    ) -> Run | None:
        me = run.scheduled_for_ms
        with self._lock:
            stored = self._waiting(run, run_state.sources_of(RunStatus.RUNNING))
            if stored is None or (run.delivered_at is None and stored.delivered_at is not None):
                return None
            job = self._jobs.get(run.job_id)
            if (
                job is None
                or job.version != slots.version
                or job.running_count >= slots.max_running
                or (slots.buffered_run_ms == me and job.buffered_run_ms != me)
                or (
                    slots.buffered_run_ms != me
                    and slots.buffered_goes_first
                    and job.buffered_run_ms is not None
                )
                or (slots.catch_up_front_ms == me and job.catch_up_queue_ms[:1] != [me])
            ):
                raise SlotsChanged(f"running slots of job {run.job_id} changed")
            queue = job.catch_up_queue_ms[1:] if slots.catch_up_front_ms == me else job.catch_up_queue_ms
            self._jobs[run.job_id] = job.model_copy(
                update={
                    "running_count": job.running_count + 1,
                    "buffered_run_ms": None if slots.buffered_run_ms == me else job.buffered_run_ms,
                    "catch_up_queue_ms": queue,
                }
            )
            return self._started(stored, now, lease_until, owner, timer, slot=True)

    def buffer_run_if_waiting(self, run: RunRef, slots: SlotsAsRead, due_at: datetime) -> bool:
        me = run.scheduled_for_ms
        with self._lock:
            stored = self._waiting(run, run_state.WAITING)
            if stored is None:
                return False
            job = self._jobs.get(run.job_id)
            if job is None or job.running_count < slots.max_running or job.buffered_run_ms not in (None, me):
                raise SlotsChanged(f"running slots of job {run.job_id} changed")
            self._jobs[run.job_id] = job.model_copy(update={"buffered_run_ms": me})
            self._runs[self._key(run)] = stored.model_copy(update={"due_at": due_at})
            return True

    def skip_run_if_waiting(
        self, run: RunRef, slots: SlotsAsRead, now: datetime, reason: str, complete_job: bool = False
    ) -> bool:
        me = run.scheduled_for_ms
        with self._lock:
            stored = self._waiting(run, run_state.sources_of(RunStatus.SKIPPED))
            if stored is None:
                return False
            job = self._jobs.get(run.job_id)
            if slots.waits_behind is not None:
                holds = job is not None and job.buffered_run_ms == slots.waits_behind
            else:
                holds = job is not None and job.running_count >= slots.max_running
                holds = holds and (
                    slots.buffered_run_ms != me or (job is not None and job.buffered_run_ms == me)
                )
            if complete_job:
                holds = holds and job is not None and _completable(job)
            if not holds or job is None:
                raise SlotsChanged(f"running slots of job {run.job_id} changed")
            update: dict[str, Any] = {}
            if slots.waits_behind is None and slots.buffered_run_ms == me:
                update["buffered_run_ms"] = None
            if complete_job:
                update |= {"status": JobStatus.COMPLETED, "version": job.version + 1, "updated_at": now}
            self._jobs[run.job_id] = job.model_copy(update=update)
            self._runs[self._key(run)] = _ended(
                stored, {"status": RunStatus.SKIPPED, "finished_at": now, "error": reason[:MAX_ERROR]}
            )
            return True

    def rejoin_catch_up_queue(self, run: RunRef, slots: SlotsAsRead, due_at: datetime) -> bool:
        me = run.scheduled_for_ms
        with self._lock:
            stored = self._waiting(run, run_state.WAITING)
            if stored is None:
                return False
            job = self._jobs.get(run.job_id)
            if slots.running >= slots.max_running:
                holds = job is not None and job.running_count >= slots.max_running
            else:
                holds = job is not None and job.buffered_run_ms == slots.buffered_run_ms
            if not holds or job is None:
                raise SlotsChanged(f"running slots of job {run.job_id} changed")
            self._jobs[run.job_id] = job.model_copy(
                update={"catch_up_queue_ms": [me, *job.catch_up_queue_ms]}
            )
            self._runs[self._key(run)] = stored.model_copy(update={"due_at": due_at})
            return True

    def leave_catch_up_queue(self, job_id: str, run_ms: int) -> bool:
        with self._lock:
            job = self._jobs.get(job_id)
            if job is None or job.catch_up_queue_ms[:1] != [run_ms]:
                return False
            self._jobs[job_id] = job.model_copy(update={"catch_up_queue_ms": job.catch_up_queue_ms[1:]})
            return True

    def clear_buffered_run(self, job_id: str, run_ms: int) -> bool:
        with self._lock:
            job = self._jobs.get(job_id)
            if job is None or job.buffered_run_ms != run_ms:
                return False
            self._jobs[job_id] = job.model_copy(update={"buffered_run_ms": None})
            return True

    # --- helpers ------------------------------------------------------------------------

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
        if complete and job is not None and _completable(job):
            self._jobs[stored.job_id] = job.model_copy(
                update={"status": JobStatus.COMPLETED, "version": job.version + 1, "updated_at": now}
            )
        ended = _ended(stored, changes)
        self._runs[self._key(stored)] = ended
        self._owners.pop(self._key(stored), None)
        return ended

    def _end_waiting(self, run: RunRef, status: RunStatus, now: datetime, error: str | None) -> bool:
        with self._lock:
            stored = self._waiting(run, run_state.WAITING)
            if stored is None:
                return False
            self._runs[self._key(run)] = _ended(
                stored, {"status": status, "finished_at": now, "error": error}
            )
            return True

    def _to_retry(
        self,
        stored: Run,
        next_attempt_at: datetime,
        due_at: datetime,
        error: str | None,
        response_code: int | None,
        lateness_ms: int | None,
        release: bool,
        keep: bool = False,
    ) -> Run:
        self._release(stored.job_id, release)
        changes: dict[str, Any] = {
            "status": RunStatus.RETRYING,
            "attempt": stored.attempt + 1,
            "next_attempt_at": next_attempt_at,
            "due_at": due_at,
            "error": error,
            "lease_until": None,
            "holds_slot": False,
        }
        if not keep:
            changes |= {"response_code": response_code, "lateness_ms": lateness_ms}
        retried = stored.model_copy(
            update={k: v for k, v in changes.items() if v is not None or k in _CLEARED}
        )
        self._runs[self._key(stored)] = retried
        self._owners.pop(self._key(stored), None)
        return retried


# Attributes a retry clears rather than leaves as they were when its value is None.
_CLEARED = frozenset({"lease_until", "holds_slot"})


def _ended(run: Run, changes: dict[str, Any]) -> Run:
    cleared = {"due_at": None, "lease_until": None, "next_attempt_at": None, "holds_slot": False}
    kept = {name: value for name, value in changes.items() if value is not None}
    return run.model_copy(update=cleared | kept)


def _completable(job: Job) -> bool:
    return job.status in (JobStatus.SCHEDULED, JobStatus.PAUSED) and job.next_fire_at is None


def _holds_slot(run: RunRef) -> bool:
    return isinstance(run, Run) and run.holds_slot


def _error(error: str | None) -> str | None:
    return error[:MAX_ERROR] if error else None


def _created_key(job: Job) -> str:
    return f"{to_ms(job.created_at):013d}#{job.job_id}"
