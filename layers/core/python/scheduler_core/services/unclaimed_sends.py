"""One-off firings a poll sends without claiming them (`PollPolicy.send_unclaimed`): the
run's start claims the firing (`RunningSlots.claim_and_start_if_unchanged`), one write where
a claim and then a start are two, a write unit and a request less a run (issue 10).

What keeps it safe and on time (docs/architecture.md, "Poll"):

- One claim per firing still: the start's write is conditioned on the job as the poll read
  it (its version, that firing next, no run kept on its item). A second message for the
  firing finds it claimed (a duplicate); one for a job changed since finds it changed.
- Sent once, not every minute: beside a shard's watermark, its polls keep the time before
  which every such firing has been sent (`Watermark.sent_until_ms`). A poll sends those from
  there up to its horizon less SEND_MARGIN, then moves the mark up to where it got: its
  horizon less the margin, or the first firing it left (out of time, a failed send), or
  the first index entry it did not read (in a bucket it resumed in and did not read again
  from its start, the bucket's start). A job the poll could not see yet (made while it
  read, the index lagging) is due after that: made within the lookahead, its create claimed
  it; made before, its firing is more than the lookahead after its create.
- Never lost: until its start claims it, the job stays in its bucket, which is not drained.
  One not started `resend_after` after its time (its message lost, its start failing) is
  claimed by a poll as a firing on time would be (not as a misfire) and sent again.
- Only what the start can claim with nothing to decide: a one-off job (no firing after this
  one), not jittered, nothing running, buffered or caught up. Anything else is claimed by the
  poll as before; a firing whose job has a run in a slot by its time is claimed by the worker
  as a poll would, and its overlap policy decides then (`execution`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import Enum

from scheduler_core.domain.clock import from_ms, to_ms
from scheduler_core.domain.entities import Job, Run
from scheduler_core.domain.job_firings import waits_for_its_last_firing
from scheduler_core.domain.messages import RunMessage
from scheduler_core.domain.schedule import jittered
from scheduler_core.domain.vocabulary import Priority, RunStatus, Trigger

# How far before its horizon a poll stops sending unclaimed firings: more than the due
# index's lag behind a create, and the clocks' skew between the api and the poller.
SEND_MARGIN = timedelta(seconds=10)


class Send(Enum):
    CLAIM = "claim"  # not for the start to claim: the poll claims it, as any other firing
    SEND = "send"  # sent now, unclaimed
    WAIT = "wait"  # sent by an earlier poll, or the next poll's to send: left in its bucket
    LATE = "late"  # sent, and not started `resend_after` after its time: claimed now


@dataclass(frozen=True)
class SendWindow:
    """The firings a poll sends unclaimed: from `from_ms` (those before it were sent by
    earlier polls) to `until_ms` (its horizon less SEND_MARGIN), exclusive."""

    from_ms: int
    until_ms: int

    @classmethod
    def of_poll(cls, sent_until_ms: int | None, horizon: datetime) -> SendWindow:
        until_ms = to_ms(horizon - SEND_MARGIN)
        return cls(min(sent_until_ms or 0, until_ms), until_ms)


def one_off_firing(job: Job) -> bool:
    """Whether the job's next firing is a one-off's: its last (none after it), not jittered."""
    fire_at = job.next_fire_at
    return (
        waits_for_its_last_firing(job)
        and fire_at is not None
        and jittered(job.fires_by, job.job_id, fire_at, None) == fire_at
    )


def claimable_by_start(job: Job) -> bool:
    """Whether a start can claim the job's next firing in its own write: a one-off's firing,
    with nothing running, buffered or caught up (then every overlap policy starts it)."""
    return (
        one_off_firing(job)
        and not job.running_count
        and job.buffered_run_ms is None
        and not job.catch_up_queue_ms
    )


def send_decision(job: Job, now: datetime, window: SendWindow, resend_after: timedelta) -> Send:
    """What a poll does with `job`'s next firing (`window`: what it sends unclaimed)."""
    if not claimable_by_start(job):
        return Send.CLAIM
    assert job.next_fire_at is not None
    fire_ms = to_ms(job.next_fire_at)
    if fire_ms >= window.from_ms:  # no earlier poll sent it
        if job.next_fire_at < now:
            return Send.CLAIM  # missed while nothing polled: its misfire policy decides
        return Send.SEND if fire_ms < window.until_ms else Send.WAIT
    return Send.LATE if now >= job.next_fire_at + resend_after else Send.WAIT


def sent_unclaimed(run: Run, job: Job) -> Run:
    """The run of the firing a poll sends unclaimed (`run`: as its claim would make it)."""
    return run.model_copy(update={"with_job": True, "claim_version": job.version})


def run_claimed_by_start(message: RunMessage, timer: datetime) -> Run:
    """The run a start claims for a message sent unclaimed, as the poll's claim would have
    made it (`scheduled_run`), its re-send timer `timer`. Its priority is the job's, which
    the store copies (the message does not carry it; NORMAL here is a placeholder)."""
    return Run(
        run_id=message.run_id,
        job_id=message.job_id,
        status=RunStatus.PENDING,
        trigger=Trigger.SCHEDULE,
        scheduled_for=from_ms(message.scheduled_for_ms),
        attempt=1,
        priority=Priority.NORMAL,
        with_job=True,
        due_at=timer,
    )
