"""Dollars per million one-off runs, from what `python -m bench --only requests` measured
(calls, DynamoDB capacity units, SQS requests as billed, invocations, busy time, log bytes
per run) and a dated list of AWS on-demand prices. Pure: no AWS, no clock.

The model, and what it assumes beyond the measurement:
- A month is 30 days (43,200 minutes, 720 hours); the steady load is 100,000 runs a minute,
  4.32e9 runs a month. Fixed costs (the poll cycle, the mappings' idle long polls) are
  amortized over that load.
- An SQS event source mapping keeps `ESM_IDLE_POLLERS` pollers long-polling each of its
  queues back to back (`ESM_LONG_POLL_SECONDS` each), whatever the load: receives that
  find nothing are billed too. Receives and deletes that carry runs are measured.
- Lambda is billed per invocation and per GB-second at the deployed memory size; the busy
  time is measured on moto (wall time of the services' work, in a trial of each path with
  the write meter off), which is neither AWS's latency nor a real target's; cold starts are left out.
- Every invocation also logs Lambda's START, END and REPORT lines (with the X-Ray line,
  tracing being active): `PLATFORM_LOG_LINES`, a sample of their size; every API request
  one access log line (`ACCESS_LOG_LINE`). The audit lines are measured. A GB is 2^30 bytes.
- X-Ray records `XRAY_SAMPLED` of the API's requests and of the functions' invocations.
- The worker waits for each run's time inside its invocation, which the measurement (a
  manual clock) skips. SQS delays in whole seconds, floored, less `delivery_lead_seconds`:
  the messages a poll sends for one second's runs become visible together, between lead +
  1 s and lead before their times, and a mapping's poller picks them up 0-1 s later (0.5 s
  on average, the capacity model's figure, `bench.capacity.latency`). At the steady load
  every batch is full (`worker_batch_size` records of one second), and its invocation
  waits for the last of them: lead + b/(b+1) - 0.5 s on average for b records (3.49 s at
  the 3 s lead and the batches of 100 Deploy gives for this load, as the measurement deploys
  them; the capacity simulation's steady-tuned invocations average 2.99 s, with 90 records
  a batch). The worker runs a batch's records side by side, so the invocation then lasts
  about one record's time more (the requests part measures records one after another: its
  time per run is one record's); `python -m bench --only worker-cpu` measured invocations of
  3.7-4.5 s for 100 records due over a second. Each run bears a b-th of the invocation.
  Fewer records a batch raise it: batches of 10, the default, wait 2.41 s for 10 runs.
- Provisioned capacity: auto scaling holds the tables at `TARGET_UTILIZATION` of the
  capacity the steady load needs (capacity units = units per run × runs per second ÷ 0.7),
  billed by the hour; indexes and the idempotency table alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

MINUTES_PER_MONTH = 30 * 24 * 60
HOURS_PER_MONTH = 30 * 24
STEADY_RUNS_PER_MINUTE = 100_000
RUNS_PER_MONTH = STEADY_RUNS_PER_MINUTE * MINUTES_PER_MONTH  # 4.32e9
TARGET_UTILIZATION = 0.7  # DynamoDB auto scaling's target
ESM_IDLE_POLLERS = 5  # Lambda starts an SQS mapping with five pollers
ESM_LONG_POLL_SECONDS = 20  # each poller's receive waits up to 20 s for a message
GIB = 2**30
MILLION = 1_000_000
# What Lambda itself logs per invocation of a traced function (ids and figures of typical width).
PLATFORM_LOG_LINES = (
    "START RequestId: 8f5e0b6e-3c4a-4f0e-9a7b-2d1c0e9f8a7b Version: $LATEST\n"
    "END RequestId: 8f5e0b6e-3c4a-4f0e-9a7b-2d1c0e9f8a7b\n"
    "REPORT RequestId: 8f5e0b6e-3c4a-4f0e-9a7b-2d1c0e9f8a7b\tDuration: 123.45 ms\t"
    "Billed Duration: 124 ms\tMemory Size: 512 MB\tMax Memory Used: 98 MB\t\n"
    "XRAY TraceId: 1-6745f0a2-3b8c1d2e4f5a6b7c8d9e0f1a\tSegmentId: 1a2b3c4d5e6f7a8b\tSampled: true\t\n"
)
PLATFORM_LOG_BYTES = len(PLATFORM_LOG_LINES.encode())
# API Gateway's access log line per request: the stage's format (CDK's
# `json_with_standard_fields`, every field on) with a typical request's values, and the 26 B
# CloudWatch Logs counts per event.
ACCESS_LOG_LINE = (
    '{"requestId":"8f5e0b6e-3c4a-4f0e-9a7b-2d1c0e9f8a7b","ip":"203.0.113.17",'
    '"user":"AIDAJQABLZS4A3QDU576Q","caller":"AIDAJQABLZS4A3QDU576Q",'
    '"requestTime":"26/Nov/2026:17:19:09 +0000","httpMethod":"POST","resourcePath":"/v1/jobs",'
    '"status":"201","protocol":"HTTP/1.1","responseLength":"812"}'
)
ACCESS_LOG_BYTES = len(ACCESS_LOG_LINE.encode()) + 26
# X-Ray's default sampling rule: the first request each second, then 5 % (at the steady load
# the first-per-second share is negligible). API Gateway's stage and every function trace.
XRAY_SAMPLED = 0.05
# How long after a delayed message becomes visible a mapping's poller has it, on average
# (`bench.capacity.latency.DELAYED_PICKUP_MAX_SECONDS`: uniform over 0-1 s).
MEAN_PICKUP_SECONDS = 0.5


@dataclass(frozen=True)
class PriceList:
    """AWS list prices in US dollars, one unit each."""

    as_of: str
    region: str
    dynamodb_write_request_unit: float  # on-demand
    dynamodb_read_request_unit: float  # on-demand
    dynamodb_wcu_hour: float  # provisioned
    dynamodb_rcu_hour: float  # provisioned
    sqs_request: float  # standard queue, per 64 KiB chunk
    lambda_request: float
    lambda_gb_second: float  # at `lambda_architecture`
    api_gateway_rest_request: float
    logs_ingested_gb: float  # CloudWatch Logs, standard class
    xray_trace_recorded: float
    eventbridge_scheduler_invocation: float  # for comparison
    lambda_architecture: str = "x86_64"

    def for_architecture(self, architecture: str) -> PriceList:
        """These prices, Lambda's GB-second at `architecture`'s (the request price is the same)."""
        if architecture not in LAMBDA_GB_SECOND:
            known = sorted(LAMBDA_GB_SECOND)
            raise ValueError(f"the price list has no Lambda prices for {architecture}: {known}")
        price = LAMBDA_GB_SECOND[architecture]
        return replace(self, lambda_gb_second=price, lambda_architecture=architecture)


# Lambda's duration price per GB-second, us-east-1, the first 6 billion GB-seconds a month.
LAMBDA_GB_SECOND = {"x86_64": 0.0000166667, "arm64": 0.0000133334}


PRICES = PriceList(
    as_of="2026-11",
    region="us-east-1",
    dynamodb_write_request_unit=0.625 / MILLION,
    dynamodb_read_request_unit=0.125 / MILLION,
    dynamodb_wcu_hour=0.00065,
    dynamodb_rcu_hour=0.00013,
    sqs_request=0.40 / MILLION,
    lambda_request=0.20 / MILLION,
    lambda_gb_second=LAMBDA_GB_SECOND["x86_64"],
    api_gateway_rest_request=3.50 / MILLION,
    logs_ingested_gb=0.50,
    xray_trace_recorded=5.00 / MILLION,
    eventbridge_scheduler_invocation=1.00 / MILLION,
)


def idle_receives_per_queue_per_month(
    pollers: int = ESM_IDLE_POLLERS, wait_seconds: int = ESM_LONG_POLL_SECONDS
) -> float:
    """Receives an event source mapping makes on an empty queue in a month."""
    return pollers * (60 / wait_seconds) * MINUTES_PER_MONTH


def provisioned_dollars_per_month(units_per_second: float, unit_hour_price: float) -> float:
    """Provisioned capacity held at the target utilization for a steady rate, for a month."""
    return units_per_second / TARGET_UTILIZATION * unit_hour_price * HOURS_PER_MONTH


def provisioned_per_run(units_per_run: float, unit_hour_price: float) -> float:
    """Dollars per run of provisioned capacity at the steady load (the load cancels out: the
    capacity grows with it)."""
    runs_per_second = STEADY_RUNS_PER_MINUTE / 60
    monthly = provisioned_dollars_per_month(units_per_run * runs_per_second, unit_hour_price)
    return monthly / RUNS_PER_MONTH


def worker_wait_per_invocation(lead_seconds: float, batch: int) -> float:
    """What a full batch's invocation waits for its runs' time (see the module)."""
    return max(0.0, lead_seconds + batch / (batch + 1) - MEAN_PICKUP_SECONDS)


def gb_seconds(seconds: float, memory_mb: int) -> float:
    return seconds * memory_mb / 1024


@dataclass(frozen=True)
class PollCycle:
    """One shard's poll, every minute, whatever the load."""

    invocations: float
    seconds: float
    read_units: float
    write_units: float
    log_bytes: float

    @classmethod
    def per_shard(cls, cycle: Mapping[str, Any]) -> PollCycle:
        """From the requests bench's `poll_cycle` (one poll of every shard)."""
        shards = int(cycle["shards"])
        return cls(
            invocations=cycle["invocations"] / shards,
            seconds=cycle["seconds"] / shards,
            read_units=cycle["read_units"] / shards,
            write_units=(cycle["table_wcu"] + cycle["index_wcu"]) / shards,
            log_bytes=(cycle["log_bytes"] + PLATFORM_LOG_BYTES * cycle["invocations"]) / shards,
        )

    def dollars_per_month(self, memory_mb: int, prices: PriceList, provisioned: bool) -> dict[str, float]:
        """One shard's poll cycle for a month, line by line."""
        polls = MINUTES_PER_MONTH
        if provisioned:
            dynamodb = provisioned_dollars_per_month(
                self.write_units / 60, prices.dynamodb_wcu_hour
            ) + provisioned_dollars_per_month(self.read_units / 60, prices.dynamodb_rcu_hour)
        else:
            dynamodb = polls * (
                self.write_units * prices.dynamodb_write_request_unit
                + self.read_units * prices.dynamodb_read_request_unit
            )
        return {
            "dynamodb": dynamodb,
            "lambda_requests": polls * self.invocations * prices.lambda_request,
            "lambda_gb_seconds": polls * gb_seconds(self.seconds, memory_mb) * prices.lambda_gb_second,
            "logs": polls * self.log_bytes / GIB * prices.logs_ingested_gb,
        }


