"""The poller's rules (`Dispatcher.poll_shard`), on the in-memory fakes
(`tests/support/fakes.py`): each firing claimed exactly once and run on time, over hours of
polls; a poller claiming from a stale read of the due index loses every race; a second poll
of the same minute claims nothing new; a firing missed while no poller ran fires when one
returns; a big bucket's runs are sent a batch at a time while the rest is claimed; a poll
out of time sends what it claimed and leaves the rest to the next; a run whose timer is not
up is left alone, and sent again once it is.

Each test drives the API's job service, the poll and the worker (handed its messages by
`Deliveries`, as SQS's event source mapping does) and moves a manual clock.

Elsewhere: on moto (`tests/integration/test_polling.py`), what the fakes cannot show: the
jobs table's due index items (their bucket and shard), the poller's handler and its
EventBridge input, two pollers claiming side by side on threads against DynamoDB's
conditions, and the DynamoDB adapter's reads (a run whose timer is not up is not read; a
big bucket is read and claimed a page of the index at a time)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from datetime import datetime, timedelta
from typing import Any, TypeVar

import pytest

from scheduler_core.domain import keys
from scheduler_core.domain.api_shapes import JobCreate
from scheduler_core.domain.clock import to_ms
from scheduler_core.domain.entities import Job, Run
from scheduler_core.domain.outcomes import Outcome
from scheduler_core.domain.vocabulary import RunStatus
from scheduler_core.poll_ports import PollResume, Watermark
from scheduler_core.services.dispatch import STOP_BEFORE_TIMEOUT, Dispatcher
from scheduler_core.services.parallel import InOrder, Runner
from scheduler_core.services.polls import PollReport
from tests.support.builders import T0
from tests.support.fakes import POLL_POLICY, Deliveries, FakeWorld, fake_world
from tests.support.helpers import iso

T = TypeVar("T")
R = TypeVar("R")

ALICE = "alice"
SHARDS = 4  # fake_world's default
START = T0 + timedelta(seconds=30)  # 09:00:30
RESEND_AFTER = timedelta(seconds=60)  # fake_world's: a sent run not started by then is sent again


@pytest.fixture
def world() -> FakeWorld:
    return fake_world(START, shards=SHARDS)


@pytest.fixture
def worker(world: FakeWorld) -> Deliveries:
    """Each message sent handed to the worker once, when its run's time has come."""
    return Deliveries(world)


def create(world: FakeWorld, schedule: dict[str, Any], name: str = "every") -> Job:
    body = {"name": name, "schedule": schedule, "target": {"type": "HTTP", "url": "https://example.com/hook"}}
    return world.jobs.create(ALICE, JobCreate.model_validate(body))


def poll(world: FakeWorld) -> list[PollReport]:
    return [world.dispatcher.poll_shard(shard) for shard in range(SHARDS)]


def claimed(reports: list[PollReport]) -> int:
    return sum(len(report.claimed) for report in reports)


def called(world: FakeWorld) -> list[Run]:
    """The runs the target was called for, in the order of the calls."""
    return [run for _, run in world.targets.calls]


def runs_of(world: FakeWorld, job: Job) -> list[Run]:
    page: list[Run] = world.jobs.list_runs(ALICE, job.job_id, 100, None, None).items
    return page


def one_offs_at(world: FakeWorld, fire_at: datetime, count: int) -> list[Job]:
    return [create(world, {"at": iso(fire_at)}, name=f"j{i}") for i in range(count)]


def crowded_shard(jobs: list[Job]) -> tuple[int, list[Job]]:
    """The shard that got the most of `jobs`, and its jobs."""
    by_shard: dict[int, list[Job]] = {}
    for job in jobs:
        by_shard.setdefault(keys.shard_for(job.job_id, SHARDS), []).append(job)
    shard = max(by_shard, key=lambda s: len(by_shard[s]))
    return shard, by_shard[shard]


def dispatcher(world: FakeWorld, runner: Runner) -> Dispatcher:
    """A poller of the world's store, queue and clock whose claims go through `runner`."""
    return Dispatcher(world.store, world.queue, world.clock, POLL_POLICY, world.lifecycle, runner)


# --- every firing once, on time ---------------------------------------------------------------


