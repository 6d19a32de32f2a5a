"""Every DynamoDB and SQS call a function makes is allowed by that function's own IAM role.

Why this test exists: moto does not check IAM. A function calling an action its role was
never granted passes every test on moto and fails in AWS with AccessDenied; the worker's
`BatchGetItem`, with its role granted only `GetItem`, went unnoticed that way. Here the
flows of the real services run on moto, each function (api, poller, worker) with an
`AwsClients` of its own on a boto3 session of its own, and a hook on that session records
every call the function makes: the operation, the IAM actions it needs (a
`TransactWriteItems` needs the item actions it carries; a batch of SQS messages the
action of one message) and the table, index or queue it needs them on. The synthesized
template's policies of that function's role must allow each one there.

The event source mappings' receives and deletes are AWS's, not the worker's: the test's
stand-in for them uses a session of its own, whose calls are not checked here
(`test_iam` checks the mappings' grants).
"""

from __future__ import annotations

import json
import threading
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.model import OperationModel
from freezegun import freeze_time
from moto import mock_aws

from functions.api import handler as api_function
from functions.poller import handler as poller_function
from functions.worker import handler as worker_function
from infra.config import PRIORITIES
from infra.job_store import DUE_INDEX, TENANT_INDEX
from scheduler_core.adapters.aws import AwsClients
from scheduler_core.composition import (
    build_dispatcher,
    build_job_service,
    build_lifecycle,
    build_run_executor,
    build_store,
    build_targets,
)
from scheduler_core.domain.messages import RunMessage
from scheduler_core.domain.vocabulary import Priority
from scheduler_core.services import workflow_runs
from scheduler_core.services.dispatch import Dispatcher
from scheduler_core.services.execution import RunExecutor
from scheduler_core.services.workflow_runs import WorkflowRunner
from scheduler_core.settings import Settings
from tests.infra.conftest import Synthesis
from tests.infra.grants import arn_of, grants_of
from tests.support.events import ALICE_TENANT, LambdaContext, api_event, sqs_event
from tests.support.faults import DiesAtTheCall, WorkerDied
from tests.support.harness import (
    IDEMPOTENCY_TABLE,
    JOBS_TABLE,
    FrozenClock,
    SkewedClock,
    create_scheduler_resources,
)
from tests.support.helpers import iso
from tests.support.receiver import WebhookReceiver

FUNCTIONS = ("api", "poller", "worker")
REGION = "us-east-1"
START = "2026-11-21T10:00:30Z"
# As tests/integration/conftest.py: our code reads time through the injected clock only.
NOT_FROZEN = ["scheduler_core", "functions", "pydantic", "aws_lambda_powertools"]

# What IAM authorizes a call by, where it is not the operation's own name.
TRANSACT_WRITE_ACTIONS = {
    "Put": "dynamodb:PutItem",
    "Update": "dynamodb:UpdateItem",
    "Delete": "dynamodb:DeleteItem",
    "ConditionCheck": "dynamodb:ConditionCheckItem",
}
SQS_BATCH_ACTIONS = {
    "SendMessageBatch": "sqs:SendMessage",
    "DeleteMessageBatch": "sqs:DeleteMessage",
    "ChangeMessageVisibilityBatch": "sqs:ChangeMessageVisibility",
}

# The stack's resources, named by their role (moto's names and the template's logical ids differ).
JOBS = "the jobs table"
IDEMPOTENCY = "the idempotency table"
DEAD_LETTERS = "the dead-letter queue"
SECRETS_KEY = "the secrets key"
AUDIT_LOGS = "the audit log group"
ROLES_OF_THE_ACCOUNT = "a role of the stack's account"
ANY_ROLE = "a role of any account"


def index_of(table: str, index: str) -> str:
    return f"{table}'s index {index!r}"


def queue_of(priority: str) -> str:
    return f"the {priority} queue"


# --- recording each function's calls -------------------------------------------------------


@dataclass(frozen=True, order=True)
class Need:
    """One call's need: `operation` (as called) needs `action` on `resource`."""

    operation: str
    action: str
    resource: str


