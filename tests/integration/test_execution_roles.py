"""Execution roles (docs/security.md, "Execution roles"), on moto: a target with `role_arn`
is called with that role's temporary credentials, assumed with ExternalId = the tenant; the
API refuses, at create and change, a role of the account whose trust policy does not let the
worker in for the tenant (403 naming target.role_arn, the same for a role that does not
exist); a role STS will not hand out fails the run at once with what to fix.

What moto does not do, and how the decisions are tested instead: its STS never refuses an
AssumeRole (it checks no trust policy, no external id), so the worker's answer to a refusal
is shown with STS's answer injected through the adapter's seam (`AssumedRoles(sts=...)`, a
botocore Stubber on a real STS client); and the trust policy is judged by our own code at
create (`trust_allows`), which is what the 403 tests exercise. moto does route each call by
the credentials it carries: calls made with an assumed role's keys act in the role's account,
and moto keeps each AssumeRole (role, external id, session, keys), which the tests read."""

from __future__ import annotations

import json
import threading
from datetime import timedelta
from typing import Any
from urllib.parse import parse_qs

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws
from moto.core.botocore_stubber import BotocoreStubber
from moto.sts.models import sts_backends

from scheduler_core.adapters.assumed_roles import AssumedRoles
from scheduler_core.composition import build_run_executor, build_targets
from scheduler_core.domain.execution_roles import external_id
from tests.support.events import ACCOUNT, ALICE, ALICE_TENANT, BOB, BOB_TENANT
from tests.support.harness import REGION, FrozenClock, SchedulerHarness
from tests.support.helpers import a_function

OTHER_ACCOUNT = "111122223333"


# --- set-up: roles, what moto saw -------------------------------------------------------------


def trust_policy(principal: str | list[str], tenant: str | None, **statement: Any) -> dict[str, Any]:
    """A trust policy letting `principal` assume the role, with sts:ExternalId = `tenant`'s
    external id (None: no condition)."""
    allow: dict[str, Any] = {"Effect": "Allow", "Principal": {"AWS": principal}, "Action": "sts:AssumeRole"}
    if tenant is not None:
        allow["Condition"] = {"StringEquals": {"sts:ExternalId": external_id(tenant)}}
    return {"Version": "2012-10-17", "Statement": [allow | statement]}


def a_role(cloud: SchedulerHarness, name: str, policy: dict[str, Any] | None = None) -> str:
    """A role of the stack's account; by default one that trusts the worker for ALICE_TENANT."""
    policy = policy or trust_policy(cloud.settings.worker_role_arn, ALICE_TENANT)
    role = cloud.clients.client("iam").create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(policy))
    return str(role["Role"]["Arn"])


def assumed(account: str = ACCOUNT) -> list[tuple[str, str, str]]:
    """(role, external id, session name) of each AssumeRole moto answered for roles of `account`."""
    return [(r.role_arn, r.external_id, r.session_name) for r in sts_backends[account]["aws"].assumed_roles]


def assumed_keys(account: str = ACCOUNT) -> set[str]:
    return {r.access_key_id for r in sts_backends[account]["aws"].assumed_roles}