def test_every_five_minutes_fires_at_every_mark_exactly_once_over_two_hours(
    world: FakeWorld, worker: Deliveries
) -> None:
    job = create(world, {"cron": "*/5 * * * *"})
    minute = T0
    for _ in range(120):
        # EventBridge fires the poller somewhere inside each minute; the worker takes each
        # message as soon as its delay ends.
        world.clock.set(minute + timedelta(seconds=37))
        poll(world)
        minute += timedelta(minutes=1)
        world.clock.set(minute)
        worker.deliver()

    expected = [T0 + timedelta(minutes=5 * k) for k in range(1, 25)]
    assert minute == T0 + timedelta(hours=2)
    assert [run.scheduled_for for run in called(world)] == expected  # in order, each once
    assert worker.outcomes == [Outcome.SUCCEEDED] * 24  # no message handed twice
    runs = runs_of(world, job)
    assert sorted(run.scheduled_for for run in runs) == expected
    assert {run.status for run in runs} == {RunStatus.SUCCEEDED}
    assert all(run.lateness_ms == 0 for run in runs)
    assert world.jobs.get(ALICE, job.job_id).next_fire_at == T0 + timedelta(hours=2, minutes=5)


def test_a_poller_claiming_from_a_stale_read_loses_every_race_to_the_one_that_claimed_first(
    world: FakeWorld, worker: Deliveries
) -> None:
    fire_at = START + timedelta(minutes=30)
    created = one_offs_at(world, fire_at, 40)
    world.clock.set(fire_at - timedelta(seconds=60))
    now = world.clock.now()
    until = to_ms(now + POLL_POLICY.lookahead)
    # Poller A reads the due index; poller B then polls every shard; A claims what it read.
    seen_by_a = [
        job
        for shard in range(SHARDS)
        for page in world.store.due_pages(shard, keys.bucket_of(to_ms(fire_at)), until)
        for job in page.jobs
    ]
    assert len(seen_by_a) == 40
    claimed_by_b = claimed(poll(world))
    claimed_by_a = sum(len(world.dispatcher.claim_firings(job, now).runs) for job in seen_by_a)

    assert (claimed_by_b, claimed_by_a) == (40, 0)
    assert len(world.queue.sent) == 40
    world.clock.set(fire_at)
    assert worker.deliver() == [Outcome.SUCCEEDED] * 40
    assert sorted(run.run_id for run in called(world)) == sorted(
        keys.run_id(job.job_id, to_ms(fire_at)) for job in created
    )


def test_a_second_poll_of_the_same_minute_claims_nothing_new(world: FakeWorld, worker: Deliveries) -> None:
    create(world, {"cron": "*/10 * * * *"})
    world.clock.set(START + timedelta(minutes=9))  # 09:09:30
    first, second = claimed(poll(world)), claimed(poll(world))
    assert (first, second) == (1, 0)
    [sent] = world.queue.sent
    assert sent.scheduled_for == T0 + timedelta(minutes=10)
    assert worker.deliver() == []  # delayed until its time
    world.clock.set(sent.scheduled_for)
    assert worker.deliver() == [Outcome.SUCCEEDED]


def test_a_job_missed_while_the_poller_was_down_fires_when_it_returns(
    world: FakeWorld, worker: Deliveries
) -> None:
    fire_at = START + timedelta(minutes=10)
    poll(world)  # sets the watermarks
    job = create(world, {"at": iso(fire_at)}, name="late")
    world.clock.set(fire_at + timedelta(minutes=20))  # no poll for half an hour
    assert claimed(poll(world)) == 1
    assert worker.deliver() == [Outcome.SUCCEEDED]
    [run] = called(world)
    assert run.scheduled_for == fire_at
    [done] = runs_of(world, job)
    assert done.lateness_ms == 20 * 60 * 1000


# --- a big bucket ----------------------------------------------------------------------------


