"""AWS for the simulation: in-process moto (`moto.mock_aws`) gives every call its meaning
(conditions, transactions, queries, SQS delays and visibility); botocore event hooks on
each session's clients give it its time, its cost and its limits.

Each session made here has moto's request stubber replaced by `SimulatedAws._send`, which,
for a call made inside a simulated task: waits half the call's latency (virtual time), lets
moto answer, waits the other half. A DynamoDB write is metered from the items before and
after it (`bench.metering.WriteMeter`'s rules: 1 WCU per started KB of the larger image, x2
in a transaction, index entries written or deleted), and its units are charged to the
partition keys it touched (table and indexes); when they do not fit (`partitions`), the
items are put back as they were and the answer is AWS's throttling error, which botocore's
own standard retry (the project's `RETRY_CONFIG`) retries after a backoff slept in virtual
time. A transaction is refused the way AWS documents it for a throttled item:
`TransactionCanceledException` with the reason `ThrottlingError`, which botocore does not
retry and the store reads as contention.

moto's SQS reads the clock through `unix_time`/`unix_time_millis`; inside the simulation
those read virtual time, so DelaySeconds and visibility timeouts pass in virtual time.
Calls made outside any task (setting up tables, jobs created "days before") cost nothing.
"""

from __future__ import annotations

import contextlib
import copy
import json
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

import boto3
from botocore.awsrequest import AWSPreparedRequest, AWSResponse
from moto.core.botocore_stubber import MockRawResponse
from moto.core.models import botocore_stubber
from moto.dynamodb.models import DynamoDBBackend, dynamodb_backends
from moto.sqs import models as sqs_models

from bench.capacity.kernel import Sim
from bench.capacity.latency import LatencyModel
from bench.capacity.partitions import CapacityModel, Charge
from bench.metering import WriteMeter, _units, item_size, read_units
from scheduler_core.adapters.aws import RETRY_CONFIG, AwsClients

ACCOUNT = "123456789012"  # moto's default account
REGION = "us-east-1"
CREDENTIALS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}
_WRITES = {"PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem"}
_READS = {"GetItem", "BatchGetItem", "Query"}
_SQS_SENDS = {"SendMessage", "SendMessageBatch", "ChangeMessageVisibility", "ChangeMessageVisibilityBatch"}
_DDB_ERROR = "com.amazonaws.dynamodb.v20120810#"
_THROTTLED = "sim-throttled"  # the request id of the answers the capacity model refuses
# The poller's calls that go one after the other through a bucket, and how many of the
# bucket's entries each carries at most (request field, entries per call): BatchGetItem 100
# keys (AWS API reference).
_SHADOWED_BATCHES = {"BatchGetItem": ("RequestItems", 100)}
# Whose units are shadowed: the roles whose time is (the poller's; the api's, though the
# sampled scenarios create their jobs outside virtual time). The worker's time is not
# shadowed, so neither are its units: charged at the sampled runs' times they would pile
# the whole load into the few seconds the sample takes.
SHADOWED_ROLES = ("poller", "api")
QUERY_PAGE_BYTES = 1_048_576  # a Query page stops at 1 MB of items read (DynamoDB Query reference)


class _MotoItems:
    """What `WriteMeter` reads items with: moto's DynamoDB backend itself (no request, no
    serialization: the meter's reads cost the simulation no time and no wall time to speak of)."""

    def __init__(self, describe: Callable[..., Any]) -> None:
        self._describe = describe

    @property
    def backend(self) -> DynamoDBBackend:
        backend: DynamoDBBackend = dynamodb_backends[ACCOUNT][REGION]
        return backend

    def describe_table(self, TableName: str) -> Any:  # noqa: N803 (boto3's spelling)
        return self._describe(TableName=TableName)

    def get_item(self, TableName: str, Key: Mapping[str, Any], ConsistentRead: bool = True) -> Any:  # noqa: N803
        item = self.backend.get_item(TableName, dict(Key))
        return {"Item": item.to_json()["Attributes"]} if item is not None else {}

    def snapshot(self, table_name: str, key: Mapping[str, Any]) -> tuple[Any, Any, Any, Any]:
        table = self.backend.get_table(table_name)
        hash_key, range_key = self.backend.get_keys_value(table, dict(key))
        return table, hash_key, range_key, copy.deepcopy(table.get_item(hash_key, range_key))

    @staticmethod
    def restore(snapshot: tuple[Any, Any, Any, Any]) -> None:
        table, hash_key, range_key, item = snapshot
        if item is None:
            if table.get_item(hash_key, range_key) is not None:
                table.delete_item(hash_key, range_key)
        elif range_key is not None:
            table.items[hash_key][range_key] = item
        else:
            table.items[hash_key] = item