def needs_of(service: str, operation: str, params: Mapping[str, Any], names: Mapping[str, str]) -> set[Need]:
    """What IAM checks for one call: each action and the resource it is checked on.
    `names`: moto's table and queue names → the resource they stand for."""
    called = f"{service}:{operation}"

    def table(name: str, index: str | None = None) -> str:
        resource = names.get(name, f"a table named {name!r}, not the stack's")
        return index_of(resource, index) if index else resource

    if service == "dynamodb":
        if operation == "TransactWriteItems":
            return {
                Need(called, TRANSACT_WRITE_ACTIONS[kind], table(part["TableName"]))
                for item in params["TransactItems"]
                for kind, part in item.items()
            }
        if operation == "TransactGetItems":
            return {
                Need(called, "dynamodb:GetItem", table(item["Get"]["TableName"]))
                for item in params["TransactItems"]
            }
        if operation in ("BatchGetItem", "BatchWriteItem"):
            return {Need(called, called, table(name)) for name in params["RequestItems"]}
        return {Need(called, called, table(params["TableName"], params.get("IndexName")))}
    if service == "sqs":
        name = str(params.get("QueueUrl", "")).rstrip("/").rsplit("/", 1)[-1] or params.get("QueueName", "")
        resource = names.get(name, f"a queue named {name!r}, not the stack's")
        return {Need(called, SQS_BATCH_ACTIONS.get(operation, called), resource)}
    if service == "logs":
        group = str(params.get("logGroupName", ""))
        return {Need(called, called, names.get(group, f"a log group {group!r}, not the stack's"))}
    if service == "kms":
        key = str(params.get("KeyId", ""))
        return {Need(called, called, names.get(key, f"a key {key!r}, not the stack's"))}
    if service == "iam" and operation == "GetRole":  # a role's trust policy (same account)
        return {Need(called, called, ROLES_OF_THE_ACCOUNT)}
    if service == "sts" and operation == "AssumeRole":  # a tenant's execution role
        return {Need(called, called, ANY_ROLE)}
    return {
        Need(
            called,
            called,
            f"something of {service} (this test maps only DynamoDB, SQS, KMS, CloudWatch Logs, "
            "iam:GetRole and sts:AssumeRole calls)",
        )
    }


class CallLog:
    """The calls of each function, as the hooks on its session saw them (from any thread)."""

    def __init__(self, names: Mapping[str, str]) -> None:
        self._names = dict(names)
        self._lock = threading.Lock()
        self.needs: dict[str, set[Need]] = defaultdict(set)

    def session_of(self, function: str) -> boto3.session.Session:
        """A session of `function`'s own: every client made from it reports its calls here
        (the hook is on the session's emitter, which each new client copies)."""
        session = boto3.session.Session(region_name=REGION)

        def record(params: Mapping[str, Any], model: OperationModel, **_: Any) -> None:
            needs = needs_of(model.service_model.service_name, model.name, params, self._names)
            with self._lock:
                self.needs[function] |= needs

        session.events.register("before-parameter-build", record)
        return session


# --- the scheduler on moto, one set of clients per function ---------------------------------