@dataclass(frozen=True)
class RunUsage:
    """What one run uses, on one path, from the requests bench."""

    write_units: float  # table, indexes and idempotency
    read_units: float
    sqs_requests: float  # billed requests, by the functions and the mapping
    invocations: Mapping[str, float]  # per function
    seconds: Mapping[str, float]  # busy seconds per function
    log_bytes: float  # the functions' lines and metrics, Lambda's own, the audit and access logs
    api_requests: float
    traces: float  # X-Ray traces (an API request with its api invocation is one)

    @classmethod
    def of_path(cls, path: Mapping[str, Any], wait_per_invocation: float = 0.0, batch: int = 1) -> RunUsage:
        """`wait_per_invocation`: what a full batch of `batch` runs waits for their time (see
        the module). The worker runs a batch's records side by side: an invocation lasts its
        wait and about one record's time (measured, one after another, per run)."""
        invocations = dict(path["invocations_per_run"])
        seconds = dict(path["lambda_seconds_per_run"])
        seconds["worker"] = (wait_per_invocation + seconds.get("worker", 0.0)) / batch
        # Every job was created through the api function: one request each, or one per batch.
        api_requests = invocations.get("api", 0.0)
        return cls(
            write_units=path["table_wcu_per_run"] + path["index_wcu_per_run"],
            read_units=path["read_units_per_run"],
            sqs_requests=sum(path["sqs_requests_per_run"].values()),
            invocations=invocations,
            seconds=seconds,
            log_bytes=sum(path["log_bytes_per_run"].values())
            + PLATFORM_LOG_BYTES * sum(invocations.values())
            + ACCESS_LOG_BYTES * api_requests,
            api_requests=api_requests,
            traces=sum(invocations.values()),
        )


