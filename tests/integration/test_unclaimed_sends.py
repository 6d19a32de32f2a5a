"""One-offs claimed at their start (context `one_offs_claimed_at_start`,
services/unclaimed_sends.py), on moto: a poll sends a one-off's firing without writing it,
once; the worker's start claims and starts it in one write; whatever happens between the
send and the start (a duplicate message, a pause, a cancel, a change, a lost message, a poll
out of time, a failed send), the firing runs once, and on time unless its message is lost.
Every other guarantee is checked this way too by the interleavings
(tests/integration/test_interleavings.py, `claimed-at-start`)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import boto3
import pytest
from moto import mock_aws

from scheduler_core.adapters.aws import AwsClients
from scheduler_core.composition import build_dispatcher, build_store
from scheduler_core.domain import keys
from scheduler_core.domain.clock import to_ms
from scheduler_core.domain.entities import Job, Run
from scheduler_core.domain.messages import DeadLetter
from scheduler_core.domain.schedule import ScheduleSpec
from scheduler_core.domain.vocabulary import Priority
from scheduler_core.ports import StoreContention
from scheduler_core.services.unclaimed_sends import SEND_MARGIN
from tests.support.builders import a_job
from tests.support.harness import FrozenClock, SchedulerHarness, create_scheduler_resources
from tests.support.receiver import WebhookReceiver

SOON = timedelta(minutes=10)  # a one-off's time after its create: beyond the lookahead


@pytest.fixture
def cloud(clock: FrozenClock) -> Iterator[SchedulerHarness]:
    with mock_aws():
        clients = AwsClients(boto3.session.Session(region_name="us-east-1"))
        settings = create_scheduler_resources(clients).model_copy(update={"one_offs_claimed_at_start": True})
        yield SchedulerHarness(clients, settings, clock)


def one_off(cloud: SchedulerHarness, receiver: WebhookReceiver, at: datetime, **extra: Any) -> dict[str, Any]:
    target = {"type": "HTTP", "url": receiver.url}
    return cloud.create({"name": "once", "schedule": {"at": at.isoformat()}, "target": target} | extra)


def job_version(cloud: SchedulerHarness, job_id: str) -> int:
    job = cloud.poll_store.get_job(job_id)
    assert job is not None
    return job.version


def messages_on(cloud: SchedulerHarness, priority: Priority = Priority.NORMAL) -> int:
    """Messages on the queue, visible or delayed."""
    attributes = cloud.clients.sqs().get_queue_attributes(
        QueueUrl=cloud.queue_url(priority),
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesDelayed"],
    )["Attributes"]
    return sum(int(attributes[name]) for name in attributes)


def sent(reports: list[Any]) -> list[Run]:
    return [run for report in reports for run in report.sent]


def claimed(reports: list[Any]) -> list[Run]:
    return [run for report in reports for run in report.claimed]


def sent_before(cloud: SchedulerHarness, clock: FrozenClock, fire_at: datetime) -> list[Run]:
    """Polls a minute and a half before `fire_at` (within the lookahead less the margin)."""
    clock.move_to(fire_at - timedelta(seconds=90))
    return sent(cloud.poll())


def test_a_poll_sends_a_one_off_without_a_write_once_and_its_start_claims_it(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    fire_at = clock.now() + SOON
    job = one_off(cloud, receiver, fire_at)
    version = job_version(cloud, job["job_id"])

    [run] = sent_before(cloud, clock, fire_at)
    assert (run.job_id, run.scheduled_for, run.claim_version) == (job["job_id"], fire_at, version)
    # No write: the job is as created, no run yet, its message on the queue.
    assert job_version(cloud, job["job_id"]) == version
    assert cloud.runs(job["job_id"]) == []
    assert messages_on(cloud) == 1
    shard = keys.shard_for(job["job_id"], cloud.settings.shard_count)
    mark = cloud.poll_store.get_watermark(shard)
    assert mark is not None
    horizon = clock.now() + timedelta(seconds=cloud.settings.lookahead_seconds)
    assert mark.sent_until_ms == to_ms(horizon - SEND_MARGIN)

    # The next polls before its start send nothing more, and keep its bucket.
    clock.advance(30)
    assert sent(cloud.poll()) == claimed(cloud.poll()) == []
    assert messages_on(cloud) == 1

    clock.move_to(fire_at)
    assert cloud.deliver() == 1
    assert len(receiver.requests) == 1
    [ran] = cloud.runs(job["job_id"])
    assert (ran["status"], ran["attempt"], ran["lateness_ms"]) == ("SUCCEEDED", 1, 0)
    assert cloud.call("GET", f"/v1/jobs/{job['job_id']}").body["status"] == "COMPLETED"
    # Its entry leaves the index with the run's end: nothing left to claim, send or watch.
    clock.advance(61)
    reports = cloud.poll()
    assert (sent(reports), claimed(reports)) == ([], [])
    assert all(report.watched == {} for report in reports)


def test_a_duplicate_message_starts_nothing_more(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    fire_at = clock.now() + SOON
    job = one_off(cloud, receiver, fire_at)
    [run] = sent_before(cloud, clock, fire_at)
    cloud.dispatcher.enqueue([run])  # as a poll that overlapped another would
    assert messages_on(cloud) == 2

    clock.move_to(fire_at)
    assert cloud.deliver() == 2
    assert len(receiver.requests) == 1
    assert [r["status"] for r in cloud.runs(job["job_id"])] == ["SUCCEEDED"]


def test_a_one_off_paused_after_its_send_and_resumed_before_its_time_runs_once(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    fire_at = clock.now() + SOON
    job = one_off(cloud, receiver, fire_at)
    assert sent_before(cloud, clock, fire_at)
    clock.advance(30)
    assert cloud.call("POST", f"/v1/jobs/{job['job_id']}/pause").status == 200
    clock.advance(30)
    # The resume claims the firing (due within the lookahead) and sends it, claimed.
    assert cloud.call("POST", f"/v1/jobs/{job['job_id']}/resume").status == 200
    assert messages_on(cloud) == 2

    clock.move_to(fire_at)
    assert cloud.deliver() == 2
    assert len(receiver.requests) == 1
    [ran] = cloud.runs(job["job_id"])
    assert (ran["status"], ran["lateness_ms"]) == ("SUCCEEDED", 0)


def test_a_one_off_paused_or_cancelled_after_its_send_does_not_run(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    fire_at = clock.now() + SOON
    paused = one_off(cloud, receiver, fire_at)
    cancelled = one_off(cloud, receiver, fire_at)
    assert len(sent_before(cloud, clock, fire_at)) == 2
    assert cloud.call("POST", f"/v1/jobs/{paused['job_id']}/pause").status == 200
    assert cloud.call("DELETE", f"/v1/jobs/{cancelled['job_id']}").status in (200, 204)

    clock.move_to(fire_at)
    assert cloud.deliver() == 2
    assert receiver.requests == []
    assert cloud.runs(paused["job_id"]) == []
    assert cloud.poll_store.get_run(cancelled["job_id"], to_ms(fire_at)) is None
    # The stale messages are gone; nothing is claimed behind the user's back.
    clock.advance(120)
    reports = cloud.poll()
    assert claimed(reports) == sent(reports) == []
    assert cloud.deliver() == 0


def test_a_one_off_changed_after_its_send_runs_once_as_changed(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    fire_at = clock.now() + SOON
    renamed = one_off(cloud, receiver, fire_at)
    moved = one_off(cloud, receiver, fire_at)
    assert len(sent_before(cloud, clock, fire_at)) == 2
    later = fire_at + timedelta(minutes=30)
    reply = cloud.call("PATCH", f"/v1/jobs/{renamed['job_id']}", {"name": "renamed"})
    assert reply.status == 200, reply.body
    reply = cloud.call("PATCH", f"/v1/jobs/{moved['job_id']}", {"schedule": {"at": later.isoformat()}})
    assert reply.status == 200, reply.body

    clock.move_to(fire_at)
    cloud.deliver()
    # The renamed one ran on time, once (its start claimed the firing of the job as it is
    # now); the moved one's first message was stale.
    assert [r["status"] for r in cloud.runs(renamed["job_id"])] == ["SUCCEEDED"]
    assert cloud.runs(moved["job_id"]) == []
    assert len(receiver.requests) == 1

    assert len(sent_before(cloud, clock, later)) == 1
    clock.move_to(later)
    assert cloud.deliver() == 1
    [ran] = cloud.runs(moved["job_id"])
    assert (ran["status"], ran["lateness_ms"]) == ("SUCCEEDED", 0)
    assert len(receiver.requests) == 2


def test_a_lost_message_is_claimed_and_sent_again_after_the_resend_timer(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    fire_at = clock.now() + SOON
    job = one_off(cloud, receiver, fire_at)
    assert sent_before(cloud, clock, fire_at)
    cloud.clients.sqs().purge_queue(QueueUrl=cloud.queue_url(Priority.NORMAL))

    # Within the re-send timer the polls wait for its start.
    clock.move_to(fire_at + timedelta(seconds=cloud.settings.resend_after_seconds - 1))
    assert claimed(cloud.poll()) == []
    clock.advance(2)
    [run] = claimed(cloud.poll())
    assert (run.scheduled_for, run.claim_version) == (fire_at, None)
    assert cloud.deliver() == 1
    [ran] = cloud.runs(job["job_id"])
    assert ran["status"] == "SUCCEEDED"
    assert len(receiver.requests) == 1


def test_a_poll_out_of_time_marks_as_sent_only_what_it_sent(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    fire_at = clock.now() + SOON
    for i in range(40):
        one_off(cloud, receiver, fire_at + timedelta(seconds=i % 20), name=f"j{i}")
    shard = max(range(4), key=lambda s: sum(1 for _ in _jobs_of_shard(cloud, s)))
    crowd = sum(1 for _ in _jobs_of_shard(cloud, shard))
    store = build_store(cloud.settings, cloud.clients, due_page=5)
    clock.move_to(fire_at - timedelta(seconds=90))

    # Claims (and sends) a page, then the poll is out of time.
    dispatcher = build_dispatcher(cloud.settings, cloud.clients, clock, store, OutOfTimeAfterPages(clock, 1))
    first = dispatcher.poll_shard(shard, time_left=timedelta(seconds=6))
    assert 0 < len(first.sent) < crowd
    mark = store.get_watermark(shard)
    assert mark is not None
    assert mark.sent_until_ms is not None
    first_ids = {run.run_id for run in first.sent}
    unsent = [job.next_fire_at for job in _jobs_of_shard(cloud, shard) if _run_id(job) not in first_ids]
    assert mark.sent_until_ms <= min(to_ms(when) for when in unsent if when is not None)

    second = dispatcher.poll_shard(shard)
    # The rest is sent; of the first poll's, at most those at the firing time it stopped at.
    stopped_at = mark.sent_until_ms
    again = {run.run_id for run in second.sent} & {run.run_id for run in first.sent}
    assert all(to_ms(run.scheduled_for) >= stopped_at for run in first.sent if run.run_id in again)
    every = {_run_id(job) for job in _jobs_of_shard(cloud, shard)}
    assert first_ids | {run.run_id for run in second.sent} == every
    assert dispatcher.poll_shard(shard).sent == []

    cloud.poll()  # the other shards
    clock.move_to(fire_at + timedelta(seconds=20))
    cloud.deliver()
    assert len(receiver.requests) == 40  # each once


def test_a_send_that_fails_is_sent_by_the_next_poll(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    fire_at = clock.now() + SOON
    job = one_off(cloud, receiver, fire_at)
    shard = keys.shard_for(job["job_id"], cloud.settings.shard_count)

    class Refusing:
        def send_runs(self, runs: list[Run]) -> list[Run]:
            return list(runs)  # none sent

        def send_dead_letter(self, record: DeadLetter) -> bool:
            raise AssertionError("nothing here fails")

    clock.move_to(fire_at - timedelta(seconds=90))
    failing = build_dispatcher(cloud.settings, cloud.clients, clock, cloud.poll_store, queue=Refusing())
    report = failing.poll_shard(shard)
    assert [run.job_id for run in report.unsent] == [job["job_id"]]
    mark = cloud.poll_store.get_watermark(shard)
    assert mark is not None
    assert mark.sent_until_ms == to_ms(fire_at)  # what it failed to send comes next

    assert [run.job_id for run in cloud.dispatcher.poll_shard(shard).sent] == [job["job_id"]]
    clock.move_to(fire_at)
    assert cloud.deliver() == 1
    assert len(receiver.requests) == 1


def test_what_a_start_cannot_claim_alone_is_claimed_by_the_poll(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    fire_at = (clock.now() + SOON).replace(second=0, microsecond=0)
    target = {"type": "HTTP", "url": receiver.url}
    cron = cloud.create({"name": "cron", "schedule": {"cron": "*/5 * * * *"}, "target": target})
    jittered = one_off(cloud, receiver, fire_at, schedule={"at": fire_at.isoformat(), "jitter_seconds": 30})
    clock.move_to(fire_at - timedelta(seconds=90))
    reports = cloud.poll()
    assert sent(reports) == []
    assert {run.job_id for run in claimed(reports)} == {cron["job_id"], jittered["job_id"]}


def _jobs_of_shard(cloud: SchedulerHarness, shard: int) -> Iterator[Any]:
    """The jobs of `shard` that wait for a firing."""
    for item in cloud.clients.dynamodb().scan(TableName=cloud.settings.jobs_table_name)["Items"]:
        if item["sk"]["S"] != "JOB":
            continue
        job = cloud.poll_store.get_job(item["job_id"]["S"])
        if job is None or job.next_fire_at is None:
            continue
        if keys.shard_for(job.job_id, cloud.settings.shard_count) == shard:
            yield job


def _run_id(job: Any) -> str:
    return keys.run_id(job.job_id, to_ms(job.next_fire_at))


class OutOfTimeAfterPages:
    """A `Runner`, in order: after `pages` pages of claims, the poll is out of time (the
    watchdog's calls, with runs, are not pages)."""

    def __init__(self, clock: FrozenClock, pages: int) -> None:
        self._clock = clock
        self._left = pages

    def map(self, work: Any, items: Any) -> list[Any]:
        todo = list(items)
        results = [work(item) for item in todo]
        if todo and isinstance(todo[0], Job):
            self._left -= 1
            if self._left == 0:
                self._clock.advance(2)
        return results


def _unsent_below_the_mark(cloud: SchedulerHarness, shard: int, sent_ids: set[str]) -> list[str]:
    """The shard's one-offs waiting for their firing below its mark that no poll sent."""
    mark = cloud.poll_store.get_watermark(shard)
    assert mark is not None
    below = [
        job for job in _jobs_of_shard(cloud, shard) if to_ms(job.next_fire_at) < (mark.sent_until_ms or 0)
    ]
    return [_run_id(job) for job in below if _run_id(job) not in sent_ids]


def test_a_bucket_a_poll_resumes_in_keeps_the_mark_until_it_is_read_from_its_start(
    cloud: SchedulerHarness, clock: FrozenClock
) -> None:
    """The first poll stops in a bucket whose later firings were beyond what it sends; the
    next resumes after where it stopped and is out of time before it reads the bucket from
    its start again: the firings before the point it has not sent stay above the mark."""
    bucket_start = (clock.now() + SOON).replace(second=0, microsecond=0)
    # 20 one-offs of shard 0, one a second from the bucket's start: pages of 5 entries.
    ids = [job_id for job_id in (f"job-{n}" for n in range(400)) if keys.shard_for(job_id, 4) == 0][:20]
    for offset, job_id in enumerate(ids):
        at = bucket_start + timedelta(seconds=offset)
        assert cloud.api_store.put_job_if_absent(
            a_job(job_id, schedule=ScheduleSpec(at=at), next_fire_at=at, created_at=clock.now())
        )
    store = build_store(cloud.settings, cloud.clients, due_page=5)
    # The first poll reads to 15 s into the bucket and sends up to 5 s (its horizon less the
    # margin): its first page (0–4 s) is sent, its second (5–9 s) left for the next poll; then
    # it is out of time, its point after the 9 s entry.
    clock.move_to(bucket_start + timedelta(seconds=15) - timedelta(seconds=cloud.settings.lookahead_seconds))
    first = build_dispatcher(cloud.settings, cloud.clients, clock, store, OutOfTimeAfterPages(clock, 2))
    report = first.poll_shard(0, time_left=timedelta(seconds=6))
    assert report.resume is not None
    sent_ids = {run.run_id for run in report.sent}
    assert len(sent_ids) == 5
    assert _unsent_below_the_mark(cloud, 0, sent_ids) == []

    # The next sends from the point on (10–14 s), and is out of time before it reads the
    # bucket from its start: 5–9 s, which no poll sent, must stay above the mark.
    clock.advance(60)
    second = build_dispatcher(cloud.settings, cloud.clients, clock, store, OutOfTimeAfterPages(clock, 1))
    report = second.poll_shard(0, time_left=timedelta(seconds=6))
    sent_ids |= {run.run_id for run in report.sent}
    assert len(sent_ids) == 10
    assert _unsent_below_the_mark(cloud, 0, sent_ids) == []

    sent_ids |= {run.run_id for run in cloud.dispatcher.poll_shard(0).sent}
    assert {_run_id(job) for job in _jobs_of_shard(cloud, 0)} <= sent_ids


def test_a_run_holding_the_slot_at_the_firings_time_has_the_overlap_policy_decide_then(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    """The start cannot claim alone a firing whose job has a slot taken (by a manual run):
    the worker claims it as a poll would, and the job's overlap policy (SKIP, the default)
    decides at the firing's time."""
    fire_at = clock.now() + SOON
    job = one_off(cloud, receiver, fire_at)
    assert sent_before(cloud, clock, fire_at)
    cloud.clients.dynamodb().update_item(
        TableName=cloud.settings.jobs_table_name,
        Key={"pk": {"S": keys.job_pk(job["job_id"])}, "sk": {"S": keys.JOB_SK}},
        UpdateExpression="SET running_count = :one",
        ExpressionAttributeValues={":one": {"N": "1"}},
    )

    clock.move_to(fire_at)
    assert cloud.deliver() == 1
    [run] = cloud.runs(job["job_id"])
    assert run["status"] == "SKIPPED"
    assert receiver.requests == []


def test_a_start_dynamodb_throttles_is_tried_again_at_once(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    fire_at = clock.now() + SOON
    job = one_off(cloud, receiver, fire_at)
    assert sent_before(cloud, clock, fire_at)
    write = cloud.worker_store.claim_and_start_if_unchanged
    throttled: list[str] = []

    def once_throttled(*args: Any, **kwargs: Any) -> Any:
        if not throttled:
            throttled.append("throttled")
            raise StoreContention("ProvisionedThroughputExceededException")
        return write(*args, **kwargs)

    monkeypatch.setattr(cloud.worker_store, "claim_and_start_if_unchanged", once_throttled)
    clock.move_to(fire_at)
    assert cloud.deliver() == 1
    assert throttled
    [run] = cloud.runs(job["job_id"])
    assert run["status"] == "SUCCEEDED"
    assert run["lateness_ms"] < 1_000  # the pause before the try again, not the message's return


def test_a_job_whose_claim_fails_every_poll_does_not_hold_back_the_mark(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    fire_at = clock.now() + SOON
    job = one_off(cloud, receiver, fire_at)
    shard = keys.shard_for(job["job_id"], cloud.settings.shard_count)
    while True:  # a cron job of the same shard, whose claim always fails
        cron = cloud.create(
            {
                "name": "cron",
                "schedule": {"cron": "* * * * *"},
                "target": {"type": "HTTP", "url": receiver.url},
            }
        )
        if keys.shard_for(cron["job_id"], cloud.settings.shard_count) == shard:
            break
    claim = cloud.poll_store.claim_if_unchanged

    def failing(stored: Job, *args: Any, **kwargs: Any) -> Any:
        if stored.job_id == cron["job_id"]:
            raise RuntimeError("an item this poll cannot write")
        return claim(stored, *args, **kwargs)

    monkeypatch.setattr(cloud.poll_store, "claim_if_unchanged", failing)
    clock.move_to(fire_at - timedelta(seconds=90))
    report = cloud.dispatcher.poll_shard(shard)
    assert [run.job_id for run in report.sent] == [job["job_id"]]
    mark = cloud.poll_store.get_watermark(shard)
    assert mark is not None
    assert mark.sent_until_ms == to_ms(report_horizon(cloud, clock) - SEND_MARGIN)
    clock.advance(30)
    assert cloud.dispatcher.poll_shard(shard).sent == []  # not sent again


def report_horizon(cloud: SchedulerHarness, clock: FrozenClock) -> datetime:
    return clock.now() + timedelta(seconds=cloud.settings.lookahead_seconds)


def test_a_poll_out_of_time_after_a_due_listing_marks_no_firing_it_did_not_read(
    clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    with mock_aws():
        clients = AwsClients(boto3.session.Session(region_name="us-east-1"))
        settings = create_scheduler_resources(clients).model_copy(
            update={"one_offs_claimed_at_start": True, "shard_count": 1}
        )
        cloud = SchedulerHarness(clients, settings, clock)
        minute = (clock.now() + SOON).replace(second=0, microsecond=0)

        def body(seconds: int) -> dict[str, Any]:
            at = (minute + timedelta(seconds=seconds)).isoformat()
            return {
                "name": f"at-{seconds}",
                "schedule": {"at": at},
                "target": {"type": "HTTP", "url": receiver.url},
            }

        # A due listing at the minute's start names jobs up to :50; own entries at :10-:12
        # come after its entry in the index, though before most of its jobs.
        reply = cloud.call("POST", "/v1/jobs/batch", {"jobs": [body(0), body(20), body(50)]})
        assert reply.status == 201, reply.body
        own = {cloud.create(body(10 + i))["job_id"] for i in range(3)}
        store = build_store(settings, clients, due_page=3)
        clock.move_to(minute - timedelta(seconds=90))

        dispatcher = build_dispatcher(settings, clients, clock, store, OutOfTimeAfterPages(clock, 1))
        first = dispatcher.poll_shard(0, time_left=timedelta(seconds=6))
        assert {run.job_id for run in first.sent} & own == set()  # only the listing's page
        assert _unsent_below_the_mark(cloud, 0, {run.run_id for run in first.sent}) == []
        second = dispatcher.poll_shard(0)
        assert own <= {run.job_id for run in second.sent}