class Calls:
    """Every request moto answered: (service, operation, the access key that signed it)."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, str]] = []

    def record(self, request: Any) -> None:
        authorization = str(request.headers.get("Authorization", ""))
        if "Credential=" not in authorization:
            return
        key, _, region_service = authorization.split("Credential=", 1)[1].partition("/")
        service = region_service.split("/")[2]
        target = request.headers.get("X-Amz-Target")
        if target:
            operation = (target.decode() if isinstance(target, bytes) else str(target)).rsplit(".", 1)[-1]
        elif "/invocations" in str(request.url):
            operation = "Invoke"
        else:
            body = request.body.decode() if isinstance(request.body, bytes) else str(request.body or "")
            operation = parse_qs(body).get("Action", [""])[0]
        self.seen.append((service, operation, key))

    def keys_of(self, service: str, operation: str) -> set[str]:
        return {key for named, op, key in self.seen if (named, op) == (service, operation)}


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Calls:
    """What moto answered while the test ran, and with whose keys (moto's request hook)."""
    recorded = Calls()
    answer = BotocoreStubber.process_request

    def process_request(self: BotocoreStubber, request: Any) -> Any:
        recorded.record(request)
        return answer(self, request)

    monkeypatch.setattr(BotocoreStubber, "process_request", process_request)
    return recorded


def due_soon(cloud: SchedulerHarness, target: dict[str, Any], *, caller: str = ALICE, **job: Any) -> Any:
    body = {
        "name": f"as-a-role-{target['type'].lower()}",
        "schedule": {"at": (cloud.clock.now() + timedelta(seconds=2)).isoformat()},
        "target": target,
        "payload": {"order": 7},
        **job,
    }
    return cloud.call("POST", "/v1/jobs", body, caller=caller)


def run_when_due(cloud: SchedulerHarness, clock: FrozenClock, job_id: str) -> dict[str, Any]:
    clock.advance(2)
    cloud.deliver()
    [run] = cloud.runs(job_id)
    return run


def inbox(clients: Any, name: str) -> tuple[str, str]:
    url = clients.sqs().create_queue(QueueName=name)["QueueUrl"]
    arn = clients.sqs().get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    return url, arn


def messages(clients: Any, url: str) -> list[Any]:
    return clients.sqs().receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])  # type: ignore[no-any-return]


# --- delivering as the role ----------------------------------------------------------------------


def test_a_queue_target_is_sent_to_with_the_roles_credentials_not_the_workers(
    cloud: SchedulerHarness, clock: FrozenClock, calls: Calls
) -> None:
    role = a_role(cloud, "alice-delivery")
    url, _ = inbox(cloud.clients, "alice-orders")
    reply = due_soon(cloud, {"type": "SQS", "queue_url": url, "role_arn": role})
    assert reply.status == 201, reply.body
    assert reply.body["target"]["role_arn"] == role

    run = run_when_due(cloud, clock, reply.body["job_id"])

    assert run["status"] == "SUCCEEDED", run
    assert [json.loads(m["Body"]) for m in messages(cloud.clients, url)] == [{"order": 7}]
    assert assumed() == [(role, ALICE_TENANT, f"scheduler-{run['run_id'].replace(':', '-')}")]
    # The SendMessage to the target carried the assumed role's keys, and only those.
    assert calls.keys_of("sqs", "SendMessage") == assumed_keys()


@pytest.mark.parametrize("kind", ["SNS", "EVENTBRIDGE", "LAMBDA"])
def test_topic_bus_and_function_targets_are_called_with_the_roles_credentials(
    cloud: SchedulerHarness, clock: FrozenClock, calls: Calls, kind: str
) -> None:
    """The call to the target is signed with the assumed role's keys; SNS and EventBridge
    hand the message on (to a queue subscribed or targeted), Lambda answers 202."""
    role = a_role(cloud, f"alice-{kind.lower()}")
    url, queue_arn = inbox(cloud.clients, f"alice-{kind.lower()}-inbox")
    with mock_aws(config={"lambda": {"use_docker": False}}):  # nested: the cloud's state stays
        if kind == "SNS":
            topic = cloud.clients.sns().create_topic(Name="alice-reports")["TopicArn"]
            cloud.clients.sns().subscribe(TopicArn=topic, Protocol="sqs", Endpoint=queue_arn)
            target: dict[str, Any] = {"type": "SNS", "topic_arn": topic}
            service, operation = "sns", "Publish"
        elif kind == "EVENTBRIDGE":
            events = cloud.clients.events()
            events.create_event_bus(Name="alice-bus")
            events.put_rule(
                Name="all", EventBusName="alice-bus", EventPattern=json.dumps({"source": ["com.alice"]})
            )
            events.put_targets(
                Rule="all", EventBusName="alice-bus", Targets=[{"Id": "inbox", "Arn": queue_arn}]
            )
            target = {
                "type": "EVENTBRIDGE",
                "event_bus_name": "alice-bus",
                "source": "com.alice",
                "detail_type": "T",
            }
            service, operation = "events", "PutEvents"
        else:
            target = {"type": "LAMBDA", "function_arn": a_function(cloud, "alice-report")}
            service, operation = "lambda", "Invoke"
        reply = due_soon(cloud, target | {"role_arn": role})
        assert reply.status == 201, reply.body

        run = run_when_due(cloud, clock, reply.body["job_id"])

    assert run["status"] == "SUCCEEDED", run
    assert [(arn, tenant) for arn, tenant, _ in assumed()] == [(role, ALICE_TENANT)]
    assert calls.keys_of(service, operation) == assumed_keys()
    if kind != "LAMBDA":
        [message] = messages(cloud.clients, url)
        body = json.loads(message["Body"])
        delivered = json.loads(body["Message"]) if kind == "SNS" else body["detail"]
        assert delivered["order"] == 7