class Scheduler:
    """The three functions, each on clients of its own (recorded in `log`), and AWS's side:
    the event source mappings and the test's own reads, on `aws` (not recorded)."""

    def __init__(self, settings: Settings, clock: FrozenClock, log: CallLog, aws: AwsClients) -> None:
        self.settings = settings
        self.clock = clock
        self.aws = aws
        self.clients = {name: AwsClients(log.session_of(name)) for name in FUNCTIONS}
        self.jobs = build_job_service(self.settings, self.clients["api"], self.clock)
        self.dispatcher = build_dispatcher(self.settings, self.clients["poller"], self.clock)
        self.executor = build_run_executor(self.settings, self.clients["worker"], self.clock)
        sqs = self.aws.sqs()
        self.queue_arns = {
            priority: sqs.get_queue_attributes(
                QueueUrl=self.settings.queue_url(priority), AttributeNames=["QueueArn"]
            )["Attributes"]["QueueArn"]
            for priority in Priority
        }

    # API Gateway → api
    def call(self, method: str, path: str, body: Any = None, **kw: Any) -> tuple[int, Any]:
        reply = api_function.handler(api_event(method, path, body, **kw), LambdaContext(), jobs=self.jobs)
        return reply["statusCode"], json.loads(reply["body"] or "null")

    def ok(self, method: str, path: str, body: Any = None, status: int = 200, **kw: Any) -> Any:
        got, answer = self.call(method, path, body, **kw)
        assert got == status, (method, path, got, answer)
        return answer

    # EventBridge → poller
    def poll(self, dispatcher: Dispatcher | None = None) -> dict[str, int]:
        """One invocation of the poller per shard; what its watchdog did, summed."""
        watched: dict[str, int] = defaultdict(int)
        for shard in range(self.settings.shard_count):
            summary = poller_function.handler(
                {"shard": shard}, LambdaContext(), dispatcher=dispatcher or self.dispatcher
            )
            for action, count in summary["watched"].items():
                watched[action] += count
        return dict(watched)

    # SQS event source mappings → worker
    def deliver(self) -> int:
        """Each queue drained through the worker, as the mappings do; how many records it got."""
        handed = 0
        sqs = self.aws.sqs()
        for priority in Priority:
            url = self.settings.queue_url(priority)
            while messages := sqs.receive_message(
                QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"], WaitTimeSeconds=0
            ).get("Messages", []):
                handed += len(messages)
                event = sqs_event([dict(message) for message in messages], self.queue_arns[priority])
                result = worker_function.handler(event, LambdaContext(), executor=self.executor)
                failed = {item["itemIdentifier"] for item in result.get("batchItemFailures", [])}
                done = [m for m in messages if m["MessageId"] not in failed]
                if done:
                    sqs.delete_message_batch(
                        QueueUrl=url,
                        Entries=[
                            {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(done)
                        ],
                    )
        return handed

    def deliver_until_quiet(self) -> None:
        while self.deliver():
            pass

    def dead_letters(self) -> list[dict[str, Any]]:
        """The DLQ's records (read by people, never by a function), each read once."""
        records: list[dict[str, Any]] = []
        while (
            messages := self.aws.sqs()
            .receive_message(QueueUrl=self.settings.dlq_url, MaxNumberOfMessages=10, VisibilityTimeout=43_200)
            .get("Messages", [])
        ):
            records += [json.loads(message["Body"]) for message in messages]
        return records

    def runs(self, job_id: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = self.ok("GET", f"/v1/jobs/{job_id}/runs")["items"]
        return items


def hook(url: str, when: datetime, **fields: Any) -> dict[str, Any]:
    return {"name": "hook", "schedule": {"at": iso(when)}, "target": {"type": "HTTP", "url": url}} | fields


# --- the flows ------------------------------------------------------------------------------


def deliveries(s: Scheduler, receiver: WebhookReceiver) -> None:
    """Jobs due soon, claimed at create (a one-off's last firing in one write, a cron's in a
    transaction), and a job due later, claimed by a poll: all delivered."""
    clock = s.clock
    s.poll()  # the deployed poller has run: the shards' watermarks exist
    soon_at, later_at = clock.now() + timedelta(seconds=20), clock.now() + timedelta(minutes=10)
    soon = s.ok("POST", "/v1/jobs", hook(receiver.answer_on("soon"), soon_at), 201)
    assert soon["next_fire_at"] is None  # claimed at create
    cron = {"name": "minutely", "schedule": {"cron": "* * * * *"}}
    minutely = s.ok(
        "POST", "/v1/jobs", cron | {"target": {"type": "HTTP", "url": receiver.answer_on("cron")}}, 201
    )
    first_minute = clock.now().replace(second=0, microsecond=0) + timedelta(minutes=1)
    # Its firings within the lookahead (10:01, 10:02) were claimed at create.
    assert minutely["next_fire_at"] == iso(first_minute + timedelta(minutes=2))
    later = s.ok("POST", "/v1/jobs", hook(receiver.answer_on("later"), later_at, priority="HIGH"), 201)
    clock.move_to(soon_at)
    s.deliver()
    clock.move_to(first_minute)
    s.deliver()
    clock.move_to(first_minute + timedelta(minutes=1))
    s.deliver()
    assert s.ok("DELETE", f"/v1/jobs/{minutely['job_id']}")["status"] == "CANCELLED"
    clock.move_to(later_at - timedelta(seconds=90))
    s.poll()
    clock.move_to(later_at)
    s.deliver()
    for job, runs in ((soon, 1), (minutely, 2), (later, 1)):
        assert [run["status"] for run in s.runs(job["job_id"])] == ["SUCCEEDED"] * runs


def failures_retries_and_dead_letters(s: Scheduler, receiver: WebhookReceiver) -> None:
    """A target answering 500: a retry, then attempts spent (a DLQ record, by the worker);
    the API re-drives the failed run, which succeeds."""
    clock = s.clock
    url = receiver.answer_on("flaky", statuses=(500, 500))
    fire_at = clock.now() + timedelta(seconds=5)
    job = s.ok("POST", "/v1/jobs", hook(url, fire_at, retry={"max_attempts": 2, "backoff_seconds": 1}), 201)
    clock.move_to(fire_at)
    s.deliver()  # attempt 1, and its retry once due (the worker waits out its backoff)
    assert [request.headers["x-scheduler-attempt"] for request in receiver.at("flaky")] == ["1", "2"]
    [run] = s.runs(job["job_id"])
    assert (run["status"], run["attempt"]) == ("FAILED", 2), run
    assert [record["run_id"] for record in s.dead_letters()] == [run["run_id"]]
    s.ok("POST", f"/v1/jobs/{job['job_id']}/runs/{run['run_id']}/retry", status=202)
    clock.advance(5)
    s.deliver()
    assert s.ok("GET", f"/v1/jobs/{job['job_id']}/runs/{run['run_id']}")["status"] == "SUCCEEDED"


def job_control(s: Scheduler, receiver: WebhookReceiver) -> None:
    """PATCH, pause, a manual run of the paused job, resume; then a cancel while a claimed
    run waits in its queue (the worker cancels it uncalled)."""
    clock = s.clock
    target = {"type": "HTTP", "url": receiver.answer_on("control")}
    body = {"name": "every-5", "schedule": {"cron": "*/5 * * * *"}, "target": target}
    job = s.ok("POST", "/v1/jobs", body, 201)
    job_id = job["job_id"]
    version = {"If-Match": str(job["version"])}
    assert s.ok("PATCH", f"/v1/jobs/{job_id}", {"payload": {"v": 2}}, headers=version)["payload"] == {"v": 2}
    assert s.ok("POST", f"/v1/jobs/{job_id}/pause")["status"] == "PAUSED"
    s.ok("POST", f"/v1/jobs/{job_id}/trigger", status=202)
    clock.advance(2)
    s.deliver()
    assert [run["trigger"] for run in s.runs(job_id) if run["status"] == "SUCCEEDED"] == ["MANUAL"]
    resumed = s.ok("POST", f"/v1/jobs/{job_id}/resume")
    assert resumed["status"] == "SCHEDULED"
    s.deliver()  # whatever the resume caught up
    fire_at = datetime.fromisoformat(s.ok("GET", f"/v1/jobs/{job_id}")["next_fire_at"])
    clock.move_to(fire_at - timedelta(seconds=90))
    s.poll()  # claims the next firing: its message waits in the queue
    assert s.ok("DELETE", f"/v1/jobs/{job_id}")["status"] == "CANCELLED"
    clock.move_to(fire_at)
    s.deliver()
    assert any(run["status"] == "CANCELLED" for run in s.runs(job_id))


def idempotent_creates(s: Scheduler, receiver: WebhookReceiver) -> None:
    """Idempotency-Key: a create sent again, the key with another body, a failed create
    (its record deleted) and the key used again; a batch sent again."""
    clock = s.clock
    body = hook(receiver.answer_on("once"), clock.now() + timedelta(hours=1))
    first = s.ok("POST", "/v1/jobs", body, 201, headers={"Idempotency-Key": "k1"})
    again = s.ok("POST", "/v1/jobs", body, 201, headers={"Idempotency-Key": "k1"})
    assert again["job_id"] == first["job_id"]
    s.ok("POST", "/v1/jobs", body | {"name": "other"}, 422, headers={"Idempotency-Key": "k1"})
    past = hook(receiver.answer_on("once"), clock.now() - timedelta(hours=1))
    s.ok("POST", "/v1/jobs", past, 422, headers={"Idempotency-Key": "k2"})
    s.ok("POST", "/v1/jobs", body | {"name": "fixed"}, 201, headers={"Idempotency-Key": "k2"})
    # A batch, made then sent again: the second reads the jobs the first made, in one read.
    soon = hook(receiver.answer_on("batch"), clock.now() + timedelta(seconds=30))
    jobs = {"jobs": [body | {"name": "b0"}, soon | {"name": "b1"}]}
    made = s.ok("POST", "/v1/jobs/batch", jobs, 201, headers={"Idempotency-Key": "b1"})
    assert s.ok("POST", "/v1/jobs/batch", jobs, 201, headers={"Idempotency-Key": "b1"}) == made


def listings(s: Scheduler) -> None:
    """Jobs (a page, the next page, filtered), one job, its runs (filtered)."""
    jobs = s.ok("GET", "/v1/jobs?limit=2")
    assert jobs["items"]
    s.ok("GET", f"/v1/jobs?cursor={jobs['next_cursor']}")
    s.ok("GET", "/v1/jobs?status=SCHEDULED&name_prefix=ho")
    job_id = jobs["items"][0]["job_id"]
    s.ok("GET", f"/v1/jobs/{job_id}")
    s.ok("GET", f"/v1/jobs/{job_id}/runs?status=SUCCEEDED&limit=5")


def workflows(s: Scheduler, receiver: WebhookReceiver, monkeypatch: pytest.MonkeyPatch) -> None:
    """A workflow a → b triggered twice: run to the end, then with the join of a's end lost
    (the worker died) and caught up by the poller's reconcile."""
    clock = s.clock
    tasks = [
        {"task_id": "a", "target": {"type": "HTTP", "url": receiver.answer_on("a", {"rows": 1})}},
        {"task_id": "b", "target": {"type": "HTTP", "url": receiver.answer_on("b")}, "depends_on": ["a"]},
    ]
    workflow_id = s.ok("POST", "/v1/workflows", {"name": "pipeline", "tasks": tasks}, 201)["workflow_id"]
    first = s.ok("POST", f"/v1/workflows/{workflow_id}/trigger", status=202)["workflow_run_id"]
    s.deliver_until_quiet()
    assert s.ok("GET", f"/v1/workflows/{workflow_id}/runs/{first}")["status"] == "SUCCEEDED"

    clock.advance(1)
    second = s.ok("POST", f"/v1/workflows/{workflow_id}/trigger", status=202)["workflow_run_id"]
    with monkeypatch.context() as patched:
        patched.setattr(WorkflowRunner, "task_run_ended", lambda *args: None)  # the join is lost
        s.deliver_until_quiet()
    run = s.ok("GET", f"/v1/workflows/{workflow_id}/runs/{second}")
    assert {task_id: task["status"] for task_id, task in run["tasks"].items()} == {
        "a": "SUCCEEDED",
        "b": "PENDING",
    }
    clock.advance(workflow_runs.RECHECK.total_seconds() + 1)
    assert s.poll().get("workflow_joined") == 1
    s.deliver_until_quiet()
    assert s.ok("GET", f"/v1/workflows/{workflow_id}/runs/{second}")["status"] == "SUCCEEDED"
    s.ok("GET", "/v1/workflows")
    s.ok("GET", f"/v1/workflows/{workflow_id}")
    assert len(s.ok("GET", f"/v1/workflows/{workflow_id}/runs")["items"]) == 2


def execution_roles(s: Scheduler) -> None:
    """A job to a queue through the tenant's execution role: the api reads the role's trust
    policy (GetRole), the worker assumes it (AssumeRole) and sends as the role, whose call is
    the role's to be allowed, not the worker's (its client is not the worker's: not recorded)."""
    clock = s.clock
    trust = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"AWS": s.settings.worker_role_arn},
                "Action": "sts:AssumeRole",
                "Condition": {"StringEquals": {"sts:ExternalId": ALICE_TENANT}},
            }
        ],
    }
    role = s.aws.client("iam").create_role(
        RoleName="alice-delivery", AssumeRolePolicyDocument=json.dumps(trust)
    )
    queue = s.aws.sqs().create_queue(QueueName="alice-orders")["QueueUrl"]
    fire_at = clock.now() + timedelta(seconds=5)
    target = {"type": "SQS", "queue_url": queue, "role_arn": role["Role"]["Arn"]}
    job = s.ok(
        "POST", "/v1/jobs", {"name": "as-alice", "schedule": {"at": iso(fire_at)}, "target": target}, 201
    )
    clock.move_to(fire_at)
    s.deliver()
    assert [run["status"] for run in s.runs(job["job_id"])] == ["SUCCEEDED"]


