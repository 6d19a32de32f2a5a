"""The `RunRecords` port and the worker's side of `RunTransitions` on the jobs table: a run
read or created, an attempt started, its lease extended, and its end (succeeded, failed,
retrying, or a late success remembered). Every write is fenced by the attempt it expects."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from scheduler_core.adapters.dynamodb.codec import (
    RUN_ATTRIBUTES,
    WORKFLOW_RUN_ATTRIBUTES,
    holds_run_with_job,
    to_item,
    with_job_attributes,
)
from scheduler_core.adapters.dynamodb.expressions import (
    HELD_BY_OWNER,
    HOLDS_SLOT,
    LEASE_AND_TIMER,
    RUN_ABSENT,
    holds_slot,
    status_in_values,
    status_one_of_values,
)
from scheduler_core.adapters.dynamodb.table import started_sets
from scheduler_core.adapters.dynamodb.transactions import TransactionalWrites
from scheduler_core.domain import keys
from scheduler_core.domain.clock import to_ms
from scheduler_core.domain.entities import Attempt, Job, Run
from scheduler_core.domain.vocabulary import MAX_RUN_ERROR, RunStatus
from scheduler_core.ports import RunRef

# What `get_run` reads of both items: a run of its own, and a run kept on its job's item.
_RUN_READ = (
    "run_id",
    "job_id",
    *RUN_ATTRIBUTES,
    "due_sk",
    *WORKFLOW_RUN_ATTRIBUTES,
    *with_job_attributes(),
)


class RunsTable(TransactionalWrites):
    def get_run(self, job_id: str, scheduled_for_ms: int) -> Run | None:
        """The run on its own item, or kept on its job's (`Run.with_job`): both read at once
        (one consistent BatchGetItem, the job's item only as far as a kept run goes)."""
        job_key = self._codec.job_key(job_id)
        own, job = self._items_of([self._codec.run_key(job_id, scheduled_for_ms), job_key], _RUN_READ)
        if own:
            return self._codec.run_from_item(own)
        if job is None or not holds_run_with_job(job, scheduled_for_ms):
            return None
        return self._codec.run_with_job_from_item(job)

    def get_runs(self, refs: Sequence[tuple[str, int]]) -> list[Run | None]:
        """Runs by (job id, scheduled time), on their own items or kept on their jobs', read
        together (consistent BatchGetItems), in the order asked; None where there is none.
        The jobs' items are read only for runs that have no item of their own."""
        own = self._items_of([self._codec.run_key(job_id, ms) for job_id, ms in refs], _RUN_READ)
        runs: list[Run | None] = [self._codec.run_from_item(item) if item else None for item in own]
        missing = list(
            dict.fromkeys(job_id for (job_id, _), run in zip(refs, runs, strict=True) if run is None)
        )
        if not missing:
            return runs
        jobs = dict(
            zip(missing, self._items_of([self._codec.job_key(j) for j in missing], _RUN_READ), strict=True)
        )
        for position, (job_id, ms) in enumerate(refs):
            job = jobs.get(job_id)
            if runs[position] is None and job is not None and holds_run_with_job(job, ms):
                runs[position] = self._codec.run_with_job_from_item(job)
        return runs

    def get_job_and_run(self, job_id: str, scheduled_for_ms: int) -> tuple[Job | None, Run | None]:
        """A job and one of its runs, on the run's own item or kept on the job's, read together
        (one consistent BatchGetItem)."""
        job_key = to_item({"pk": keys.job_pk(job_id), "sk": keys.JOB_SK})
        run_key = self._codec.run_key(job_id, scheduled_for_ms)
        job, run = self._items_of([job_key, run_key])
        if run:
            return self._codec.job_from_item(job) if job else None, self._codec.run_from_item(run)
        if not job:
            return None, None
        kept = self._codec.run_with_job_from_item(job) if holds_run_with_job(job, scheduled_for_ms) else None
        return self._codec.job_from_item(job), kept

    def put_run_if_absent(self, run: Run, now: datetime) -> bool:
        """Write a new run (a manual one, a resume's catch-up run); False if one already
        exists at its time."""
        return self._write_if(
            {
                "TableName": self._table,
                "Item": self._codec.run_item(run, now),
                "ConditionExpression": RUN_ABSENT,
            },
            put=True,
        )

    def start_run_if_waiting(
        self, run: RunRef, now: datetime, lease_until: datetime, owner: str, timer: datetime | None = None
    ) -> Run | None:
        """PENDING/RETRYING → RUNNING for exactly this attempt, leased to `owner` until
        `lease_until`; the run's timer moves to `timer` if given, else stays where it is. None
        for a duplicate or stale message: the run already started, finished, or moved on to
        another attempt."""
        condition, values = status_in_values(RunStatus.RUNNING)
        return self._update_run(
            run.job_id,
            run.scheduled_for_ms,
            {
                **started_sets(now, lease_until, owner),
                **(self._codec.due_attributes(run.job_id, timer) if timer else {}),
            },
            f"{condition} AND attempt = :attempt",
            values | {"attempt": run.attempt},
            with_job=run.with_job,
        )

    def extend_lease_if_held(self, run: RunRef, owner: str, lease_until: datetime) -> bool:
        """Push the lease (and the watchdog's timer) of a running attempt `owner` still holds."""
        return (
            self._update_run(
                run.job_id,
                run.scheduled_for_ms,
                {"lease_until_ms": to_ms(lease_until), **self._codec.due_attributes(run.job_id, lease_until)},
                HELD_BY_OWNER,
                {"running": "RUNNING", "attempt": run.attempt, "owner": owner},
                with_job=run.with_job,
            )
            is not None
        )

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
        output: str | None = None,
    ) -> bool:
        """RUNNING → `status` (SUCCEEDED, FAILED, CANCELLED) only for the attempt `owner` holds;
        False if the lease was lost to another attempt (a slow worker cannot finish the run).
        `lateness_ms`: how late the target was called. `complete_job`: this was the job's
        last run; the job becomes COMPLETED in the same transaction. `output`: a workflow
        task's output (JSON text), kept for the tasks after it."""
        request = self._run_update(
            run.job_id,
            run.scheduled_for_ms,
            {
                "status": str(status),
                "finished_at_ms": to_ms(now),
                "expires_at": self._codec.expiry(now),
                "error": error[:MAX_RUN_ERROR] if error else None,
                "response_code": response_code,
                "lateness_ms": lateness_ms,
                "output": output,
            },
            HELD_BY_OWNER + (f" AND {HOLDS_SLOT}" if holds_slot(run) else ""),
            {"running": "RUNNING", "attempt": run.attempt, "owner": owner},
            # An attempt that got no answer leaves no earlier attempt's code behind.
            remove=(*LEASE_AND_TIMER, "response_code"),
            with_job=run.with_job,
        )
        return self._end_run(request, run.job_id, now, complete=complete_job, release=holds_slot(run))

    def record_late_success_if_may_run_again(
        self, run: RunRef, response_code: int | None, now: datetime
    ) -> bool:
        """Remember that an attempt whose lease was lost called the target successfully, on
        a run that may still run again (waiting, running another attempt, or FAILED and
        re-drivable): its next attempt then finishes with this answer instead of a call.
        False when the run ended for good meanwhile (SUCCEEDED, CANCELLED, SKIPPED)."""
        condition, values = status_one_of_values(
            [RunStatus.PENDING, RunStatus.RETRYING, RunStatus.RUNNING, RunStatus.FAILED]
        )
        sets = {"delivered_at_ms": to_ms(now), "delivered_code": response_code}
        return (
            self._update_run(run.job_id, run.scheduled_for_ms, sets, condition, values, with_job=run.with_job)
            is not None
        )

    def retry_run_if_held(
        self,
        run: RunRef,
        owner: str,
        ended: Attempt,
        next_attempt_at: datetime,
        due_at: datetime,
        lateness_ms: int | None = None,
    ) -> Run | None:
        """RUNNING → RETRYING as the next attempt, due at `next_attempt_at`, only for the
        attempt `owner` holds (its running slot, if it holds one, is given back: the retry
        takes one again when it starts). `ended`, the attempt that failed, joins the run's
        earlier attempts. The poller looks at it again at `due_at`."""
        error = ended.error
        return self._move_to_retry(
            run,
            ended,
            {
                "status": str(RunStatus.RETRYING),
                "attempt": run.attempt + 1,
                "next_attempt_at_ms": to_ms(next_attempt_at),
                "error": error[:MAX_RUN_ERROR] if error else None,
                "lateness_ms": lateness_ms,
                **self._codec.due_attributes(run.job_id, due_at),
            },
            HELD_BY_OWNER,
            {"running": "RUNNING", "attempt": run.attempt, "owner": owner},
            {
                "next_attempt_at": next_attempt_at,
                "due_at": due_at,
                "error": error,
                "lateness_ms": lateness_ms,
            },
        )
