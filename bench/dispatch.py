"""Dispatch overhead: how long the poller takes to claim and enqueue K due jobs of one shard,
against a floor measured on the same moto, with the same table and queue — a plain boto3
loop making only the calls the work needs: one query page of the due index, one claim per
one-off job (the same UpdateItem as `claim_if_unchanged`: the run added to its job's item,
the job's index entry left at the firing), one batch send per 10.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from bench.common import metrics_namespace
from bench.metering import CallLog
from bench.report import table
from bench.stack import TENANT, BenchStack, moto_session
from scheduler_core.adapters.aws import RETRY_CONFIG, AwsClients
from scheduler_core.adapters.dynamodb import DUE_INDEX
from scheduler_core.composition import build_dispatcher, build_store
from scheduler_core.domain import keys
from scheduler_core.domain.clock import SystemClock, from_ms, to_ms
from scheduler_core.domain.entities import Job
from scheduler_core.domain.policies import RetryPolicy
from scheduler_core.domain.schedule import ScheduleSpec
from scheduler_core.domain.target_spec import HttpTarget
from scheduler_core.domain.vocabulary import JobStatus, Priority
from scheduler_core.services.parallel import InOrder

SHARD = 0
TRIALS = 3
WARM_UP_JOBS = 20
_MINUTE_MS = 60_000


@dataclass(frozen=True)
class Seeded:
    bucket_ms: int  # the minute bucket holding every seeded job
    until_ms: int  # a horizon past all of them


def jobs_in_shard(count: int, shard: int, shard_count: int) -> list[str]:
    """Fresh job ids that all hash to `shard`."""
    ids: list[str] = []
    while len(ids) < count:
        job_id = uuid.uuid4().hex
        if keys.shard_for(job_id, shard_count) == shard:
            ids.append(job_id)
    return ids


def seed(stack: BenchStack, job_ids: list[str]) -> Seeded:
    """One-off jobs due during the next minute, which a poll claims ahead of their time
    (within its lookahead), and the shard's watermark where a poller that runs every minute
    leaves it. The same ids each time, so every trial is alike. (Jobs due a minute ago, as
    this part seeded them before, took the outage path: each claim past its misfire
    tolerance logged a warning and a metric, which a poll does not in steady state.)"""
    store = build_store(stack.settings, AwsClients(moto_session()))
    now = datetime.now(UTC)
    bucket = keys.bucket_of(to_ms(now)) + _MINUTE_MS
    step = _MINUTE_MS // len(job_ids)
    for position, job_id in enumerate(job_ids):
        fire_at = from_ms(bucket + position * step)
        store.put_job_if_absent(
            Job(
                job_id=job_id,
                tenant=TENANT,
                name=f"bench-dispatch-{position}",
                status=JobStatus.SCHEDULED,
                schedule=ScheduleSpec(at=fire_at),
                target=HttpTarget(type="HTTP", url="http://127.0.0.1:9/hook"),
                payload={"position": position},
                priority=Priority.NORMAL,
                retry=RetryPolicy(),
                next_fire_at=fire_at,
                created_at=now - timedelta(minutes=10),
                updated_at=now - timedelta(minutes=10),
            )
        )
    grace = timedelta(seconds=stack.settings.poll_grace_seconds)
    store.advance_watermark(SHARD, keys.bucket_of(to_ms(now - grace)))
    return Seeded(bucket_ms=bucket, until_ms=to_ms(now) + stack.settings.lookahead_seconds * 1000)


class FloorDispatcher:
    """The least a dispatcher can do on the same table (its due index holds keys only), with
    plain boto3 calls: query the bucket, read the jobs, claim each, send in batches of 10."""

    def __init__(self, stack: BenchStack, session: Any) -> None:
        self._ddb = session.client("dynamodb", config=RETRY_CONFIG)
        self._sqs = session.client("sqs", config=RETRY_CONFIG)
        self._table = stack.settings.jobs_table_name
        self._queue_url = stack.settings.queue_url(Priority.NORMAL)
        self._shard_count = stack.settings.shard_count
        self._resend_ms = stack.settings.resend_after_seconds * 1000

    def warm(self) -> None:
        self._ddb.describe_table(TableName=self._table)
        self._sqs.get_queue_attributes(QueueUrl=self._queue_url, AttributeNames=["QueueArn"])

    def dispatch(self, seeded: Seeded) -> int:
        now_ms = int(time.time() * 1000)
        page = self._ddb.query(
            TableName=self._table,
            IndexName=DUE_INDEX,
            KeyConditionExpression="due_pk = :bucket AND due_sk <= :until",
            ExpressionAttributeValues={
                ":bucket": {"S": keys.due_pk(seeded.bucket_ms, SHARD)},
                ":until": {"N": str(seeded.until_ms)},
            },
        )
        messages = []
        for item in self._items_of(page["Items"]):
            job_id, fire_ms = item["job_id"]["S"], int(item["due_sk"]["N"])
            run_id = keys.run_id(job_id, fire_ms)
            self._claim(item, fire_ms, now_ms)
            body = {"job_id": job_id, "run_id": run_id, "scheduled_for_ms": fire_ms, "attempt": 1}
            messages.append(json.dumps(body, separators=(",", ":")))
        for start in range(0, len(messages), 10):
            batch = messages[start : start + 10]
            self._sqs.send_message_batch(
                QueueUrl=self._queue_url,
                Entries=[
                    {"Id": str(i), "MessageBody": body, "DelaySeconds": 0} for i, body in enumerate(batch)
                ],
            )
        return len(messages)

    def _items_of(self, entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The jobs of index entries (the index holds keys only): consistent BatchGetItems of
        100 keys, as the scheduler reads them."""
        items: list[dict[str, Any]] = []
        for start in range(0, len(entries), 100):
            keys_ = [{"pk": entry["pk"], "sk": entry["sk"]} for entry in entries[start : start + 100]]
            reply = self._ddb.batch_get_item(
                RequestItems={self._table: {"Keys": keys_, "ConsistentRead": True}}
            )
            items += reply["Responses"][self._table]
            if reply.get("UnprocessedKeys"):
                raise RuntimeError("BatchGetItem left keys unprocessed; the floor does not retry")
        return items

    def _claim(self, item: dict[str, Any], fire_ms: int, now_ms: int) -> None:
        kept = {
            "r_status": {"S": "PENDING"},
            "r_priority": item["priority"],
            "r_scheduled_for_ms": {"N": str(fire_ms)},
            "r_attempt": {"N": "1"},
            "r_due_ms": {"N": str(fire_ms + self._resend_ms)},
        }
        names = {f"#k{n}": name for n, name in enumerate(kept)}
        values = {f":k{n}": value for n, value in enumerate(kept.values())}
        self._ddb.update_item(
            TableName=self._table,
            Key={"pk": item["pk"], "sk": item["sk"]},
            UpdateExpression="SET version = version + :one, updated_at_ms = :now, "
            + ", ".join(f"#k{n} = :k{n}" for n in range(len(kept)))
            + " REMOVE next_fire_at_ms",
            ConditionExpression="version = :seen AND due_sk = :seen_fire AND #status = :scheduled"
            " AND attribute_not_exists(r_status)",
            ExpressionAttributeNames=names | {"#status": "status"},
            ExpressionAttributeValues=values
            | {
                ":one": {"N": "1"},
                ":now": {"N": str(now_ms)},
                ":seen": item["version"],
                ":seen_fire": item["due_sk"],
                ":scheduled": {"S": "SCHEDULED"},
            },
        )


