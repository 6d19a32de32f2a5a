"""Writes of a run together with its job item, in one transaction: a run's end that gives a
running slot back or completes its job, an admission conditioned on the job's slots, a write
conditioned on the job being paused. The caller learns which side's condition failed."""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError

from scheduler_core.adapters.aws import error_code
from scheduler_core.adapters.dynamodb.codec import attempt_entry, expression_values, with_job_name
from scheduler_core.adapters.dynamodb.expressions import (
    ACTIVE_WITH_NOTHING_LEFT_TO_FIRE,
    HOLDS_SLOT,
    holds_slot,
)
from scheduler_core.adapters.dynamodb.table import (
    ON_ITS_OWN,
    WITH_ITS_JOB,
    Appended,
    TableAdapter,
    condition_failed,
    is_contention,
)
from scheduler_core.domain import keys
from scheduler_core.domain.clock import to_ms
from scheduler_core.domain.entities import Attempt, Run
from scheduler_core.domain.vocabulary import RunStatus
from scheduler_core.ports import RunRef, SlotsChanged, StoreContention

# Pauses (seconds) before a transaction cancelled by contention on its items is tried again
# here, a moment apart (a service may try the whole write again after pauses of its own).
TRANSACTION_CONTENTION_PAUSES = (0.02, 0.1)
_CONTENTION_REASONS = {"TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded"}
_PLACEHOLDER = re.compile(r"([#:])([A-Za-z_]\w*)")
_CLAUSES = re.compile(r"(?:SET (?P<set>.+?))?\s*(?:REMOVE (?P<remove>.+))?")


