"""`POST /v1/jobs` with an `Idempotency-Key` header (DESIGN §7): a create sent again gets the
job the first one made, through the real handler and Powertools idempotency on moto."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError

from scheduler_core.adapters.dynamodb import DynamoJobStore
from scheduler_core.domain.vocabulary import Priority
from scheduler_core.services.dispatch import Dispatcher
from tests.support.events import BOB
from tests.support.harness import ApiReply, FrozenClock, SchedulerHarness
from tests.support.receiver import WebhookReceiver


def job_body(receiver: WebhookReceiver, clock: FrozenClock, name: str = "report") -> dict[str, Any]:
    at = (clock.now() + timedelta(hours=1)).isoformat()
    return {"name": name, "schedule": {"at": at}, "target": {"type": "HTTP", "url": receiver.url}}


def create(cloud: SchedulerHarness, body: dict[str, Any], key: str | None, **kw: Any) -> ApiReply:
    headers = {"Idempotency-Key": key} if key is not None else {}
    return cloud.call("POST", "/v1/jobs", body, headers=headers, **kw)


def job_ids(cloud: SchedulerHarness, **kw: Any) -> list[str]:
    reply = cloud.call("GET", "/v1/jobs", **kw)
    assert reply.status == 200, reply.body
    return [job["job_id"] for job in reply.body["items"]]


def test_a_create_sent_again_with_its_key_returns_the_same_job_as_it_is_now(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    body = job_body(receiver, clock)
    first = create(cloud, body, "order-42")
    assert first.status == 201, first.body
    assert cloud.call("POST", f"/v1/jobs/{first.body['job_id']}/pause").status == 200

    again = create(cloud, body, "order-42")
    assert again.status == 201, again.body
    assert again.body["job_id"] == first.body["job_id"]
    assert again.body["status"] == "PAUSED"  # the job as it is now, not as it was made
    assert job_ids(cloud) == [first.body["job_id"]]


def test_creates_without_a_key_or_with_different_keys_make_different_jobs(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    body = job_body(receiver, clock)
    made = [create(cloud, body, key).body["job_id"] for key in (None, None, "a", "b")]
    assert len(set(made)) == 4
    assert sorted(job_ids(cloud)) == sorted(made)


def test_a_key_is_the_tenants_own(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    body = job_body(receiver, clock)
    alice = create(cloud, body, "nightly")
    bob = create(cloud, body, "nightly", caller=BOB)
    assert (alice.status, bob.status) == (201, 201)
    assert alice.body["job_id"] != bob.body["job_id"]
    assert job_ids(cloud, caller=BOB) == [bob.body["job_id"]]


def test_the_same_key_with_another_body_is_refused_naming_the_header(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    first = create(cloud, job_body(receiver, clock), "k1")
    assert first.status == 201, first.body
    other = create(cloud, job_body(receiver, clock, name="another"), "k1")
    assert other.status == 422, other.body
    assert other.body["error"]["code"] == "UNPROCESSABLE"
    assert other.body["error"]["details"] == [
        {"field": "Idempotency-Key", "message": "was used with another request body"}
    ]
    assert "use a new key" in other.body["error"]["message"]
    assert job_ids(cloud) == [first.body["job_id"]]


def test_a_create_that_failed_leaves_its_key_free(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    past = job_body(receiver, clock) | {"schedule": {"at": (clock.now() - timedelta(hours=1)).isoformat()}}
    refused = create(cloud, past, "retry-me")
    assert refused.status == 422, refused.body
    fixed = create(cloud, job_body(receiver, clock), "retry-me")
    assert fixed.status == 201, fixed.body
    assert job_ids(cloud) == [fixed.body["job_id"]]


def test_a_key_sent_while_its_first_create_is_in_progress_is_a_409(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second request arrives while the first is still writing its job."""
    body = job_body(receiver, clock)
    meanwhile: list[ApiReply] = []
    put = DynamoJobStore.put_job_if_absent

    def put_while_another_arrives(
        store: DynamoJobStore, job: Any, listed: bool = True, due_listed: bool = False
    ) -> None:
        if not meanwhile:
            meanwhile.append(create(cloud, body, "slow"))
        put(store, job, listed, due_listed)

    monkeypatch.setattr(DynamoJobStore, "put_job_if_absent", put_while_another_arrives)
    first = create(cloud, body, "slow")
    assert first.status == 201, first.body
    [second] = meanwhile
    assert second.status == 409, second.body
    assert second.body["error"]["details"] == [
        {"field": "Idempotency-Key", "message": "is in use by a request in progress"}
    ]
    assert job_ids(cloud) == [first.body["job_id"]]
    assert create(cloud, body, "slow").body["job_id"] == first.body["job_id"]  # done: replayed


@pytest.mark.parametrize("key", ["", "k" * 256])
def test_a_key_of_no_or_too_many_characters_is_a_400_naming_it(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver, key: str
) -> None:
    reply = create(cloud, job_body(receiver, clock), key)
    assert reply.status == 400, reply.body
    assert [detail["field"] for detail in reply.body["error"]["details"]] == ["Idempotency-Key"]
    assert job_ids(cloud) == []


