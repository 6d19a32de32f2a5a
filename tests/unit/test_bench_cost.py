"""The benchmark's cost model: list prices applied to what the requests bench measured.
Every expected figure is worked out by hand in the test."""

from __future__ import annotations

from typing import Any

import pytest

from bench.cost import (
    ACCESS_LOG_BYTES,
    PLATFORM_LOG_BYTES,
    PRICES,
    RUNS_PER_MONTH,
    PollCycle,
    RunUsage,
    cost_markdown,
    cost_model,
    dollars_per_million_runs,
    idle_receives_per_queue_per_month,
    provisioned_per_run,
    worker_wait_per_invocation,
)
from bench.metering import read_units, sqs_billed_requests

MEMORY = {"api": 512, "poller": 512, "worker": 1024}
NO_POLL = PollCycle(invocations=0, seconds=0, read_units=0, write_units=0, log_bytes=0)


def test_a_month_at_the_steady_load_is_4_32e9_runs() -> None:
    assert RUNS_PER_MONTH == 100_000 * 60 * 24 * 30 == 4_320_000_000


def test_an_idle_queue_mapping_makes_five_long_polls_every_20_seconds() -> None:
    # 5 pollers x 3 receives a minute x 43,200 minutes
    assert idle_receives_per_queue_per_month() == 648_000


def test_a_write_unit_per_run_costs_its_on_demand_price_per_million_runs() -> None:
    usage = RunUsage(1, 0, 0, {}, {}, 0, 0, 0)

    lines = dollars_per_million_runs(usage, MEMORY, 0, NO_POLL, 4)

    assert lines["dynamodb_writes"] == pytest.approx(0.625)
    assert sum(lines.values()) == pytest.approx(0.625)


def test_provisioned_capacity_is_priced_at_70_percent_utilization() -> None:
    # 1 WU a run at 100,000 runs/min = 1,666.7 WCU/s, / 0.7 = 2,381 WCU, x $0.00065 x 720 h
    # = $1,114.29 a month, over 4.32e9 runs: $0.2579 per million runs (= 0.00065 / 0.7 / 3600 x 1e6).
    assert provisioned_per_run(1, PRICES.dynamodb_wcu_hour) * 1e6 == pytest.approx(0.257937, rel=1e-5)
    usage = RunUsage(25, 4, 0, {}, {}, 0, 0, 0)
    lines = dollars_per_million_runs(usage, MEMORY, 0, NO_POLL, 4, provisioned=True)
    assert lines["dynamodb_writes"] == pytest.approx(25 * 0.257937, rel=1e-5)
    # reads: 4 RU x 0.00013 / 0.7 / 3600 x 1e6
    assert lines["dynamodb_reads"] == pytest.approx(0.206349, rel=1e-5)


def test_every_line_of_a_hand_computed_run() -> None:
    usage = RunUsage(
        write_units=25,
        read_units=4,
        sqs_requests=2,
        invocations={"api": 1, "worker": 0.1},
        seconds={"api": 0.05, "worker": 0.1},
        log_bytes=1024,
        api_requests=1,
        traces=1.1,
    )

    lines = dollars_per_million_runs(usage, MEMORY, mappings=3, cycle=NO_POLL, shards=4)

    assert lines["dynamodb_writes"] == pytest.approx(15.625)  # 25 x $0.625
    assert lines["dynamodb_reads"] == pytest.approx(0.5)  # 4 x $0.125
    # 2 requests, plus 3 queues x 648,000 idle receives / 4.32e9 runs = 0.00045 a run; x $0.40
    assert lines["sqs_requests"] == pytest.approx(2.00045 * 0.40)
    assert lines["lambda_requests"] == pytest.approx(0.22)  # 1.1 x $0.20
    # 0.05 s x 0.5 GB + 0.1 s x 1 GB = 0.125 GB-s x $16.6667 per million GB-s
    assert lines["lambda_gb_seconds"] == pytest.approx(2.0833375)
    assert lines["api_gateway"] == pytest.approx(3.5)
    assert lines["logs"] == pytest.approx(1024 / 2**30 * 0.5 * 1e6)  # $0.4768
    assert lines["xray"] == pytest.approx(1.1 * 0.05 * 5.0)  # 5 % of 1.1 traces x $5 per million
    assert lines["poll_cycle"] == 0


def test_the_poll_cycle_of_one_shard_for_a_month() -> None:
    cycle = PollCycle(invocations=1, seconds=0.1, read_units=4, write_units=1, log_bytes=1000)

    month = cycle.dollars_per_month(512, PRICES, provisioned=False)

    assert month["dynamodb"] == pytest.approx(43_200 * (0.625 + 4 * 0.125) / 1e6)  # $0.0486
    assert month["lambda_requests"] == pytest.approx(43_200 * 0.2 / 1e6)
    assert month["lambda_gb_seconds"] == pytest.approx(43_200 * 0.05 * 0.0000166667)
    assert month["logs"] == pytest.approx(43_200 * 1000 / 2**30 * 0.5)
    amortized = dollars_per_million_runs(RunUsage(0, 0, 0, {}, {}, 0, 0, 0), MEMORY, 0, cycle, shards=4)
    assert amortized["poll_cycle"] == pytest.approx(sum(month.values()) * 4 / 4.32e9 * 1e6)


