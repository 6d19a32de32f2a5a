"""The poller on moto: only what the fakes cannot show. The due index items as the jobs
table holds them (bucket and shard); the poller's handler and its EventBridge input; two
pollers claiming one big bucket side by side, each on its threads, against DynamoDB's
conditions; and the DynamoDB adapter's reads (a run whose timer is not up is not read; a
big bucket is read and claimed a page of the index at a time).

The poller's rules (each firing claimed exactly once and run on time over hours of polls; a
stale read loses every race; a second poll of the same minute claims nothing new; a firing
missed while no poller ran fires when one returns; a big bucket sent a batch at a time; a
poll out of time sends what it claimed and leaves the rest; a run's timer) are specified on
the in-memory fakes in `tests/unit/test_polling_rules_on_fakes.py`."""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from scheduler_core.adapters.dynamodb.cursors import encode_cursor
from scheduler_core.composition import build_dispatcher, build_store
from scheduler_core.domain import keys
from scheduler_core.domain.clock import to_ms
from scheduler_core.domain.vocabulary import Priority
from scheduler_core.observability import SAME_ON_EVERY_LINE, logger
from scheduler_core.poll_ports import PollResume, Watermark
from scheduler_core.ports import CursorNotValid
from scheduler_core.services.dispatch import Dispatcher
from tests.support.harness import FrozenClock, SchedulerHarness
from tests.support.receiver import WebhookReceiver


def cron_job(receiver: WebhookReceiver, cron: str, **extra: object) -> dict[str, object]:
    return {
        "name": "every",
        "schedule": {"cron": cron},
        "target": {"type": "HTTP", "url": receiver.url},
    } | extra


def test_jobs_are_stored_in_the_due_index_bucket_of_their_shard(
    cloud: SchedulerHarness, receiver: WebhookReceiver
) -> None:
    ids = [cloud.create(cron_job(receiver, "0 * * * *", name=f"hourly-{i}"))["job_id"] for i in range(40)]
    ddb = cloud.clients.dynamodb()
    shards = set()
    for job_id in ids:
        item = ddb.get_item(
            TableName=cloud.settings.jobs_table_name, Key={"pk": {"S": f"JOB#{job_id}"}, "sk": {"S": "JOB"}}
        )
        bucket, shard = item["Item"]["due_pk"]["S"].split("#")
        assert bucket == "202611211100"  # the 11:00 firing's minute
        assert int(shard) == keys.shard_for(job_id, cloud.settings.shard_count)
        shards.add(int(shard))
    assert shards == {0, 1, 2, 3}


