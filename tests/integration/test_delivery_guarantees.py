"""Fault injection against the delivery guarantees (issue 4): each test injects one fault
and checks that no due run is lost (it ends SUCCEEDED, or FAILED with one DLQ record when
it should), that none succeeds twice, and what the target saw: how many calls, and how
many effects (distinct `Idempotency-Key` values; a receiver that honours the key acts once
per key).

Covered elsewhere, not repeated here: a malformed message failing alone and reaching the
DLQ (test_worker), the same message delivered twice one after the other (test_worker), a
cron missed through a long outage (test_faults), a claim throttled by the poller
(test_faults, with the store raising), a cancel that lands before the claim or while the
worker waits for the run's second (test_end_to_end_flow, test_faults).
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.awsrequest import AWSResponse
from botocore.compat import HTTPHeaders
from moto import mock_aws

from functions.worker.handler import handler as worker_handler
from scheduler_core.adapters.aws import AwsClients
from scheduler_core.adapters.dynamodb import DynamoJobStore
from scheduler_core.adapters.dynamodb.transactions import TRANSACTION_CONTENTION_PAUSES
from scheduler_core.composition import (
    build_dispatcher,
    build_job_service,
    build_lifecycle,
    build_run_executor,
    build_store,
    build_targets,
)
from scheduler_core.domain.api_shapes import JobCreate
from scheduler_core.domain.clock import Clock, ManualClock, SystemClock, from_ms, to_ms
from scheduler_core.domain.entities import Run
from scheduler_core.domain.messages import DeadLetter, RunMessage, run_message
from scheduler_core.domain.outcomes import ADMISSION_TRIES, Outcome
from scheduler_core.domain.policies import RetryPolicy
from scheduler_core.domain.retry import backoff
from scheduler_core.domain.vocabulary import Priority, RunStatus
from scheduler_core.ports import StoreContention
from scheduler_core.services.admission import START_CONTENTION_PAUSES_MS
from scheduler_core.services.claim_pauses import (
    CONTENTION_PAUSES_MS,
    URGENT_CONTENTION_PAUSES_MS,
    URGENT_WITHIN,
)
from scheduler_core.services.dispatch import STOP_BEFORE_TIMEOUT
from scheduler_core.services.execution import END_WRITE_PAUSES, RunExecutor
from scheduler_core.settings import Settings, settings_from_env
from tests.support.events import ALICE, BOB, LambdaContext, sqs_event
from tests.support.faults import DiesBeforeSending, PollerDied, WorkerDied, dead_letters, dying_executor
from tests.support.harness import FrozenClock, SchedulerHarness, SkewedClock, create_scheduler_resources
from tests.support.helpers import iso
from tests.support.receiver import WebhookReceiver

NORMAL_ARN = "arn:aws:sqs:us-east-1:123456789012:scheduler-normal"


# --- helpers ------------------------------------------------------------------------------


@pytest.fixture
def worker_knows_its_queues(cloud: SchedulerHarness, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The worker handler finds the queue of a record among the queue URLs of its settings
    (the environment, as deployed) to hide a message that came too early until shortly
    before its run's time. The harness's environment names no queues; this one does."""
    for priority in Priority:
        monkeypatch.setenv(f"QUEUE_URL_{priority}", cloud.queue_url(priority))
    settings_from_env.cache_clear()
    yield
    monkeypatch.undo()
    settings_from_env.cache_clear()


def hook(receiver: WebhookReceiver, schedule: dict[str, str], **extra: Any) -> dict[str, Any]:
    target = {"type": "HTTP", "url": receiver.url} | extra.pop("target", {})
    return {"name": "guarded", "schedule": schedule, "target": target} | extra


def at(when: datetime) -> dict[str, str]:
    return {"at": iso(when)}


def runs_of(cloud: SchedulerHarness, job_id: str) -> list[dict[str, Any]]:
    """The job's runs, oldest first."""
    return list(reversed(cloud.runs(job_id, "?limit=100")))


def only_run(cloud: SchedulerHarness, job_id: str) -> dict[str, Any]:
    [run] = runs_of(cloud, job_id)
    return run


def stored_run(cloud: SchedulerHarness, run_id: str) -> Run:
    job_id, ms = run_id.rsplit(":", 1)
    run = cloud.poll_store.get_run(job_id, int(ms))
    assert run is not None
    return run


def calls(receiver: WebhookReceiver, run_id: str) -> list[str]:
    """The attempts (X-Scheduler-Attempt) of the calls the target received for a run."""
    return [
        r.headers["x-scheduler-attempt"] for r in receiver.requests if r.headers["idempotency-key"] == run_id
    ]


def effects(receiver: WebhookReceiver) -> set[str]:
    """What a receiver that honours `Idempotency-Key` acted on: one effect per key."""
    return {request.headers["idempotency-key"] for request in receiver.requests}


def idempotency_records(cloud: SchedulerHarness) -> list[str]:
    """The statuses of the Powertools idempotency records."""
    items = cloud.clients.dynamodb().scan(TableName=cloud.settings.idempotency_table_name)["Items"]
    return [item["status"]["S"] for item in items]


def receive_one(cloud: SchedulerHarness, priority: Priority = Priority.NORMAL) -> dict[str, Any]:
    [message] = cloud.clients.sqs().receive_message(
        QueueUrl=cloud.queue_url(priority), MaxNumberOfMessages=1, AttributeNames=["All"]
    )["Messages"]
    return dict(message)


def watched(reports: list[Any]) -> dict[str, int]:
    total: dict[str, int] = {}
    for report in reports:
        for action, count in report.watched.items():
            total[action] = total.get(action, 0) + count
    return total


def move_and_deliver(cloud: SchedulerHarness, clock: FrozenClock, when: datetime) -> int:
    clock.move_to(when)
    return cloud.deliver()


# --- 1. the poller dies between the claim and the send ---------------------------------------