@pytest.mark.parametrize(
    ("size", "consistent", "transactional", "units"),
    [
        (0, True, False, 1.0),  # a missing item still costs a unit
        (4096, True, False, 1.0),
        (4097, True, False, 2.0),
        (4096, False, False, 0.5),
        (5000, False, False, 1.0),
        (100, True, True, 2.0),
    ],
)
def test_read_units_follow_dynamodb_rules(
    size: int, consistent: bool, transactional: bool, units: float
) -> None:
    assert read_units(size, consistent, transactional) == units


def test_sqs_bills_a_request_per_started_64_kib() -> None:
    assert sqs_billed_requests(0) == 1
    assert sqs_billed_requests(65_536) == 1
    assert sqs_billed_requests(65_537) == 2


def _requests(architecture: str = "x86_64") -> dict[str, Any]:
    """A `requests` section as `python -m bench --only requests` writes it (one path)."""
    return {
        "functions": {
            name: {"memory_mb": mb, "architecture": architecture, "log_level": "INFO"}
            for name, mb in MEMORY.items()
        },
        "event_source_mappings": 3,
        "poll_cycle": {
            "shards": 4,
            "invocations": 4,
            "seconds": 0.4,
            "read_units": 16,
            "table_wcu": 4,
            "index_wcu": 0,
            "log_bytes": 2000,
        },
        "paths": {
            "near": {
                "description": "due within the lookahead: claimed at creation",
                "table_wcu_per_run": 15,
                "index_wcu_per_run": 10,
                "read_units_per_run": 3,
                "sqs_requests_per_run": {"functions": 1, "event source mapping": 0.2},
                "invocations_per_run": {"api": 1, "worker": 0.1},
                "lambda_seconds_per_run": {"api": 0.05, "worker": 0.1},
                "log_bytes_per_run": {"worker": 500},
            }
        },
    }


def test_the_cost_section_totals_its_lines_and_counts_lambdas_and_api_gateways_own_log_lines() -> None:
    cost = cost_model(_requests())

    near = cost["paths"]["near"]
    assert near["usage_per_run"]["log_bytes"] == 500 + 1.1 * PLATFORM_LOG_BYTES + ACCESS_LOG_BYTES
    assert ACCESS_LOG_BYTES > 300  # the access log line of one request, with its event overhead
    assert near["usage_per_run"]["traces"] == 1.1
    assert near["on_demand_total"] == pytest.approx(sum(near["on_demand"].values()))
    assert near["on_demand"]["dynamodb_writes"] == pytest.approx(15.625)
    assert near["provisioned_total"] < near["on_demand_total"]
    assert cost["poll_cycle_per_shard_per_month"]["usage_per_poll"]["read_units"] == 4
    assert cost["eventbridge_scheduler"] == pytest.approx(1.0)
    assert cost["price_list"]["as_of"] == "2026-11"


def test_the_markdown_table_shows_both_totals_and_eventbridge_scheduler_beside_them() -> None:
    table = cost_markdown(cost_model(_requests()))

    assert (
        "| DynamoDB writes (jobs table + indexes + idempotency) | $15.62 (25.0 WU) |" in table
    )  # $15.625, rounded half to even
    assert "**total, on-demand capacity**" in table
    assert "**total, provisioned capacity**" in table
    assert "| EventBridge Scheduler, for comparison | $1.00 |" in table


def test_arm_functions_are_priced_at_gravitons_gb_second() -> None:
    x86 = cost_model(_requests(architecture="x86_64"))["paths"]["near"]["on_demand"]
    arm = cost_model(_requests(architecture="arm64"))

    near = arm["paths"]["near"]["on_demand"]
    assert arm["price_list"]["lambda_architecture"] == "arm64"
    # The same GB-seconds at $13.3334 per million where x86 is $16.6667: 20 % less.
    assert near["lambda_gb_seconds"] == pytest.approx(x86["lambda_gb_seconds"] * 13.3334 / 16.6667)
    assert near["lambda_gb_seconds"] > 0
    assert near["lambda_requests"] == x86["lambda_requests"]  # the same request price


def test_an_architecture_without_prices_or_a_mix_of_them_is_refused() -> None:
    with pytest.raises(ValueError, match="no Lambda prices for riscv"):
        cost_model(_requests(architecture="riscv"))
    mixed = _requests()
    mixed["functions"]["worker"]["architecture"] = "arm64"
    with pytest.raises(ValueError, match="one Lambda architecture"):
        cost_model(mixed)


def test_a_full_batch_waits_the_lead_and_its_last_runs_offset_less_the_pickup() -> None:
    # Visible together lead + 1 s .. lead before their times, picked up 0.5 s later on
    # average; the invocation lasts until the last of b uniform offsets: b / (b + 1).
    assert worker_wait_per_invocation(2, 10) == pytest.approx(2 + 10 / 11 - 0.5)
    assert worker_wait_per_invocation(0, 1) == 0.0  # never below nothing


def test_the_workers_wait_for_its_runs_time_is_billed_to_each_run_of_a_full_batch() -> None:
    requests = _requests() | {"delivery_lead_seconds": 2, "worker_batch_size": 10}

    near = cost_model(requests)["paths"]["near"]

    # The batch's records side by side: its 2.41 s wait, then one record's 0.1 s, for 10 runs.
    per_run = (worker_wait_per_invocation(2, 10) + 0.1) / 10
    assert near["usage_per_run"]["seconds"]["worker"] == pytest.approx(per_run)
    # 0.05 s x 0.5 GB + 0.251 s x 1 GB, x $16.6667 per million GB-s
    assert near["on_demand"]["lambda_gb_seconds"] == pytest.approx(
        (0.05 * 0.5 + per_run * 1.0) * 16.6667, rel=1e-4
    )