def test_a_role_of_another_account_reaches_that_accounts_queue(
    cloud: SchedulerHarness, clock: FrozenClock
) -> None:
    """moto acts in the account of the keys a call carries: the queue exists only in the
    role's account, so only a call made as the role can reach it. (A role of another account
    is accepted at create: its trust policy cannot be read from here; STS checks it.)"""
    role = f"arn:aws:iam::{OTHER_ACCOUNT}:role/alice-delivery"
    theirs = (
        boto3.session.Session(region_name=REGION)
        .client("sts")
        .assume_role(
            RoleArn=f"arn:aws:iam::{OTHER_ACCOUNT}:role/setup", RoleSessionName="setup", ExternalId="setup"
        )["Credentials"]
    )
    their_clients = cloud.clients.acting_as(
        theirs["AccessKeyId"], theirs["SecretAccessKey"], theirs["SessionToken"]
    )
    url, _ = inbox(their_clients, "alice-orders")
    assert url.startswith(f"https://sqs.{REGION}.amazonaws.com/{OTHER_ACCOUNT}/")

    reply = due_soon(cloud, {"type": "SQS", "queue_url": url, "role_arn": role})
    assert reply.status == 201, reply.body
    run = run_when_due(cloud, clock, reply.body["job_id"])

    assert run["status"] == "SUCCEEDED", run
    assert [json.loads(m["Body"]) for m in messages(their_clients, url)] == [{"order": 7}]
    assert [(arn, tenant) for arn, tenant, _ in assumed(OTHER_ACCOUNT) if arn == role] == [
        (role, ALICE_TENANT)
    ]


# --- credentials kept, refreshed ----------------------------------------------------------------


def test_credentials_are_reused_for_the_roles_runs_and_refreshed_near_their_expiry(
    cloud: SchedulerHarness, clock: FrozenClock
) -> None:
    """One AssumeRole for every run within the credentials' hour but its last 5 minutes; then
    another (the clock is the worker's, injected; moto's credentials last the hour asked)."""
    role = a_role(cloud, "alice-delivery")
    url, _ = inbox(cloud.clients, "alice-orders")
    start = clock.now()

    def one_run_at(minutes: float) -> None:
        clock.move_to(start + timedelta(minutes=minutes))
        job = due_soon(cloud, {"type": "SQS", "queue_url": url, "role_arn": role}).body
        assert run_when_due(cloud, clock, job["job_id"])["status"] == "SUCCEEDED"

    one_run_at(0)  # assumed 2 s in: the credentials expire at 60 min 2 s
    one_run_at(1)
    one_run_at(54)  # 6 minutes left: kept
    assert len(assumed()) == 1

    one_run_at(56)  # 4 minutes left: refreshed

    assert len(assumed()) == 2
    assert len(messages(cloud.clients, url)) == 4


