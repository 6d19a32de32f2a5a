"""Due listings: the one-offs a batch made, due in one minute, in the due index by one entry
for them all (docs/architecture.md, "One table").

A job's own entry costs a write unit when it is made and another when its run ends and takes
it out. A due listing is one item (a hundred ids, about 3.7 KB: 4 write units) and its one
entry, written before its jobs. Polls read it, and the jobs it names, while they read its
bucket; a job it names waits there as its own entry would (at its firing, then at its run's
firing until the run ends), unless it has an entry of its own by then (a change of schedule,
a timer moved away: those writes give it one), has ended, or was never written (a batch that
failed part-way). The first poll that finds none of its jobs waiting deletes it (5 write
units for the hundred); one that names a job never written expires.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from botocore.exceptions import ClientError

from scheduler_core.adapters.dynamodb.codec import WITH_JOB_TIMER, with_job_name
from scheduler_core.adapters.dynamodb.table import TableAdapter, is_contention
from scheduler_core.domain import keys
from scheduler_core.domain.clock import to_ms
from scheduler_core.domain.entities import Job
from scheduler_core.domain.vocabulary import JobStatus


class DueListingsTable(TableAdapter):
    def list_due_together(self, listing_id: str, jobs: Sequence[Job]) -> None:
        """Hold the firings of `jobs` (one-offs a batch is about to write `due_listed`) in the
        due index: one due listing per minute their firings fall in, `listing_id` and that
        minute its id (fresh for each request: a keyed batch sent again lists only the jobs it
        makes, under another id)."""
        by_minute: defaultdict[int, dict[str, int]] = defaultdict(dict)
        for job in jobs:
            assert job.next_fire_at is not None, "a due listing holds firings"
            fire_ms = to_ms(job.next_fire_at)
            by_minute[keys.bucket_of(fire_ms)][job.job_id] = fire_ms
        for minute, firings in by_minute.items():
            self._ddb.put_item(
                TableName=self._table,
                Item=self._codec.due_listing_item(f"{listing_id}-{keys.bucket_label(minute)}", firings),
            )

    def _listed_due_items(
        self, bucket: str, until_ms: int, listings: Sequence[Mapping[str, Any]]
    ) -> tuple[list[dict[str, Any]], set[tuple[str, str]]]:
        """The items of the jobs the due listings of `listings` (their index entries) name that
        wait in `bucket` at or before `until_ms` through them (`_listed_position`), read as the
        poll reads its entries' items (eventually consistent), each once; and the keys of the
        listings holding some due after `until_ms`. A listing none of whose jobs waits through
        it any more (each has ended, is paused or has an entry of its own) is deleted, so that
        the polls re-reading its bucket do not read them all again; one naming a job not found
        (not written yet, or never: a batch that failed part-way) is kept."""
        shard = int(bucket.rsplit("#", 1)[1])
        named = {
            (listing["pk"]["S"], listing["sk"]["S"]): sorted(listing.get("job_ids", {}).get("SS", []))
            for listing in self._items_of(listings, consistent=False)
            if listing is not None
        }
        keys_of = [
            {"pk": {"S": keys.job_pk(job_id)}, "sk": {"S": keys.JOB_SK}}
            for job_ids in named.values()
            for job_id in job_ids
        ]
        items = dict(
            zip([key["pk"]["S"] for key in keys_of], self._items_of(keys_of, consistent=False), strict=True)
        )
        found: dict[str, dict[str, Any]] = {}
        holding: set[tuple[str, str]] = set()
        for (pk, sk), job_ids in named.items():
            waiting = False
            for job_id in job_ids:
                item = items[keys.job_pk(job_id)]
                position = None if item is None else _listed_position(item)
                waiting = waiting or item is None or position is not None
                # In the listing's bucket, as it put it there: a firing since moved has an entry.
                if item is None or position is None or keys.due_pk(position, shard) != bucket:
                    continue
                if position <= until_ms:
                    found[job_id] = item  # once, should two listings name it (a batch sent again)
                else:
                    holding.add((pk, sk))
            if not waiting:
                self._delete_listing_if_done(pk, sk)
        return list(found.values()), holding

    def _delete_listing_if_done(self, pk: str, sk: str) -> None:
        """A listing whose jobs no longer wait through it, deleted (its jobs read as ended or
        with entries of their own stay so, a revived one gets an entry of its own: nothing
        needs it again). Throttled, it is left for the next poll."""
        try:
            self._ddb.delete_item(TableName=self._table, Key={"pk": {"S": pk}, "sk": {"S": sk}})
        except ClientError as error:
            if not is_contention(error):
                raise


def _listed_position(item: Mapping[str, Any]) -> int | None:
    """Where a job a due listing names waits in the due index through it, as its own entry
    would: its firing while it is scheduled, its kept run's firing until that run ends. None
    when it has an entry of its own (that one leads to it) or waits nowhere (paused, ended)."""
    if "due_pk" in item or "due_sk" in item:
        return None
    if WITH_JOB_TIMER in item:
        return int(item[with_job_name("scheduled_for_ms")]["N"])
    if "next_fire_at_ms" in item and item["status"]["S"] == str(JobStatus.SCHEDULED):
        return int(item["next_fire_at_ms"]["N"])
    return None
