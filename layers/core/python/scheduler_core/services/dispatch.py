"""Claiming due firings and handing them to the priority queues (DESIGN §3, "Poll").

The same claim serves the poller and the create path: every firing of a job at or before
the horizon (now + lookahead) is claimed, one conditional write each, so a job
never waits in the due index for a firing the next poll could reach too late. A poll claims
a bucket's jobs side by side (`claim_parallelism` at a time): a claim touches only its own
job and run, so the order between jobs does not matter.

A big bucket (a midnight burst: a shard's share of a million jobs) is worked through as it
is read: a page of the due index at a time (`DueIndex.due_pages`), its runs sent as they are
claimed, a batch at a time (`Outbox`), so the first runs reach their queue while the last
are still being read. A poll stops taking new work STOP_BEFORE_TIMEOUT before its function
would be stopped, sends what it claimed and leaves the rest to the next poll (every minute),
with the point it got to (`PollResume`): the next poll claims from there first, then reads the
bucket from its start (the runs claimed before that point, entries the index showed late), so a
bucket bigger than a poll can read is not re-read from its start every minute before its last
jobs are reached.
"""

from __future__ import annotations

from collections import deque
from datetime import datetime, timedelta
from typing import Protocol

from scheduler_core.domain import keys, misfire
from scheduler_core.domain.clock import Clock, to_ms
from scheduler_core.domain.entities import Job, Run
from scheduler_core.domain.fairness import fair_order
from scheduler_core.domain.job_firings import following_firing, scheduled_run
from scheduler_core.domain.messages import BATCH_SIZE, Outbox
from scheduler_core.domain.overlap import queues_when_caught_up
from scheduler_core.domain.schedule import jittered
from scheduler_core.domain.vocabulary import JobKind, JobStatus
from scheduler_core.observability import logger, metrics
from scheduler_core.poll_ports import DueIndex, PollResume, Watermark, Watermarks
from scheduler_core.ports import CursorNotValid, JobRecords, RunQueue, StoreContention
from scheduler_core.services.claim_pauses import claim_pauses
from scheduler_core.services.contention import through_contention
from scheduler_core.services.lifecycle import RunLifecycle
from scheduler_core.services.missed_firings import MissedFirings, missed_to_run
from scheduler_core.services.parallel import InOrder, Runner
from scheduler_core.services.poll_watch import RunWatch
from scheduler_core.services.polls import BucketRead, ClaimResult, PollPolicy, PollReport
from scheduler_core.services.unclaimed_sends import Send, SendWindow, send_decision, sent_unclaimed
from scheduler_core.services.workflow_runs import WorkflowRunner

# A poll sends claimed runs this many of one priority at a time (SQS's SendMessageBatch holds 10).
SEND_BATCH = BATCH_SIZE
# How long before its function's timeout a poll stops claiming: time for the claims under
# way and the last sends.
STOP_BEFORE_TIMEOUT = timedelta(seconds=5)


class PollStore(DueIndex, Watermarks, JobRecords, Protocol):
    """The ports of the jobs table a poll uses."""