@dataclass
class Usage:
    """What the simulated functions asked of AWS, by role (`poller`, `worker`, `api`, `esm`)."""

    calls: Counter[str]  # "role service.Operation" → API calls (each may be several attempts)
    attempts: Counter[str]  # HTTP requests, retries included
    table_wcu: dict[str, float]  # role → write units on tables
    index_wcu: dict[str, float]  # role → write units on indexes
    read_units: dict[str, float]
    throttled: Counter[str]  # "role service.Operation" → attempts answered with throttling

    def total_calls(self, roles: tuple[str, ...] | None = None) -> int:
        return sum(n for key, n in self.calls.items() if roles is None or key.split(" ", 1)[0] in roles)


class SimulatedAws:
    """Sessions whose clients reach moto through the simulation's models."""

    def __init__(
        self, sim: Sim, latency: LatencyModel, capacity: CapacityModel, fraction: float = 1.0
    ) -> None:
        self.sim = sim
        self.latency = latency
        self.capacity = capacity
        # Sampled load (see `scenarios`): each real job stands for 1/fraction jobs; `shadow`
        # is how many left-out jobs each real one carries.
        self.fraction = fraction
        self.shadow = 1.0 / fraction - 1.0
        self._shadow_owed: dict[str, float] = defaultdict(float)
        self.shadow_calls: Counter[str] = Counter()  # modeled poller calls, by operation
        self.usage = Usage(
            Counter(), Counter(), defaultdict(float), defaultdict(float), defaultdict(float), Counter()
        )
        self._plain = _session().client("dynamodb", config=RETRY_CONFIG)
        self._items = _MotoItems(self._plain.describe_table)
        self._meter = WriteMeter(self._items)
        self._send_listeners: dict[str, list[Callable[[], None]]] = {}
        self._replies: dict[int, Any] = {}  # a read's parsed answer, by its response's id

    # --- sessions ---------------------------------------------------------------------

    def session(self, role: str) -> boto3.session.Session:
        session = _session()
        events = session.events
        events.unregister("before-send", botocore_stubber)  # type: ignore[arg-type]
        events.register("before-send", partial(self._send, role))  # type: ignore[arg-type]
        events.register("before-call", partial(self._count_call, role))
        return session

    def clients(self, role: str) -> AwsClients:
        """A client factory as one Lambda execution environment has: its own clients (and
        so its own botocore retry quota), shared by the invocations it serves."""
        return AwsClients(self.session(role))

    def plain_client(self, service: str) -> Any:
        """A client outside the models (set-up and checks): moto as it is, no time, not counted."""
        return _session().client(service, config=RETRY_CONFIG)  # type: ignore[call-overload]

    def on_send(self, queue_url: str, listener: Callable[[], None]) -> None:
        """Call `listener` whenever a request may have made messages of `queue_url` visible."""
        self._send_listeners.setdefault(queue_url, []).append(listener)

    # --- hooks ------------------------------------------------------------------------

    def _count_call(self, role: str, model: Any, **_: Any) -> None:
        if self.sim.in_task():
            self.usage.calls[f"{role} {model.service_model.service_name}.{model.name}"] += 1

    def _send(self, role: str, request: AWSPreparedRequest, event_name: str, **_: Any) -> AWSResponse | None:
        _event, service, operation = event_name.split(".", 2)
        if not self.sim.in_task():
            return botocore_stubber(event_name, request)
        label = f"{role} {service}.{operation}"
        self.usage.attempts[label] += 1
        if role == "poller" and self.shadow > 0 and operation in _SHADOWED_BATCHES:
            # The left-out jobs' share of the poll's one-after-the-other reads of the bucket,
            # before this one. (Their sends go with their claims: `world`'s claim slots.)
            key, per_call = _SHADOWED_BATCHES[operation]
            entries = len(_batch_entries(_json_body(request), key))
            self._shadow_calls(service, operation, entries * (1.0 + self.shadow) / per_call - 1.0)
        latency = self.latency.call(service, operation)
        self.sim.sleep(latency / 2)
        if service == "dynamodb":
            response = self._dynamodb(label, operation, request, event_name)
        else:
            response = botocore_stubber(event_name, request)
            if service == "sqs" and operation in _SQS_SENDS:
                queue_url = _json_body(request).get("QueueUrl", "")
                for listener in self._send_listeners.get(queue_url, []):
                    listener()
        self.sim.sleep(latency / 2)
        if (
            role == "poller"
            and self.shadow > 0
            and operation == "Query"
            and response is not None
            and response.status_code == 200
        ):
            # The full bucket's index pages (1 MB each) beyond this one.
            reply = self._replies.pop(id(response), None)
            entries = (reply if reply is not None else json.loads(response.content)).get("Items", [])
            if entries:
                per_page = QUERY_PAGE_BYTES / (sum(item_size(e) for e in entries) / len(entries))
                self._shadow_calls(service, operation, len(entries) * (1.0 + self.shadow) / per_page - 1.0)
        return response

    def _shadow_calls(self, service: str, operation: str, calls: float) -> None:
        """Wait out `calls` modeled calls of `operation` (fractions carried to the next)."""
        self._shadow_owed[operation] += max(0.0, calls)
        whole = int(self._shadow_owed[operation])
        if whole:
            self._shadow_owed[operation] -= whole
            self.shadow_calls[operation] += whole
            self.sim.sleep(sum(self.latency.call(service, operation) for _ in range(whole)))

    def shadow_charges(self, charges: list[Charge]) -> list[Charge]:
        """The left-out jobs' units beside a real job's: on the same key of an index (a
        `due_pk` minute#shard, a tenant: shared by every job of it), on the table alone
        for the job's own item (their items are other keys, each far below its limit).
        The poller's own items (`SHARD#` watermarks) have none."""
        shadow = []
        for charge in charges:
            if charge.key.startswith("SHARD#"):
                continue
            key = charge.key if "/" in charge.table else ""
            shadow.append(Charge(charge.table, key, charge.units * self.shadow))
        return shadow

    def _shadow_query_charges(
        self, params: Mapping[str, Any], reply: Mapping[str, Any], charges: list[Charge]
    ) -> list[Charge]:
        """The left-out entries' share of a query's page: a query is billed on the size of
        all it read together, so the full page's units less the real page's (not the real
        page's units 1/f - 1 times over: a sampled page of one entry takes a whole unit,
        which multiplied would bill a bucket's page thousands of units for a few hundred KB)."""
        size = sum(item_size(item) for item in reply.get("Items", []))
        consistent = bool(params.get("ConsistentRead"))
        full = read_units(round(size * (1.0 + self.shadow)), consistent)
        return [Charge(charge.table, charge.key, max(0.0, full - charge.units)) for charge in charges]

    def _dynamodb(
        self, label: str, operation: str, request: AWSPreparedRequest, event_name: str
    ) -> AWSResponse | None:
        role = label.split(" ", 1)[0]
        params = _json_body(request)
        if operation in _WRITES:
            response = self._write(role, operation, params, request, event_name)
            if (
                response is None
                or response.status_code != 400
                or response.headers.get("x-amzn-RequestId") != _THROTTLED
            ):
                return response
            self.usage.throttled[label] += 1
            return response
        response = botocore_stubber(event_name, request)
        if operation in _READS and response is not None and response.status_code == 200:
            reply = json.loads(response.content)
            if operation == "Query" and role == "poller" and self.shadow > 0:
                self._replies[id(response)] = reply  # `_send` reads the page again, at once
            charges = self._read_charges(operation, params, reply)
            refusal = self.capacity.admit_read(self.sim.env.now, charges)
            if refusal is not None:
                self.usage.throttled[label] += 1
                return _throttled(request, "ProvisionedThroughputExceededException", refusal)
            self.usage.read_units[role] += sum(charge.units for charge in charges)
            if self.shadow > 0 and role in SHADOWED_ROLES:
                shadow = self.shadow_charges(charges)
                if operation == "Query":
                    shadow = self._shadow_query_charges(params, reply, charges)
                self.capacity.add_shadow_reads(self.sim.env.now, shadow)
        return response

    def _write(
        self,
        role: str,
        operation: str,
        params: dict[str, Any],
        request: AWSPreparedRequest,
        event_name: str,
    ) -> AWSResponse | None:
        writes = self._meter.writes_of(operation, params)
        snapshots = [self._items.snapshot(write.table, write.key) for write in writes]
        for write in writes:
            write.before = self._meter.read(write)
        response = botocore_stubber(event_name, request)
        charges: list[Charge] = []
        table_units = index_units = 0.0
        for write in writes:
            after = self._meter.read(write)
            write_charges = self._write_charges(write, after)
            charges += write_charges
            for charge in write_charges:
                if "/" in charge.table:
                    index_units += charge.units
                else:
                    table_units += charge.units
        refusal = self.capacity.admit_write(self.sim.env.now, charges)
        if refusal is None:
            self.usage.table_wcu[role] += table_units
            self.usage.index_wcu[role] += index_units
            if self.shadow > 0 and role in SHADOWED_ROLES:
                self.capacity.add_shadow_writes(self.sim.env.now, self.shadow_charges(charges))
            return response
        # Throttled: as if it never reached the items.
        for snapshot in reversed(snapshots):
            self._items.restore(snapshot)
        if operation == "TransactWriteItems":
            return _transaction_throttled(request, writes, charges, refusal)
        return _throttled(request, "ProvisionedThroughputExceededException", refusal)

    def _write_charges(self, write: Any, after: dict[str, Any] | None) -> list[Charge]:
        """The units of one item write on the table's key and on each index entry's key
        (`WriteMeter.units`' rules, split by the partition they land on)."""
        shape = self._meter.shape(write.table)
        before = write.before
        table_units = float(
            _units(max(item_size(before), item_size(after))) * (2 if write.transactional else 1)
        )
        hash_name = shape.key[0]
        key_value = _scalar((after or before or write.key).get(hash_name) or write.key[hash_name])
        charges = [Charge(write.table, key_value, table_units)]
        for name, key, units in self._meter.index_writes(write.table, before, after):
            charges.append(Charge(f"{write.table}/{name}", _scalar(key), float(units)))
        return charges

    def _read_charges(
        self, operation: str, params: Mapping[str, Any], reply: Mapping[str, Any]
    ) -> list[Charge]:
        if operation == "GetItem":
            table = params["TableName"]
            key = _scalar(params["Key"][self._meter.shape(table).key[0]])
            units = read_units(item_size(reply.get("Item")), bool(params.get("ConsistentRead")))
            return [Charge(table, key, units)]
        if operation == "BatchGetItem":
            charges = []
            for table, items in reply.get("Responses", {}).items():
                consistent = bool(params["RequestItems"].get(table, {}).get("ConsistentRead"))
                hash_name = self._meter.shape(table).key[0]
                charges += [
                    Charge(table, _scalar(item[hash_name]), read_units(item_size(item), consistent))
                    for item in items
                ]
            return charges
        # Query: the page's entries together, on the key its condition names.
        table = params["TableName"]
        index = params.get("IndexName")
        shape = self._meter.shape(table)
        hash_name = shape.indexes[index][0][0] if index else shape.key[0]
        key = _key_condition_value(params, hash_name)
        size = sum(item_size(item) for item in reply.get("Items", []))
        return [
            Charge(
                f"{table}/{index}" if index else table,
                key,
                read_units(size, bool(params.get("ConsistentRead"))),
            )
        ]