def test_a_big_bucket_sends_its_runs_a_batch_at_a_time_while_the_rest_is_claimed(
    world: FakeWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A poll does not hold a bucket's claimed runs until its last claim (a midnight burst
    would send nothing for minutes): each batch of 10 runs of one priority is sent as soon as
    it is claimed, the rest once the bucket is done."""
    fire_at = START + timedelta(minutes=30)
    shard, crowd = crowded_shard(one_offs_at(world, fire_at, 80))
    batches: list[int] = []
    send = world.queue.send_runs

    def noting_batches(runs: list[Run]) -> list[Run]:
        batches.append(len(runs))
        return send(runs)

    monkeypatch.setattr(world.queue, "send_runs", noting_batches)
    seen: list[int] = []

    class Watching:
        """A `Runner`: one claim after the other, noting how many runs were sent before each."""

        def map(self, work: Callable[[T], R], items: Iterable[T]) -> list[R]:
            results = []
            for item in items:
                seen.append(len(world.queue.sent))
                results.append(work(item))
            return results

    world.clock.set(fire_at - timedelta(seconds=60))
    report = dispatcher(world, Watching()).poll_shard(shard)

    assert len(report.claimed) == len(crowd) >= 20
    assert seen == [claims // 10 * 10 for claims in range(len(crowd))]
    assert batches == [10] * (len(crowd) // 10) + ([len(crowd) % 10] if len(crowd) % 10 else [])
    assert len(world.queue.sent) == len(crowd)  # the last, partial batch once the bucket is claimed
    assert report.unsent == []


def test_a_poll_out_of_time_sends_what_it_claimed_and_leaves_the_rest_to_the_next(
    world: FakeWorld, worker: Deliveries
) -> None:
    """A poll stops taking new claims STOP_BEFORE_TIMEOUT before its function's timeout: what
    it claimed is sent, the rest stays in the bucket (the watermark waits) for the next poll,
    instead of the function being killed mid-claim with its claimed runs unsent."""
    fire_at = START + timedelta(minutes=30)
    shard, crowd = crowded_shard(one_offs_at(world, fire_at, 40))

    class OneSecondEach:
        """A `Runner`: in order, each claim taking one second of the clock."""

        def map(self, work: Callable[[T], R], items: Iterable[T]) -> list[R]:
            results = []
            for item in items:
                results.append(work(item))
                world.clock.advance(1)
            return results

    world.clock.set(fire_at - timedelta(seconds=90))
    poller = dispatcher(world, OneSecondEach())
    first = poller.poll_shard(shard, time_left=STOP_BEFORE_TIMEOUT + timedelta(seconds=3))

    assert len(first.claimed) == 3
    assert first.left == len(crowd) - 3
    assert world.queue.sent == first.claimed
    assert first.watermark_ms is not None
    assert first.watermark_ms <= keys.bucket_of(to_ms(fire_at))
    second = poller.poll_shard(shard)
    assert (len(second.claimed), second.left) == (len(crowd) - 3, 0)
    assert sorted(run.job_id for run in first.claimed + second.claimed) == sorted(job.job_id for job in crowd)
    world.clock.set(fire_at)
    assert worker.deliver() == [Outcome.SUCCEEDED] * len(crowd)


# --- a run's timer -----------------------------------------------------------------------------


def test_a_run_whose_timer_is_not_up_is_left_alone_and_sent_again_once_it_is(
    world: FakeWorld, worker: Deliveries
) -> None:
    """A claimed run's re-send timer lies within the poll's reach long before it is up: the
    poll leaves it; once the timer is up, the run never started is sent
    again, and the message that comes second is dropped."""
    fire_at = T0 + timedelta(minutes=5)
    job = create(world, {"at": iso(fire_at)}, name="once")
    world.clock.set(fire_at - timedelta(seconds=90))
    assert claimed(poll(world)) == 1  # its timer: fire_at + 60 s
    shard = keys.shard_for(job.job_id, SHARDS)

    world.clock.set(fire_at - timedelta(seconds=30))
    report = world.dispatcher.poll_shard(shard)
    assert report.watched == {}  # in reach (the horizon) but not up: left alone
    assert len(world.queue.sent) == 1

    world.clock.set(fire_at + RESEND_AFTER + timedelta(seconds=1))  # never delivered: the timer is up
    report = world.dispatcher.poll_shard(shard)
    assert report.watched == {"resent": 1}
    first, again = world.queue.sent
    assert again.run_id == first.run_id
    assert worker.deliver() == [Outcome.SUCCEEDED, Outcome.DUPLICATE]
    assert len(world.targets.calls) == 1


def test_a_poll_that_claims_a_firing_after_its_time_keeps_its_bucket_for_the_next(world: FakeWorld) -> None:
    """A firing claimed late (the polls were down) may leave its run to be watched from the
    firing's bucket (the DynamoDB store keeps a one-off's run on its job's item, whose index
    entry stays there): the poll that claimed it does not move its watermark past that
    bucket, though the grace alone would let it."""
    fire_at = T0 + timedelta(minutes=10)
    job = create(world, {"at": iso(fire_at)}, name="once")
    shard = keys.shard_for(job.job_id, SHARDS)
    world.clock.set(fire_at + timedelta(seconds=210))  # no poll until now: 3.5 minutes late
    report = world.dispatcher.poll_shard(shard)
    assert [run.scheduled_for for run in report.claimed] == [fire_at]
    assert report.watermark_ms == keys.bucket_of(to_ms(fire_at))  # not the grace's 09:11


class _StaleBucket:
    """The store as a poll sees it when its read of one bucket is older than a write made
    since (the DynamoDB poll reads its items eventually consistent: `_due_page`)."""

    def __init__(self, store: Any, bucket_ms: int, pages: list[Any]) -> None:
        self._store, self._bucket_ms, self._pages = store, bucket_ms, pages

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def due_pages(
        self, shard: int, bucket_ms: int, until_ms: int, *args: Any, **kwargs: Any
    ) -> Iterator[Any]:
        if bucket_ms == self._bucket_ms:
            return iter(self._pages)
        pages: Iterator[Any] = self._store.due_pages(shard, bucket_ms, until_ms, *args, **kwargs)
        return pages


def test_a_poll_that_loses_a_race_on_an_old_read_keeps_the_bucket_for_the_next(world: FakeWorld) -> None:
    """Two polls of a shard after an outage: the first claims a one-off late (its run to be
    watched from the firing's bucket); the second read the job before that claim, and its own
    claim is refused. The second does not take the refusal for a drained bucket: the next
    poll reads the bucket as it is now, the kept run's timer in it."""
    fire_at = T0 + timedelta(minutes=10)
    job = create(world, {"at": iso(fire_at)}, name="once")
    shard = keys.shard_for(job.job_id, SHARDS)
    bucket = keys.bucket_of(to_ms(fire_at))
    world.clock.set(fire_at + timedelta(seconds=210))  # no poll until now: 3.5 minutes late
    now = world.clock.now()
    old_read = list(world.store.due_pages(shard, bucket, to_ms(now + POLL_POLICY.lookahead)))
    first = world.dispatcher.poll_shard(shard)
    assert [run.scheduled_for for run in first.claimed] == [fire_at]
    second_poller = Dispatcher(
        _StaleBucket(world.store, bucket, old_read),
        world.queue,
        world.clock,
        POLL_POLICY,
        world.lifecycle,
        InOrder(),
        workflows=world.workflows,
    )
    second = second_poller.poll_shard(shard)
    assert (second.claimed, second.lost_races) == ([], 1)
    assert second.watermark_ms is not None
    assert second.watermark_ms <= bucket  # not past the bucket that holds the kept run


def test_a_poll_out_of_time_before_the_bucket_it_was_to_resume_in_keeps_the_point(world: FakeWorld) -> None:
    now = world.clock.now()
    world.store.advance_watermark(0, keys.bucket_of(to_ms(now)))
    point = PollResume(keys.bucket_of(to_ms(now)) + 60_000, "after-a-page")
    world.store.set_poll_resume(0, point)

    report = world.dispatcher.poll_shard(0, time_left=STOP_BEFORE_TIMEOUT)  # out of time at once

    assert report.buckets_read == 0
    assert report.resume == point
    assert world.store.get_watermark(0) == Watermark(keys.bucket_of(to_ms(now)), point)


def test_a_resume_point_the_watermark_has_passed_is_dropped(world: FakeWorld) -> None:
    now = world.clock.now()
    world.store.advance_watermark(0, keys.bucket_of(to_ms(now)))
    world.store.set_poll_resume(0, PollResume(keys.bucket_of(to_ms(now)) - 60_000, "after-a-page"))

    report = world.dispatcher.poll_shard(0)

    assert report.resume is None
    assert world.store.get_watermark(0) == Watermark(keys.bucket_of(to_ms(now)))
