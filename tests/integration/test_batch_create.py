"""`POST /v1/jobs/batch` (docs/api.md, "Create jobs in a batch") through the real handler on
moto: up to 100 jobs in one request, each made as `POST /v1/jobs` makes one, every one
checked before any is written, one quota write per counter, one send for the runs claimed
at creation, and an Idempotency-Key that makes a batch safe to send again."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import boto3
import pytest
from moto import mock_aws

from scheduler_core.adapters.aws import AwsClients
from scheduler_core.domain import keys
from scheduler_core.domain.entities import Job
from scheduler_core.domain.vocabulary import Priority
from tests.support.events import ALICE_TENANT, BOB
from tests.support.harness import ApiReply, FrozenClock, SchedulerHarness, create_scheduler_resources
from tests.support.helpers import iso
from tests.support.receiver import WebhookReceiver

BATCH = "/v1/jobs/batch"


def one_off(receiver: WebhookReceiver, at: datetime, name: str = "renewal") -> dict[str, Any]:
    return {"name": name, "schedule": {"at": iso(at)}, "target": {"type": "HTTP", "url": receiver.url}}


def batch(cloud: SchedulerHarness, jobs: list[dict[str, Any]], key: str | None = None, **kw: Any) -> ApiReply:
    headers = {"Idempotency-Key": key} if key is not None else {}
    return cloud.call("POST", BATCH, {"jobs": jobs}, headers=headers, **kw)


def listed(cloud: SchedulerHarness, **kw: Any) -> list[str]:
    reply = cloud.call("GET", "/v1/jobs?limit=100", **kw)
    assert reply.status == 200, reply.body
    return sorted(job["job_id"] for job in reply.body["items"])


def minute_count(cloud: SchedulerHarness, at: datetime, tenant: str = ALICE_TENANT) -> int:
    """The tenant's one-off count for `at`'s minute, as stored."""
    item = (
        cloud.clients.dynamodb()
        .get_item(
            TableName=cloud.settings.jobs_table_name,
            Key={"pk": {"S": keys.quota_pk(tenant)}, "sk": {"S": f"MINUTE#{at:%Y%m%d%H%M}"}},
        )
        .get("Item")
    )
    return 0 if item is None else int(item["used"]["N"])


@pytest.fixture
def calls(cloud: SchedulerHarness) -> Iterator[list[str]]:
    """Each AWS call the scheduler's clients make from here on, as `service.Operation`."""
    made: list[str] = []

    def count(event_name: str, **_: Any) -> None:
        made.append(".".join(event_name.split(".")[1:3]))

    for client in (cloud.clients.dynamodb(), cloud.clients.sqs()):
        client.meta.events.register("before-call", count)
    yield made
    for client in (cloud.clients.dynamodb(), cloud.clients.sqs()):
        client.meta.events.unregister("before-call", count)