class TransactionalWrites(TableAdapter):
    def _transact(self, items: list[dict[str, Any]]) -> list[str | None]:
        """Write `items` in one transaction: [] when it committed, else each item's reason
        (`ConditionalCheckFailed`, or None for an item that was fine). A transaction cancelled
        by contention (another transaction on one of its items, throttling) is tried again
        at once, twice; then StoreContention. A run kept with its job (`Run.with_job`) and
        its job's part are one item: one UpdateItem (`_write_with_job`)."""
        run_part = items[0].get("Update", {})
        if run_part.get("Key", {}).get("sk", {}).get("S") == keys.JOB_SK:
            assert len(items) == 2, "a run kept with its job is written with its job's part only"
            return self._write_with_job(run_part, items[1])
        if WITH_ITS_JOB in run_part:
            run_part = dict(run_part)
            kept = run_part.pop(WITH_ITS_JOB)
            reasons = self._transact([{"Update": run_part}, *items[1:]])
            if reasons and reasons[0] == "ConditionalCheckFailed" and self._no_item(run_part["Key"]):
                return self._write_with_job(kept, items[1])  # the run is kept on its job's item
            return reasons
        for pause in (*TRANSACTION_CONTENTION_PAUSES, None):
            try:
                self._ddb.transact_write_items(TransactItems=items)  # type: ignore[arg-type]
            except ClientError as error:
                try:
                    reasons = self._cancellation_reasons(error, expected=len(items))
                except StoreContention:
                    if pause is None:
                        raise
                    time.sleep(pause)
                    continue
                if "ConditionalCheckFailed" not in reasons:
                    raise
                return reasons
            return []
        raise AssertionError("the last try returns or raises")

    def _write_with_job(self, run_request: dict[str, Any], job_write: dict[str, Any]) -> list[str | None]:
        """`_transact` of a run kept on its job's item and that job's part: both updates in
        one UpdateItem, both conditions in one. Which failed is asked after (one more write,
        only then); a run that has left the job's item meanwhile is written on its own."""
        request = dict(run_request)
        on_its_own = request.pop(ON_ITS_OWN, None)
        merged = merged_update(request, job_write["Update"])
        for pause in (*TRANSACTION_CONTENTION_PAUSES, None):
            try:
                self._ddb.update_item(**merged, ReturnValuesOnConditionCheckFailure="ALL_OLD")
            except ClientError as error:
                if condition_failed(error):
                    if on_its_own is not None and self._run_is_elsewhere(error, request):
                        return self._transact([{"Update": on_its_own}, job_write])
                    return self._which_failed(request, on_its_own, job_write)
                if not is_contention(error):
                    raise
                if pause is None:
                    raise StoreContention(str(error)) from error
                time.sleep(pause)
                continue
            return []
        raise AssertionError("the last try returns or raises")

    def _which_failed(
        self, run_request: dict[str, Any], on_its_own: dict[str, Any] | None, job_write: dict[str, Any]
    ) -> list[str | None]:
        """After a merged write failed: whether the run's condition holds alone (then the
        job's failed), asked with a write that changes nothing; a run that left the job's
        item meanwhile is written on its own item after all."""
        try:
            self._ddb.update_item(
                **_condition_only(run_request), ReturnValuesOnConditionCheckFailure="ALL_OLD"
            )
        except ClientError as error:
            if not condition_failed(error):
                if is_contention(error):
                    raise StoreContention(str(error)) from error
                raise
            if on_its_own is not None and self._run_is_elsewhere(error, run_request):
                return self._transact([{"Update": on_its_own}, job_write])
            return ["ConditionalCheckFailed", None]
        return [None, "ConditionalCheckFailed"]

    def _no_item(self, key: Mapping[str, Any]) -> bool:
        reply = self._ddb.get_item(
            TableName=self._table, Key=key, ConsistentRead=True, ProjectionExpression="sk"
        )
        return "Item" not in reply

    def _cancellation_reasons(self, error: ClientError, expected: int) -> list[str | None]:
        """The per-item codes of a cancelled transaction; contention raises StoreContention.
        A condition that failed is an answer even beside an item throttled or in conflict:
        tried again, the write would only lose again (after pauses, in a poll's urgent
        claim, seconds of them)."""
        if is_contention(error):
            raise StoreContention(str(error)) from error
        if error_code(error) != "TransactionCanceledException":
            raise error
        cancellations: list[dict[str, Any]] = error.response.get("CancellationReasons", [])  # type: ignore[assignment]
        reasons = [reason.get("Code") for reason in cancellations] + [None] * expected
        lost = "ConditionalCheckFailed" in reasons
        if not lost and any(reason in _CONTENTION_REASONS for reason in reasons):
            raise StoreContention(f"transaction cancelled: {reasons[:expected]}") from error
        return reasons[:expected]

    def _job_write(
        self, job_id: str, sets: list[str], removes: list[str], conditions: list[str], values: dict[str, Any]
    ) -> dict[str, Any]:
        """The job item's part of a transaction: an update (SET `sets`, REMOVE `removes`) if
        `conditions` hold."""
        write: dict[str, Any] = {
            "TableName": self._table,
            "Key": self._codec.job_key(job_id),
            "ConditionExpression": " AND ".join(["attribute_exists(pk)", *conditions]),
            "ExpressionAttributeValues": expression_values(**values),
        }
        if any("#status" in part for part in (*sets, *conditions)):
            write["ExpressionAttributeNames"] = {"#status": "status"}
        update = f"SET {', '.join(sets)}" if sets else ""
        if removes:
            update += f" REMOVE {', '.join(removes)}"
        return {"Update": write | {"UpdateExpression": update.strip()}}

    def _admit(self, run_request: dict[str, Any], job_write: dict[str, Any]) -> bool:
        """Write a run's admission (started, buffered, skipped) with its condition on the job's
        slots. False if the run's condition failed (a duplicate or stale message); SlotsChanged
        if only the job's did (its slots are no longer as read)."""
        reasons = self._transact([{"Update": run_request}, job_write])
        if not reasons:
            return True
        if reasons[0] == "ConditionalCheckFailed":
            return False
        raise SlotsChanged(f"running slots of job {run_request['Key']['pk']['S']} changed")

    def _end_run(
        self,
        request: dict[str, Any],
        job_id: str,
        now: datetime,
        *,
        complete: bool = False,
        release: bool = False,
    ) -> bool:
        """Apply a run's update that ends its attempt. With `release`, give the attempt's
        running slot back (the request must hold it: `HOLDS_SLOT`); with `complete`, complete
        the job (its last run has ended). Both are one update of the job item, in the same
        transaction as the run's, so no crash can leave a finished one-off job SCHEDULED
        forever, nor a slot taken by an attempt that ended. False if the run's condition
        failed. A job that cannot complete (cancelled meanwhile, or already completed) stops
        neither the run's update nor the release."""
        variants = [(release, complete)]
        if release and complete:
            variants.append((True, False))
        if release or complete:
            variants.append((False, False))
        for give_back, completing in variants:
            job_update = self._job_end_update(job_id, now, give_back, completing)
            if job_update is None:
                return self._write_if(request)
            reasons = self._transact([{"Update": request}, {"Update": job_update}])
            if not reasons:
                return True
            if reasons[0] == "ConditionalCheckFailed":
                return False
        raise AssertionError("the last variant writes the run alone")

    def _job_end_update(
        self, job_id: str, now: datetime, release: bool, complete: bool
    ) -> dict[str, Any] | None:
        """The job's part of a run's end: a running slot given back, the job completed."""
        if not release and not complete:
            return None
        sets: list[str] = []
        conditions = ["attribute_exists(pk)"]
        values: dict[str, Any] = {"one": 1}
        update: dict[str, Any] = {"TableName": self._table, "Key": self._codec.job_key(job_id)}
        if release:
            sets.append("running_count = running_count - :one")
            conditions.append("running_count >= :one")
        if complete:
            sets += [
                "#status = :completed",
                "version = version + :one",
                "updated_at_ms = :now",
                "expires_at = :expires",
            ]
            conditions.append(ACTIVE_WITH_NOTHING_LEFT_TO_FIRE)
            values |= {
                "completed": "COMPLETED",
                "now": to_ms(now),
                "expires": self._codec.expiry(now),
                "scheduled": "SCHEDULED",
                "paused": "PAUSED",
            }
            update["ExpressionAttributeNames"] = {"#status": "status"}
        return update | {
            "UpdateExpression": "SET " + ", ".join(sets),
            "ConditionExpression": " AND ".join(conditions),
            "ExpressionAttributeValues": expression_values(**values),
        }

    def _move_to_retry(
        self,
        run: RunRef,
        ended: Attempt,
        sets: Mapping[str, Any],
        condition: str,
        condition_values: Mapping[str, Any],
        changes: Mapping[str, Any],
    ) -> Run | None:
        """A running attempt → RETRYING (`sets`, if `condition`), giving its running slot back
        in the same transaction when it holds one. `ended`, the attempt that failed, goes onto
        the end of the run's earlier attempts (no read needed: a round has at most 20
        attempts, and a re-drive trims the list); its response code is the run's, none if it
        got no answer. The run as written (`changes`: its new values, None ones left as they
        were), or None when the condition failed."""
        kept = ended.as_kept()
        sets = {
            **sets,
            "response_code": ended.response_code,
            "past_attempts": Appended([attempt_entry(kept)]),
        }
        remove = ("lease_until_ms", "lease_owner", "slot", "response_code")
        if not holds_slot(run):
            return self._update_run(
                run.job_id,
                run.scheduled_for_ms,
                sets,
                condition,
                condition_values,
                remove,
                with_job=run.with_job,
            )
        assert isinstance(run, Run)
        request = self._run_update(
            run.job_id,
            run.scheduled_for_ms,
            sets,
            f"{condition} AND {HOLDS_SLOT}",
            condition_values,
            remove,
            with_job=run.with_job,
        )
        if not self._end_run(request, run.job_id, run.scheduled_for, release=True):
            return None
        updates = {name: value for name, value in changes.items() if value is not None}
        return run.model_copy(
            update=updates
            | {
                "status": RunStatus.RETRYING,
                "attempt": run.attempt + 1,
                "lease_until": None,
                "holds_slot": False,
                "response_code": ended.response_code,
                "past_attempts": [*run.past_attempts, kept],
            }
        )

    def _write_while_paused(
        self, run_request: dict[str, Any], job_id: str, release: bool = False
    ) -> bool | None:
        """Write a run's update in one transaction with the condition that its job is PAUSED
        (with `release`, giving a running slot back). True when written; False if the run's
        condition failed; None if only the job's did (it is no longer paused)."""
        sets, conditions = ["#status = #status"], ["#status = :paused"]
        values: dict[str, Any] = {"paused": "PAUSED"}
        if release:
            sets = ["running_count = running_count - :one"]
            conditions.append("running_count >= :one")
            values["one"] = 1
        job_write = self._job_write(job_id, sets, [], conditions, values)
        reasons = self._transact([{"Update": run_request}, job_write])
        if not reasons:
            return True
        return False if reasons[0] == "ConditionalCheckFailed" else None