def _session() -> boto3.session.Session:
    return boto3.session.Session(
        aws_access_key_id=CREDENTIALS["aws_access_key_id"],
        aws_secret_access_key=CREDENTIALS["aws_secret_access_key"],
        region_name=REGION,
    )


def _json_body(request: AWSPreparedRequest) -> dict[str, Any]:
    body = request.body
    if isinstance(body, str | bytes | bytearray) and body:
        parsed: dict[str, Any] = json.loads(body)
        return parsed
    return {}


def _batch_entries(params: Mapping[str, Any], key: str) -> list[Any]:
    """The entries of a batch request: SendMessageBatch's `Entries`, BatchGetItem's keys."""
    value = params.get(key) or []
    if isinstance(value, dict):
        return [k for table in value.values() for k in table.get("Keys", [])]
    return list(value)


def _scalar(value: Mapping[str, Any]) -> str:
    (_, raw), *_ = value.items()
    return str(raw)


def _key_condition_value(params: Mapping[str, Any], hash_name: str) -> str:
    """The partition key value a query's `KeyConditionExpression` names (`name = :value`)."""
    names = {v: k for k, v in params.get("ExpressionAttributeNames", {}).items()}
    for name, placeholder in re.findall(r"([#\w]+)\s*=\s*(:\w+)", params.get("KeyConditionExpression", "")):
        if names.get(name, name) == hash_name:
            return _scalar(params["ExpressionAttributeValues"][placeholder])
    return "?"


