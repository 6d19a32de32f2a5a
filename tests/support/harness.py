"""Drives the three handlers the way AWS would, on moto, with an injectable clock:
API requests as REST proxy events, polls per shard, and an event source mapping loop
(receive → invoke the worker → delete what it did not report failed)."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from functions.api.handler import handler as api_handler
from functions.poller.handler import handler as poller_handler
from functions.worker.handler import handler as worker_handler
from scheduler_core.adapters.aws import AwsClients
from scheduler_core.composition import (
    build_dispatcher,
    build_job_service,
    build_lifecycle,
    build_run_executor,
    build_store,
    build_targets,
)
from scheduler_core.domain import keys
from scheduler_core.domain.addresses import LOCAL_CLOUD_NETWORKS
from scheduler_core.domain.clock import Clock
from scheduler_core.domain.vocabulary import Priority
from scheduler_core.services.polls import PollReport
from scheduler_core.settings import Settings
from tests.support.events import ACCOUNT, ALICE, LambdaContext, api_event, sqs_event

JOBS_TABLE = "jobs"
# The jobs table exactly as infra/ declares it (tests/infra checks the template).
JOBS_TABLE_DEFINITION: dict[str, Any] = {
    "TableName": JOBS_TABLE,
    "BillingMode": "PAY_PER_REQUEST",
    "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
    "AttributeDefinitions": [
        {"AttributeName": name, "AttributeType": kind}
        for name, kind in [
            ("pk", "S"),
            ("sk", "S"),
            ("due_pk", "S"),
            ("due_sk", "N"),
            ("tenant", "S"),
            ("created_key", "S"),
        ]
    ],
    "GlobalSecondaryIndexes": [
        {
            "IndexName": "due",
            "KeySchema": [
                {"AttributeName": "due_pk", "KeyType": "HASH"},
                {"AttributeName": "due_sk", "KeyType": "RANGE"},
            ],
            "Projection": {"ProjectionType": "KEYS_ONLY"},
        },
        {
            "IndexName": "by_tenant",
            "KeySchema": [
                {"AttributeName": "tenant", "KeyType": "HASH"},
                {"AttributeName": "created_key", "KeyType": "RANGE"},
            ],
            "Projection": {"ProjectionType": "KEYS_ONLY"},
        },
    ],
}


AUDIT_LOG_GROUP = "scheduler-audit"
IDEMPOTENCY_TABLE = "idempotency"
# Powertools' idempotency layout, as infra/ declares it: key `id`, TTL `expiration`.
IDEMPOTENCY_TABLE_DEFINITION: dict[str, Any] = {
    "TableName": IDEMPOTENCY_TABLE,
    "BillingMode": "PAY_PER_REQUEST",
    "KeySchema": [{"AttributeName": "id", "KeyType": "HASH"}],
    "AttributeDefinitions": [{"AttributeName": "id", "AttributeType": "S"}],
}


# The region of the tests' clients (and moto's account, ACCOUNT).
REGION = "us-east-1"
WORKER_ROLE_ARN = f"arn:aws:iam::{ACCOUNT}:role/ServerlessScheduler-WorkersWorkerRole"
SHARED_TARGETS = {
    "TARGET_QUEUE_ARNS": f"arn:*:sqs:*:{ACCOUNT}:*",
    "TARGET_TOPIC_ARNS": f"arn:*:sns:*:{ACCOUNT}:*",
    "TARGET_EVENT_BUS_ARNS": f"arn:*:events:*:{ACCOUNT}:event-bus/*",
    "TARGET_FUNCTION_ARNS": f"arn:*:lambda:*:{ACCOUNT}:function:*",
}


def create_scheduler_resources(clients: AwsClients, shard_count: int = 4) -> Settings:
    """The tables and queues of the stack, in moto; returns the settings pointing at them."""
    clients.dynamodb().create_table(**JOBS_TABLE_DEFINITION)
    clients.dynamodb().create_table(**IDEMPOTENCY_TABLE_DEFINITION)
    sqs = clients.sqs()
    dlq = sqs.create_queue(QueueName="scheduler-dlq")["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    urls = {}
    for priority in Priority:
        urls[priority] = sqs.create_queue(
            QueueName=f"scheduler-{priority.lower()}",
            Attributes={
                "VisibilityTimeout": "540",
                "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": "5"}),
            },
        )["QueueUrl"]
    secrets_key = clients.kms().create_key(Description="secret headers and webhook signing secrets")
    clients.logs().create_log_group(logGroupName=AUDIT_LOG_GROUP)
    return Settings.model_validate(
        {
            "AUDIT_LOG_GROUP": AUDIT_LOG_GROUP,
            "SECRETS_KEY_ID": secrets_key["KeyMetadata"]["Arn"],
            "JOBS_TABLE_NAME": JOBS_TABLE,
            "IDEMPOTENCY_TABLE_NAME": IDEMPOTENCY_TABLE,
            "QUEUE_URL_HIGH": urls[Priority.HIGH],
            "QUEUE_URL_NORMAL": urls[Priority.NORMAL],
            "QUEUE_URL_LOW": urls[Priority.LOW],
            "DLQ_URL": dlq,
            "SHARD_COUNT": shard_count,
            "RUN_LEASE_SECONDS": 540,
            # The receivers tests deliver to listen on loopback, over plain HTTP.
            "TARGET_PRIVATE_CIDRS": list(LOCAL_CLOUD_NETWORKS),
            "ALLOW_HTTP_TARGETS": True,
            # Where the stack runs, and its worker's role (a tenant's execution role must trust it).
            "STACK_PARTITION": "aws",
            "STACK_REGION": REGION,
            "STACK_ACCOUNT_ID": ACCOUNT,
            "WORKER_ROLE_ARN": WORKER_ROLE_ARN,
            # Shared targets: as an operator offering every queue, topic, bus and function of the
            # account to every tenant. Tests of the other way, an execution role per target,
            # name a role (tests/integration/test_execution_roles.py).
            **{variable: [pattern] for variable, pattern in SHARED_TARGETS.items()},
        }
    )


class FrozenClock:
    """The `Clock` of a freezegun-frozen test: moto's SQS delays follow it too."""

    def __init__(self, frozen: Any) -> None:
        self._frozen = frozen
        self._lock = threading.Lock()

    def now(self) -> datetime:
        return datetime.now(UTC)

    def sleep_until(self, when: datetime) -> None:
        with self._lock:
            if when > self.now():
                self._frozen.move_to(when)

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._frozen.tick(timedelta(seconds=seconds))

    def move_to(self, when: datetime) -> None:
        with self._lock:
            self._frozen.move_to(when)