def dying_worker(s: Scheduler) -> RunExecutor:
    """The worker, on its own clients, dying at its target call (before calling)."""
    clients = s.clients["worker"]
    store = build_store(s.settings, clients)
    executor = RunExecutor(
        store,
        DiesAtTheCall(build_targets(s.settings, clients, s.clock), after_the_call=False),
        s.clock,
        lease=timedelta(seconds=s.settings.run_lease_seconds),
        lifecycle=build_lifecycle(s.settings, clients, s.clock, store),
    )
    executor.begin_invocation(LambdaContext())
    return executor


def lease_expired_on_its_last_attempt(s: Scheduler, receiver: WebhookReceiver) -> None:
    """The worker dies mid-call on a run's only attempt: at the lease's end the poller's
    watchdog fails the run and records it on the DLQ."""
    clock = s.clock
    fire_at = clock.now() + timedelta(seconds=5)
    job = s.ok("POST", "/v1/jobs", hook(receiver.answer_on("dies"), fire_at, retry={"max_attempts": 1}), 201)
    clock.move_to(fire_at)
    [message] = s.aws.sqs().receive_message(QueueUrl=s.settings.queue_url_normal, MaxNumberOfMessages=10)[
        "Messages"
    ]
    with pytest.raises(WorkerDied):
        dying_worker(s).execute(RunMessage.model_validate_json(message["Body"]))
    clock.move_to(fire_at + timedelta(seconds=s.settings.run_lease_seconds + 1))
    assert s.poll().get("failed") == 1
    s.deliver()  # the dead worker's message is back: dropped
    [run] = s.runs(job["job_id"])
    assert run["status"] == "FAILED", run
    assert [record["run_id"] for record in s.dead_letters()] == [run["run_id"]]


