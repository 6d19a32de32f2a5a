"""The ports a poll reads the due index through (`services/dispatch`): a shard's minute
bucket a page at a time, the claim of a firing, and the shard's watermark with the point the
next poll resumes claiming from. `JobStore` (`ports`) holds them beside the others."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from scheduler_core.domain.entities import Job, Run


@dataclass(frozen=True)
class DueItems:
    """What one bucket of the due index holds: jobs waiting for a firing and runs with a
    timer (a lease that may expire, a retry to send, a message that may have been lost)."""

    jobs: list[Job]
    runs: list[Run]
    # Runs whose timer is not up yet (left unread): the bucket is not drained while any are.
    later_runs: int = 0
    # Where a read of the bucket goes on after this page (`due_pages(after=...)`); None:
    # this was the bucket's last page.
    resume_after: str | None = None
    # The latest time of the index entries the page read (None: not told). A job a due
    # listing led to may fire later than its listing's entry, the listing's first firing.
    read_to_ms: int | None = None


@dataclass(frozen=True)
class PollResume:
    """Where a shard's next poll takes up the claims of a bucket a poll stopped in (out of
    time, or throttled), instead of re-reading the claimed runs before it."""

    bucket_ms: int
    after: str  # a page's `DueItems.resume_after`


@dataclass(frozen=True)
class Watermark:
    """A shard's oldest undrained minute bucket, and where its next poll resumes claiming."""

    bucket_ms: int
    resume: PollResume | None = None
    # The time before which every one-off firing to be sent unclaimed was sent
    # (`services/unclaimed_sends`); None: none was yet.
    sent_until_ms: int | None = None


class DueIndex(Protocol):
    """What one shard's minute bucket of the due index holds, and the claim of a firing."""

    def due_pages(
        self,
        shard: int,
        bucket_ms: int,
        until_ms: int,
        runs_until_ms: int | None = None,
        after: str | None = None,
    ) -> Iterator[DueItems]: ...

    def claim_if_unchanged(
        self, job: Job, run: Run, next_fire_at: datetime | None, now: datetime, catch_up: bool = False
    ) -> Run | None: ...


class Watermarks(Protocol):
    """Per shard, the oldest minute bucket a poll has not drained, only ever moved forward;
    and where the next poll resumes claiming (a hint: last written wins)."""

    def get_watermark(self, shard: int) -> Watermark | None: ...

    def advance_watermark(self, shard: int, bucket_ms: int) -> None: ...

    def set_poll_resume(self, shard: int, resume: PollResume | None) -> None: ...

    def raise_sent_until(self, shard: int, sent_until_ms: int) -> None:
        """Move the shard's mark of what was sent unclaimed forward (never back: polls that
        overlap each only raise it to what they sent)."""
        ...
