"""The poller's and the API's side of `RunTransitions` on the jobs table: runs moved by their
timers (the watchdog's take-over of an expired lease, a re-send, a long retry), set aside
while their job is paused, failed, re-driven or cancelled before they start."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from scheduler_core.adapters.dynamodb.codec import attempt_entry
from scheduler_core.adapters.dynamodb.expressions import (
    HELD_BY_OWNER,
    HOLDS_SLOT,
    LEASE_AND_TIMER,
    RUNNING_ATTEMPT,
    holds_slot,
    status_one_of_values,
)
from scheduler_core.adapters.dynamodb.transactions import TransactionalWrites
from scheduler_core.domain import run_state
from scheduler_core.domain.clock import to_ms
from scheduler_core.domain.entities import Run
from scheduler_core.domain.vocabulary import MAX_RUN_ERROR, RunStatus
from scheduler_core.ports import RunRef


class RunTimersTable(TransactionalWrites):
    def move_timer_to_lease_if_unchanged(self, run: Run) -> bool:
        """A running attempt's timer came before its lease ends (a start leaves the run's
        re-send timer in place, which saves two index writes for a run that ends in time):
        the timer moves to the lease's end, if the attempt and its lease are as read."""
        assert run.lease_until is not None, "only a leased run has a lease to wait for"
        condition = f"{RUNNING_ATTEMPT} AND lease_until_ms = :seen_lease"
        values = {"running": "RUNNING", "attempt": run.attempt, "seen_lease": to_ms(run.lease_until)}
        sets = self._codec.due_attributes(run.job_id, run.lease_until)
        return (
            self._update_run(run.job_id, run.scheduled_for_ms, sets, condition, values, with_job=run.with_job)
            is not None
        )

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
        """The watchdog: a RUNNING attempt whose lease (as we read it) has expired moves on:
        to RETRYING as the next attempt (`next_attempt_at`, `due_at`), or to FAILED/CANCELLED
        (with `complete_job`, its job completes in the same transaction). None if its worker
        finished, heartbeated or another poller acted first."""
        assert run.lease_until is not None, "only a leased run can expire"
        condition = f"{RUNNING_ATTEMPT} AND lease_until_ms = :seen_lease AND lease_until_ms <= :now"
        values = {
            "running": "RUNNING",
            "attempt": run.attempt,
            "seen_lease": to_ms(run.lease_until),
            "now": to_ms(now),
        }
        sets: dict[str, Any] = {"status": str(status), "error": error[:MAX_RUN_ERROR]}
        if status is RunStatus.RETRYING:
            assert next_attempt_at is not None
            assert due_at is not None
            sets |= {"attempt": run.attempt + 1, "next_attempt_at_ms": to_ms(next_attempt_at)}
            sets |= self._codec.due_attributes(run.job_id, due_at)
            changes = {"next_attempt_at": next_attempt_at, "due_at": due_at, "error": error}
            ended = run.ended_attempt(now, error)  # the lost attempt got no answer
            return self._move_to_retry(run, ended, sets, condition, values, changes)
        sets |= {"finished_at_ms": to_ms(now), "expires_at": self._codec.expiry(now)}
        release = run.holds_slot
        request = self._run_update(
            run.job_id,
            run.scheduled_for_ms,
            sets,
            condition + (f" AND {HOLDS_SLOT}" if release else ""),
            values,
            remove=(*LEASE_AND_TIMER, "response_code"),  # the lost attempt got no answer
            with_job=run.with_job,
        )
        if not self._end_run(request, run.job_id, now, complete=complete_job, release=release):
            return None
        return run.model_copy(
            update={
                "status": status,
                "error": error,
                "finished_at": now,
                "due_at": None,
                "lease_until": None,
                "holds_slot": False,
                "response_code": None,
            }
        )

    def resend_if_unchanged(self, run: Run, due_at: datetime, caught_up: bool = False) -> bool:
        """Reserve the (re-)send of a waiting run's message, as read from the due index: move
        its timer to `due_at` if nobody moved the run since. Two pollers never both send.
        `caught_up`: the run is a missed firing caught up (see `Run.caught_up`) from now on."""
        assert run.due_at is not None, "only a run in the due index is re-sent"
        return (
            self._update_run(
                *self._waiting_timer_update(run, due_at, run.due_at, caught_up), with_job=run.with_job
            )
            is not None
        )

    def fail_waiting_run(self, run: Run, now: datetime, error: str) -> bool:
        """A waiting run that may not be sent again (its job is gone) ends as FAILED."""
        condition, values = status_one_of_values(run_state.WAITING)
        return (
            self._update_run(
                run.job_id,
                run.scheduled_for_ms,
                {
                    "status": str(RunStatus.FAILED),
                    "error": error[:MAX_RUN_ERROR],
                    "finished_at_ms": to_ms(now),
                    "expires_at": self._codec.expiry(now),
                },
                f"{condition} AND attempt = :attempt",
                values | {"attempt": run.attempt},
                remove=LEASE_AND_TIMER,
                with_job=run.with_job,
            )
            is not None
        )

    def redrive_run_if_failed(self, run: Run, now: datetime, due_at: datetime) -> Run | None:
        """A manual re-drive: FAILED → RETRYING as a new attempt that starts a fresh round of
        `max_attempts`, due now. None if the run is not FAILED at the attempt we read. The
        FAILED attempt joins the earlier ones (`Run.past_attempts_with`), the list written
        whole: the condition on the attempt fences the list as read."""
        kept = run.past_attempts_with(run.ended_attempt(run.finished_at or now, run.error, run.response_code))
        return self._update_run(
            run.job_id,
            run.scheduled_for_ms,
            {
                "status": str(RunStatus.RETRYING),
                "trigger": "RETRY",
                "attempt": run.attempt + 1,
                "first_attempt": run.attempt + 1,
                "next_attempt_at_ms": to_ms(now),
                "expires_at": self._codec.expiry(now),
                "past_attempts": [attempt_entry(attempt) for attempt in kept],
                **self._codec.due_attributes(run.job_id, due_at),
            },
            "#status = :failed AND attempt = :attempt",
            {"failed": "FAILED", "attempt": run.attempt},
            remove=("finished_at_ms",),
            with_job=run.with_job,
        )

    def wait_turn_if_waiting(self, run: RunRef, due_at: datetime) -> bool:
        """A waiting run of the catch-up queue stays waiting for its turn, same attempt, its
        message acknowledged (the end of the run before it sends it). Its timer moves to
        `due_at`, when the poller looks at it again should no wake-up come. False if the run
        is no longer waiting at this attempt."""
        return self._update_run(*self._waiting_timer_update(run, due_at), with_job=run.with_job) is not None

    def set_aside_while_paused(self, run: RunRef, due_at: datetime) -> bool | None:
        """A waiting run whose job is paused stays waiting, same attempt, its message
        acknowledged: the resume decides whether it runs (the job's misfire policy). Its timer
        moves to `due_at`, when the poller looks at it again should no resume have. Written
        only while the job is still PAUSED, in one transaction with that condition, so a
        resume that has already decided never finds its decision undone. False if the run is
        no longer waiting at this attempt; None if the job is no longer paused (nothing
        written)."""
        request = self._run_update(*self._waiting_timer_update(run, due_at), with_job=run.with_job)
        return self._write_while_paused(request, run.job_id)

    def set_aside_if_held(self, run: Run, owner: str, due_at: datetime) -> bool | None:
        """RUNNING → waiting again (PENDING, or RETRYING for a retry), same attempt, for the
        attempt `owner` holds: it found its job paused before it called the target (an ALLOW
        run, whose start does not fence its job, reads the job once more before the call). Its
        running slot, if any, is given back in the same transaction; its timer moves to
        `due_at`. Only while the job is still PAUSED (see `set_aside_while_paused`): False if
        the lease was lost, None if the job is no longer paused (nothing written: the run
        goes on)."""
        status = RunStatus.RETRYING if run.attempt > run.first_attempt else RunStatus.PENDING
        request = self._run_update(
            run.job_id,
            run.scheduled_for_ms,
            {"status": str(status), **self._codec.due_attributes(run.job_id, due_at)},
            HELD_BY_OWNER + (f" AND {HOLDS_SLOT}" if holds_slot(run) else ""),
            {"running": "RUNNING", "attempt": run.attempt, "owner": owner},
            remove=("lease_until_ms", "lease_owner", "slot", "started_at_ms"),
            with_job=run.with_job,
        )
        return self._write_while_paused(request, run.job_id, release=holds_slot(run))

    def cancel_run_if_not_started(self, run: RunRef, now: datetime) -> bool:
        """PENDING/RETRYING → CANCELLED (its job was cancelled before any worker took the run)."""
        condition, values = status_one_of_values(run_state.WAITING)
        return (
            self._update_run(
                run.job_id,
                run.scheduled_for_ms,
                {
                    "status": str(RunStatus.CANCELLED),
                    "finished_at_ms": to_ms(now),
                    "expires_at": self._codec.expiry(now),
                },
                f"{condition} AND attempt = :attempt",
                values | {"attempt": run.attempt},
                remove=LEASE_AND_TIMER,
                with_job=run.with_job,
            )
            is not None
        )
