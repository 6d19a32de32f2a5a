"""The `DueIndex` port on the jobs table: what one shard's minute bucket of the due index
holds, a page at a time, and the claim of a job's firing in one transaction."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from botocore.exceptions import ClientError
from pydantic import ValidationError

from scheduler_core.adapters.aws import error_code
from scheduler_core.adapters.dynamodb.codec import (
    WITH_JOB_TIMER,
    expression_values,
    to_item,
    with_job_name,
)
from scheduler_core.adapters.dynamodb.cursors import decode_cursor, encode_cursor
from scheduler_core.adapters.dynamodb.due_listings import DueListingsTable
from scheduler_core.adapters.dynamodb.expressions import (
    JOIN_CATCH_UP_QUEUE,
    NOTHING_RUNNING_OR_WAITING,
    RUN_ABSENT,
    UNCHANGED_SINCE_READ,
)
from scheduler_core.adapters.dynamodb.table import DUE_INDEX, condition_failed, is_contention, started_sets
from scheduler_core.adapters.dynamodb.transactions import TransactionalWrites
from scheduler_core.domain import keys
from scheduler_core.domain.clock import to_ms
from scheduler_core.domain.entities import Job, Run
from scheduler_core.domain.vocabulary import JobKind, Trigger
from scheduler_core.observability import logger
from scheduler_core.poll_ports import DueItems
from scheduler_core.ports import CursorNotValid, StoreContention

# How far after its firing a run kept on its job's item may have its timer for the claim to
# leave the job's index entry at the firing (see `_claim_with_job`): a re-send timer (60 s)
# does; a first attempt jittered further away than SQS can delay does not.
ENTRY_LEFT_AT_FIRING = timedelta(minutes=5)
JOB_ABSENT = "attribute_not_exists(pk)"
DUE_ENTRY_KEYS = ("pk", "sk", "due_pk", "due_sk")  # an entry of the due index, as a resume point


def _key(entry: dict[str, Any]) -> tuple[str, str]:
    return entry["pk"]["S"], entry["sk"]["S"]


def _resume_point(key: dict[str, Any] | None) -> str | None:
    """A due entry's key as an opaque resume point (its timer a whole number of ms)."""
    if key is None:
        return None
    return encode_cursor({name: int(value) if name == "due_sk" else value for name, value in key.items()})