def merged_update(run_request: Mapping[str, Any], job_update: Mapping[str, Any]) -> dict[str, Any]:
    """One UpdateItem of a job's item doing a run's update (kept on it) and the job's own: the
    run's placeholders renamed apart, SET and REMOVE clauses joined, conditions ANDed."""

    def renamed(text: str) -> str:
        return _PLACEHOLDER.sub(lambda match: f"{match[1]}rp_{match[2]}", text)

    sets: list[str] = []
    removes: list[str] = []
    for update in (renamed(run_request["UpdateExpression"]), job_update["UpdateExpression"]):
        clauses = _CLAUSES.fullmatch(update.strip())
        assert clauses is not None, update
        sets += [clauses["set"]] if clauses["set"] else []
        removes += [clauses["remove"]] if clauses["remove"] else []
    expression = " ".join(
        part
        for part in (sets and "SET " + ", ".join(sets), removes and "REMOVE " + ", ".join(removes))
        if part
    )
    names = {f"#rp_{name[1:]}": value for name, value in run_request["ExpressionAttributeNames"].items()}
    values = {f":rp_{name[1:]}": value for name, value in run_request["ExpressionAttributeValues"].items()}
    return {
        "TableName": job_update["TableName"],
        "Key": job_update["Key"],
        "UpdateExpression": expression,
        "ConditionExpression": f"({renamed(run_request['ConditionExpression'])}) AND "
        f"({job_update['ConditionExpression']})",
        "ExpressionAttributeNames": names | job_update.get("ExpressionAttributeNames", {}),
        "ExpressionAttributeValues": values | job_update.get("ExpressionAttributeValues", {}),
    }


def _condition_only(run_request: Mapping[str, Any]) -> dict[str, Any]:
    """A write that changes nothing on a job's item and holds only if the run's condition of
    `run_request` (kept on that item) does: which side of a merged write failed."""
    condition = run_request["ConditionExpression"]
    used = set(_PLACEHOLDER.findall(condition))
    return {
        "TableName": run_request["TableName"],
        "Key": run_request["Key"],
        "UpdateExpression": "SET #kept = #kept",
        "ConditionExpression": condition,
        "ExpressionAttributeNames": {
            name: value
            for name, value in run_request["ExpressionAttributeNames"].items()
            if ("#", name[1:]) in used
        }
        | {"#kept": with_job_name("status")},
        "ExpressionAttributeValues": {
            name: value
            for name, value in run_request["ExpressionAttributeValues"].items()
            if (":", name[1:]) in used
        },
    }