def test_a_poller_that_dies_between_claim_and_send_leaves_the_run_to_the_watchdog(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    cloud.poll()  # the deployed poller has run: the shards' watermarks exist
    fire_at = clock.now() + timedelta(minutes=10)  # beyond the lookahead: the create claims nothing
    job = cloud.create(hook(receiver, at(fire_at)))
    dying = build_dispatcher(cloud.settings, cloud.clients, clock, queue=DiesBeforeSending())

    clock.move_to(fire_at - timedelta(seconds=90))
    deaths = 0
    for shard in range(cloud.settings.shard_count):
        try:
            dying.poll_shard(shard)
        except PollerDied:
            deaths += 1
    assert deaths == 1  # the job's shard: claimed, never sent
    [run] = runs_of(cloud, job["job_id"])
    assert (run["status"], run["attempt"]) == ("PENDING", 1)
    # Its timer: if it has not started a minute after its time, its message is taken as lost.
    assert stored_run(cloud, run["run_id"]).due_at == fire_at + timedelta(seconds=60)

    clock.move_to(fire_at)
    assert sum(len(report.claimed) for report in cloud.poll()) == 0  # claimed once, already
    assert cloud.deliver() == 0  # no message: the poller died before sending it
    clock.move_to(fire_at + timedelta(seconds=59))
    assert watched(cloud.poll()) == {}  # not yet

    clock.move_to(fire_at + timedelta(seconds=60))
    assert watched(cloud.poll()) == {"resent": 1}
    assert cloud.deliver() == 1
    run = only_run(cloud, job["job_id"])
    assert (run["status"], run["attempt"], run["lateness_ms"]) == ("SUCCEEDED", 1, 60_000)
    assert calls(receiver, run["run_id"]) == ["1"]

    clock.move_to(fire_at + timedelta(minutes=5))  # nothing is sent again afterwards
    assert watched(cloud.poll()) == {}
    assert cloud.deliver() == 0
    assert len(receiver.requests) == 1
    assert dead_letters(cloud) == []


# --- 2. the worker dies mid-call --------------------------------------------------------------


def die_on_next_message(cloud: SchedulerHarness, executor: RunExecutor) -> RunMessage:
    """Receive one message and run it on a worker that dies at its call; the message is never
    deleted (it comes back after the visibility timeout)."""
    message = RunMessage.model_validate_json(receive_one(cloud)["Body"])
    with pytest.raises(WorkerDied):
        executor.execute(message)
    return message


@pytest.mark.parametrize(
    ("after_the_call", "expected_calls"),
    [
        pytest.param(True, ["1", "2"], id="after-the-target-answered"),
        pytest.param(False, ["2"], id="before-calling"),
    ],
)
def test_a_worker_that_dies_mid_call_is_retried_at_lease_expiry_with_one_effect(
    cloud: SchedulerHarness,
    clock: FrozenClock,
    receiver: WebhookReceiver,
    after_the_call: bool,
    expected_calls: list[str],
) -> None:
    """Died at the call: the message comes back after the visibility timeout and is dropped
    (the run is RUNNING, leased); the watchdog at the lease's expiry makes attempt 2. A worker
    that died after the target answered had not written it down, so attempt 2 calls again
    with the same Idempotency-Key: two calls, one effect. Nothing is written to the
    idempotency table: the run item is the record."""
    fire_at = clock.now() + timedelta(seconds=5)
    job = cloud.create(hook(receiver, at(fire_at)))
    clock.move_to(fire_at)
    message = die_on_next_message(cloud, dying_executor(cloud, after_the_call=after_the_call))
    run = stored_run(cloud, message.run_id)
    called = ["1"] if after_the_call else []
    assert (run.status, run.attempt, calls(receiver, message.run_id)) == (RunStatus.RUNNING, 1, called)
    lease = timedelta(seconds=cloud.settings.run_lease_seconds)
    assert run.lease_until == fire_at + lease
    resend = timedelta(seconds=cloud.settings.resend_after_seconds)
    assert run.due_at == fire_at + resend  # the start left the run's re-send timer in place

    clock.move_to(fire_at + lease - timedelta(seconds=1))
    # The re-send timer came first: the lease still holds, so the timer moves to the lease.
    assert watched(cloud.poll()) == {"lease_holds": 1}
    assert stored_run(cloud, message.run_id).due_at == fire_at + lease
    assert watched(cloud.poll()) == {}  # nobody takes the run
    assert cloud.deliver() == 0  # the message is still invisible

    clock.move_to(fire_at + lease + timedelta(seconds=1))
    assert cloud.deliver() == 1  # the dead worker's message is back ...
    assert stored_run(cloud, message.run_id).status is RunStatus.RUNNING  # ... and dropped
    assert watched(cloud.poll()) == {"retried": 1}  # the watchdog: attempt 1 is spent
    retrying = stored_run(cloud, message.run_id)
    assert (retrying.status, retrying.attempt) == (RunStatus.RETRYING, 2)
    assert retrying.error == "attempt 1 lost: its worker did not finish within its lease"
    assert retrying.next_attempt_at is not None
    assert to_ms(retrying.next_attempt_at) == to_ms(clock.now() + backoff(RetryPolicy(), message.run_id, 1))
    assert move_and_deliver(cloud, clock, retrying.next_attempt_at) == 1
    run_body = only_run(cloud, job["job_id"])
    assert (run_body["status"], run_body["attempt"]) == ("SUCCEEDED", 2)
    assert calls(receiver, message.run_id) == expected_calls
    assert effects(receiver) == {message.run_id}
    assert dead_letters(cloud) == []
    assert idempotency_records(cloud) == []
    assert cloud.call("GET", f"/v1/jobs/{job['job_id']}").body["status"] == "COMPLETED"


class EndWriteThrottled(DynamoJobStore):
    """The real store; the first `throttles` end writes of a run (its finish) are throttled."""

    def __init__(self, cloud: SchedulerHarness, throttles: int) -> None:
        settings = cloud.settings
        super().__init__(
            cloud.clients, settings.jobs_table_name, settings.shard_count, settings.run_retention_days
        )
        self.throttles = throttles
        self.tries = 0

    def finish_run_if_held(self, *args: Any, **kwargs: Any) -> bool:
        self.tries += 1
        if self.tries <= self.throttles:
            raise StoreContention("ProvisionedThroughputExceededException")
        return super().finish_run_if_held(*args, **kwargs)


def executor_on(cloud: SchedulerHarness, store: DynamoJobStore) -> RunExecutor:
    settings, clients = cloud.settings, cloud.clients
    return RunExecutor(
        store,
        build_targets(settings, clients, cloud.clock),
        cloud.clock,
        lease=timedelta(seconds=settings.run_lease_seconds),
        lifecycle=build_lifecycle(settings, clients, cloud.clock, store),
    )


def test_a_delivered_attempts_end_write_is_tried_again_through_throttling_not_called_again(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    """The target answered 2xx and DynamoDB throttles the finish: giving the write up would
    have the message come back and the run's next attempt call the target again. The worker
    tries the write again with growing pauses; one call, the run SUCCEEDED."""
    fire_at = clock.now() + timedelta(seconds=5)
    job = cloud.create(hook(receiver, at(fire_at)))
    clock.move_to(fire_at)
    store = EndWriteThrottled(cloud, throttles=len(END_WRITE_PAUSES))
    message = RunMessage.model_validate_json(receive_one(cloud)["Body"])

    assert executor_on(cloud, store).execute(message) is Outcome.SUCCEEDED
    assert store.tries == len(END_WRITE_PAUSES) + 1
    assert calls(receiver, message.run_id) == ["1"]
    assert only_run(cloud, job["job_id"])["status"] == "SUCCEEDED"
    assert clock.now() >= fire_at + timedelta(seconds=sum(END_WRITE_PAUSES))  # it waited, not spun


def test_an_end_write_throttled_past_every_pause_is_left_to_the_at_least_once_window(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    """Throttled beyond END_WRITE_PAUSES, the worker gives up (the message comes back): the
    run stays RUNNING under its lease, as for a worker that died after the call."""
    fire_at = clock.now() + timedelta(seconds=5)
    cloud.create(hook(receiver, at(fire_at)))
    clock.move_to(fire_at)
    store = EndWriteThrottled(cloud, throttles=len(END_WRITE_PAUSES) + 1)
    message = RunMessage.model_validate_json(receive_one(cloud)["Body"])

    with pytest.raises(StoreContention):
        executor_on(cloud, store).execute(message)
    assert calls(receiver, message.run_id) == ["1"]
    assert stored_run(cloud, message.run_id).status is RunStatus.RUNNING


class ShortOnTime(LambdaContext):
    """An invocation with half a second left."""

    def get_remaining_time_in_millis(self) -> int:
        return 500


def test_an_end_write_is_not_waited_for_past_the_invocations_end(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    """The pauses stop before the invocation would be stopped: with 0.5 s left, the third
    throttle (whose pause would end at 0.8 s) is the last; the message comes back."""
    fire_at = clock.now() + timedelta(seconds=5)
    cloud.create(hook(receiver, at(fire_at)))
    clock.move_to(fire_at)
    store = EndWriteThrottled(cloud, throttles=3)
    message = RunMessage.model_validate_json(receive_one(cloud)["Body"])
    executor = executor_on(cloud, store)
    executor.begin_invocation(ShortOnTime())

    with pytest.raises(StoreContention):
        executor.execute(message)
    assert store.tries == 3
    assert clock.now() < fire_at + timedelta(seconds=0.5)


# --- 3. the same message twice, at once ------------------------------------------------------


@pytest.mark.parametrize("how", ["one-batch", "two-invocations"])
def test_the_same_message_delivered_twice_at_once_calls_the_target_once(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver, how: str
) -> None:
    """Both copies in flight together: in one batch (its records run concurrently) or in two
    worker invocations (two Lambda sandboxes, each with its own executor) at the same time.
    The conditional start lets one through; the other is acknowledged and dropped."""
    receiver.hold_seconds = 0.3  # the call is in flight while the other copy arrives
    job = cloud.create(hook(receiver, at(clock.now())))
    sqs, url = cloud.clients.sqs(), cloud.queue_url(Priority.NORMAL)
    first = receive_one(cloud)
    sqs.send_message(QueueUrl=url, MessageBody=first["Body"])  # SQS delivers it twice
    second = receive_one(cloud)
    assert second["MessageId"] != first["MessageId"]

    if how == "one-batch":
        results = [cloud.invoke_worker([first, second], url, NORMAL_ARN)]
    else:
        start = threading.Barrier(2)
        results = []

        def invocation(message: dict[str, Any]) -> None:
            executor = build_run_executor(cloud.settings, cloud.clients, clock)
            start.wait()
            results.append(
                worker_handler(sqs_event([message], NORMAL_ARN), LambdaContext(), executor=executor)
            )

        workers = [threading.Thread(target=invocation, args=(m,)) for m in (first, second)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()

    assert [result.get("batchItemFailures", []) for result in results] == [[]] * len(results)
    run = only_run(cloud, job["job_id"])
    assert (run["status"], run["attempt"]) == ("SUCCEEDED", 1)
    assert calls(receiver, run["run_id"]) == ["1"]
    assert dead_letters(cloud) == []


# --- 4. two pollers whose clocks are 30 s apart ----------------------------------------------


@pytest.mark.usefixtures("worker_knows_its_queues")
def test_two_pollers_with_clocks_30_seconds_apart_claim_each_firing_once(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    """Poller B's clock is 30 s fast: it claims further ahead, sends messages that surface
    30 s early (the worker hides them again until shortly before their time) and may re-send
    a waiting run early. Every firing is still claimed by one poller only and called once."""
    fast = build_dispatcher(cloud.settings, cloud.clients, SkewedClock(clock, timedelta(seconds=30)))
    cloud.poll()
    start = clock.now().replace(second=0, microsecond=0) + timedelta(minutes=1)  # 10:01
    cron = cloud.create(hook(receiver, {"cron": "* * * * *"}))
    rate = cloud.create(hook(receiver, {"rate": "2 minutes"}))
    one_offs = [
        cloud.create(hook(receiver, at(start + timedelta(minutes=k, seconds=k * 7)))) for k in (2, 4, 6)
    ]
    claimed_by: dict[str, list[str]] = {}
    minute = start
    for _ in range(8):  # 10:01 .. 10:08
        clock.move_to(minute - timedelta(seconds=0.5))
        cloud.deliver()  # the worker takes what is due at the mark
        for offset, poller in ((10, cloud.dispatcher), (40, fast)):
            clock.move_to(minute + timedelta(seconds=offset))
            for shard in range(cloud.settings.shard_count):
                for run in poller.poll_shard(shard).claimed:
                    claimed_by.setdefault(run.run_id, []).append("fast" if poller is fast else "true")
            cloud.deliver()
        minute += timedelta(minutes=1)
    end = minute  # 10:09
    clock.move_to(end - timedelta(seconds=0.5))
    cloud.deliver()
    assert {run_id: pollers for run_id, pollers in claimed_by.items() if len(pollers) > 1} == {}
    assert {"fast", "true"} <= {poller for pollers in claimed_by.values() for poller in pollers}
    cron_runs = [run for run in runs_of(cloud, cron["job_id"]) if run["status"] == "SUCCEEDED"]
    assert [run["scheduled_for"] for run in cron_runs] == [
        iso(start + timedelta(minutes=k))
        for k in range(9)  # 10:01 .. 10:09
    ]
    assert {run["lateness_ms"] for run in cron_runs} == {0}  # taken at the mark, skew or not
    created = datetime.fromisoformat(rate["created_at"])
    rate_marks = [
        run["scheduled_for"] for run in runs_of(cloud, rate["job_id"]) if run["status"] == "SUCCEEDED"
    ]
    assert rate_marks == [iso(created + timedelta(minutes=2 * k)) for k in range(1, 5)]
    for job in one_offs:
        assert only_run(cloud, job["job_id"])["status"] == "SUCCEEDED"
    # Every run due by the end succeeded; the only others are claimed ahead, still waiting.
    every_run = [run for job in (cron, rate, *one_offs) for run in runs_of(cloud, job["job_id"])]
    assert {run["status"] for run in every_run if run["scheduled_for"] <= iso(end)} == {"SUCCEEDED"}
    assert {run["status"] for run in every_run if run["scheduled_for"] > iso(end)} <= {"PENDING"}
    succeeded = {run["run_id"] for run in every_run if run["status"] == "SUCCEEDED"}
    assert sorted(r.headers["idempotency-key"] for r in receiver.requests) == sorted(succeeded)
    assert all(run["attempt"] == 1 for run in every_run)
    assert dead_letters(cloud) == []


# --- 5. the poller down for ten minutes -------------------------------------------------------


def test_ten_minutes_without_a_poller_lose_nothing_and_collapse_missed_recurring_firings(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    """The worker keeps running; the poller does not, from 10:01:10 to 10:11:10. Runs
    claimed before the outage fire on time; one-offs due during it fire once, late; a cron
    and a rate job fire once for everything they missed (FIRE_ONCE), then on time again."""
    cloud.poll()
    t0 = clock.now()  # 10:00:30
    base = t0.replace(second=0)
    cron = cloud.create(hook(receiver, {"cron": "* * * * *"}))  # claims 10:01 and 10:02 at once
    rate = cloud.create(hook(receiver, {"rate": "3 minutes"}))  # 10:03:30, 10:06:30, 10:09:30 ...
    during = [base + timedelta(minutes=m, seconds=s) for m, s in ((4, 0), (6, 45), (9, 0))]
    missed = [cloud.create(hook(receiver, at(when))) for when in during]
    after = cloud.create(hook(receiver, at(base + timedelta(minutes=13))))

    def minute_of_work(k: int, *, poll: bool) -> None:
        """The worker takes what is visible at :00, :10 and :30 of minute k; the poller
        polls at :10."""
        for second in (0, 10, 30):
            clock.move_to(max(clock.now(), base + timedelta(minutes=k, seconds=second)))
            if second == 10 and poll:
                cloud.poll()
            cloud.deliver()

    minute_of_work(1, poll=True)  # the last poll before the outage, at 10:01:10, claims 10:03
    for k in range(2, 11):  # 10:02 .. 10:10: no poll
        minute_of_work(k, poll=False)
    for k in range(11, 15):  # 10:11:10: the poller is back
        minute_of_work(k, poll=True)
    end = clock.now()

    cron_runs = runs_of(cloud, cron["job_id"])
    expected_cron = [1, 2, 3, 11, 12, 13, 14]  # 10:04 .. 10:10 missed: one run at 10:11
    due_cron = [run for run in cron_runs if run["scheduled_for"] <= iso(end)]
    assert [run["scheduled_for"] for run in due_cron] == [
        iso(base + timedelta(minutes=k)) for k in expected_cron
    ]
    late = next(run for run in due_cron if run["scheduled_for"] == iso(base + timedelta(minutes=11)))
    assert late["lateness_ms"] == 10_000
    rate_runs = [run for run in runs_of(cloud, rate["job_id"]) if run["scheduled_for"] <= iso(end)]
    # 10:03:30, 10:06:30 and 10:09:30 missed: one run at 10:09:30, then 10:12:30 on time.
    assert [run["scheduled_for"] for run in rate_runs] == [iso(t0 + timedelta(minutes=k)) for k in (9, 12)]
    assert [run["lateness_ms"] for run in rate_runs] == [100_000, 0]
    for job, when in zip(missed, during, strict=True):
        run = only_run(cloud, job["job_id"])
        assert (run["scheduled_for"], run["status"]) == (iso(when), "SUCCEEDED")
        assert run["lateness_ms"] == to_ms(base + timedelta(minutes=11, seconds=10)) - to_ms(when)
    assert only_run(cloud, after["job_id"])["lateness_ms"] == 0

    every_due = due_cron + rate_runs + [only_run(cloud, j["job_id"]) for j in (*missed, after)]
    assert {run["status"] for run in every_due} == {"SUCCEEDED"}
    assert sorted(r.headers["idempotency-key"] for r in receiver.requests) == sorted(
        run["run_id"] for run in every_due
    )
    assert dead_letters(cloud) == []


# --- 6. DynamoDB throttles the claim ------------------------------------------------------------


@contextmanager
def refusing(
    client: Any,
    operation: str,
    status: int,
    reply: dict[str, Any],
    times: int | None = None,
    only: Callable[[dict[str, Any]], bool] | None = None,
) -> Iterator[list[int]]:
    """The AWS service answers calls of `operation` (those whose parameters `only` picks, if
    given) with `status` and `reply` instead of serving them (botocore raises or parses the
    answer as it would the real one): the next `times` calls, or every call until the block
    ends. Yields how many were refused so far. (A real throttle would also be retried by
    botocore first; this is one that outlasted botocore's retries.)"""
    refused = [0]
    event = f"before-call.{client.meta.service_model.service_id.hyphenize()}.{operation}"

    def refuse(params: dict[str, Any], **_: Any) -> tuple[AWSResponse, dict[str, Any]] | None:
        if times is not None and refused[0] >= times:
            return None
        if only is not None and not only(json.loads(params["body"] or b"{}")):
            return None
        refused[0] += 1
        return AWSResponse("https://aws.invalid/", status, HTTPHeaders(), None), reply | {
            "ResponseMetadata": {"HTTPStatusCode": status}
        }

    client.meta.events.register(event, refuse)
    try:
        yield refused
    finally:
        client.meta.events.unregister(event, refuse)


def is_claim(params: dict[str, Any]) -> bool:
    """A one-off's claim: the single update of its job's item (`claim_if_unchanged`)."""
    return "due_sk = :seen_fire" in params.get("ConditionExpression", "")


THROUGHPUT_EXCEEDED = {"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "slow down"}}
# A transaction refused for the table's throughput (botocore does not retry it).
TRANSACTION_THROTTLED = {
    "Error": {"Code": "TransactionCanceledException", "Message": "cancelled [ThrottlingError, None]"},
    "CancellationReasons": [{"Code": "ThrottlingError"}, {"Code": "None"}],
}


ONE_OFF = "one-off"  # claimed by one UpdateItem of its job's item (its run kept on it)
DAILY = "daily"  # claimed by a transaction: its job's update and its run's own item
THROTTLED_CLAIMS = [
    pytest.param(
        ONE_OFF,
        400,
        THROUGHPUT_EXCEEDED,
        id="throughput-exceeded",
    ),
    pytest.param(
        ONE_OFF,
        400,
        {"Error": {"Code": "TransactionConflictException", "Message": "a transaction on the item"}},
        id="conflict-with-a-transaction",
    ),
    pytest.param(
        DAILY,
        400,
        TRANSACTION_THROTTLED,
        id="transaction-throttled",
    ),
    pytest.param(
        ONE_OFF, 500, {"Error": {"Code": "InternalServerError", "Message": "oops"}}, id="server-error"
    ),
]


@pytest.mark.parametrize(("kind", "status", "reply"), THROTTLED_CLAIMS)
def test_a_claim_dynamodb_throttles_is_made_by_a_later_poll(
    cloud: SchedulerHarness,
    clock: FrozenClock,
    receiver: WebhookReceiver,
    kind: str,
    status: int,
    reply: dict[str, Any],
) -> None:
    """DynamoDB refuses the claim, at create (a daily job's firing within the lookahead) and
    through the next poll, each of which tries it three times: the job keeps its firing in
    the due index, and the first poll after the throttle claims it, once. (A one-off due
    within the lookahead is claimed in its create's own write, which no claim can fail apart
    from: this one is created due later, and its poll's claim is refused.) The firing is
    more than URGENT_WITHIN away at that poll: one due sooner is tried longer (below)."""
    cloud.poll()
    tries = len(CONTENTION_PAUSES_MS) + 1
    not_urgent = URGENT_WITHIN + timedelta(seconds=5)
    if kind == ONE_OFF:
        fire_at = clock.now() + timedelta(minutes=5)
        job = cloud.create(hook(receiver, at(fire_at)))
        clock.move_to(fire_at - not_urgent)
        refused_calls = refusing(cloud.clients.dynamodb(), "UpdateItem", status, reply, only=is_claim)
    else:
        fire_at = (clock.now() + timedelta(minutes=3)).replace(second=0, microsecond=0)  # a whole minute
        clock.move_to(fire_at - timedelta(seconds=20) - not_urgent)
        daily = {"cron": f"{fire_at.minute} {fire_at.hour} * * *"}
        refused_calls = refusing(cloud.clients.dynamodb(), "TransactWriteItems", status, reply)
    with refused_calls as refused:
        if kind != ONE_OFF:
            job = cloud.create(hook(receiver, daily))
            assert job["next_fire_at"] == iso(fire_at)  # not claimed: left to the poller
            assert refused == [tries]
            clock.advance(20)
        reports = cloud.poll()
        assert refused == [tries if kind == ONE_OFF else 2 * tries]
    assert sum(report.contended for report in reports) == 1
    assert sum(len(report.claimed) for report in reports) == 0
    assert runs_of(cloud, job["job_id"]) == []

    clock.advance(20)
    assert [run.run_id for report in cloud.poll() for run in report.claimed] == [
        f"{job['job_id']}:{to_ms(fire_at)}"
    ]
    assert sum(len(report.claimed) for report in cloud.poll()) == 0  # claimed once
    assert move_and_deliver(cloud, clock, fire_at) == 1
    run = only_run(cloud, job["job_id"])
    assert (run["status"], run["lateness_ms"]) == ("SUCCEEDED", 0)
    assert calls(receiver, run["run_id"]) == ["1"]


@pytest.mark.parametrize(
    ("refusals", "claimed_by_the_first_poll"),
    [
        pytest.param(len(URGENT_CONTENTION_PAUSES_MS), True, id="throttle-passes-within-the-poll"),
        pytest.param(None, False, id="throttle-outlasts-the-poll-s-tries"),
    ],
)
def test_a_throttled_claim_of_a_firing_the_next_poll_would_make_late_is_tried_longer(
    cloud: SchedulerHarness,
    clock: FrozenClock,
    receiver: WebhookReceiver,
    refusals: int | None,
    claimed_by_the_first_poll: bool,
) -> None:
    """A daily job's firing 70 s after a poll, whose claim the table throttles (a
    transaction, which botocore does not retry: the crons' :00 burst of starts and ends
    meets the poll's claims of their next firings). The next poll, a minute on, would claim
    it 10 s before its time, less than a long poll's read may take: so this poll tries it
    after each of URGENT_CONTENTION_PAUSES_MS, and a throttle that passes within them costs
    nothing. One that outlasts them leaves the firing to the next poll."""
    cloud.poll()
    fire_at = (clock.now() + timedelta(minutes=3)).replace(second=0, microsecond=0)  # beyond the lookahead
    job = cloud.create(hook(receiver, {"cron": f"{fire_at.minute} {fire_at.hour} * * *"}))
    assert job["next_fire_at"] == iso(fire_at)
    clock.move_to(fire_at - timedelta(seconds=70))
    tries = len(URGENT_CONTENTION_PAUSES_MS) + 1
    ddb = cloud.clients.dynamodb()
    refused_calls = refusing(ddb, "TransactWriteItems", 400, TRANSACTION_THROTTLED, refusals)
    with refused_calls as refused:
        reports = cloud.poll()
        assert refused == [tries if refusals is None else refusals]
    claimed = [run.scheduled_for for report in reports for run in report.claimed]
    paused = timedelta(milliseconds=sum(URGENT_CONTENTION_PAUSES_MS))
    assert clock.now() >= fire_at - timedelta(seconds=70) + paused
    if claimed_by_the_first_poll:
        assert (claimed, sum(report.contended for report in reports)) == ([fire_at], 0)
    else:
        assert (claimed, sum(report.contended for report in reports)) == ([], 1)
        assert [run.scheduled_for for report in cloud.poll() for run in report.claimed] == [fire_at]
    assert sum(len(report.claimed) for report in cloud.poll()) == 0  # claimed once
    assert move_and_deliver(cloud, clock, fire_at) == 1
    run = only_run(cloud, job["job_id"])
    assert (run["status"], run["lateness_ms"]) == ("SUCCEEDED", 0)
    assert calls(receiver, run["run_id"]) == ["1"]


def test_a_claim_lost_beside_a_throttled_item_is_lost_not_contended(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    """A claim's transaction cancelled because the job's condition failed while its run's
    item was throttled: the condition's answer stands (tried again, the claim would only
    lose again), so an urgent claim is tried once, not through its pauses, and counted
    lost, not contended. (Here nothing changed the job: the next poll claims the firing.)"""
    cloud.poll()
    fire_at = (clock.now() + timedelta(minutes=3)).replace(second=0, microsecond=0)
    cloud.create(hook(receiver, {"cron": f"{fire_at.minute} {fire_at.hour} * * *"}))
    clock.move_to(fire_at - timedelta(seconds=70))
    lost_beside_a_throttle = {
        "Error": {
            "Code": "TransactionCanceledException",
            "Message": "[ConditionalCheckFailed, ThrottlingError]",
        },
        "CancellationReasons": [{"Code": "ConditionalCheckFailed"}, {"Code": "ThrottlingError"}],
    }
    ddb = cloud.clients.dynamodb()
    with refusing(ddb, "TransactWriteItems", 400, lost_beside_a_throttle) as refused:
        reports = cloud.poll()
    assert refused == [1]
    assert clock.now() == fire_at - timedelta(seconds=70)  # no pause
    assert (sum(report.contended for report in reports), sum(len(r.claimed) for r in reports)) == (0, 0)
    assert [run.scheduled_for for report in cloud.poll() for run in report.claimed] == [fire_at]


@pytest.mark.parametrize("kind", [ONE_OFF, DAILY])
def test_a_claim_due_soon_is_tried_briefly_outside_a_poll_or_for_a_one_off(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver, kind: str
) -> None:
    """The longer tries are a poll's, for a recurring job: a create (which answers a request)
    tries a daily job's firing 70 s away as briefly as any, and a poll a one-off's (its claim
    one UpdateItem, which botocore retries itself)."""
    cloud.poll()
    fire_at = (clock.now() + timedelta(minutes=5)).replace(second=0, microsecond=0)
    ddb = cloud.clients.dynamodb()
    if kind == ONE_OFF:
        job = cloud.create(hook(receiver, at(fire_at)))
        clock.move_to(fire_at - timedelta(seconds=70))
        refused_calls = refusing(ddb, "UpdateItem", 400, THROUGHPUT_EXCEEDED, only=is_claim)
    else:
        clock.move_to(fire_at - timedelta(seconds=70))
        refused_calls = refusing(ddb, "TransactWriteItems", 400, TRANSACTION_THROTTLED)
    with refused_calls as refused:
        if kind == ONE_OFF:
            reports = cloud.poll()
            assert sum(report.contended for report in reports) == 1
        else:
            job = cloud.create(hook(receiver, {"cron": f"{fire_at.minute} {fire_at.hour} * * *"}))
            assert job["next_fire_at"] == iso(fire_at)  # left to the poller
    assert refused == [len(CONTENTION_PAUSES_MS) + 1]
    assert [run.scheduled_for for report in cloud.poll() for run in report.claimed] == [fire_at]


def test_a_poll_tries_an_urgent_claim_no_later_than_it_stops(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    """With 6 s left of its function's time, a poll stops taking work 1 s on
    (STOP_BEFORE_TIMEOUT): an urgent claim throttled throughout is tried after pauses of 50,
    200 and 500 ms, not after the 1 s pause that would end past that."""
    cloud.poll()
    fire_at = (clock.now() + timedelta(minutes=3)).replace(second=0, microsecond=0)
    cloud.create(hook(receiver, {"cron": f"{fire_at.minute} {fire_at.hour} * * *"}))
    clock.move_to(fire_at - timedelta(seconds=70))
    with refusing(cloud.clients.dynamodb(), "TransactWriteItems", 400, TRANSACTION_THROTTLED) as refused:
        reports = [
            cloud.dispatcher.poll_shard(shard, time_left=STOP_BEFORE_TIMEOUT + timedelta(seconds=1))
            for shard in range(cloud.settings.shard_count)
        ]
    assert refused == [4]
    assert (sum(report.contended for report in reports), sum(len(r.claimed) for r in reports)) == (1, 0)
    assert [run.scheduled_for for report in cloud.poll() for run in report.claimed] == [fire_at]


# Each try of a start is up to this many of its transaction, a moment apart (the adapter's).
TRANSACTION_TRIES = len(TRANSACTION_CONTENTION_PAUSES) + 1


def a_daily_run_at_its_time(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> RunMessage:
    """A daily job's run, claimed by its create, its message received at the run's time (its
    start is a transaction: the run's item and a running slot on its job)."""
    fire_at = (clock.now() + timedelta(minutes=2)).replace(second=0, microsecond=0)
    cloud.create(hook(receiver, {"cron": f"{fire_at.minute} {fire_at.hour} * * *"}))
    clock.move_to(fire_at)
    return RunMessage.model_validate_json(receive_one(cloud)["Body"])


@pytest.mark.parametrize(
    ("refusals", "started"),
    [
        pytest.param(len(START_CONTENTION_PAUSES_MS), True, id="throttle-passes-within-the-pauses"),
        pytest.param(None, False, id="throttle-outlasts-the-pauses"),
    ],
)
def test_a_start_the_table_throttles_is_tried_again_after_pauses(
    cloud: SchedulerHarness,
    clock: FrozenClock,
    receiver: WebhookReceiver,
    refusals: int | None,
    started: bool,
) -> None:
    """The table throttles a cron's start at its time (the crons' :00 burst of starts and
    ends), a transaction, which botocore does not retry: the worker tries it again after
    each of START_CONTENTION_PAUSES_MS, so a throttle that passes within them makes the run
    that much late, not a visibility timeout late. One that outlasts them fails the record:
    the run waits, unstarted, for its message to come back."""
    message = a_daily_run_at_its_time(cloud, clock, receiver)
    due = from_ms(message.due_ms)
    tries = len(START_CONTENTION_PAUSES_MS) + 1
    if refusals is not None:
        refusals *= TRANSACTION_TRIES  # every try but the last
    ddb = cloud.clients.dynamodb()
    with refusing(ddb, "TransactWriteItems", 400, TRANSACTION_THROTTLED, refusals) as refused:
        if started:
            assert cloud.executor.execute(message) is Outcome.SUCCEEDED
        else:
            with pytest.raises(StoreContention):
                cloud.executor.execute(message)
    assert refused == [(tries - 1 if started else tries) * TRANSACTION_TRIES]
    paused = timedelta(milliseconds=sum(START_CONTENTION_PAUSES_MS))
    assert clock.now() >= due + paused  # it waited, not spun
    run = stored_run(cloud, message.run_id)
    if started:
        assert run.status is RunStatus.SUCCEEDED
        assert calls(receiver, message.run_id) == ["1"]
    else:
        assert (run.status, run.attempt) == (RunStatus.PENDING, 1)
        assert calls(receiver, message.run_id) == []


@pytest.mark.parametrize(
    "reasons",
    [
        pytest.param(["ConditionalCheckFailed", "ThrottlingError"], id="run-changed-beside-a-throttled-job"),
        pytest.param(["ThrottlingError", "ConditionalCheckFailed"], id="job-changed-beside-a-throttled-run"),
    ],
)
def test_a_start_lost_beside_a_throttled_item_is_decided_again_at_once(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver, reasons: list[str]
) -> None:
    """A start's transaction cancelled because the run's or the job's condition failed while
    the other item was throttled, each time: a lost race, so neither the adapter nor the
    admission tries the same write again, or pauses; the run or the job is read again and
    the start decided again at once, ADMISSION_TRIES times, then given up (here nothing
    changed, so it kept losing). Were it contention, 3 transactions a try, and pauses."""
    message = a_daily_run_at_its_time(cloud, clock, receiver)
    lost_beside_a_throttle = {
        "Error": {"Code": "TransactionCanceledException", "Message": f"cancelled {reasons}"},
        "CancellationReasons": [{"Code": reason} for reason in reasons],
    }
    ddb = cloud.clients.dynamodb()
    with (
        refusing(ddb, "TransactWriteItems", 400, lost_beside_a_throttle) as refused,
        pytest.raises(StoreContention, match="kept changing"),
    ):
        cloud.executor.execute(message)
    assert refused == [ADMISSION_TRIES]
    assert clock.now() == from_ms(message.due_ms)  # no pause
    assert calls(receiver, message.run_id) == []


def test_a_throttled_start_is_not_waited_for_past_the_invocations_end(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    """With 0.5 s of the invocation left, the start throttled throughout is tried after
    pauses of 50 and 200 ms, not after the 500 ms one that would end past it. (Each try is
    three of its transaction, the adapter's quick tries, in wall time: the frozen clock sees
    the pauses only.)"""
    message = a_daily_run_at_its_time(cloud, clock, receiver)
    cloud.executor.begin_invocation(ShortOnTime())
    ddb = cloud.clients.dynamodb()
    with (
        refusing(ddb, "TransactWriteItems", 400, TRANSACTION_THROTTLED) as refused,
        pytest.raises(StoreContention),
    ):
        cloud.executor.execute(message)
    assert refused == [3 * TRANSACTION_TRIES]
    assert calls(receiver, message.run_id) == []


# --- 7. SQS refuses the send --------------------------------------------------------------------


REFUSED_SENDS = [
    pytest.param(503, {"Error": {"Code": "ServiceUnavailable", "Message": "try later"}}, id="call-refused"),
    pytest.param(
        200,
        {"Successful": [], "Failed": [{"Id": "0", "SenderFault": False, "Code": "InternalError"}]},
        id="entry-failed",
    ),
]


@pytest.mark.parametrize(("status", "reply"), REFUSED_SENDS)
def test_a_run_whose_send_sqs_refused_is_sent_by_the_watchdog(
    cloud: SchedulerHarness,
    clock: FrozenClock,
    receiver: WebhookReceiver,
    status: int,
    reply: dict[str, Any],
) -> None:
    """SQS refuses the message of a run claimed at create, as a whole call or as one failed
    entry of the batch: the run waits PENDING with its timer, and the watchdog sends it a
    minute after its time. Same attempt: the target was never called."""
    cloud.poll()
    fire_at = clock.now() + timedelta(seconds=30)
    with refusing(cloud.clients.sqs(), "SendMessageBatch", status, reply, times=1) as refused:
        job = cloud.create(hook(receiver, at(fire_at)))
        assert refused == [1]
    assert only_run(cloud, job["job_id"])["status"] == "PENDING"
    assert move_and_deliver(cloud, clock, fire_at) == 0  # nothing was queued
    assert watched(cloud.poll()) == {}

    clock.move_to(fire_at + timedelta(seconds=60))
    assert watched(cloud.poll()) == {"resent": 1}
    assert cloud.deliver() == 1
    run = only_run(cloud, job["job_id"])
    assert (run["status"], run["attempt"], run["lateness_ms"]) == ("SUCCEEDED", 1, 60_000)
    assert calls(receiver, run["run_id"]) == ["1"]
    assert dead_letters(cloud) == []


def test_a_retry_whose_send_sqs_refused_is_sent_by_the_watchdog(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    receiver.respond_with(503)
    fire_at = clock.now() + timedelta(seconds=5)
    job = cloud.create(hook(receiver, at(fire_at)))
    clock.move_to(fire_at)
    reply = {"Error": {"Code": "ServiceUnavailable", "Message": "try later"}}
    with refusing(cloud.clients.sqs(), "SendMessageBatch", 503, reply, times=1) as refused:
        assert cloud.deliver() == 1  # attempt 1 fails; its retry is not enqueued
        assert refused == [1]
    run = only_run(cloud, job["job_id"])
    assert (run["status"], run["attempt"]) == ("RETRYING", 2)
    retry_at = datetime.fromisoformat(run["next_attempt_at"])
    assert move_and_deliver(cloud, clock, retry_at + timedelta(seconds=59)) == 0
    assert watched(cloud.poll()) == {}

    clock.move_to(retry_at + timedelta(seconds=60))
    assert watched(cloud.poll()) == {"resent": 1}
    assert cloud.deliver() == 1
    run = only_run(cloud, job["job_id"])
    assert (run["status"], run["attempt"]) == ("SUCCEEDED", 2)
    assert calls(receiver, run["run_id"]) == ["1", "2"]
    assert dead_letters(cloud) == []


# --- 8-11. what the target answers ---------------------------------------------------------------


def deliver_attempts(cloud: SchedulerHarness, clock: FrozenClock, job_id: str) -> list[dict[str, Any]]:
    """Deliver the job's one run attempt after attempt, each at its retry time, polling in
    between (nothing is re-sent early); the run as it was after each attempt."""
    seen = []
    while True:
        assert cloud.deliver_batches() == 1
        run = only_run(cloud, job_id)
        seen.append(run)
        if run["status"] != "RETRYING":
            return seen
        assert watched(cloud.poll()) == {}
        clock.move_to(datetime.fromisoformat(run["next_attempt_at"]))


def test_a_target_that_fails_twice_then_answers_succeeds_on_attempt_three(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    receiver.respond_with(500, 500)
    fire_at = clock.now() + timedelta(seconds=5)
    job = cloud.create(hook(receiver, at(fire_at)))
    clock.move_to(fire_at)
    seen = deliver_attempts(cloud, clock, job["job_id"])

    assert [(run["status"], run["attempt"]) for run in seen] == [
        ("RETRYING", 2),
        ("RETRYING", 3),
        ("SUCCEEDED", 3),
    ]
    run_id = seen[-1]["run_id"]
    assert calls(receiver, run_id) == ["1", "2", "3"]
    assert effects(receiver) == {run_id}
    # Each retry waited out its backoff: the deterministic full jitter of its attempt.
    times = [request.received_at for request in receiver.requests]
    for attempt, (before, after) in enumerate(itertools.pairwise(times), start=1):
        assert to_ms(after) == to_ms(before + backoff(RetryPolicy(), run_id, attempt))
    final = seen[-1]
    assert (final["response_code"], final["lateness_ms"]) == (200, 0)
    assert dead_letters(cloud) == []
    assert cloud.call("GET", f"/v1/jobs/{job['job_id']}").body["status"] == "COMPLETED"


@pytest.mark.parametrize(
    ("answers", "attempts"),
    [
        pytest.param([500, 500, 500], 3, id="always-500"),
        pytest.param([404], 1, id="404-is-final"),
        pytest.param([503, 403], 2, id="retried-then-final"),
    ],
)
def test_a_run_that_cannot_succeed_fails_once_with_one_dlq_record(
    cloud: SchedulerHarness,
    clock: FrozenClock,
    receiver: WebhookReceiver,
    answers: list[int],
    attempts: int,
) -> None:
    receiver.respond_with(*answers)
    fire_at = clock.now() + timedelta(seconds=5)
    job = cloud.create(hook(receiver, at(fire_at)))
    clock.move_to(fire_at)
    seen = deliver_attempts(cloud, clock, job["job_id"])
    final = seen[-1]
    run_id, last = final["run_id"], answers[-1]
    assert (final["status"], final["attempt"], final["response_code"]) == ("FAILED", attempts, last)
    assert (
        final["error"] == f"HTTP {last} from 127.0.0.1:{receiver.port}"
    )  # the host only: a path can hold a token
    assert calls(receiver, run_id) == [str(n) for n in range(1, attempts + 1)]

    [record] = dead_letters(cloud)
    letter = DeadLetter.model_validate(record)
    assert (letter.kind, letter.run_id, letter.job_id) == ("RUN_FAILED", run_id, job["job_id"])
    assert (letter.attempts, letter.last_error, letter.response_code) == (attempts, final["error"], last)
    assert letter.scheduled_for == iso(fire_at)
    assert letter.message.run_id == run_id
    assert letter.message.attempt == attempts
    assert letter.message.scheduled_for_ms == to_ms(fire_at)

    clock.advance(3_600)  # nothing more: no timer, no message
    assert watched(cloud.poll()) == {}
    assert cloud.deliver() == 0
    assert len(receiver.requests) == attempts
    assert dead_letters(cloud) == []
    assert cloud.call("GET", f"/v1/jobs/{job['job_id']}").body["status"] == "COMPLETED"


def test_a_retry_beyond_the_longest_queue_delay_waits_in_the_due_index_for_the_poller(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    """SQS delays a message 15 minutes at most: a retry further away is not queued; its run
    waits in the due index until the lookahead before its time, when the poller sends it."""
    cloud.poll()
    receiver.respond_with(503)
    fire_at = clock.now() + timedelta(seconds=5)
    policy = RetryPolicy(max_attempts=2, backoff_seconds=86_400, max_backoff_seconds=1_500)
    job = cloud.create(hook(receiver, at(fire_at), retry=policy.model_dump()))
    # Take a run whose first retry lies 15 to 25 minutes away (a hash of its run id decides).
    while backoff(policy, f"{job['job_id']}:{to_ms(fire_at)}", 1) <= timedelta(seconds=900):
        cloud.call("DELETE", f"/v1/jobs/{job['job_id']}")
        job = cloud.create(hook(receiver, at(fire_at), retry=policy.model_dump()))
    run_id = f"{job['job_id']}:{to_ms(fire_at)}"
    retry_at = fire_at + backoff(policy, run_id, 1)
    lookahead = timedelta(seconds=cloud.settings.lookahead_seconds)

    clock.move_to(fire_at)
    assert cloud.deliver() >= 1  # attempt 1 (and the cancelled jobs' runs, dropped)
    waiting = stored_run(cloud, run_id)
    assert (waiting.status, waiting.attempt) == (RunStatus.RETRYING, 2)
    assert waiting.due_at == from_ms(to_ms(retry_at - lookahead))
    clock.move_to(retry_at - lookahead - timedelta(seconds=1))
    assert watched(cloud.poll()) == {}
    assert cloud.deliver() == 0  # nothing was queued

    clock.move_to(retry_at - lookahead)
    assert watched(cloud.poll()) == {"resent": 1}
    assert cloud.deliver() == 0  # queued, delayed until its time
    assert move_and_deliver(cloud, clock, from_ms(to_ms(retry_at))) == 1
    run = only_run(cloud, job["job_id"])
    assert (run["status"], run["attempt"]) == ("SUCCEEDED", 2)
    assert calls(receiver, run_id) == ["1", "2"]


def test_a_target_that_hangs_past_its_timeout_is_retried(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    """The first call hangs (1 s against a 0.2 s timeout): a retryable failure. The retry
    carries the same Idempotency-Key, so a target that did act on the hung call acts once."""
    receiver.hold_next(1.0)
    fire_at = clock.now() + timedelta(seconds=5)
    job = cloud.create(hook(receiver, at(fire_at), target={"timeout_seconds": 0.2}))
    clock.move_to(fire_at)
    seen = deliver_attempts(cloud, clock, job["job_id"])
    assert [(run["status"], run["attempt"]) for run in seen] == [("RETRYING", 2), ("SUCCEEDED", 2)]
    assert (
        seen[0]["error"] == f"127.0.0.1:{receiver.port} did not answer within 0.2s (connect, send and answer)"
    )
    requests = receiver.wait_for(2)  # the hung call is recorded once its hold ends
    assert sorted(r.headers["x-scheduler-attempt"] for r in requests) == ["1", "2"]
    assert effects(receiver) == {seen[-1]["run_id"]}
    assert dead_letters(cloud) == []


# --- 12. a cancel while the message waits -------------------------------------------------------


def test_a_job_cancelled_while_its_runs_wait_in_the_queue_cancels_them_uncalled(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    """A cron job with two firings claimed ahead (messages delayed on the queue) and a
    one-off whose retry waits on the queue: both cancelled before their messages surface.
    The worker cancels each run; the target sees no further call."""
    receiver.respond_with(500)
    fire_at = clock.now() + timedelta(seconds=5)
    retried = cloud.create(hook(receiver, at(fire_at)))
    clock.move_to(fire_at)
    assert cloud.deliver_batches() == 1
    [waiting] = runs_of(cloud, retried["job_id"])
    assert waiting["status"] == "RETRYING"
    cron = cloud.create(hook(receiver, {"cron": "* * * * *"}))
    assert [run["status"] for run in runs_of(cloud, cron["job_id"])] == ["PENDING", "PENDING"]

    for job in (retried, cron):
        assert cloud.call("DELETE", f"/v1/jobs/{job['job_id']}").body["status"] == "CANCELLED"
    clock.move_to(fire_at + timedelta(minutes=3))
    assert cloud.deliver() == 3
    clock.move_to(fire_at + timedelta(minutes=10))  # timers, visibility timeouts: nothing left
    assert watched(cloud.poll()) == {}
    assert cloud.deliver() == 0

    assert [run["status"] for run in runs_of(cloud, cron["job_id"])] == ["CANCELLED", "CANCELLED"]
    run = only_run(cloud, retried["job_id"])
    assert (run["status"], run["attempt"]) == ("CANCELLED", 2)
    assert calls(receiver, run["run_id"]) == ["1"]
    assert len(receiver.requests) == 1
    assert dead_letters(cloud) == []


# --- 13. a batch of good, malformed, stale and orphaned messages --------------------------------


def test_a_malformed_message_is_the_only_failure_of_its_batch(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    """Beside a malformed body: a stale copy (attempt 2 of a run at attempt 1) and a message
    for a job that does not exist are acknowledged and dropped, not failed (they would only
    come back); the good run is delivered once."""
    sqs, url = cloud.clients.sqs(), cloud.queue_url(Priority.NORMAL)
    job = cloud.create(hook(receiver, at(clock.now())))
    [run] = runs_of(cloud, job["job_id"])
    good = json.loads(receive_one(cloud)["Body"])
    bodies = {
        "malformed": '{"job_id": "a", "run_id": "a:1", "scheduled_for_ms": 1, "attempt": 0}',
        "stale": json.dumps(good | {"attempt": 2, "not_before_ms": good["scheduled_for_ms"]}),
        "orphan": json.dumps(good | {"job_id": "gone", "run_id": f"gone:{good['scheduled_for_ms']}"}),
    }
    clock.advance(541)  # the good message is visible again
    for body in bodies.values():
        sqs.send_message(QueueUrl=url, MessageBody=body)
    messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert len(messages) == 4

    result = cloud.invoke_worker(messages, url, NORMAL_ARN)
    [failure] = result["batchItemFailures"]
    [failed] = [m for m in messages if m["MessageId"] == failure["itemIdentifier"]]
    assert failed["Body"] == bodies["malformed"]
    assert calls(receiver, run["run_id"]) == ["1"]
    assert only_run(cloud, job["job_id"])["status"] == "SUCCEEDED"
    clock.advance(541)
    assert cloud.deliver() == 1  # only the malformed one comes back
    assert len(receiver.requests) == 1


# --- re-drive: POST /v1/jobs/{job_id}/runs/{run_id}/retry ---------------------------------------


def test_retrying_a_failed_run_starts_a_fresh_round_of_attempts(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    receiver.respond_with(500, 500, 500)  # attempts 1-2 fail for good; the re-drive's first too
    fire_at = clock.now() + timedelta(seconds=5)
    job = cloud.create(hook(receiver, at(fire_at), retry={"max_attempts": 2, "backoff_seconds": 1}))
    clock.move_to(fire_at)
    failed = deliver_attempts(cloud, clock, job["job_id"])[-1]
    assert (failed["status"], failed["attempt"]) == ("FAILED", 2)
    run_path = f"/v1/jobs/{job['job_id']}/runs/{failed['run_id']}"

    reply = cloud.call("POST", f"{run_path}/retry")
    assert reply.status == 202, reply.body
    assert (reply.body["status"], reply.body["trigger"], reply.body["attempt"]) == ("RETRYING", "RETRY", 3)
    assert reply.body["next_attempt_at"] == iso(clock.now())
    assert reply.body["finished_at"] is None
    assert cloud.call("POST", f"{run_path}/retry").status == 409  # not FAILED any more

    # A fresh round of max_attempts=2: attempt 3 fails and is retried, attempt 4 succeeds.
    seen = deliver_attempts(cloud, clock, job["job_id"])
    assert [(run["status"], run["attempt"], run["trigger"]) for run in seen] == [
        ("RETRYING", 4, "RETRY"),
        ("SUCCEEDED", 4, "RETRY"),
    ]
    assert calls(receiver, failed["run_id"]) == ["1", "2", "3", "4"]
    assert len(dead_letters(cloud)) == 1  # the first round's failure only
    assert cloud.call("POST", f"{run_path}/retry").status == 409  # a SUCCEEDED run is not retried


def test_retrying_a_run_that_is_not_failed_or_not_known_is_refused(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    cron = cloud.create(hook(receiver, {"cron": "* * * * *"}))
    pending, later = runs_of(cloud, cron["job_id"])
    path = f"/v1/jobs/{cron['job_id']}/runs"
    reply = cloud.call("POST", f"{path}/{pending['run_id']}/retry")
    assert (reply.status, reply.body["error"]["code"]) == (409, "CONFLICT")
    assert "PENDING" in reply.body["error"]["message"]

    unknown = [
        f"{cron['job_id']}:{to_ms(clock.now())}",  # a well-formed id of no run
        "not-a-run",
        f"{'0' * 32}:{pending['run_id'].split(':')[1]}",  # another job's id
    ]
    for run_id in unknown:
        reply = cloud.call("POST", f"{path}/{run_id}/retry")
        assert (reply.status, reply.body["error"]["code"]) == (404, "NOT_FOUND"), run_id
    assert cloud.call("POST", f"/v1/jobs/{'0' * 32}/runs/{later['run_id']}/retry").status == 404
    # Another tenant's run is as unknown as a missing one.
    assert cloud.call("POST", f"{path}/{pending['run_id']}/retry", caller=BOB).status == 404
    assert [run["status"] for run in runs_of(cloud, cron["job_id"])] == ["PENDING", "PENDING"]


def test_a_failed_run_of_a_cancelled_job_is_not_retried(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    receiver.respond_with(404)
    cron = cloud.create(hook(receiver, {"cron": "* * * * *"}))
    first = runs_of(cloud, cron["job_id"])[0]
    move_and_deliver(cloud, clock, datetime.fromisoformat(first["scheduled_for"]))
    assert only_run_status(cloud, cron["job_id"], first["run_id"]) == "FAILED"
    cloud.call("DELETE", f"/v1/jobs/{cron['job_id']}")
    reply = cloud.call("POST", f"/v1/jobs/{cron['job_id']}/runs/{first['run_id']}/retry")
    assert (reply.status, reply.body["error"]["code"]) == (409, "CONFLICT")
    assert only_run_status(cloud, cron["job_id"], first["run_id"]) == "FAILED"


def only_run_status(cloud: SchedulerHarness, job_id: str, run_id: str) -> str:
    status: str = cloud.call("GET", f"/v1/jobs/{job_id}/runs/{run_id}").body["status"]
    return status


# --- the heartbeat ---------------------------------------------------------------------------
# The integration clock is frozen, while the heartbeat beats in real seconds and would renew
# the lease to the same frozen instant: these tests run on the system clock, on moto, in
# real time (a few seconds).


@contextmanager
def real_time_cloud(**overrides: Any) -> Iterator[tuple[AwsClients, Settings]]:
    with mock_aws():
        clients = AwsClients(boto3.session.Session(region_name="us-east-1"))
        settings = create_scheduler_resources(clients, shard_count=1)
        yield clients, Settings.model_validate(settings.model_dump() | overrides)


class RecordingLease:
    """The `MessageLease` of the message being worked on: records each renewal."""

    def __init__(self) -> None:
        self.hides: list[int] = []

    def hide_for(self, seconds: int) -> None:
        self.hides.append(seconds)


@dataclass
class Working:
    """A worker on a run's message, in the background."""

    message: RunMessage
    lease: RecordingLease
    thread: threading.Thread
    outcomes: list[Outcome]
    first_lease_until: datetime  # the lease the attempt started with

    def sleep_past_first_lease(self, seconds: float) -> None:
        time.sleep(max(0.0, (self.first_lease_until - datetime.now(UTC)).total_seconds() + seconds))


def start_working(
    clients: AwsClients, settings: Settings, clock: Clock, receiver: WebhookReceiver, **job: Any
) -> Working:
    """Create a job due now and start a worker on its message; returns once the worker has
    started the run."""
    created = build_job_service(settings, clients, clock).create(
        ALICE, JobCreate.model_validate(hook(receiver, at(clock.now()), **job))
    )
    [body] = [
        m["Body"] for m in clients.sqs().receive_message(QueueUrl=settings.queue_url_normal)["Messages"]
    ]
    message = RunMessage.model_validate_json(body)
    assert message.job_id == created.job_id
    executor, lease, outcomes = build_run_executor(settings, clients, clock), RecordingLease(), []
    executor.begin_invocation(LambdaContext())
    thread = threading.Thread(target=lambda: outcomes.append(executor.execute(message, lease)))
    thread.start()
    store = build_store(settings, clients)
    while True:
        run = store.get_run(message.job_id, message.scheduled_for_ms)
        if run is not None and run.lease_until is not None:
            return Working(message, lease, thread, outcomes, run.lease_until)
        time.sleep(0.01)


def test_a_call_longer_than_the_lease_keeps_its_run_through_heartbeats(receiver: WebhookReceiver) -> None:
    """Lease 3 s, a heartbeat every second, a call held until the poller has looked after the
    lease the attempt started with has expired: the run is RUNNING with its lease pushed
    ahead, so the watchdog leaves it alone; the call's result is then recorded. (The call is
    held by a gate, not for a fixed time that a slow poll could outlast.)"""
    call = receiver.hold_until_released()
    with real_time_cloud(run_lease_seconds=3, heartbeat_seconds=1) as (clients, settings):
        clock = SystemClock()
        working = start_working(clients, settings, clock, receiver)
        message = working.message
        working.sleep_past_first_lease(0.5)
        store = build_store(settings, clients)
        running = store.get_run(message.job_id, message.scheduled_for_ms)
        assert running is not None
        assert running.lease_until is not None
        assert (running.status, running.attempt) == (RunStatus.RUNNING, 1)
        assert running.lease_until > clock.now() > working.first_lease_until
        assert running.due_at == running.lease_until  # the watchdog's timer moved with it
        assert watched([build_dispatcher(settings, clients, clock).poll_shard(0)]) == {}
        assert working.thread.is_alive()  # the call was still going on
        call.set()
        working.thread.join()

        assert working.outcomes == [Outcome.SUCCEEDED]
        done = store.get_run(message.job_id, message.scheduled_for_ms)
        assert done is not None
        assert (done.status, done.attempt, done.lease_until) == (RunStatus.SUCCEEDED, 1, None)
        assert len(working.lease.hides) >= 3  # the message's visibility was renewed with the lease
        assert set(working.lease.hides) == {3}
        assert calls(receiver, message.run_id) == ["1"]


def test_a_call_that_outlives_its_lease_unrenewed_loses_the_run_and_its_success_is_reused(
    receiver: WebhookReceiver,
) -> None:
    """The control: lease 1 s and no heartbeat within the call (held until the watchdog has
    looked). The watchdog takes the run over (attempt 2); the slow worker's success cannot
    finish it (fenced by its lease), but it is recorded on the run, so attempt 2 reuses it
    without a second call."""
    call = receiver.hold_until_released()
    with real_time_cloud(run_lease_seconds=1, heartbeat_seconds=60) as (clients, settings):
        clock = SystemClock()
        working = start_working(clients, settings, clock, receiver, retry={"backoff_seconds": 1})
        message = working.message
        working.sleep_past_first_lease(0.3)
        assert watched([build_dispatcher(settings, clients, clock).poll_shard(0)]) == {"retried": 1}
        assert working.thread.is_alive()
        call.set()
        working.thread.join()
        assert working.outcomes == [Outcome.LEASE_LOST]
        assert working.lease.hides == []
        store = build_store(settings, clients)
        retrying = store.get_run(message.job_id, message.scheduled_for_ms)
        assert retrying is not None
        assert (retrying.status, retrying.attempt) == (RunStatus.RETRYING, 2)

        # Attempt 2 on a clock that waits out its backoff at once.
        second = build_run_executor(settings, clients, ManualClock(clock.now()))
        second.begin_invocation(LambdaContext())
        assert second.execute(run_message(retrying)) is Outcome.SUCCEEDED
        done = store.get_run(message.job_id, message.scheduled_for_ms)
        assert done is not None
        assert (done.status, done.attempt) == (RunStatus.SUCCEEDED, 2)
        assert calls(receiver, message.run_id) == ["1"]