def dollars_per_million_runs(
    usage: RunUsage,
    memory_mb: Mapping[str, int],
    mappings: int,
    cycle: PollCycle,
    shards: int,
    prices: PriceList = PRICES,
    provisioned: bool = False,
) -> dict[str, float]:
    """Each line of the bill for a million runs, at the steady load."""
    if provisioned:
        writes = provisioned_per_run(usage.write_units, prices.dynamodb_wcu_hour)
        reads = provisioned_per_run(usage.read_units, prices.dynamodb_rcu_hour)
    else:
        writes = usage.write_units * prices.dynamodb_write_request_unit
        reads = usage.read_units * prices.dynamodb_read_request_unit
    idle_receives = mappings * idle_receives_per_queue_per_month() / RUNS_PER_MONTH
    compute = sum(gb_seconds(seconds, memory_mb[name]) for name, seconds in usage.seconds.items())
    poll_cycle = sum(cycle.dollars_per_month(memory_mb["poller"], prices, provisioned).values())
    per_run = {
        "dynamodb_writes": writes,
        "dynamodb_reads": reads,
        "sqs_requests": (usage.sqs_requests + idle_receives) * prices.sqs_request,
        "lambda_requests": sum(usage.invocations.values()) * prices.lambda_request,
        "lambda_gb_seconds": compute * prices.lambda_gb_second,
        "api_gateway": usage.api_requests * prices.api_gateway_rest_request,
        "logs": usage.log_bytes / GIB * prices.logs_ingested_gb,
        "xray": usage.traces * XRAY_SAMPLED * prices.xray_trace_recorded,
        "poll_cycle": poll_cycle * shards / RUNS_PER_MONTH,
    }
    return {line: dollars * MILLION for line, dollars in per_run.items()}