class DueIndexTable(TransactionalWrites, DueListingsTable):
    def due_pages(
        self,
        shard: int,
        bucket_ms: int,
        until_ms: int,
        runs_until_ms: int | None = None,
        after: str | None = None,
    ) -> Iterator[DueItems]:
        """Jobs and runs of one shard's minute bucket due at or before `until_ms`, a page of up
        to `due_page` index entries at a time (oldest first; a due listing's entry counts as
        the jobs it names: `due_listings`), so a poll acts on the first of a
        big bucket before it has read the last; from the start, or after the page a
        `resume_after` names. With `runs_until_ms`, runs only up to then, the later ones
        counted (`later_runs`), not read. The index holds keys only (a run's key says it is a
        run): each page's items are then read (in batches, eventually consistent: see
        `_due_page`), and one that moved on since the index saw it (claimed, finished, its
        timer moved) is left out. Every write that follows still re-checks the item it read.
        Throttling raises StoreContention, from the page it met it on; a resume point not of
        this bucket, CursorNotValid."""
        bucket = keys.due_pk(bucket_ms, shard)
        query: dict[str, Any] = {
            "TableName": self._table,
            "IndexName": DUE_INDEX,
            "KeyConditionExpression": "due_pk = :bucket AND due_sk <= :until",
            "ExpressionAttributeValues": expression_values(bucket=bucket, until=until_ms),
        }
        start = decode_cursor(after, DUE_ENTRY_KEYS) if after else None
        if start is not None and (start["due_pk"] != bucket or not isinstance(start["due_sk"], int)):
            raise CursorNotValid("a resume point of another bucket")
        if start is not None and start["due_sk"] > until_ms:
            return  # nothing after it is due yet (DynamoDB refuses a start outside the range)
        entries: list[dict[str, Any]] = []
        resumes: list[str | None] = []  # the resume point after each of `entries`
        before = after  # the resume point before this page
        held: list[str | None] = []  # where the first due listing still holding later jobs is
        later_runs = weight = 0
        try:
            for entry, resume in self._query_items(query, start):
                is_run = entry["sk"]["S"].startswith(keys.RUN_SK_PREFIX)
                if is_run and runs_until_ms is not None and int(entry["due_sk"]["N"]) > runs_until_ms:
                    later_runs += 1
                else:
                    entries.append(entry)
                    resumes.append(_resume_point(resume))
                    # A due listing's entry weighs as the jobs it names.
                    weight += keys.due_listing_size(entry["pk"]["S"], entry["sk"]["S"]) or 1
                if weight >= self._due_page_size or resume is None:
                    page, holding = self._due_page(bucket, until_ms, entries, later_runs, runs_until_ms)
                    # A resume point never passes a due listing with jobs not due yet: the
                    # next poll takes them up from before it, as it would their own entries.
                    first = next((i for i, e in enumerate(entries) if _key(e) in holding), None)
                    if first is not None and not held:
                        held.append(resumes[first - 1] if first else before)
                    yield replace(page, resume_after=held[0] if held else _resume_point(resume))
                    before = _resume_point(resume)
                    entries, resumes, later_runs, weight = [], [], 0, 0
        except ClientError as error:
            if is_contention(error):
                raise StoreContention(str(error)) from error
            if start is not None and error_code(error) == "ValidationException":
                raise CursorNotValid(f"a resume point the query refused: {error}") from error
            raise
        if entries or later_runs:  # a query whose last page came back empty
            yield self._due_page(bucket, until_ms, entries, later_runs, runs_until_ms)[0]

    def _due_page(
        self,
        bucket: str,
        until_ms: int,
        entries: list[dict[str, Any]],
        later_runs: int,
        runs_until_ms: int | None,
    ) -> tuple[DueItems, set[tuple[str, str]]]:
        """The items of a page of index entries, and the keys of its due listings that hold
        jobs due after `until_ms` (`_listed_due_items`). A job's item with a firing is the
        job; one without, that keeps a run (`Run.with_job`), is that run, counted in
        `later_runs` if its timer is after `runs_until_ms` (its entry stays at the firing
        until it ends).

        Read eventually consistent, half the read units of a strong read: an item read may be
        up to about a second old, never newer, and a poll acts on none without a write
        conditioned on it as read (a claim on its version, a send on the version its start is
        conditioned on, the watchdog on the run's state). An old one costs a refused write,
        and the refusal keeps its bucket for the next poll, which reads the item as it is now
        (`Dispatcher`: a lost race is not a drained bucket). Older means more left to do, or,
        for an item written in that second, not seen yet: the index's own lag (a job made or
        moved within the lookahead is claimed by its own write; docs/architecture.md,
        "Poll"). The watchdog sends a last attempt's dead-letter record before its write, so
        a run that ended or beat its heart in that second can leave a record for nothing
        (`make redrive` drops it: docs/operations/redrive.md)."""
        listing = [keys.due_listing_size(e["pk"]["S"], e["sk"]["S"]) is not None for e in entries]
        listings = [e for e, is_listing in zip(entries, listing, strict=True) if is_listing]
        own = [e for e, is_listing in zip(entries, listing, strict=True) if not is_listing]
        holding: set[tuple[str, str]] = set()
        items = [
            item
            for item in self._items_of(own, consistent=False)
            if item is not None
            and item.get("due_pk", {}).get("S") == bucket
            and int(item["due_sk"]["N"]) <= until_ms
        ]
        if listings:  # the jobs due listings hold here (none of them has an entry of its own)
            listed, holding = self._listed_due_items(bucket, until_ms, listings)
            items += listed
        jobs: list[Job] = []
        runs: list[Run] = []
        for item in items:
            try:
                if item["sk"]["S"] == keys.JOB_SK and WITH_JOB_TIMER in item:
                    # The entry is the kept run's (its job has no firing of its own meanwhile).
                    kept = self._codec.run_with_job_from_item(item)
                    if kept is None:
                        continue
                    if runs_until_ms is not None and int(item[WITH_JOB_TIMER]["N"]) > runs_until_ms:
                        later_runs += 1
                    else:
                        runs.append(kept)
                elif item["sk"]["S"] == keys.JOB_SK and "next_fire_at_ms" in item:
                    jobs.append(self._codec.job_from_item(item))
                elif item["sk"]["S"].startswith(keys.RUN_SK_PREFIX):
                    runs.append(self._codec.run_from_item(item))
            except (ValidationError, KeyError, ValueError) as error:
                # One unreadable item (stored under older, looser rules) must not stop the
                # shard's poll: it is logged and left where it is for a person to look at.
                logger.error(
                    "due item unreadable; skipped",
                    extra={"pk": item["pk"]["S"], "sk": item["sk"]["S"], "error": str(error)},
                )
        # The latest timer of the page's index entries: a job a due listing led to may fire
        # later, its listing's entry being at the listing's first firing.
        read_to = max((int(e["due_sk"]["N"]) for e in entries), default=None)
        return DueItems(jobs, runs, later_runs, read_to_ms=read_to), holding

    def claim_if_unchanged(
        self, job: Job, run: Run, next_fire_at: datetime | None, now: datetime, catch_up: bool = False
    ) -> Run | None:
        """Claim the firing `run.scheduled_for` of `job`: move the job from the firing we read
        (`job.next_fire_at`) to `next_fire_at` (or out of the due index) if nobody changed it
        since we read it, and create the run if it does not exist yet. With `catch_up`, the run
        joins the end of the job's catch-up queue (a missed firing caught up: it waits its turn
        for a running slot). A job's last firing is kept on its item (`_claim_with_job`: one
        write); any other, and a workflow's, in one transaction with its run's own item
        (a workflow run's phases live there). The run as claimed; None: another poller or
        an API call won."""
        assert job.next_fire_at is not None, "only a job with a due firing can be claimed"
        last = next_fire_at is None and not catch_up and run.trigger is Trigger.SCHEDULE
        if last and job.kind is JobKind.JOB:
            claimed = self._claim_with_job(job, run, now)
            if claimed is None or isinstance(claimed, Run):
                return claimed
        return run if self._claim_on_its_own(job, run, next_fire_at, now, catch_up) else None

    def _claim_with_job(self, job: Job, run: Run, now: datetime) -> Run | bool | None:
        """The claim of a job's last firing, its run kept on the job's item (`Run.with_job`):
        one UpdateItem. The job's index entry stays at the firing, where the poller looks at
        the run until it ends (its own timer is `r_due_ms`). The run as claimed; None if the
        job changed since it was read; False if the job's item keeps a run already (an earlier
        firing's, before a change of schedule): this one goes on its own item."""
        kept = run.model_copy(update={"with_job": True})
        attributes = self._codec.run_with_job_item(kept, now)
        names = {f"#k{n}": name for n, name in enumerate(attributes)}
        values = expression_values(
            one=1,
            now=to_ms(now),
            seen=job.version,
            seen_fire=to_ms(job.next_fire_at or now),
            scheduled="SCHEDULED",
        ) | {f":k{n}": value for n, value in enumerate(attributes.values())}
        sets = ", ".join(f"#k{n} = :k{n}" for n in range(len(attributes)))
        assert job.next_fire_at is not None, "only a job with a due firing can be claimed"
        entry = self._entry_of_kept_run(job.next_fire_at, run)
        if entry:
            sets += ", due_pk = :entry_pk, due_sk = :entry_sk"
            values |= {":entry_pk": entry["due_pk"], ":entry_sk": entry["due_sk"]}
        update = f"SET version = version + :one, updated_at_ms = :now, {sets} REMOVE next_fire_at_ms"
        keeps_none = f"attribute_not_exists({with_job_name('status')})"
        try:
            self._ddb.update_item(
                TableName=self._table,
                Key=self._codec.job_key(job.job_id),
                UpdateExpression=update,
                ConditionExpression=f"{UNCHANGED_SINCE_READ} AND {keeps_none}",
                ExpressionAttributeNames=names | {"#status": "status"},
                ExpressionAttributeValues=values,
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as error:
            if condition_failed(error):
                item: dict[str, Any] = error.response.get("Item", {})  # type: ignore[assignment]
                return False if with_job_name("status") in item else None
            if is_contention(error):
                raise StoreContention(str(error)) from error
            raise
        return kept

    def _entry_of_kept_run(self, fire_at: datetime, run: Run) -> dict[str, Any]:
        """Where the claim of a job's last firing moves the job's index entry: nowhere (empty;
        it stays at the firing), or, for a timer far from the firing (jitter), to the timer,
        not to hold the firing's bucket (and the shard's watermark) that long. (A claim after
        its firing leaves the entry too, in a bucket the poll then keeps: see `dispatch`.)"""
        if run.due_at is None or run.due_at - fire_at <= ENTRY_LEFT_AT_FIRING:
            return {}
        return to_item(self._codec.due_attributes(run.job_id, run.due_at))

    def claim_and_start_if_unchanged(
        self, run: Run, seen_version: int, now: datetime, lease_until: datetime, owner: str
    ) -> tuple[Job, Run] | None:
        """`RunningSlots.claim_and_start_if_unchanged`: what `_claim_with_job` and then
        `start_kept_run_if_job_idle` write, in one UpdateItem of the job's item (the run's
        attributes as started, a running slot taken), on both their conditions. The run's
        priority is copied from the job's (the message does not carry it). The job and the
        run as written; None if the job is not as the poll read it or keeps a run already.
        Throttled: StoreContention (the message is tried again, not dropped)."""
        assert run.with_job, "a run kept on its job's item"
        assert run.due_at is not None, "with its re-send timer"
        attributes = self._codec.run_with_job_item(run, now)
        started = to_item(started_sets(now, lease_until, owner) | {"slot": True})
        attributes |= {with_job_name(name): value for name, value in started.items()}
        attributes.pop(with_job_name("priority"), None)
        attributes |= self._entry_of_kept_run(run.scheduled_for, run)
        names = {f"#k{n}": name for n, name in enumerate(attributes)}
        sets = ", ".join(f"#k{n} = :k{n}" for n in range(len(attributes)))
        values = expression_values(
            one=1,
            zero=0,
            now=to_ms(now),
            seen=seen_version,
            seen_fire=run.scheduled_for_ms,
            scheduled="SCHEDULED",
        ) | {f":k{n}": value for n, value in enumerate(attributes.values())}
        conditions = [
            UNCHANGED_SINCE_READ,
            f"attribute_not_exists({with_job_name('status')})",
            *NOTHING_RUNNING_OR_WAITING,
        ]
        try:
            reply = self._ddb.update_item(
                TableName=self._table,
                Key=self._codec.job_key(run.job_id),
                UpdateExpression=(
                    f"SET version = version + :one, updated_at_ms = :now, running_count = :one, {sets},"
                    f" #rp = #priority REMOVE next_fire_at_ms"
                ),
                ConditionExpression=" AND ".join(conditions),
                ExpressionAttributeNames=names
                | {"#status": "status", "#rp": with_job_name("priority"), "#priority": "priority"},
                ExpressionAttributeValues=values,
                ReturnValues="ALL_NEW",
            )
        except ClientError as error:
            if condition_failed(error):
                return None
            if is_contention(error):
                raise StoreContention(str(error)) from error
            raise
        item = reply["Attributes"]
        kept = self._codec.run_with_job_from_item(item)
        assert kept is not None, "the update wrote the run"
        return self._codec.job_from_item(item), kept

    def put_job_claimed_if_absent(
        self, job: Job, run: Run, now: datetime, listed: bool = True, due_listed: bool = False
    ) -> Run | None:
        """A new job whose only firing is `run`, written claimed: the item a put and then the
        claim of its last firing (`_claim_with_job`) leave, in one PutItem. Nobody can have
        read a job before it exists, so the put's own condition fences the claim. The run
        as claimed; None if a job with its id exists already. `listed`, `due_listed`: as
        `put_job_if_absent`."""
        kept = run.model_copy(update={"with_job": True})
        item = {
            name: value
            for name, value in self._codec.job_item(job, listed, due_listed).items()
            if name != "next_fire_at_ms"
        }
        item |= to_item({"version": job.version + 1, "updated_at_ms": to_ms(now)})
        item |= self._codec.run_with_job_item(kept, now)
        assert job.next_fire_at is not None, "a one-off's firing"
        item |= self._entry_of_kept_run(job.next_fire_at, run)
        try:
            self._ddb.put_item(TableName=self._table, Item=item, ConditionExpression=JOB_ABSENT)
        except ClientError as error:
            if condition_failed(error):
                return None
            raise
        return kept

    def _claim_on_its_own(
        self, job: Job, run: Run, next_fire_at: datetime | None, now: datetime, catch_up: bool
    ) -> bool:
        """The claim in one transaction: the job's update, and the put of its run's item."""
        assert job.next_fire_at is not None, "only a job with a due firing can be claimed"
        update = "SET version = version + :one, updated_at_ms = :now"
        values = expression_values(
            one=1, now=to_ms(now), seen=job.version, seen_fire=to_ms(job.next_fire_at), scheduled="SCHEDULED"
        )
        if catch_up:
            update += f", {JOIN_CATCH_UP_QUEUE}"
            values |= expression_values(no_runs=[], queued=[run.scheduled_for_ms])
        if next_fire_at is None:
            update += " REMOVE due_pk, due_sk, next_fire_at_ms"
        else:
            next_ms = to_ms(next_fire_at)
            update += ", due_pk = :next_pk, due_sk = :next_ms, next_fire_at_ms = :next_ms"
            values |= expression_values(
                next_pk=keys.due_pk(next_ms, keys.shard_for(job.job_id, self._shards)), next_ms=next_ms
            )
        try:
            self._ddb.transact_write_items(
                TransactItems=[
                    {
                        "Update": {
                            "TableName": self._table,
                            "Key": to_item({"pk": keys.job_pk(job.job_id), "sk": keys.JOB_SK}),
                            "UpdateExpression": update,
                            "ConditionExpression": UNCHANGED_SINCE_READ,
                            "ExpressionAttributeNames": {"#status": "status"},
                            "ExpressionAttributeValues": values,
                        }
                    },
                    {
                        "Put": {
                            "TableName": self._table,
                            "Item": self._codec.run_item(run, now),
                            "ConditionExpression": RUN_ABSENT,
                        }
                    },
                ]
            )
        except ClientError as error:
            job_update, run_put = self._cancellation_reasons(error, expected=2)
            if job_update == "ConditionalCheckFailed" or run_put == "ConditionalCheckFailed":
                return False
            raise
        return True