@dataclass
class Trial:
    who: str
    seconds: float
    cpu_seconds: float  # this process's CPU time: the client side's own work, moto excluded
    in_calls_seconds: float  # inside AWS calls, from parameters to parsed reply
    dispatched: int
    calls: dict[str, int]


def measure_dispatch(stack: BenchStack, jobs: int) -> dict[str, Any]:
    """Alternate ours and the floor, TRIALS times each, after one warm-up of each."""
    log = CallLog()
    clients = AwsClients(log.session("ours", moto_session()))
    # Claims one after another, as the floor makes them: this part weighs the code around each
    # claim, not how many a poll makes at once (moto's server conflicts on parallel
    # transactions, which a poll leaves to the next one; the capacity simulation covers that).
    # The claim path, whatever the stack's `one_offs_claimed_at_start`: the floor claims each
    # firing too (a one-off sent unclaimed is a poll's send, no write: the requests part).
    settings = stack.settings.model_copy(update={"one_offs_claimed_at_start": False})
    dispatcher = build_dispatcher(settings, clients, SystemClock(), runner=InOrder())
    floor = FloorDispatcher(stack, log.session("floor", moto_session()))
    clients.dynamodb().describe_table(TableName=stack.settings.jobs_table_name)
    clients.sqs().get_queue_attributes(QueueUrl=stack.settings.queue_url_normal, AttributeNames=["QueueArn"])
    floor.warm()

    def ours(_: Seeded) -> int:
        # The seeded bucket is a minute old, so claims count misfires: as in the poller, with
        # a namespace (Powertools refuses a metric set without one), dropped after the poll.
        with metrics_namespace("ServerlessSchedulerBench"):
            report = dispatcher.poll_shard(SHARD)
        if report.unsent or report.contended:
            raise RuntimeError(
                f"poll left work behind: {report.contended} claims failed or contended, "
                f"{len(report.unsent)} runs unsent (see the log above)"
            )
        return len(report.claimed)

    runners: dict[str, Callable[[Seeded], int]] = {"ours": ours, "floor": floor.dispatch}
    job_ids = jobs_in_shard(jobs, SHARD, stack.settings.shard_count)
    trials: list[Trial] = []
    for number in range(TRIALS + 1):
        for who, run in runners.items():
            ids = job_ids[:WARM_UP_JOBS] if number == 0 else job_ids
            stack.clear()
            seeded = seed(stack, ids)
            label = f"{who}-{number}"
            with log.labelled(label):
                started, cpu_started = time.perf_counter(), time.process_time()
                dispatched = run(seeded)
                seconds = time.perf_counter() - started
                cpu_seconds = time.process_time() - cpu_started
            if dispatched != len(ids):
                raise RuntimeError(f"{who} dispatched {dispatched} of {len(ids)} due jobs")
            if number > 0:
                in_calls = sum(call.seconds for call in log.calls if call.label == label)
                trials.append(
                    Trial(who, seconds, cpu_seconds, in_calls, dispatched, dict(log.operations(label)))
                )
    stack.clear()

    def median(figure: Callable[[Trial], float]) -> dict[str, float]:
        return {who: statistics.median(figure(t) for t in trials if t.who == who) for who in runners}

    def per_job_ms(figure: Callable[[Trial], float]) -> dict[str, float]:
        return {who: 1000 * seconds / jobs for who, seconds in median(figure).items()}

    medians = median(lambda t: t.seconds)
    return {
        "jobs": jobs,
        "shard": SHARD,
        "trials": [dataclasses.asdict(t) for t in trials],
        "median_seconds": medians,
        "median_ms_per_job": {
            "total": per_job_ms(lambda t: t.seconds),
            "outside_calls": per_job_ms(lambda t: t.seconds - t.in_calls_seconds),
            "client_cpu": per_job_ms(lambda t: t.cpu_seconds),
        },
        "ratio_floor_over_ours": medians["floor"] / medians["ours"],
        "calls": {who: next(t.calls for t in trials if t.who == who) for who in runners},
    }