def test_threads_delivering_for_one_role_at_once_assume_it_once(
    cloud: SchedulerHarness, clock: FrozenClock
) -> None:
    """The worker runs a batch's records in threads: one AssumeRole per role, not one each."""
    roles = AssumedRoles(cloud.clients, clock)
    role = a_role(cloud, "alice-delivery")
    got: list[Any] = []
    threads = [
        threading.Thread(target=lambda n=n: got.append(roles.clients(role, ALICE_TENANT, f"job:{n}")))
        for n in range(16)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert len(assumed()) == 1
    assert len({id(clients) for clients in got}) == 1
    # Another tenant naming the same role is another external id: assumed apart.
    roles.clients(role, BOB_TENANT, "job:bob")
    assert [tenant for _, tenant, _ in assumed()] == [ALICE_TENANT, BOB_TENANT]


# --- refused at create and change: the trust-policy check (the PassRole equivalent) -------------


def refusal_403(reply: Any) -> str:
    assert reply.status == 403, reply.body
    error = reply.body["error"]
    assert error["code"] == "FORBIDDEN"
    [detail] = error["details"]
    assert detail["field"] == "target.role_arn"
    return str(detail["message"])


def expected_refusal(cloud: SchedulerHarness, role: str, tenant: str = ALICE_TENANT) -> str:
    return (
        f"the scheduler could not assume {role}: its trust policy must let {cloud.settings.worker_role_arn} "
        f"assume it (sts:AssumeRole) with sts:ExternalId = {external_id(tenant)}"
    )


@pytest.mark.parametrize(
    "policy",
    [
        lambda worker: trust_policy(f"arn:aws:iam::{ACCOUNT}:role/someone-else", ALICE_TENANT),
        lambda worker: trust_policy(worker, BOB_TENANT),
        lambda worker: trust_policy(worker, None),
        lambda worker: trust_policy(worker, ALICE_TENANT, Effect="Deny"),
        lambda worker: trust_policy("*", ALICE_TENANT),
        lambda worker: {
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"AWS": worker},
                    "Action": "sts:AssumeRole",
                    "Condition": {"StringLike": {"sts:ExternalId": "*"}},
                }
            ]
        },
    ],
    ids=[
        "trusts another principal",
        "wrong external id (another tenant's)",
        "no external id condition",
        "a Deny",
        "anyone",
        "any external id",
    ],
)
def test_a_role_that_does_not_trust_the_worker_for_this_tenant_is_a_403(
    cloud: SchedulerHarness, policy: Any
) -> None:
    role = a_role(cloud, "not-for-alice", policy(cloud.settings.worker_role_arn))
    url, _ = inbox(cloud.clients, "alice-orders")

    message = refusal_403(due_soon(cloud, {"type": "SQS", "queue_url": url, "role_arn": role}))

    assert message == expected_refusal(cloud, role)


def test_a_role_that_does_not_exist_is_the_same_403(cloud: SchedulerHarness) -> None:
    """Never says whether the role exists: the answer is word for word the one for a role
    that exists but does not trust the worker."""
    missing = f"arn:aws:iam::{ACCOUNT}:role/never-made"
    under_another_path = f"arn:aws:iam::{ACCOUNT}:role/team/alice-delivery"
    a_role(cloud, "alice-delivery")  # exists, at path /, so the ARN with /team/ is no role
    url, _ = inbox(cloud.clients, "alice-orders")

    for role in (missing, under_another_path):
        message = refusal_403(due_soon(cloud, {"type": "SQS", "queue_url": url, "role_arn": role}))
        assert message == expected_refusal(cloud, role)


def test_another_tenant_cannot_use_alices_role(cloud: SchedulerHarness) -> None:
    """The confused deputy, refused: Bob names Alice's role; its trust policy names Alice's
    external id, not Bob's."""
    role = a_role(cloud, "alice-delivery")
    url, _ = inbox(cloud.clients, "alice-orders")

    message = refusal_403(due_soon(cloud, {"type": "SQS", "queue_url": url, "role_arn": role}, caller=BOB))

    assert message == expected_refusal(cloud, role, BOB_TENANT)
    assert due_soon(cloud, {"type": "SQS", "queue_url": url, "role_arn": role}).status == 201