def test_a_key_sent_again_after_its_record_is_gone_finds_the_same_job(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    """The key's job has an id of its own: were its idempotency record gone (a first request
    that failed after writing the job, or timed out and let the record expire), the create
    sent again still makes no second job."""
    body = job_body(receiver, clock)
    first = create(cloud, body, "lost-record")
    ddb = cloud.clients.dynamodb()
    table = cloud.settings.idempotency_table_name
    for item in ddb.scan(TableName=table)["Items"]:
        ddb.delete_item(TableName=table, Key={"id": item["id"]})
    again = create(cloud, body, "lost-record")
    assert again.status == 201, again.body
    assert again.body["job_id"] == first.body["job_id"]
    assert job_ids(cloud) == [first.body["job_id"]]


def test_a_create_whose_claim_fails_after_the_job_is_written_returns_the_job(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The job exists once written: a claim that fails then (an AWS error) leaves its firings
    to the poller instead of answering 500, so a client does not send it again. (A cron job:
    a one-off's create claims its firing in the job's own write.)"""
    soon = job_body(receiver, clock) | {"schedule": {"cron": "* * * * *"}}

    def claim_fails(*_: Any, **__: Any) -> Any:
        raise ClientError(
            {"Error": {"Code": "InternalServerError", "Message": "try later"}}, "TransactWriteItems"
        )

    monkeypatch.setattr(Dispatcher, "claim_and_enqueue", claim_fails)
    made = create(cloud, soon, "claim-fails")
    assert made.status == 201, made.body
    monkeypatch.undo()
    assert cloud.visible_messages(Priority.NORMAL) == 0  # nothing claimed at create
    assert sum(len(report.claimed) for report in cloud.poll()) >= 1  # the poller claims it
    assert create(cloud, soon, "claim-fails").body["job_id"] == made.body["job_id"]


def test_a_one_off_whose_send_fails_after_its_claimed_write_is_sent_by_the_poller(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A one-off due soon is written with its firing claimed, in one write; if its message
    cannot be sent then (SQS failing), the create still answers 201 and the run's timer has
    the poller send it."""
    soon = job_body(receiver, clock) | {"schedule": {"at": (clock.now() + timedelta(seconds=30)).isoformat()}}
    monkeypatch.setattr(Dispatcher, "enqueue", lambda _self, runs: list(runs))  # none sent
    made = create(cloud, soon, "send-fails")
    assert made.status == 201, made.body
    monkeypatch.undo()
    assert made.body["next_fire_at"] is None  # claimed with the job
    assert cloud.visible_messages(Priority.NORMAL) == 0
    assert sum(len(report.claimed) for report in cloud.poll()) == 0  # nothing left to claim
    for _ in range(4):  # until its re-send timer is up
        clock.move_to(clock.now() + timedelta(seconds=30))
        cloud.poll()
        cloud.deliver()
    assert [request.headers["x-scheduler-job-id"] for request in receiver.requests] == [made.body["job_id"]]


def throttle_idempotency_table(cloud: SchedulerHarness, operation: str) -> Any:
    """The idempotency table answering `operation` with throttling (botocore's retries spent)."""
    table = cloud.settings.idempotency_table_name

    def throttled(params: dict[str, Any], **_: Any) -> None:
        if params.get("TableName") == table:
            error = {"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "slow down"}}
            raise ClientError(error, operation)  # type: ignore[arg-type]

    event = f"provide-client-params.dynamodb.{operation}"
    cloud.clients.dynamodb().meta.events.register(event, throttled)
    return lambda: cloud.clients.dynamodb().meta.events.unregister(event, throttled)


def test_a_throttled_idempotency_table_before_the_create_is_a_503_and_makes_no_job(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    undo = throttle_idempotency_table(cloud, "PutItem")
    try:
        reply = create(cloud, job_body(receiver, clock), "busy")
    finally:
        undo()
    assert reply.status == 503, reply.body
    assert "try again" in reply.body["error"]["message"]
    assert job_ids(cloud) == []


def test_a_key_record_not_saved_after_the_create_still_answers_the_job_and_finds_it_again(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    body = job_body(receiver, clock)
    undo = throttle_idempotency_table(cloud, "UpdateItem")  # Powertools saves the success
    try:
        made = create(cloud, body, "saved-late")
    finally:
        undo()
    assert made.status == 201, made.body
    # Its record stays in progress until that invocation's deadline (a minute here) ...
    assert create(cloud, body, "saved-late").status == 409
    clock.advance(61)
    # ... then the create runs again and finds the job by the id the key gives it.
    again = create(cloud, body, "saved-late")
    assert (again.status, again.body["job_id"]) == (201, made.body["job_id"])
    assert job_ids(cloud) == [made.body["job_id"]]