def early_message(s: Scheduler, receiver: WebhookReceiver) -> None:
    """A poller whose clock runs 30 s fast sends a message that surfaces too early: the
    worker hides it again until shortly before its run's time (its message's visibility)."""
    clock = s.clock
    fire_at = clock.now().replace(microsecond=0) + timedelta(minutes=10)
    job = s.ok("POST", "/v1/jobs", hook(receiver.answer_on("early"), fire_at), 201)
    fast = build_dispatcher(s.settings, s.clients["poller"], SkewedClock(clock, timedelta(seconds=30)))
    clock.move_to(fire_at - timedelta(seconds=130))
    s.poll(fast)
    clock.move_to(fire_at - timedelta(seconds=32))
    assert s.deliver() == 1  # too early: hidden again, not run
    assert [run["status"] for run in s.runs(job["job_id"])] == ["PENDING"]
    clock.move_to(fire_at)
    s.deliver()
    assert [run["status"] for run in s.runs(job["job_id"])] == ["SUCCEEDED"]


@pytest.fixture(scope="module")
def recorded() -> dict[str, set[Need]]:
    """The flows, run once; what each function needed for the calls it made. Nothing of it
    (moto, the frozen clock, the patches) outlives the flows."""
    with (
        pytest.MonkeyPatch.context() as monkeypatch,
        freeze_time(START, ignore=NOT_FROZEN) as frozen,
        mock_aws(),
        WebhookReceiver() as receiver,
    ):
        clock = FrozenClock(frozen)
        aws = AwsClients(boto3.session.Session(region_name=REGION))
        settings = create_scheduler_resources(aws)
        names = {
            JOBS_TABLE: JOBS,
            IDEMPOTENCY_TABLE: IDEMPOTENCY,
            queue_name(settings.dlq_url): DEAD_LETTERS,
            **{queue_name(settings.queue_url(priority)): queue_of(priority) for priority in Priority},
            settings.secrets_key_id: SECRETS_KEY,
            settings.audit_log_group: AUDIT_LOGS,
        }
        log = CallLog(names)
        s = Scheduler(settings, clock, log, aws)
        # As deployed: the worker handler knows its queues (from its environment) and hides
        # a message with the process's clients, the worker's own.
        monkeypatch.setattr(worker_function, "settings_from_env", lambda: settings)
        monkeypatch.setattr(worker_function, "default_clients", lambda: s.clients["worker"])

        deliveries(s, receiver)
        failures_retries_and_dead_letters(s, receiver)
        job_control(s, receiver)
        idempotent_creates(s, receiver)
        listings(s)
        workflows(s, receiver, monkeypatch)
        lease_expired_on_its_last_attempt(s, receiver)
        early_message(s, receiver)
        execution_roles(s)
    return {name: set(log.needs[name]) for name in FUNCTIONS}