def print_dispatch(result: dict[str, Any]) -> None:
    jobs, per_job = result["jobs"], result["median_ms_per_job"]
    print(f"Dispatch overhead — claim and enqueue {jobs} due jobs of one shard (median of {TRIALS})")
    rows = [
        [
            who,
            result["median_seconds"][who],
            per_job["total"][who],
            per_job["outside_calls"][who],
            per_job["client_cpu"][who],
            sum(result["calls"][who].values()),
            ", ".join(f"{t['seconds']:.3f}" for t in result["trials"] if t["who"] == who),
        ]
        for who in ("ours", "floor")
    ]
    headers = ["", "median s", "ms/job", "outside calls", "client CPU", "calls", "trials (s)"]
    print(table(headers, rows))
    print(f"ratio floor/ours: {result['ratio_floor_over_ours']:.2f}   (goal ≥ 0.8)")
    print(
        "  ms/job: wall time; outside calls: wall time not spent inside AWS calls (from parameters to "
        "parsed reply); client CPU: this process's CPU time (moto's excluded)"
    )
    for who in ("ours", "floor"):
        calls = ", ".join(f"{op.split('.', 1)[1]} {n}" for op, n in sorted(result["calls"][who].items()))
        print(f"  {who} calls: {calls}")


def dispatch_headline(result: dict[str, Any]) -> str:
    medians = result["median_seconds"]
    return (
        f"floor/ours {result['ratio_floor_over_ours']:.2f} (goal ≥ 0.8): "
        f"ours {medians['ours']:.2f} s, floor {medians['floor']:.2f} s for {result['jobs']} jobs"
    )
