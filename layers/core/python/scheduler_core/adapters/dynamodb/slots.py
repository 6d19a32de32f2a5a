"""The `RunningSlots` port on the jobs table: a run admitted under its job's concurrency
policy (started in a slot, buffered, skipped, back in the catch-up queue), each write
conditioned on the job's slots as the service read them (see `overlap`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError

from scheduler_core.adapters.dynamodb.codec import CATCH_UP_QUEUE, expression_values, with_job_name
from scheduler_core.adapters.dynamodb.expressions import (
    ACTIVE_WITH_NOTHING_LEFT_TO_FIRE,
    LEASE_AND_TIMER,
    NOTHING_RUNNING_OR_WAITING,
    status_in_values,
    status_one_of_values,
)
from scheduler_core.adapters.dynamodb.table import condition_failed, is_contention, started_sets
from scheduler_core.adapters.dynamodb.transactions import TransactionalWrites, merged_update
from scheduler_core.domain import run_state
from scheduler_core.domain.clock import to_ms
from scheduler_core.domain.entities import Job, Run
from scheduler_core.domain.overlap import SlotsAsRead
from scheduler_core.domain.vocabulary import MAX_RUN_ERROR, RunStatus
from scheduler_core.ports import RunRef


class SlotsTable(TransactionalWrites):
    def start_run_in_slot(
        self,
        run: Run,
        slots: SlotsAsRead,
        now: datetime,
        lease_until: datetime,
        owner: str,
        timer: datetime | None = None,
    ) -> Run | None:
        """`start_run_if_waiting` for `run` as read, taking one of the job's running slots in
        the same transaction: if the job is still at the version read (not paused, cancelled
        or changed since) and fewer than `slots.max_running` are taken and, when a buffered
        run goes first (BUFFER_ONE), no other run waits for one. The job's buffered run gives up its place as
        it starts. The run as started (no read after the write); None when the run is not as
        read (a duplicate or stale message, or a late success recorded on it since);
        SlotsChanged when the job is no longer as read."""
        me = run.scheduled_for_ms
        condition, values = status_in_values(RunStatus.RUNNING)
        request = self._run_update(
            run.job_id,
            me,
            {
                **started_sets(now, lease_until, owner),
                "slot": True,
                **(self._codec.due_attributes(run.job_id, timer) if timer else {}),
            },
            # The run as read: a late success recorded since must not be missed (see `execution`).
            f"{condition} AND attempt = :attempt"
            + ("" if run.delivered_at is not None else " AND attribute_not_exists(delivered_at_ms)"),
            values | {"attempt": run.attempt},
            with_job=run.with_job,
        )
        conditions = ["version = :version", "(attribute_not_exists(running_count) OR running_count < :max)"]
        slot_values: dict[str, Any] = {
            "zero": 0,
            "one": 1,
            "max": slots.max_running,
            "version": slots.version,
        }
        removes = []
        if slots.buffered_run_ms == me:
            conditions.append("buffered_run_ms = :me")
            slot_values["me"] = me
            removes.append("buffered_run_ms")
        elif slots.buffered_goes_first:
            conditions.append("attribute_not_exists(buffered_run_ms)")
        if slots.catch_up_front_ms == me:  # its turn: it leaves the queue as it starts
            conditions.append(f"{CATCH_UP_QUEUE}[0] = :me")
            slot_values["me"] = me
            removes.append(f"{CATCH_UP_QUEUE}[0]")
        sets = ["running_count = if_not_exists(running_count, :zero) + :one"]
        if not self._admit(request, self._job_write(run.job_id, sets, removes, conditions, slot_values)):
            return None
        started = {"status": RunStatus.RUNNING, "started_at": now, "lease_until": lease_until}
        return run.model_copy(update=started | {"holds_slot": True, "due_at": timer or run.due_at})

    def start_kept_run_if_job_idle(
        self, run: RunRef, now: datetime, lease_until: datetime, owner: str
    ) -> tuple[Job, Run] | None:
        """Start a run kept on its job's item (`Run.with_job`) without reading it first: one
        UpdateItem of the job's item, taking a running slot, on the condition that the run
        waits at this attempt with nothing recorded on it (no late success, not a caught-up
        firing) and its re-send timer falls within the lease (so that it stays where it is),
        and that its job is SCHEDULED with no slot taken, no run buffered and no catch-up
        queue: then every concurrency policy starts it (`overlap.admit`; an ALLOW job's run
        holds the slot too, which is released as for any other). The job and the run as
        written; None when any of that is not so (read, and decide as usual)."""
        assert run.with_job, "only a run kept on its job's item"
        condition, values = status_in_values(RunStatus.RUNNING)
        timer = with_job_name("due_sk")
        request = self._run_update(
            run.job_id,
            run.scheduled_for_ms,
            {
                **started_sets(now, lease_until, owner),
                "slot": True,
            },
            f"{condition} AND attempt = :attempt AND attribute_not_exists(delivered_at_ms)"
            " AND attribute_not_exists(caught_up)",
            values | {"attempt": run.attempt},
            with_job=True,
            elsewhere=False,
        )
        job_write = self._job_write(
            run.job_id,
            ["running_count = if_not_exists(running_count, :zero) + :one"],
            [],
            [
                "#status = :scheduled",
                *NOTHING_RUNNING_OR_WAITING,
                f"{timer} > :now",
                f"{timer} <= :lease_end",
            ],
            {"zero": 0, "one": 1, "scheduled": "SCHEDULED"}
            | {"now": to_ms(now), "lease_end": to_ms(lease_until)},
        )
        merged = merged_update(request, job_write["Update"])
        try:
            reply = self._ddb.update_item(**merged, ReturnValues="ALL_NEW")
        except ClientError as error:
            if condition_failed(error) or is_contention(error):
                return None
            raise
        item = reply["Attributes"]
        started = self._codec.run_with_job_from_item(item)
        assert started is not None, "the update was conditioned on the run being there"
        return self._codec.job_from_item(item), started

    def buffer_run_if_waiting(self, run: RunRef, slots: SlotsAsRead, due_at: datetime) -> bool:
        """Make the waiting run the job's buffered run (BUFFER_ONE): the one that starts when a
        slot is given back. Only while every slot is taken and no other run waits (as `slots`
        was read). Its timer moves to `due_at`: if no slot's release sends its message by
        then, the poller does. False for a duplicate or stale message; SlotsChanged when
        the job's slots are no longer as read."""
        me = run.scheduled_for_ms
        condition, values = status_one_of_values(run_state.WAITING)
        request = self._run_update(
            run.job_id,
            me,
            self._codec.due_attributes(run.job_id, due_at),
            f"{condition} AND attempt = :attempt",
            values | {"attempt": run.attempt},
            with_job=run.with_job,
        )
        conditions = [
            "running_count >= :max",
            "(attribute_not_exists(buffered_run_ms) OR buffered_run_ms = :me)",
        ]
        job_write = self._job_write(
            run.job_id, ["buffered_run_ms = :me"], [], conditions, {"max": slots.max_running, "me": me}
        )
        return self._admit(request, job_write)

    def skip_run_if_waiting(
        self, run: RunRef, slots: SlotsAsRead, now: datetime, reason: str, complete_job: bool = False
    ) -> bool:
        """PENDING/RETRYING → SKIPPED (`reason` as its error; the target is not called) while
        the job's slots are as read (`slots`): every one taken, or (BUFFER_ONE) another run
        waiting for one. The job's buffered run, skipped, gives up its place. `complete_job`:
        this was the job's last run; the job completes in the same transaction. False for a
        duplicate or stale message; SlotsChanged when the job's slots are no longer as read."""
        me = run.scheduled_for_ms
        condition, values = status_in_values(RunStatus.SKIPPED)
        request = self._run_update(
            run.job_id,
            me,
            {
                "status": str(RunStatus.SKIPPED),
                "finished_at_ms": to_ms(now),
                "expires_at": self._codec.expiry(now),
                "error": reason[:MAX_RUN_ERROR],
            },
            f"{condition} AND attempt = :attempt",
            values | {"attempt": run.attempt},
            remove=LEASE_AND_TIMER,
            with_job=run.with_job,
        )
        sets: list[str] = []
        removes: list[str] = []
        slot_values: dict[str, Any] = {}
        # With nothing to change on the job, an attribute the conditions hold is rewritten as
        # it is: an update, not a ConditionCheck, which would need one more IAM action.
        if slots.waits_behind is not None:
            conditions = ["buffered_run_ms = :other"]
            slot_values["other"] = slots.waits_behind
            unchanged = "buffered_run_ms = buffered_run_ms"
        else:
            conditions = ["running_count >= :max"]
            unchanged = "running_count = running_count"
            slot_values["max"] = slots.max_running
            if slots.buffered_run_ms == me:
                conditions.append("buffered_run_ms = :me")
                slot_values["me"] = me
                removes.append("buffered_run_ms")
        if complete_job:
            sets += [
                "#status = :completed",
                "version = version + :one",
                "updated_at_ms = :now",
                "expires_at = :expires",
            ]
            conditions.append(ACTIVE_WITH_NOTHING_LEFT_TO_FIRE)
            slot_values |= {
                "completed": "COMPLETED",
                "one": 1,
                "now": to_ms(now),
                "expires": self._codec.expiry(now),
                "scheduled": "SCHEDULED",
                "paused": "PAUSED",
            }
        if not sets and not removes:
            sets.append(unchanged)
        return self._admit(request, self._job_write(run.job_id, sets, removes, conditions, slot_values))

    def rejoin_catch_up_queue(self, run: RunRef, slots: SlotsAsRead, due_at: datetime) -> bool:
        """A caught-up run that left the catch-up queue at an earlier start (it is retrying, or
        was set aside by a pause) and finds no running slot free takes the queue's front again,
        so the next slot given back is its turn. Only while the job's slots are as read
        (`slots`: every one taken, or a run buffered for one): the release it then waits for
        wakes it. Its timer moves to `due_at`. False for a duplicate or stale message;
        SlotsChanged when the job's slots are no longer as read."""
        me = run.scheduled_for_ms
        request = self._run_update(*self._waiting_timer_update(run, due_at), with_job=run.with_job)
        values: dict[str, Any] = {"queued": [me], "no_runs": []}
        if slots.running >= slots.max_running:
            conditions = ["running_count >= :max"]
            values["max"] = slots.max_running
        else:  # a run buffered for a slot (BUFFER_ONE) goes first
            conditions = ["buffered_run_ms = :other"]
            values["other"] = slots.buffered_run_ms
        sets = [f"{CATCH_UP_QUEUE} = list_append(:queued, if_not_exists({CATCH_UP_QUEUE}, :no_runs))"]
        return self._admit(request, self._job_write(run.job_id, sets, [], conditions, values))

    def leave_catch_up_queue(self, job_id: str, run_ms: int) -> bool:
        """Take `run_ms` off the front of the job's catch-up queue (it ended without starting:
        cancelled, failed), if it still is there."""
        return self._write_if(
            {
                "TableName": self._table,
                "Key": self._codec.job_key(job_id),
                "UpdateExpression": f"REMOVE {CATCH_UP_QUEUE}[0]",
                "ConditionExpression": f"{CATCH_UP_QUEUE}[0] = :seen",
                "ExpressionAttributeValues": expression_values(seen=run_ms),
            }
        )

    def clear_buffered_run(self, job_id: str, run_ms: int) -> bool:
        """Forget the job's buffered run `run_ms` (it ended without starting: cancelled,
        failed), if it still is the buffered one."""
        return self._write_if(
            {
                "TableName": self._table,
                "Key": self._codec.job_key(job_id),
                "UpdateExpression": "REMOVE buffered_run_ms",
                "ConditionExpression": "buffered_run_ms = :seen",
                "ExpressionAttributeValues": expression_values(seen=run_ms),
            }
        )