def queue_name(url: str) -> str:
    return url.rstrip("/").rsplit("/", 1)[-1]


# --- the template's grants (as tests/infra/test_iam.py reads them) ----------------------------


def template_arns(synthesis: Synthesis) -> dict[str, str]:
    """The stack's resource each role name stands for → its ARN in the template (as JSON text)."""
    stack = synthesis.stack
    jobs = synthesis.logical_id(stack.store.jobs_table)
    return {
        JOBS: arn_of(jobs),
        **{index_of(JOBS, index): arn_of(jobs, f"/index/{index}") for index in (DUE_INDEX, TENANT_INDEX)},
        IDEMPOTENCY: arn_of(synthesis.logical_id(stack.store.idempotency_table)),
        **{queue_of(p): arn_of(synthesis.logical_id(stack.queues.by_priority[p])) for p in PRIORITIES},
        DEAD_LETTERS: arn_of(synthesis.logical_id(stack.queues.dead_letter_queue)),
        SECRETS_KEY: arn_of(synthesis.logical_id(stack.keys.secrets)),
        AUDIT_LOGS: arn_of(synthesis.logical_id(stack.api.audit_logs)),
        ROLES_OF_THE_ACCOUNT: json.dumps(
            {
                "Fn::Join": [
                    "",
                    ["arn:", {"Ref": "AWS::Partition"}, ":iam::", {"Ref": "AWS::AccountId"}, ":role/*"],
                ]
            }
        ),
        ANY_ROLE: json.dumps({"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":iam::*:role/*"]]}),
    }


ANYWHERE = json.dumps("*")


def ungranted(synthesis: Synthesis, function: str, needs: set[Need]) -> list[str]:
    """Each need of `function` its role's policies do not allow, described."""
    arns = template_arns(synthesis)
    named = {arn: resource for resource, arn in arns.items()}
    grants = grants_of(synthesis, function)
    problems = []
    for need in sorted(needs):
        arn = arns.get(need.resource)
        granted = grants.get(need.action, set())
        if arn is None:
            problems.append(
                f"the {function} function called {need.operation} on {need.resource}, which this test "
                f"cannot find in the template (needs {need.action})"
            )
        elif arn not in granted and ANYWHERE not in granted:
            where = sorted(named.get(resource, resource) for resource in granted) or ["nothing"]
            problems.append(
                f"the {function} function called {need.operation} on {need.resource}, but its role "
                f"has no {need.action} there (it has {need.action} on: {'; '.join(where)})"
            )
    return problems


# --- the tests --------------------------------------------------------------------------------


@pytest.mark.parametrize("function", FUNCTIONS)
def test_the_role_of_each_function_allows_every_call_it_makes(
    synthesis: Synthesis, recorded: dict[str, set[Need]], function: str
) -> None:
    needs = recorded[function]
    assert needs, f"no call of the {function} function was recorded: the hook is not on its clients"
    problems = ungranted(synthesis, function, needs)
    assert not problems, "calls IAM would refuse with AccessDenied:\n" + "\n".join(problems)


# What the flows must have made each function call, at the least: if a flow stops reaching
# one of these (or the hooks stop seeing it), the test above checks less than it claims.
def _calls(*needs: tuple[str, str, str]) -> set[Need]:
    return {
        Need(f"dynamodb:{op}" if ":" not in op else op, action, resource) for op, action, resource in needs
    }


EXERCISED = {
    "api": _calls(
        ("PutItem", "dynamodb:PutItem", JOBS),  # a job
        ("TransactWriteItems", "dynamodb:UpdateItem", JOBS),  # a claim at create
        ("TransactWriteItems", "dynamodb:PutItem", JOBS),
        ("UpdateItem", "dynamodb:UpdateItem", JOBS),  # pause, resume, cancel, re-drive
        ("BatchGetItem", "dynamodb:BatchGetItem", JOBS),  # listings
        ("Query", "dynamodb:Query", JOBS),  # runs
        ("Query", "dynamodb:Query", index_of(JOBS, TENANT_INDEX)),  # jobs
        ("PutItem", "dynamodb:PutItem", IDEMPOTENCY),
        ("UpdateItem", "dynamodb:UpdateItem", IDEMPOTENCY),
        ("DeleteItem", "dynamodb:DeleteItem", IDEMPOTENCY),
        ("sqs:SendMessageBatch", "sqs:SendMessage", queue_of("NORMAL")),
        ("iam:GetRole", "iam:GetRole", ROLES_OF_THE_ACCOUNT),  # an execution role's trust policy
    ),
    "poller": _calls(
        ("Query", "dynamodb:Query", index_of(JOBS, DUE_INDEX)),
        ("BatchGetItem", "dynamodb:BatchGetItem", JOBS),
        ("TransactWriteItems", "dynamodb:UpdateItem", JOBS),  # claims
        ("TransactWriteItems", "dynamodb:PutItem", JOBS),
        ("UpdateItem", "dynamodb:UpdateItem", JOBS),  # a one-off's claim, the watchdog
        ("PutItem", "dynamodb:PutItem", JOBS),  # a run put if absent (a task released by the reconcile)
        ("sqs:SendMessageBatch", "sqs:SendMessage", queue_of("HIGH")),
        ("sqs:SendMessageBatch", "sqs:SendMessage", queue_of("NORMAL")),
        ("sqs:SendMessage", "sqs:SendMessage", DEAD_LETTERS),  # a lease expired on a last attempt
    ),
    "worker": _calls(
        ("BatchGetItem", "dynamodb:BatchGetItem", JOBS),  # a job and its run
        ("UpdateItem", "dynamodb:UpdateItem", JOBS),
        ("TransactWriteItems", "dynamodb:UpdateItem", JOBS),
        ("PutItem", "dynamodb:PutItem", JOBS),  # a workflow task's run, released
        ("sqs:SendMessageBatch", "sqs:SendMessage", queue_of("NORMAL")),  # retries, released tasks
        ("sqs:SendMessage", "sqs:SendMessage", DEAD_LETTERS),  # attempts spent
        ("sqs:ChangeMessageVisibility", "sqs:ChangeMessageVisibility", queue_of("NORMAL")),  # too early
        ("sts:AssumeRole", "sts:AssumeRole", ANY_ROLE),  # a tenant's execution role
    ),
}


@pytest.mark.parametrize("function", FUNCTIONS)
def test_the_flows_make_each_function_make_the_calls_it_makes_in_production(
    recorded: dict[str, set[Need]], function: str
) -> None:
    missing = EXERCISED[function] - recorded[function]
    assert not missing, f"the flows no longer make the {function} function call: {sorted(missing)}"