def test_a_batch_makes_each_job_in_order_as_a_create_would_and_its_one_offs_fire(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    soon, later = clock.now() + timedelta(seconds=30), clock.now() + timedelta(hours=2)
    hourly = {
        "name": "hourly",
        "schedule": {"cron": "0 * * * *"},
        "target": {"type": "HTTP", "url": receiver.url},
    }
    reply = batch(cloud, [one_off(receiver, soon, "soon"), one_off(receiver, later, "later"), hourly])

    assert reply.status == 201, reply.body
    made = reply.body["jobs"]
    assert [job["name"] for job in made] == ["soon", "later", "hourly"]
    assert len({job["job_id"] for job in made}) == 3
    for job in made:  # each answered as GET answers it
        assert cloud.call("GET", f"/v1/jobs/{job['job_id']}").body == job
    assert made[0]["next_fire_at"] is None  # claimed in its create, as a single create claims it
    assert made[1]["next_fire_at"] == iso(later)
    top_of_the_hour = (clock.now() + timedelta(hours=1)).replace(minute=0, second=0, microsecond=0)
    assert made[2]["next_fire_at"] == iso(top_of_the_hour)
    assert listed(cloud) == sorted(job["job_id"] for job in made)

    clock.move_to(soon)
    assert cloud.deliver() == 1
    clock.move_to(later - timedelta(seconds=90))
    cloud.poll()
    clock.move_to(later)
    cloud.deliver()
    names = {request.headers["x-scheduler-job-id"] for request in receiver.requests}
    assert {made[0]["job_id"], made[1]["job_id"]} <= names
    for job in made[:2]:
        assert cloud.call("GET", f"/v1/jobs/{job['job_id']}").body["status"] == "COMPLETED"


def test_a_batch_takes_each_minutes_count_in_one_write_and_sends_its_claimed_runs_at_once(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver, calls: list[str]
) -> None:
    assert cloud.jobs.signing is not None
    cloud.jobs.signing.ensure(ALICE_TENANT)  # the tenant's signing secret, made once, before
    calls.clear()
    soon = clock.now() + timedelta(seconds=30)
    reply = batch(cloud, [one_off(receiver, soon + timedelta(milliseconds=i), f"j{i}") for i in range(25)])

    assert reply.status == 201, reply.body
    # Each job's own conditional write, and the due listing that holds their firings.
    assert calls.count("dynamodb.PutItem") == 26
    # The minute's count, once for all 25, and the one item that lists them all.
    assert calls.count("dynamodb.UpdateItem") == 2
    assert calls.count("sqs.SendMessageBatch") == 3  # 25 claimed runs, 10 a call
    assert "sqs.SendMessage" not in calls
    assert minute_count(cloud, soon) == 25
    clock.move_to(soon + timedelta(seconds=1))
    assert cloud.deliver() == 25
    assert len(receiver.requests) == 25


def test_one_refused_job_refuses_the_batch_naming_it_and_nothing_is_written(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    at = clock.now() + timedelta(hours=1)
    queue = {"type": "SQS", "queue_url": cloud.settings.queue_url(Priority.NORMAL)}
    jobs = [one_off(receiver, at, "fine"), {**one_off(receiver, at, "own-queue"), "target": queue}]

    reply = batch(cloud, jobs)

    assert reply.status == 400, reply.body
    fields = [detail["field"] for detail in reply.body["error"]["details"]]
    assert fields, reply.body
    assert all(field.startswith("jobs[1].") for field in fields), reply.body
    assert reply.body["error"]["message"].startswith("jobs[1]: ")
    assert listed(cloud) == []
    assert minute_count(cloud, at) == 0


@pytest.mark.parametrize(
    ("jobs", "field"),
    [
        ([], "jobs"),
        (
            [{"name": "no-schedule", "target": {"type": "HTTP", "url": "https://example.com/h"}}],
            "jobs[0].schedule",
        ),
        ("not a list", "jobs"),
    ],
)
def test_a_malformed_batch_is_a_400_naming_the_field(cloud: SchedulerHarness, jobs: Any, field: str) -> None:
    reply = cloud.call("POST", BATCH, {"jobs": jobs})
    assert reply.status == 400, reply.body
    assert field in [detail["field"] for detail in reply.body["error"]["details"]], reply.body
    assert listed(cloud) == []


def test_more_than_100_jobs_is_a_400_saying_so(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    at = clock.now() + timedelta(hours=1)
    reply = batch(cloud, [one_off(receiver, at, f"j{i}") for i in range(101)])
    assert reply.status == 400, reply.body
    [detail] = reply.body["error"]["details"]
    assert detail["field"] == "jobs"
    assert "100" in detail["message"]
    assert listed(cloud) == []


def test_a_batch_sent_again_with_its_key_makes_nothing_more(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    at = clock.now() + timedelta(hours=1)
    jobs = [one_off(receiver, at, f"j{i}") for i in range(3)]
    first = batch(cloud, jobs, key="december-renewals")
    assert first.status == 201, first.body
    ids = [job["job_id"] for job in first.body["jobs"]]
    assert cloud.call("POST", f"/v1/jobs/{ids[1]}/pause").status == 200

    again = batch(cloud, jobs, key="december-renewals")

    assert again.status == 201, again.body
    assert [job["job_id"] for job in again.body["jobs"]] == ids
    assert again.body["jobs"][1]["status"] == "PAUSED"  # as they are now
    assert listed(cloud) == sorted(ids)
    assert minute_count(cloud, at) == 3
    other = batch(cloud, jobs[:2], key="december-renewals")
    assert other.status == 422, other.body
    assert other.body["error"]["details"][0]["field"] == "Idempotency-Key"
    # Another tenant's key of the same name is its own.
    assert batch(cloud, jobs, key="december-renewals", caller=BOB).status == 201
    assert listed(cloud) == sorted(ids)


def fail_once(cloud: SchedulerHarness, monkeypatch: pytest.MonkeyPatch, name: str) -> list[str]:
    """The api's write of the job named `name` fails once (a throttle botocore gave up on);
    the ids it failed for."""
    put = cloud.api_store.put_job_if_absent
    failed: list[str] = []

    def throttled_once(job: Job, listed: bool = True, due_listed: bool = False) -> bool:
        if job.name == name and not failed:
            failed.append(job.job_id)
            raise RuntimeError("ProvisionedThroughputExceededException, retries exhausted")
        return put(job, listed, due_listed)

    monkeypatch.setattr(cloud.api_store, "put_job_if_absent", throttled_once)
    return failed


def test_a_batch_that_failed_part_way_sent_again_with_its_key_makes_only_what_is_missing(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = clock.now() + timedelta(hours=1)
    jobs = [one_off(receiver, at, f"j{i}") for i in range(5)]
    throttled = fail_once(cloud, monkeypatch, "j3")
    failed = batch(cloud, jobs, key="k")
    assert failed.status == 500, failed.body
    assert len(listed(cloud)) == 4  # the others were written
    assert minute_count(cloud, at) == 4  # the failed one's count given back

    again = batch(cloud, jobs, key="k")

    assert again.status == 201, again.body
    ids = [job["job_id"] for job in again.body["jobs"]]
    assert ids[3] == throttled[0]
    assert listed(cloud) == sorted(ids)
    assert minute_count(cloud, at) == 5


def test_a_batch_over_a_minutes_room_is_refused_whole_saying_how_many_it_asked(
    clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    with mock_aws():
        cloud = limited_cloud(clock, per_minute=4)
        at = clock.now() + timedelta(hours=1)
        assert batch(cloud, [one_off(receiver, at, "a"), one_off(receiver, at, "b")]).status == 201

        reply = batch(cloud, [one_off(receiver, at, f"j{i}") for i in range(3)])

        assert reply.status == 429, reply.body
        [detail] = reply.body["error"]["details"]
        assert detail["field"] == "tenant_max_firings_per_minute"
        assert "this batch asks for 3 of it" in detail["message"]
        assert len(listed(cloud)) == 2
        assert minute_count(cloud, at) == 2
        # Two more fit, in one batch or across minutes.
        later = at + timedelta(minutes=1)
        fits = [one_off(receiver, at, "c"), one_off(receiver, at, "d"), one_off(receiver, later, "e")]
        assert batch(cloud, fits).status == 201
        assert minute_count(cloud, at) == 4
        assert minute_count(cloud, later) == 1


def test_the_audit_line_of_a_batch_names_every_job_it_made(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines: list[dict[str, Any]] = []
    assert cloud.jobs.audit is not None
    monkeypatch.setattr(cloud.jobs.audit, "record", lines.append)
    at = clock.now() + timedelta(hours=1)
    reply = batch(cloud, [one_off(receiver, at, f"j{i}") for i in range(3)])
    assert reply.status == 201, reply.body
    [line] = lines
    assert line["action"] == "POST /v1/jobs/batch"
    assert line["ids"]["job_ids"] == [job["job_id"] for job in reply.body["jobs"]]


def limited_cloud(clock: FrozenClock, per_minute: int) -> SchedulerHarness:
    """The scheduler (within `mock_aws`) with `per_minute` one-offs a minute per tenant."""
    clients = AwsClients(boto3.session.Session(region_name="us-east-1"))
    settings = create_scheduler_resources(clients).model_copy(
        update={"tenant_max_firings_per_minute": per_minute}
    )
    return SchedulerHarness(clients, settings, clock)


def test_a_batch_sent_again_after_failing_part_way_at_its_minutes_limit_is_counted_for_the_missing_only(
    clock: FrozenClock, receiver: WebhookReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    with mock_aws():
        cloud = limited_cloud(clock, per_minute=5)
        at = clock.now() + timedelta(hours=1)
        jobs = [one_off(receiver, at, f"j{i}") for i in range(5)]
        fail_once(cloud, monkeypatch, "j3")
        assert batch(cloud, jobs, key="k").status == 500
        assert minute_count(cloud, at) == 4

        again = batch(cloud, jobs, key="k")  # the minute's room is one: the one missing

        assert again.status == 201, again.body
        assert minute_count(cloud, at) == 5
        assert len(listed(cloud)) == 5


def test_a_key_sent_again_with_other_jobs_after_a_part_way_failure_makes_those_jobs(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The failed request's record is gone (Powertools drops it), so nothing refuses the
    other body: the ids follow each job's body too, and the new jobs are made, not the
    first request's answered for them."""
    at = clock.now() + timedelta(hours=1)
    fail_once(cloud, monkeypatch, "j2")
    first = [one_off(receiver, at, f"j{i}") for i in range(3)]
    assert batch(cloud, first, key="k").status == 500
    made_before = listed(cloud)
    assert len(made_before) == 2  # j0, j1

    other = [one_off(receiver, at, f"other{i}") for i in range(3)]
    reply = batch(cloud, other, key="k")

    assert reply.status == 201, reply.body
    assert [job["name"] for job in reply.body["jobs"]] == ["other0", "other1", "other2"]
    assert not {job["job_id"] for job in reply.body["jobs"]} & set(made_before)
    assert len(listed(cloud)) == 5  # what the failed request made stays


def test_the_jobs_a_failed_batch_wrote_are_claimed_and_audited(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines: list[dict[str, Any]] = []
    assert cloud.jobs.audit is not None
    monkeypatch.setattr(cloud.jobs.audit, "record", lines.append)
    every_minute = {**one_off(receiver, clock.now(), "every-minute"), "schedule": {"rate": "1 minutes"}}
    fail_once(cloud, monkeypatch, "j1")

    failed = batch(cloud, [every_minute, one_off(receiver, clock.now() + timedelta(hours=1), "j1")], key="k")

    assert failed.status == 500, failed.body
    [made] = listed(cloud)
    assert cloud.runs(made), "its firing within the lookahead is claimed, as a create claims it"
    [line] = lines
    assert (line["action"], line["status"]) == ("POST /v1/jobs/batch", 500)
    assert line["ids"]["job_ids"] == [made]


def test_a_batch_larger_than_a_minutes_limit_is_refused_without_a_write(
    clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    with mock_aws():
        cloud = limited_cloud(clock, per_minute=4)
        at = clock.now() + timedelta(hours=1)

        reply = batch(cloud, [one_off(receiver, at, f"j{i}") for i in range(5)])

        assert reply.status == 429, reply.body
        assert "this batch asks for 5 of it" in reply.body["error"]["details"][0]["message"]
        assert minute_count(cloud, at) == 0
        assert listed(cloud) == []


def test_a_batch_refused_for_one_minute_takes_no_count_of_another(
    clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    with mock_aws():
        cloud = limited_cloud(clock, per_minute=2)
        full, free = clock.now() + timedelta(hours=1), clock.now() + timedelta(hours=2)
        assert batch(cloud, [one_off(receiver, full, "a"), one_off(receiver, full, "b")]).status == 201

        reply = batch(cloud, [one_off(receiver, free, "c"), one_off(receiver, full, "d")])

        assert reply.status == 429, reply.body
        assert (minute_count(cloud, full), minute_count(cloud, free)) == (2, 0)
        assert len(listed(cloud)) == 2


class FailingRunner:
    """A runner that runs the first item, then cannot start another thread."""

    def map(self, work: Any, items: Any) -> list[Any]:
        first, *_ = items
        work(first)
        raise RuntimeError("can't start new thread")


def test_a_runner_that_fails_part_way_keeps_every_count_and_answers_what_it_made(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cloud.jobs, "_runner", FailingRunner())
    at = clock.now() + timedelta(hours=1)

    reply = batch(cloud, [one_off(receiver, at, f"j{i}") for i in range(3)], key="k")

    assert reply.status == 500, reply.body
    assert len(listed(cloud)) == 1
    assert minute_count(cloud, at) == 3  # the runner's writes may yet land: none given back


def test_a_keyed_batch_reads_which_of_its_jobs_exist_eventually_consistent_and_its_replay_consistently(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    """The read before a keyed batch's writes costs half the read units (a job it misses
    is found by its put's condition); the answer to a batch sent again after it succeeded
    lists its jobs and must not miss one."""
    reads: list[bool] = []

    def note(params: dict[str, Any], **_: Any) -> None:
        reads.extend(request["ConsistentRead"] for request in params["RequestItems"].values())

    cloud.clients.dynamodb().meta.events.register("provide-client-params.dynamodb.BatchGetItem", note)
    jobs = [one_off(receiver, clock.now() + timedelta(hours=1), f"j{i}") for i in range(3)]
    assert batch(cloud, jobs, key="k").status == 201
    assert reads == [False]
    assert batch(cloud, jobs, key="k").status == 201
    assert reads == [False, True]