def cost_model(requests: Mapping[str, Any], prices: PriceList = PRICES) -> dict[str, Any]:
    """The `cost` section of the bench's figures, from its `requests` section."""
    memory_mb = {name: int(f["memory_mb"]) for name, f in requests["functions"].items()}
    architectures = {f["architecture"] for f in requests["functions"].values()}
    if len(architectures) != 1:
        raise ValueError(f"one Lambda architecture is priced at a time, the functions run on {architectures}")
    prices = prices.for_architecture(architectures.pop())
    shards = int(requests["poll_cycle"]["shards"])
    mappings = int(requests["event_source_mappings"])
    cycle = PollCycle.per_shard(requests["poll_cycle"])
    lead = float(requests.get("delivery_lead_seconds", 0))
    batch = int(requests.get("worker_batch_size", 10))
    wait = worker_wait_per_invocation(lead, batch)
    paths: dict[str, Any] = {}
    for name, path in requests["paths"].items():
        usage = RunUsage.of_path(path, wait, batch)
        on_demand = dollars_per_million_runs(usage, memory_mb, mappings, cycle, shards, prices)
        provisioned = dollars_per_million_runs(
            usage, memory_mb, mappings, cycle, shards, prices, provisioned=True
        )
        paths[name] = {
            "description": path["description"],
            "usage_per_run": asdict(usage),
            "on_demand": on_demand,
            "on_demand_total": sum(on_demand.values()),
            "provisioned": provisioned,
            "provisioned_total": sum(provisioned.values()),
        }
    return {
        "unit": "US dollars per million one-off HTTP runs",
        "price_list": asdict(prices),
        "assumptions": {
            "steady_runs_per_minute": STEADY_RUNS_PER_MINUTE,
            "runs_per_month": RUNS_PER_MONTH,
            "minutes_per_month": MINUTES_PER_MONTH,
            "esm_idle_pollers_per_queue": ESM_IDLE_POLLERS,
            "esm_long_poll_seconds": ESM_LONG_POLL_SECONDS,
            "esm_idle_receives_per_queue_per_month": idle_receives_per_queue_per_month(),
            "provisioned_target_utilization": TARGET_UTILIZATION,
            "platform_log_bytes_per_invocation": PLATFORM_LOG_BYTES,
            "api_access_log_bytes_per_request": ACCESS_LOG_BYTES,
            "xray_sampled": XRAY_SAMPLED,
            "worker_wait": {
                "delivery_lead_seconds": lead,
                "worker_batch_size": batch,
                "seconds_per_run": wait / batch,
                "seconds_per_invocation": wait,
                "rule": "a full batch's invocation waits lead + b/(b+1) - 0.5 s for its last run's time, "
                "then takes about one record's time (its records run side by side)",
            },
            "memory_mb": memory_mb,
            "shards": shards,
            "event_source_mappings": mappings,
            "lambda_duration": "measured on moto (wall time, the write meter off); no cold starts",
        },
        "paths": paths,
        "poll_cycle_per_shard_per_month": {
            "usage_per_poll": asdict(cycle),
            "on_demand": cycle.dollars_per_month(memory_mb["poller"], prices, provisioned=False),
            "provisioned": cycle.dollars_per_month(memory_mb["poller"], prices, provisioned=True),
        },
        "esm_idle_receives_per_month": mappings * idle_receives_per_queue_per_month() * prices.sqs_request,
        "eventbridge_scheduler": prices.eventbridge_scheduler_invocation * MILLION,
    }