class Dispatcher:
    def __init__(
        self,
        store: PollStore,
        queue: RunQueue,
        clock: Clock,
        policy: PollPolicy,
        lifecycle: RunLifecycle,
        runner: Runner | None = None,
        send_batch: int = SEND_BATCH,
        workflows: WorkflowRunner | None = None,
    ) -> None:
        """`send_batch`: how many claimed runs of one priority a poll sends at a time (a
        simulation that runs a sample of the jobs sends each as it is claimed: each stands
        for many whose batches fill at once). `workflows`: the watchdog of workflow runs
        (none: a store that holds none)."""
        self._store = store
        self._queue = queue
        self._clock = clock
        self._policy = policy
        self._lifecycle = lifecycle
        # A bucket's jobs are claimed side by side (each claim writes only its own job).
        self._runner: Runner = runner or InOrder()
        self._send_batch = send_batch
        self._watch = RunWatch(lifecycle, self._runner, workflows)
        self._missed = MissedFirings(store, lifecycle)

    def horizon(self, now: datetime) -> datetime:
        return now + self._policy.lookahead

    def claim_firings(self, job: Job, now: datetime, poll: BucketRead | None = None) -> ClaimResult:
        """Claim every firing of `job` up to the horizon, one conditional write each. Stops at the
        first lost race (someone else changed the job: they own what follows) or contention
        (what is claimed so far stands; the rest waits for a later poll). In a `poll`, some
        claims are tried longer than outside one (`claim_pauses`).

        Firings missed while nothing polled (an outage: the job's next firing is past) go as
        the job's misfire policy says (`misfire`; docs/concepts/misfires.md): those that run
        are claimed first, oldest first, and the first claim moves the job past the others."""
        horizon = self.horizon(now)
        runs: list[Run] = []
        missed: deque[datetime] = deque()
        if job.status is JobStatus.SCHEDULED and job.next_fire_at is not None and job.next_fire_at < now:
            missed.extend(missed_to_run(job, now))
            if not missed:
                # None of them runs: the job moves on to its first firing after now.
                skip_to = following_firing(job, now)
                if skip_to is None or skip_to > horizon:
                    return self._missed.skip(job, skip_to, now)
                missed.append(skip_to)
        while (
            job.status is JobStatus.SCHEDULED and job.next_fire_at is not None and job.next_fire_at <= horizon
        ):
            fire_at = missed.popleft() if missed else job.next_fire_at
            following = following_firing(job, fire_at)
            catch_up = queues_when_caught_up(job) and misfire.is_misfire(fire_at, now)
            run = self._firing_run(job, fire_at, following, now, catch_up)
            try:
                claimed = self._claim_retrying_contention(job, run, following, now, catch_up, poll)
            except StoreContention:
                return ClaimResult(runs, job, contended=True)
            if claimed is None:
                break
            runs.append(claimed)
            queue = [*job.catch_up_queue_ms, run.scheduled_for_ms] if catch_up else job.catch_up_queue_ms
            job = job.model_copy(
                update={"version": job.version + 1, "next_fire_at": following, "catch_up_queue_ms": queue}
            )
        return ClaimResult(runs, job)

    def _firing_run(
        self, job: Job, fire_at: datetime, following: datetime | None, now: datetime, catch_up: bool
    ) -> Run:
        """The run a claim of the firing `fire_at` makes (`following`: the job's next)."""
        starts_at = jittered(job.fires_by, job.job_id, fire_at, following)
        # The run's timer: if it has not started by then, its message is sent again (or,
        # jittered beyond what SQS can delay, first sent then).
        due_at, _ = self._lifecycle.send_plan(starts_at, now)
        run = scheduled_run(job, fire_at, starts_at)
        return run.model_copy(update={"due_at": due_at, "caught_up": catch_up})

    def claimed_at_create(self, job: Job, now: datetime) -> Run | None:
        """The run a new job is written with, claimed (`put_job_claimed_if_absent`: one
        write, not a put and a claim): a one-off's only firing, due within the horizon and
        not missed. None for any other job: it is put as it is, then `claim_and_enqueue`."""
        fire_at = job.next_fire_at
        if job.kind is not JobKind.JOB or job.status is not JobStatus.SCHEDULED or fire_at is None:
            return None
        if not now <= fire_at <= self.horizon(now) or following_firing(job, fire_at) is not None:
            return None
        return self._firing_run(job, fire_at, None, now, catch_up=False)

    def _claim_retrying_contention(
        self,
        job: Job,
        run: Run,
        following: datetime | None,
        now: datetime,
        catch_up: bool,
        poll: BucketRead | None,
    ) -> Run | None:
        """A claim throttled or caught in a transaction conflict is tried again after
        `claim_pauses`. A lost race (the condition failed) is never retried: someone else
        owns the firing."""
        return through_contention(
            lambda: self._store.claim_if_unchanged(job, run, following, now, catch_up),
            self._clock,
            claim_pauses(run.starts_at, following is not None, now, in_poll=poll is not None),
            until=poll.stop_at if poll is not None else None,
            on_retry=lambda: logger.info("claim contended; trying again", extra={"job_id": job.job_id}),
        )

    def claim_and_enqueue(self, job: Job, now: datetime) -> ClaimResult:
        """Claim and enqueue a job's firings within the horizon (the create path). What
        contention leaves unclaimed stays in the due index for the poller."""
        result = self.claim_firings(job, now)
        if result.contended:
            logger.warning("some firings left to the poller", extra={"job_id": job.job_id})
        self._enqueue(result.runs)
        return result

    def missed_run(self, job: Job, fire_at: datetime, now: datetime) -> Run:
        """The run of a past firing `fire_at` made outside a claim (a resume that catches up),
        with its timer as a claim would set it; send it with `enqueue`."""
        starts_at = jittered(job.fires_by, job.job_id, fire_at, following_firing(job, fire_at))
        due_at, _ = self._lifecycle.send_plan(starts_at, now)
        return scheduled_run(job, fire_at, starts_at).model_copy(
            update={"due_at": due_at, "caught_up": queues_when_caught_up(job)}
        )

    def enqueue(self, runs: list[Run]) -> list[Run]:
        """Send runs made outside a poll; returns those not sent (their timers have the
        poller send them)."""
        return self._enqueue(runs)

    def _enqueue(self, runs: list[Run]) -> list[Run]:
        # A run whose timer comes before its start waits in the due index (jittered further
        # away than SQS can delay a message): the poller sends it when it comes within reach.
        runs = [run for run in runs if run.due_at is None or run.due_at >= run.starts_at]
        if not runs:
            return []
        unsent = self._queue.send_runs(runs)
        for run in unsent:
            logger.error("claimed run not enqueued", extra={"run_id": run.run_id, "job_id": run.job_id})
        return unsent

    def poll_shard(self, shard: int, time_left: timedelta | None = None) -> PollReport:
        """Claim and enqueue everything due in one shard, from its watermark to the horizon;
        then advance the watermark past the buckets that are fully drained. `time_left`: how
        long until the function is stopped (none: no limit); the poll stops taking new work
        STOP_BEFORE_TIMEOUT before that. A bucket the last poll stopped in is claimed from
        where it stopped, and read from its start only after the later buckets."""
        now = self._clock.now()
        stop_at = now + time_left - STOP_BEFORE_TIMEOUT if time_left is not None else None
        until_ms = to_ms(self.horizon(now))
        report = PollReport(shard)
        mark = self._store.get_watermark(shard)
        if mark is None:
            # Pin the first poll's start now, so a first poll that keeps failing does not let
            # the window slide past jobs created before it.
            mark = Watermark(keys.bucket_of(to_ms(now - self._policy.first_poll_lookback)))
            self._store.advance_watermark(shard, mark.bucket_ms)
        buckets = keys.buckets_between(mark.bucket_ms, until_ms)
        truncated = len(buckets) > self._policy.max_buckets
        if truncated:
            report.sends_stop_at(buckets[self._policy.max_buckets])  # not read by this poll
        buckets = buckets[: self._policy.max_buckets]
        sends = (
            SendWindow.of_poll(mark.sent_until_ms, self.horizon(now)) if self._policy.send_unclaimed else None
        )
        read = BucketRead(shard, until_ms, now, report, stop_at, sends)
        undrained: list[int] = []
        resumed: list[int] = []  # read from their start once the later buckets are
        for bucket in buckets:
            if self._out_of_time(stop_at):
                undrained.append(bucket)
                report.sends_stop_at(bucket)
                break
            report.buckets_read += 1
            if mark.resume is not None and mark.resume.bucket_ms == bucket:
                if self._claim_from(read, mark.resume):
                    resumed.append(bucket)
                undrained.append(bucket)
            elif not self._drain_pages(read, bucket, None)[0] or keys.bucket_end(bucket) > until_ms:
                undrained.append(bucket)  # the last bucket reaches past the horizon: not due yet
        for bucket in resumed:
            if self._out_of_time(stop_at):
                report.sends_stop_at(bucket)  # what lies before its point was not read again
                break
            if self._drain_pages(read, bucket, None)[0] and keys.bucket_end(bucket) <= until_ms:
                undrained.remove(bucket)
        if undrained:
            first_undrained = min(undrained)
        else:
            first_undrained = buckets[-1] + 60_000 if truncated else keys.bucket_of(until_ms)
        # GSI reads lag: keep re-reading the last `grace` of buckets before leaving them.
        report.watermark_ms = min(first_undrained, keys.bucket_of(to_ms(now - self._policy.grace)))
        if report.watermark_ms > mark.bucket_ms:
            self._store.advance_watermark(shard, report.watermark_ms)
        self._leave_resume(shard, mark.resume, report, max(report.watermark_ms, mark.bucket_ms))
        if sends is not None:
            self._raise_sent_until(shard, sends, report)
        return report

    def _raise_sent_until(self, shard: int, sends: SendWindow, report: PollReport) -> None:
        """Move the shard's mark of what was sent unclaimed up to where this poll got."""
        stop = report.sends_stop_ms
        until = sends.until_ms if stop is None else min(sends.until_ms, stop)
        if until <= sends.from_ms:
            return
        try:
            self._store.raise_sent_until(shard, until)
        except Exception:  # the next poll sends again what this one sent: duplicates, dropped
            logger.exception("mark of the firings sent unclaimed not written", extra={"shard": shard})

    def _out_of_time(self, stop_at: datetime | None) -> bool:
        return stop_at is not None and self._clock.now() >= stop_at

    def _claim_from(self, read: BucketRead, resume: PollResume) -> bool:
        """The claims of a bucket after where the last poll stopped; True if every page after
        it was read (a point the store refuses counts: the bucket is then read from its start)."""
        try:
            finished = self._drain_pages(read, resume.bucket_ms, resume.after)[1]
        except CursorNotValid as error:
            logger.warning(
                "poll resume point refused; the bucket is read from its start",
                extra={"shard": read.shard, "bucket_ms": resume.bucket_ms, "error": str(error)},
            )
            finished = True
        read.report.resume_done = read.report.resume_done or finished
        return finished

    def _leave_resume(
        self, shard: int, found: PollResume | None, report: PollReport, watermark_ms: int
    ) -> None:
        """Where the next poll claims first: where this one stopped, or the point it found if it
        did not get through it (unless the watermark passed its bucket); the later of the two."""
        kept = found
        if kept is not None and (report.resume_done or kept.bucket_ms < watermark_ms):
            kept = None
        points = [point for point in (report.resume, kept) if point is not None]
        report.resume = max(points, key=lambda point: point.bucket_ms) if points else None
        if report.resume == found:
            return
        try:
            self._store.set_poll_resume(shard, report.resume)
        except Exception:  # a hint: the next poll reads the bucket from its start instead
            logger.exception("poll resume point not written", extra={"shard": shard})

    def _drain_pages(self, read: BucketRead, bucket: int, after: str | None) -> tuple[bool, bool]:
        """Claim the jobs of one bucket and look after its runs whose timer is up, a page of the
        index at a time, from `after` (None: its start): whether nothing was left behind, and
        whether every page was read. Stopped early (out of time, throttled), it leaves the
        point up to which every job was tried (`report.resume`)."""
        outbox = Outbox(self._enqueue, self._send_batch)
        report, now, stop_at = read.report, read.now, read.stop_at
        tried_to = after
        read_to_ms: int | None = None  # the latest firing of a job read in this bucket
        drained = finished = False
        try:
            drained = True
            # A run's timer that is not up yet needs nothing from this poll: not read.
            pages = self._store.due_pages(
                read.shard, bucket, read.until_ms, runs_until_ms=to_ms(now), after=after
            )
            for due in pages:
                if self._out_of_time(stop_at):
                    break
                if not self._watch.watch_runs(due.runs, now, report) or due.later_runs:
                    drained = False
                page_drained, page_tried = self._claim_page(due.jobs, read, outbox)
                drained = drained and page_drained
                fires = [to_ms(job.next_fire_at) for job in due.jobs if job.next_fire_at is not None]
                if due.read_to_ms is not None:  # not past the index entries read (due listings)
                    fires = [min(fire, due.read_to_ms) for fire in fires]
                read_to_ms = max([fire for fire in fires if fire < bucket + 60_000] + [read_to_ms or bucket])
                if page_tried:
                    tried_to = due.resume_after
                if self._out_of_time(stop_at) or not page_tried:
                    break
            else:
                finished = True
        except StoreContention:
            report.contended += 1
        finally:
            outbox.flush()  # what is claimed is sent, whatever happened to the rest
            report.unsent += outbox.unsent
            failed = {run.run_id for run in outbox.unsent if run.claim_version is not None}
            for run in report.sent:
                if run.run_id in failed:
                    report.sends_stop_at(run.scheduled_for_ms)
            report.sent = [run for run in report.sent if run.run_id not in failed]
            if not finished:  # the entries not read come after what was read (from a point: all)
                report.sends_stop_at(bucket if after is not None else read_to_ms or bucket)
        if not finished and tried_to is not None:
            stopped = PollResume(bucket, tried_to)
            if report.resume is None or report.resume.bucket_ms <= bucket:
                report.resume = stopped
        return drained and finished, finished

    def _claim_page(self, jobs: list[Job], read: BucketRead, outbox: Outbox) -> tuple[bool, bool]:
        """Claim one page's jobs side by side (or send them unclaimed): whether none was left
        behind, and whether each was tried (none left for lack of time; a failed claim is
        tried again by the read of the bucket from its start)."""
        report, now = read.report, read.now
        drained = tried = True
        ordered = fair_order(jobs)
        claims = self._runner.map(lambda job: self._claim_or_log(job, read, outbox), ordered)
        for job, result in zip(ordered, claims, strict=True):
            if result is not None and result.left and self._would_send(job, read):
                report.sends_stop_at(to_ms(job.next_fire_at or now))  # the next poll sends it
            # None: an error, logged; the job stays in the bucket for a later poll.
            if result is None or result.contended:
                report.contended += 1
                drained = False
            elif result.left:
                report.left += 1
                drained = tried = False
            elif result.skipped:
                report.skipped += 1
            elif result.sent or result.waiting:
                drained = False  # the job stays in its bucket until its start claims it
                report.sent += result.runs
                continue
            elif not result.runs:
                # Written since it was read (the poll's read may be a second old: `_due_page`);
                # what it is now, a kept run to watch from this bucket among others, the next
                # poll reads: not drained.
                report.lost_races += 1
                drained = False
            if result is not None and any(run.scheduled_for < now for run in result.runs):
                # A firing claimed after its time: its run may be watched from this bucket (the
                # store may leave the job's index entry there), which a later poll reads again
                # before the watermark passes it. Claimed ahead of time, the grace keeps it.
                drained = False
            report.claimed += result.runs if result is not None else []
        return drained, tried

    def _claim_or_log(self, job: Job, read: BucketRead, outbox: Outbox) -> ClaimResult | None:
        """One job's claims within a poll (or its firing sent unclaimed), handed to `outbox` as
        they are made; None if they failed for a reason other than contention (logged), so one
        job cannot cost the other claims of its bucket their send, nor stop the shard's poll
        every minute. Not tried once the poll is out of time (`left`)."""
        if self._out_of_time(read.stop_at):
            return ClaimResult([], job, left=True)
        try:
            result = self._claim_or_send(job, read)
        except Exception:
            logger.exception("claim failed; the job is left for a later poll", extra={"job_id": job.job_id})
            return None
        outbox.add(result.runs)
        return result

    def _claim_or_send(self, job: Job, read: BucketRead) -> ClaimResult:
        """A job's firings claimed; or, a one-off's, sent unclaimed, left for its start to
        claim, or claimed when it did not start in time (`unclaimed_sends`)."""
        now = read.now
        if read.sends is None:
            return self.claim_firings(job, now, read)
        decision = send_decision(job, now, read.sends, self._lifecycle.resend_after)
        if decision is Send.CLAIM:
            return self.claim_firings(job, now, read)
        if decision is Send.WAIT:
            return ClaimResult([], job, waiting=True)
        assert job.next_fire_at is not None
        run = self._firing_run(job, job.next_fire_at, None, now, catch_up=False)
        if decision is Send.SEND:
            return ClaimResult([sent_unclaimed(run, job)], job, sent=True)
        # Send.LATE: sent, not started since; claimed as on time (no misfire), sent again.
        logger.warning(
            "firing sent unclaimed did not start; claimed and sent again", extra={"job_id": job.job_id}
        )
        metrics.add_metric(name="UnclaimedRunsClaimedLate", unit="Count", value=1)
        try:
            claimed = self._claim_retrying_contention(job, run, None, now, False, read)
        except StoreContention:
            return ClaimResult([], job, contended=True)
        # Lost: its start (or another poll) claimed it, a run now kept in this bucket.
        return ClaimResult([claimed], job) if claimed is not None else ClaimResult([], job, waiting=True)

    def _would_send(self, job: Job, read: BucketRead) -> bool:
        """Whether this poll sends the job's firing unclaimed (`unclaimed_sends`)."""
        if read.sends is None:
            return False
        return send_decision(job, read.now, read.sends, self._lifecycle.resend_after) is Send.SEND