def test_the_poller_handler_takes_the_eventbridge_input_and_moves_the_watermark(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    cloud.create(cron_job(receiver, "*/15 * * * *"))
    clock.move_to(clock.now() + timedelta(minutes=14))
    summaries = [cloud.poll_via_handler(shard) for shard in range(4)]
    assert sum(summary["claimed"] for summary in summaries) == 1
    grace = timedelta(seconds=cloud.settings.poll_grace_seconds)
    expected_watermark = keys.bucket_of(to_ms(clock.now() - grace))
    assert {summary["watermark_ms"] for summary in summaries} == {expected_watermark}
    assert cloud.poll_store.get_watermark(0) == Watermark(expected_watermark)


def test_two_pollers_claiming_one_big_bucket_side_by_side_claim_each_firing_once(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    """Each poll claims a bucket's jobs on several threads (`claim_parallelism`); two pollers
    of the same shards at once, each on its threads, still claim every firing exactly once."""
    fire_at = clock.now() + timedelta(minutes=30)
    at = fire_at.isoformat().replace("+00:00", "Z")
    created = [
        cloud.create(
            {"name": f"j{i}", "schedule": {"at": at}, "target": {"type": "HTTP", "url": receiver.url}}
        )
        for i in range(60)
    ]
    assert cloud.settings.claim_parallelism > 1
    clock.move_to(fire_at - timedelta(seconds=60))
    other = build_dispatcher(cloud.settings, cloud.clients, clock)
    claimed: list[list[str]] = [[], []]

    def poll(index: int, dispatcher: Dispatcher) -> None:
        for shard in range(cloud.settings.shard_count):
            claimed[index] += [run.run_id for run in dispatcher.poll_shard(shard).claimed]

    pollers = [threading.Thread(target=poll, args=pair) for pair in enumerate((cloud.dispatcher, other))]
    for poller in pollers:
        poller.start()
    for poller in pollers:
        poller.join()

    expected = sorted(f"{job['job_id']}:{to_ms(fire_at)}" for job in created)
    assert sorted(claimed[0] + claimed[1]) == expected
    clock.move_to(fire_at)
    assert cloud.deliver() == 60
    assert sorted(receiver.by_run()) == expected


def test_a_poll_reads_no_run_whose_timer_is_not_up(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    """A claimed run's re-send timer lies within the poll's reach long before it is up: the
    poll counts it from the index keys without reading the run (its bucket is not drained);
    once the timer is up the poll reads it (and re-sends it).
    (A daily job's run has an item of its own; a one-off's is kept on its job's: below.)"""
    fire_at = clock.now().replace(second=0, microsecond=0) + timedelta(minutes=5)
    job = cloud.create(
        {
            "name": "daily",
            "schedule": {"cron": f"{fire_at.minute} {fire_at.hour} * * *"},
            "target": {"type": "HTTP", "url": receiver.url},
        }
    )
    clock.move_to(fire_at - timedelta(seconds=90))
    assert sum(len(report.claimed) for report in cloud.poll()) == 1  # its timer: fire_at + 60 s
    shard = keys.shard_for(job["job_id"], cloud.settings.shard_count)

    read: list[str] = []

    def count_reads(params: dict[str, Any], **_: Any) -> None:
        read.extend(key["sk"]["S"] for table in params["RequestItems"].values() for key in table["Keys"])

    events = cloud.clients.dynamodb().meta.events
    events.register("provide-client-params.dynamodb.BatchGetItem", count_reads)
    try:
        clock.move_to(fire_at - timedelta(seconds=30))
        cloud.dispatcher.poll_shard(shard)
        assert read == []  # the run's timer is in reach (horizon) but not up: not read
        clock.move_to(fire_at + timedelta(seconds=cloud.settings.resend_after_seconds + 1))
        report = cloud.dispatcher.poll_shard(shard)  # never delivered: the timer is up
        assert report.watched == {"resent": 1}
        assert read == [f"RUN#{to_ms(fire_at)}"]
    finally:
        events.unregister("provide-client-params.dynamodb.BatchGetItem", count_reads)


def test_a_poll_reads_its_buckets_items_eventually_consistent_and_the_worker_strongly(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    """Half the read units: every decision a poll takes on an item it read is a write
    conditioned on it as read (see `DueIndexTable._due_page`). The worker, which starts a run
    on what it read, reads strongly."""
    fire_at = clock.now().replace(second=0, microsecond=0) + timedelta(minutes=5)
    cloud.create(cron_job(receiver, f"{fire_at.minute} {fire_at.hour} * * *", name="daily"))
    reads: list[bool] = []

    def note_consistency(params: dict[str, Any], **_: Any) -> None:
        reads.extend(bool(table.get("ConsistentRead")) for table in params["RequestItems"].values())

    events = cloud.clients.dynamodb().meta.events
    events.register("provide-client-params.dynamodb.BatchGetItem", note_consistency)
    try:
        clock.move_to(fire_at - timedelta(seconds=90))
        assert sum(len(report.claimed) for report in cloud.poll()) == 1
        assert reads
        assert not any(reads)  # the poll: eventually consistent
        reads.clear()
        clock.move_to(fire_at)
        assert cloud.deliver() == 1
        assert reads
        assert all(reads)  # the worker: strongly
    finally:
        events.unregister("provide-client-params.dynamodb.BatchGetItem", note_consistency)


def test_a_one_offs_run_kept_on_its_job_holds_the_firings_bucket_until_it_ends(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    """A one-off's run is kept on its job's item, whose index entry stays at the firing (the
    claim writes one item and no index entry): each poll until the run ends reads that item,
    leaves the run alone while its timer is not up; once the timer is up the watchdog acts
    (a re-send), and the run's end takes the entry out, so the watermark moves past it."""
    fire_at = clock.now().replace(second=0, microsecond=0) + timedelta(minutes=5)
    job = cloud.create(
        {
            "name": "once",
            "schedule": {"at": fire_at.isoformat()},
            "target": {"type": "HTTP", "url": receiver.url},
        }
    )
    clock.move_to(fire_at - timedelta(seconds=90))
    assert sum(len(report.claimed) for report in cloud.poll()) == 1
    shard = keys.shard_for(job["job_id"], cloud.settings.shard_count)
    firing_bucket = keys.bucket_of(to_ms(fire_at))

    clock.move_to(fire_at - timedelta(seconds=30))
    report = cloud.dispatcher.poll_shard(shard)
    assert (report.claimed, report.watched) == ([], {})  # read, not claimed again, not watched
    clock.move_to(fire_at + timedelta(seconds=cloud.settings.resend_after_seconds + 1))
    assert cloud.dispatcher.poll_shard(shard).watched == {"resent": 1}  # never delivered
    assert cloud.deliver() == 2  # the message and its re-send: one runs, one is a duplicate
    assert [run["status"] for run in cloud.runs(job["job_id"])] == ["SUCCEEDED"]
    assert len(receiver.requests) == 1
    clock.advance(120)
    item = cloud.clients.dynamodb().get_item(
        TableName=cloud.settings.jobs_table_name,
        Key={"pk": {"S": f"JOB#{job['job_id']}"}, "sk": {"S": "JOB"}},
    )["Item"]
    assert "due_pk" not in item  # the run's end took the entry out
    report = cloud.dispatcher.poll_shard(shard)
    assert report.watermark_ms is not None
    assert report.watermark_ms > firing_bucket


def test_a_one_off_claimed_late_is_watched_at_its_timer_not_left_in_a_passed_bucket(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    """Polls missed a one-off's firing by more than two minutes (an outage): its run, claimed
    late, would leave its job's entry in a bucket this very poll drains and leaves behind.
    The entry moves to the run's timer instead, so a message lost after the claim is sent
    again there."""
    fire_at = clock.now().replace(second=0, microsecond=0) + timedelta(minutes=10)
    job = cloud.create(
        {
            "name": "once",
            "schedule": {"at": fire_at.isoformat()},
            "target": {"type": "HTTP", "url": receiver.url},
        }
    )
    clock.move_to(fire_at + timedelta(seconds=210))  # no poll until now
    assert sum(len(report.claimed) for report in cloud.poll()) == 1
    cloud.clients.sqs().purge_queue(QueueUrl=cloud.queue_url(Priority.NORMAL))  # the message, lost
    clock.advance(cloud.settings.resend_after_seconds)  # the run's re-send timer
    assert sum(report.watched.get("resent", 0) for report in cloud.poll()) == 1
    assert cloud.deliver() == 1
    assert [run["status"] for run in cloud.runs(job["job_id"])] == ["SUCCEEDED"]


def _crowded_shard(cloud: SchedulerHarness, receiver: WebhookReceiver, at: str, jobs: int) -> tuple[int, int]:
    """Create `jobs` one-offs at `at`; the shard that got the most, and how many."""
    by_shard: dict[int, int] = {}
    for i in range(jobs):
        job = cloud.create(
            {"name": f"j{i}", "schedule": {"at": at}, "target": {"type": "HTTP", "url": receiver.url}}
        )
        shard = keys.shard_for(job["job_id"], cloud.settings.shard_count)
        by_shard[shard] = by_shard.get(shard, 0) + 1
    shard = max(by_shard, key=lambda s: by_shard[s])
    return shard, by_shard[shard]


class _ClaimPages:
    """A `Runner`, in order: each claiming call's number of jobs, with how many batch reads of
    items (`BatchGetItem`, 10 index entries each here) the store had made by then (the
    watchdog's calls, with no run due, are empty: not noted); `after_first` is called once,
    when the first page's claims are made."""

    def __init__(self, cloud: SchedulerHarness, after_first: Callable[[], None] | None = None) -> None:
        self.reads = 0
        self.pages: list[tuple[int, int]] = []
        self._after_first = after_first
        cloud.clients.dynamodb().meta.events.register("before-call.dynamodb.BatchGetItem", self._read)

    def _read(self, **_: Any) -> None:
        self.reads += 1

    def map(self, work: Any, items: Any) -> list[Any]:
        todo = list(items)
        if todo:
            self.pages.append((len(todo), self.reads))
        results = [work(item) for item in todo]
        if todo and self._after_first is not None:
            self._after_first()
            self._after_first = None
        return results


def test_a_big_bucket_is_claimed_a_page_of_the_index_at_a_time(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    """A poll reads a bucket a page at a time and claims each page before reading the next,
    so a shard's share of a million jobs does not have to be read whole first."""
    fire_at = clock.now() + timedelta(minutes=30)
    shard, crowd = _crowded_shard(cloud, receiver, fire_at.isoformat(), 60)
    claims = _ClaimPages(cloud)

    clock.move_to(fire_at - timedelta(seconds=60))
    store = build_store(cloud.settings, cloud.clients, due_page=10)
    report = build_dispatcher(cloud.settings, cloud.clients, clock, store, claims).poll_shard(shard)

    assert len(report.claimed) == crowd >= 15  # 60 jobs, 4 shards: the fullest has 15 or more
    sizes = [10] * (crowd // 10) + ([crowd % 10] if crowd % 10 else [])
    # Page n is claimed after the n-th read, before the next one: read, claim, read, claim.
    assert claims.pages == [(size, n) for n, size in enumerate(sizes, start=1)]


def test_a_poll_stopped_in_a_big_bucket_is_taken_up_where_it_stopped_before_the_bucket_is_read_again(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    """A bucket bigger than a poll can get through (a burst's shard): the next poll claims
    from where the last one stopped first, not after re-reading the runs it claimed."""
    fire_at = clock.now() + timedelta(minutes=30)
    shard, crowd = _crowded_shard(cloud, receiver, fire_at.isoformat(), 60)
    # The first page's claims take the poll past its time.
    claims = _ClaimPages(cloud, after_first=lambda: clock.move_to(clock.now() + timedelta(seconds=2)))

    clock.move_to(fire_at - timedelta(seconds=60))
    store = build_store(cloud.settings, cloud.clients, due_page=10)
    dispatcher = build_dispatcher(cloud.settings, cloud.clients, clock, store, claims)
    # 6 s left: the poll stops taking new work 1 s from now (STOP_BEFORE_TIMEOUT is 5 s).
    first = dispatcher.poll_shard(shard, time_left=timedelta(seconds=6))

    assert len(first.claimed) == 10
    mark = store.get_watermark(shard)
    assert mark is not None
    assert mark.resume is not None
    assert mark.resume == first.resume
    assert mark.resume.bucket_ms == keys.bucket_of(to_ms(fire_at))

    claims.pages.clear()
    claims.reads = 0
    second = dispatcher.poll_shard(shard)

    # It read the page after the point first (one read) and claimed the rest of the crowd
    # from there, then read the bucket from its start (the first ten are runs now: read,
    # nothing to claim).
    assert claims.pages[0] == (min(10, crowd - 10), 1)
    assert sum(size for size, _ in claims.pages) == crowd - 10
    assert len(second.claimed) == crowd - 10
    assert {run.job_id for run in first.claimed}.isdisjoint(run.job_id for run in second.claimed)
    assert claims.reads > 1
    # Nothing left to take up: the point is gone.
    assert second.resume is None
    assert store.get_watermark(shard) == Watermark(mark.bucket_ms)


def test_a_resume_point_of_another_bucket_is_refused(cloud: SchedulerHarness, clock: FrozenClock) -> None:
    store = build_store(cloud.settings, cloud.clients)
    bucket = keys.bucket_of(to_ms(clock.now()))
    for due_pk, due_sk in ((keys.due_pk(bucket, 0), bucket), (keys.due_pk(bucket, 1), "not a time")):
        point = encode_cursor({"pk": "JOB#j", "sk": "JOB", "due_pk": due_pk, "due_sk": due_sk})
        with pytest.raises(CursorNotValid):
            list(store.due_pages(1, bucket, bucket + 60_000, after=point))


@pytest.mark.parametrize(
    "point",
    [
        "not a point",
        encode_cursor({"pk": "JOB#x", "sk": "JOB", "due_pk": "another bucket", "due_sk": 1}),
    ],
)
def test_a_resume_point_the_store_refuses_costs_a_read_from_the_start_not_the_shards_polls(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver, point: str
) -> None:
    """A point written under other rules (or by hand) is a hint gone wrong, not an outage:
    the poll reads the bucket from its start, claims it, and drops the point."""
    fire_at = clock.now() + timedelta(minutes=30)
    shard, crowd = _crowded_shard(cloud, receiver, fire_at.isoformat(), 20)
    clock.move_to(fire_at - timedelta(seconds=60))
    store = build_store(cloud.settings, cloud.clients, due_page=10)
    store.advance_watermark(shard, keys.bucket_of(to_ms(clock.now())))
    store.set_poll_resume(shard, PollResume(keys.bucket_of(to_ms(fire_at)), point))

    report = build_dispatcher(cloud.settings, cloud.clients, clock, store).poll_shard(shard)

    assert len(report.claimed) == crowd
    assert report.resume is None
    assert store.get_watermark(shard) == Watermark(keys.bucket_of(to_ms(clock.now())))


def test_a_resume_point_past_the_horizon_reads_nothing(cloud: SchedulerHarness, clock: FrozenClock) -> None:
    store = build_store(cloud.settings, cloud.clients)
    bucket = keys.bucket_of(to_ms(clock.now()))
    point = encode_cursor(
        {"pk": "JOB#j", "sk": "JOB", "due_pk": keys.due_pk(bucket, 1), "due_sk": bucket + 30_000}
    )
    assert list(store.due_pages(1, bucket, bucket + 10_000, after=point)) == []


def test_a_functions_lines_name_the_invocation_not_what_its_log_group_says(cloud: SchedulerHarness) -> None:
    """Each line keeps the invocation's request id; the function's name, ARN and memory, the
    cold start and the code location, the same on every line of its log group, are left out
    (`observability.SAME_ON_EVERY_LINE`: about 215 B a line, a run's cost)."""
    lines = io.StringIO()
    handler = logger.registered_handler
    stream, level = handler.setStream(lines), logger.log_level  # type: ignore[attr-defined]
    logger.setLevel("INFO")
    try:
        cloud.poll_via_handler(0)
    finally:
        handler.setStream(stream)  # type: ignore[attr-defined]
        logger.setLevel(level)
    [line] = [json.loads(text) for text in lines.getvalue().splitlines() if '"poll finished"' in text]
    assert line["function_request_id"]
    assert not set(SAME_ON_EVERY_LINE) & set(line), line
