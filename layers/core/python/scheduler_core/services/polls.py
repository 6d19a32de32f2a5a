"""What a poll is given and what it reports (`dispatch`): its policy, one job's claims, the
shard's report, and what its reads of a shard's buckets share."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from scheduler_core.domain.entities import Job, Run
from scheduler_core.poll_ports import PollResume
from scheduler_core.services.unclaimed_sends import SendWindow


@dataclass(frozen=True)
class PollPolicy:
    lookahead: timedelta
    grace: timedelta
    first_poll_lookback: timedelta
    max_buckets: int
    # One-offs' firings sent unclaimed, their start claiming them (`unclaimed_sends`).
    send_unclaimed: bool = False


@dataclass
class ClaimResult:
    runs: list[Run]
    job: Job  # the job as the last successful claim left it
    contended: bool = False  # a claim was throttled or conflicted: the rest waits for a later poll
    skipped: bool = False  # missed firings skipped (misfire policy), nothing within the horizon
    left: bool = False  # not tried: the poll ran out of time
    sent: bool = False  # `runs` were sent unclaimed (`unclaimed_sends`): their start claims them
    waiting: bool = False  # left in its bucket for now: sent unclaimed earlier, or not yet


@dataclass
class PollReport:
    shard: int
    buckets_read: int = 0
    claimed: list[Run] = field(default_factory=list)
    sent: list[Run] = field(default_factory=list)  # sent unclaimed (`unclaimed_sends`)
    lost_races: int = 0
    contended: int = 0
    skipped: int = 0  # jobs moved past missed firings without a run (misfire SKIP, CATCH_UP)
    left: int = 0  # jobs not tried: the poll stopped before its function's timeout
    unsent: list[Run] = field(default_factory=list)
    # What the watchdog did with runs whose timer was up: "resent", "retried", "failed", ...
    watched: dict[str, int] = field(default_factory=dict)
    watermark_ms: int | None = None
    resume: PollResume | None = None  # where the next poll claims first
    resume_done: bool = False  # every page after the point this poll found was read
    # The first firing this poll may not have sent unclaimed (left, unsent, not read): where
    # the shard's mark of what was sent stops (`unclaimed_sends`). None: nothing left.
    sends_stop_ms: int | None = None

    def sends_stop_at(self, fire_ms: int) -> None:
        self.sends_stop_ms = fire_ms if self.sends_stop_ms is None else min(self.sends_stop_ms, fire_ms)


@dataclass(frozen=True)
class BucketRead:
    """What a poll's reads of its buckets share."""

    shard: int
    until_ms: int
    now: datetime
    report: PollReport
    stop_at: datetime | None
    sends: SendWindow | None = None  # what it sends unclaimed; None: it claims every firing