class SkewedClock:
    """A clock running `skew` ahead of `base` (a poller whose clock is fast)."""

    def __init__(self, base: FrozenClock, skew: timedelta) -> None:
        self._base = base
        self._skew = skew

    def now(self) -> datetime:
        return self._base.now() + self._skew

    def sleep_until(self, when: datetime) -> None:
        self._base.sleep_until(when - self._skew)


@dataclass
class ApiReply:
    status: int
    body: Any
    headers: dict[str, str]


class SchedulerHarness:
    def __init__(self, clients: AwsClients, settings: Settings, clock: Clock) -> None:
        self.clients = clients
        self.settings = settings
        self.clock = clock
        # The jobs table as each function sees it, its own as in AWS: a test may wrap a
        # method of one function's store and leave the others as they are.
        self.api_store = build_store(settings, clients)
        self.poll_store = build_store(settings, clients)
        self.worker_store = build_store(settings, clients)
        self.jobs = build_job_service(settings, clients, clock, self.api_store)
        self.dispatcher = build_dispatcher(settings, clients, clock, self.poll_store)
        # The worker's targets and lifecycle, for a test that wraps one of their methods.
        self.worker_targets = build_targets(settings, clients, clock)
        self.worker_lifecycle = build_lifecycle(settings, clients, clock, self.worker_store)
        self.executor = build_run_executor(
            settings, clients, clock, self.worker_store, self.worker_targets, self.worker_lifecycle
        )

    # --- API Gateway ------------------------------------------------------------------

    def call(
        self, method: str, path: str, body: Any = None, *, caller: str | None = ALICE, **kw: Any
    ) -> ApiReply:
        reply = api_handler(
            api_event(method, path, body, caller=caller, **kw), LambdaContext(), jobs=self.jobs
        )
        return ApiReply(reply["statusCode"], json.loads(reply["body"] or "null"), reply.get("headers") or {})

    def create(self, body: dict[str, Any], *, caller: str = ALICE) -> dict[str, Any]:
        reply = self.call("POST", "/v1/jobs", body, caller=caller)
        assert reply.status == 201, reply.body
        created: dict[str, Any] = reply.body
        return created

    def runs(self, job_id: str, query: str = "") -> list[dict[str, Any]]:
        """The job's runs as `GET /v1/jobs/{job_id}/runs{query}` lists them (newest first)."""
        reply = self.call("GET", f"/v1/jobs/{job_id}/runs{query}")
        assert reply.status == 200, reply.body
        runs: list[dict[str, Any]] = reply.body["items"]
        return runs

    def job_expiry(self, job_id: str) -> datetime | None:
        """The TTL the job's item carries (None: it is kept); an ended job's
        (docs/concepts/guarantees.md, "Run history")."""
        item = self.clients.dynamodb().get_item(
            TableName=self.settings.jobs_table_name,
            Key={"pk": {"S": keys.job_pk(job_id)}, "sk": {"S": keys.JOB_SK}},
            ConsistentRead=True,
        )["Item"]
        return datetime.fromtimestamp(int(item["expires_at"]["N"]), UTC) if "expires_at" in item else None

    def kept_until(self, ended_at: datetime) -> datetime:
        """The TTL a job that ended at `ended_at` carries: the run retention later, to the second."""
        return (ended_at + timedelta(days=self.settings.run_retention_days)).replace(microsecond=0)

    # --- EventBridge → poller ---------------------------------------------------------

    def poll(self) -> list[PollReport]:
        return [self.dispatcher.poll_shard(shard) for shard in range(self.settings.shard_count)]

    def poll_via_handler(self, shard: int) -> dict[str, Any]:
        result: dict[str, Any] = poller_handler({"shard": shard}, LambdaContext(), dispatcher=self.dispatcher)
        return result

    # --- SQS event source mappings → worker -------------------------------------------

    def queue_url(self, priority: Priority) -> str:
        return self.settings.queue_url(priority)

    def visible_messages(self, priority: Priority) -> int:
        attributes = self.clients.sqs().get_queue_attributes(
            QueueUrl=self.queue_url(priority),
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesDelayed"],
        )["Attributes"]
        return int(attributes["ApproximateNumberOfMessages"])

    def deliver(self, priorities: tuple[Priority, ...] = tuple(Priority)) -> int:
        """One event source mapping pass over each queue until nothing is visible.
        Returns how many records the worker was handed."""
        return sum(self._deliver_from(priority, drain=True) for priority in priorities)

    def deliver_batches(self) -> int:
        """One worker invocation per queue with what is visible now (not a drain: a message
        sent meanwhile, such as a retry due within a second or two, which the queue shows at
        once, waits for the next call). How many records the worker was handed."""
        return sum(self._deliver_from(priority, drain=False) for priority in Priority)

    def _deliver_from(self, priority: Priority, drain: bool) -> int:
        handed = 0
        sqs = self.clients.sqs()
        url = self.queue_url(priority)
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        while True:
            messages = sqs.receive_message(
                QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"], WaitTimeSeconds=0
            ).get("Messages", [])
            if not messages:
                return handed
            handed += len(messages)
            self.invoke_worker(messages, url, arn)
            if not drain:
                return handed

    def invoke_worker(self, messages: list[Any], url: str, arn: str) -> dict[str, Any]:
        result: dict[str, Any] = worker_handler(
            sqs_event(messages, arn), LambdaContext(), executor=self.executor
        )
        failed = {item["itemIdentifier"] for item in result.get("batchItemFailures", [])}
        done = [m for m in messages if m["MessageId"] not in failed]
        if done:
            self.clients.sqs().delete_message_batch(
                QueueUrl=url,
                Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(done)],
            )
        return result