_LINES = {
    "dynamodb_writes": "DynamoDB writes (jobs table + indexes + idempotency)",
    "dynamodb_reads": "DynamoDB reads",
    "sqs_requests": "SQS requests (functions + queue mapping, idle long polls included)",
    "lambda_requests": "Lambda requests",
    "lambda_gb_seconds": "Lambda GB-seconds (the worker's wait for the run's time included)",
    "api_gateway": "API Gateway REST (the create)",
    "logs": "CloudWatch Logs ingestion (functions, audit, API access log)",
    "xray": "X-Ray traces (5 % sampled)",
    "poll_cycle": "poll cycle (every shard, every minute), amortized",
}


def _quantity(line: str, usage: Mapping[str, Any]) -> str:
    """What a line is made of, per run."""
    if line == "dynamodb_writes":
        return f"{usage['write_units']:.1f} WU"
    if line == "dynamodb_reads":
        return f"{usage['read_units']:.1f} RU"
    if line == "sqs_requests":
        return f"{usage['sqs_requests']:.2f} req"
    if line == "lambda_requests":
        return f"{sum(usage['invocations'].values()):.2f} inv"
    if line == "lambda_gb_seconds":
        return f"{sum(usage['seconds'].values()) * 1000:.0f} ms"
    if line == "logs":
        return f"{usage['log_bytes']:,.0f} B"
    if line == "api_gateway":
        return f"{usage['api_requests']:.2f} req"
    return ""


def _dollars(value: float) -> str:
    return f"${value:.2f}" if value >= 0.01 else f"${value:.4f}"