@pytest.mark.parametrize(
    "policy",
    [
        lambda worker: trust_policy(f"arn:aws:iam::{ACCOUNT}:root", ALICE_TENANT),
        lambda worker: trust_policy(
            [worker, "arn:aws:iam::444455556666:root"],
            ALICE_TENANT,
            Action=["sts:AssumeRole", "sts:TagSession"],
        ),
        lambda worker: {
            "Statement": {
                "Effect": "Allow",
                "Principal": {"AWS": worker},
                "Action": "sts:*",
                "Condition": {
                    "StringEquals": {"STS:EXTERNALID": [external_id(BOB_TENANT), external_id(ALICE_TENANT)]}
                },
            }
        },
    ],
    ids=["the worker's account", "a list of principals and actions", "a list of tenants"],
)
def test_trust_policies_written_other_ways_that_let_the_worker_in_are_accepted(
    cloud: SchedulerHarness, policy: Any
) -> None:
    role = a_role(cloud, "alice-delivery", policy(cloud.settings.worker_role_arn))
    url, _ = inbox(cloud.clients, "alice-orders")

    assert due_soon(cloud, {"type": "SQS", "queue_url": url, "role_arn": role}).status == 201


def test_a_patch_to_an_untrusted_role_is_a_403_and_changes_nothing(cloud: SchedulerHarness) -> None:
    role = a_role(cloud, "alice-delivery")
    untrusted = a_role(cloud, "bobs-role", trust_policy(cloud.settings.worker_role_arn, BOB_TENANT))
    url, _ = inbox(cloud.clients, "alice-orders")
    job = due_soon(cloud, {"type": "SQS", "queue_url": url, "role_arn": role}).body

    reply = cloud.call(
        "PATCH",
        f"/v1/jobs/{job['job_id']}",
        {"target": {"type": "SQS", "queue_url": url, "role_arn": untrusted}},
    )

    assert refusal_403(reply) == expected_refusal(cloud, untrusted)
    after = cloud.call("GET", f"/v1/jobs/{job['job_id']}").body
    assert (after["target"]["role_arn"], after["version"]) == (role, job["version"])


def test_a_workflow_tasks_untrusted_role_is_a_403_naming_the_task(cloud: SchedulerHarness) -> None:
    untrusted = a_role(cloud, "bobs-role", trust_policy(cloud.settings.worker_role_arn, BOB_TENANT))
    url, _ = inbox(cloud.clients, "alice-orders")
    tasks = [{"task_id": "a", "target": {"type": "SQS", "queue_url": url, "role_arn": untrusted}}]

    reply = cloud.call("POST", "/v1/workflows", {"name": "flow", "tasks": tasks})

    assert reply.status == 403, reply.body
    [detail] = reply.body["error"]["details"]
    assert detail == {"field": "tasks[0].target.role_arn", "message": expected_refusal(cloud, untrusted)}


# --- neither a role nor a shared target -------------------------------------------------------------


def test_a_target_with_neither_a_role_nor_a_listed_arn_is_a_400_that_says_nothing_of_the_resource(
    cloud: SchedulerHarness,
) -> None:
    """A deployment offering no shared queue (the default): the refusal is the same for a
    queue that exists and one that does not, bar the ARN the caller sent."""
    bare = SchedulerHarness(
        cloud.clients, cloud.settings.model_copy(update={"target_queue_arns": ()}), cloud.clock
    )
    existing, _ = inbox(cloud.clients, "someone-elses-queue")
    missing = existing.replace("someone-elses-queue", "no-such-queue")

    answers = []
    for url in (existing, missing):
        reply = due_soon(bare, {"type": "SQS", "queue_url": url})
        assert reply.status == 400, reply.body
        [detail] = reply.body["error"]["details"]
        assert detail["field"] == "target.role_arn"
        answers.append(detail["message"].replace(url.rsplit("/", 1)[-1], "<queue>"))

    assert answers[0] == answers[1]
    assert "Give role_arn, a role of yours the scheduler may assume" in answers[0]
    assert "CDK context `target_queue_arns`" in answers[0]