def _response(request: AWSPreparedRequest, body: dict[str, Any]) -> AWSResponse:
    headers = {"Content-Type": "application/x-amz-json-1.0", "x-amzn-RequestId": _THROTTLED}
    return AWSResponse(request.url, 400, headers, MockRawResponse(json.dumps(body)))  # type: ignore[arg-type]


def _throttled(request: AWSPreparedRequest, code: str, reason: str) -> AWSResponse:
    kind = reason.split(":", 1)[0]
    return _response(
        request,
        {
            "__type": _DDB_ERROR + code,
            "message": f"Throughput exceeds the current capacity ({reason})",
            "ThrottlingReasons": [{"reason": kind}],
        },
    )


def _transaction_throttled(
    request: AWSPreparedRequest, writes: list[Any], charges: list[Charge], reason: str
) -> AWSResponse:
    # One reason per transaction entry: ThrottlingError where the entry's item is on the
    # refused key (or on a refused table), None elsewhere.
    refused = reason.split(": ", 1)[1]
    codes = []
    for write in writes:
        on_refused = any(
            refused in (f"{charge.table} key {charge.key}", charge.table)
            for charge in charges
            if charge.table.split("/", 1)[0] == write.table
        )
        codes.append({"Code": "ThrottlingError" if on_refused else "None"})
    if not any(code["Code"] == "ThrottlingError" for code in codes):
        codes[0] = {"Code": "ThrottlingError"}
    summary = ", ".join(code["Code"] for code in codes)
    return _response(
        request,
        {
            "__type": _DDB_ERROR + "TransactionCanceledException",
            "message": "Transaction cancelled, please refer cancellation reasons for specific reasons "
            f"[{summary}]",
            "CancellationReasons": [
                code
                | ({"Message": "Throughput exceeds the current capacity"} if code["Code"] != "None" else {})
                for code in codes
            ],
        },
    )


@contextlib.contextmanager
def sqs_in_virtual_time(sim: Sim) -> Iterator[None]:
    """moto's SQS reads the simulation's clock: delays and visibility pass in virtual time."""
    saved = sqs_models.unix_time, sqs_models.unix_time_millis  # type: ignore[attr-defined]

    def unix_time(*_: Any) -> float:
        return sim.now().timestamp()

    def unix_time_millis(*_: Any) -> float:
        return sim.now().timestamp() * 1000.0

    sqs_models.unix_time = unix_time  # type: ignore[attr-defined,assignment]
    sqs_models.unix_time_millis = unix_time_millis  # type: ignore[attr-defined,assignment]
    try:
        yield
    finally:
        sqs_models.unix_time, sqs_models.unix_time_millis = saved  # type: ignore[attr-defined]