def cost_markdown(cost: Mapping[str, Any]) -> str:
    """The cost table of docs/benchmarks.md: every line per path, both totals, EventBridge
    Scheduler beside."""
    paths = cost["paths"]
    headers = [
        "per million one-off HTTP runs",
        *(f"{name}: {_short(p['description'])}" for name, p in paths.items()),
    ]
    rows: list[list[str]] = []
    for line, label in _LINES.items():
        cells = []
        for path in paths.values():
            quantity = _quantity(line, path["usage_per_run"])
            cells.append(_dollars(path["on_demand"][line]) + (f" ({quantity})" if quantity else ""))
        rows.append([label, *cells])
    rows.append(
        ["**total, on-demand capacity**", *(f"**{_dollars(p['on_demand_total'])}**" for p in paths.values())]
    )
    rows.append(
        [
            f"DynamoDB writes + reads, provisioned (auto scaling at {TARGET_UTILIZATION:.0%})",
            *(
                _dollars(p["provisioned"]["dynamodb_writes"] + p["provisioned"]["dynamodb_reads"])
                for p in paths.values()
            ),
        ]
    )
    rows.append(
        [
            "**total, provisioned capacity**",
            *(f"**{_dollars(p['provisioned_total'])}**" for p in paths.values()),
        ]
    )
    rows.append(
        ["EventBridge Scheduler, for comparison", *(_dollars(cost["eventbridge_scheduler"]) for _ in paths)]
    )
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _short(description: str) -> str:
    return description.split(":", 1)[0]


def print_cost(cost: Mapping[str, Any]) -> None:
    prices = cost["price_list"]
    assumptions = cost["assumptions"]
    print(
        f"Cost per million one-off HTTP runs — AWS list prices, {prices['region']}, price list as of "
        f"{prices['as_of']}; at a steady {assumptions['steady_runs_per_minute']:,} runs a minute "
        f"({assumptions['runs_per_month']:.3g} a month)\n"
    )
    print(cost_markdown(cost))
    cycle = cost["poll_cycle_per_shard_per_month"]
    on_demand, provisioned = sum(cycle["on_demand"].values()), sum(cycle["provisioned"].values())
    print(
        f"\n  poll cycle: {_dollars(on_demand)} per shard per month on-demand "
        f"({_dollars(provisioned)} provisioned), {assumptions['shards']} shards"
    )
    print(
        f"  queue mappings' idle long polls: {_dollars(cost['esm_idle_receives_per_month'])} a month "
        f"({assumptions['event_source_mappings']} queues, {assumptions['esm_idle_pollers_per_queue']} "
        f"pollers each, {assumptions['esm_long_poll_seconds']} s receives)"
    )
    memory = ", ".join(f"{name} {mb} MB" for name, mb in sorted(assumptions["memory_mb"].items()))
    print(f"  Lambda ({prices['lambda_architecture']}): {memory}; duration {assumptions['lambda_duration']}")
    wait = assumptions["worker_wait"]
    print(
        f"  worker: {wait['seconds_per_run'] * 1000:.0f} ms a run of waiting for its time included "
        f"(a {wait['delivery_lead_seconds']:.0f} s delivery lead over batches of {wait['worker_batch_size']})"
    )
    print(
        f"  logs: the functions' lines and metrics and the api's audit lines as measured, plus "
        f"{assumptions['platform_log_bytes_per_invocation']} B of Lambda's own lines per invocation and "
        f"{assumptions['api_access_log_bytes_per_request']} B of API Gateway's access log per request"
    )
    print(
        f"  X-Ray: {assumptions['xray_sampled']:.0%} of API requests and worker invocations traced "
        "(the default sampling rule)"
    )


def cost_headline(cost: Mapping[str, Any]) -> str:
    return (
        "; ".join(
            f"{name} {_dollars(p['on_demand_total'])} on-demand, "
            f"{_dollars(p['provisioned_total'])} provisioned"
            for name, p in cost["paths"].items()
        )
        + f" per million runs (EventBridge Scheduler {_dollars(cost['eventbridge_scheduler'])})"
    )