def test_an_http_target_takes_no_role(cloud: SchedulerHarness) -> None:
    reply = due_soon(cloud, {"type": "HTTP", "url": "https://example.com/", "role_arn": a_role(cloud, "r")})

    assert reply.status == 400
    assert [d["field"] for d in reply.body["error"]["details"]] == ["target.role_arn"]


@pytest.mark.parametrize(
    "role",
    [
        "arn:aws:iam::123456789012:user/alice",
        "arn:aws:iam:us-east-1:123456789012:role/r",
        "arn:aws:sts::123456789012:assumed-role/r/s",
        "arn:aws:iam::12345:role/r",
        "arn:aws:iam::123456789012:role/with space",
        "role/r",
    ],
)
def test_a_malformed_role_arn_is_a_400_naming_it(cloud: SchedulerHarness, role: str) -> None:
    reply = due_soon(
        cloud, {"type": "SNS", "topic_arn": f"arn:aws:sns:{REGION}:{ACCOUNT}:t", "role_arn": role}
    )

    assert reply.status == 400, reply.body
    assert [d["field"] for d in reply.body["error"]["details"]] == ["target.role_arn"]


# --- refused at delivery: STS's answer, injected through the adapter's seam -------------------------


def worker_with_sts_answering(cloud: SchedulerHarness, error_code: str, status: int) -> Stubber:
    """The harness's worker, its AssumeRole answered by a Stubber with `error_code` (moto's
    STS never refuses). Everything else is as deployed."""
    sts = boto3.session.Session(region_name=REGION).client("sts")
    stubber = Stubber(sts)
    for _ in range(3):
        stubber.add_client_error("assume_role", error_code, "refused by the test's STS", status)
    stubber.activate()
    roles = AssumedRoles(cloud.clients, cloud.clock, worker_role_arn=cloud.settings.worker_role_arn, sts=sts)
    targets = build_targets(cloud.settings, cloud.clients, cloud.clock, roles=roles)
    cloud.executor = build_run_executor(
        cloud.settings, cloud.clients, cloud.clock, cloud.worker_store, targets, cloud.worker_lifecycle
    )
    return stubber


def test_access_denied_by_sts_fails_the_run_at_once_saying_what_to_fix(
    cloud: SchedulerHarness, clock: FrozenClock
) -> None:
    """Not trusted, wrong external id, no such role: STS says AccessDenied for each, and the
    run says what the trust policy must hold, nothing about the target."""
    role = a_role(cloud, "alice-delivery")
    url, _ = inbox(cloud.clients, "alice-orders")
    job = due_soon(cloud, {"type": "SQS", "queue_url": url, "role_arn": role}, retry={"max_attempts": 3}).body
    worker_with_sts_answering(cloud, "AccessDenied", 403)

    run = run_when_due(cloud, clock, job["job_id"])

    assert (run["status"], run["attempt"]) == ("FAILED", 1), run
    assert run["error"] == expected_refusal(cloud, role)
    assert messages(cloud.clients, url) == []


def test_a_throttled_assume_is_tried_again(cloud: SchedulerHarness, clock: FrozenClock) -> None:
    role = a_role(cloud, "alice-delivery")
    url, _ = inbox(cloud.clients, "alice-orders")
    job = due_soon(
        cloud,
        {"type": "SQS", "queue_url": url, "role_arn": role},
        retry={"max_attempts": 2, "backoff_seconds": 1},
    ).body
    worker_with_sts_answering(cloud, "Throttling", 400)

    clock.advance(2)
    cloud.deliver_batches()  # the first attempt, throttled: a retry is sent

    [run] = cloud.runs(job["job_id"])
    assert (run["status"], run["attempt"]) == ("RETRYING", 2), run
    assert run["error"] == f"the scheduler could not assume {role}: STS Throttling: refused by the test's STS"
