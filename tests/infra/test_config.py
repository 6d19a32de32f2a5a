"""Context settings (no synthesis): defaults from cdk.json, overrides, and their bounds."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from aws_cdk import App, Stack

from infra import layers
from infra.build_deps_layer import pip_command
from infra.config import (
    HIGH_VOLUME_CONTEXT,
    LAMBDA_PYTHON_VERSION,
    MILLION_A_SECOND_CONTEXT,
    REPO_ROOT,
    ConfigError,
    SchedulerConfig,
    cdk_json_context,
    shards_needed,
)


def _config(**overrides: Any) -> SchedulerConfig:
    return SchedulerConfig.from_context(App(context={**cdk_json_context(), **overrides}).node)


def _capacity(**changes: Any) -> dict[str, Any]:
    """cdk.json's table_capacity with `changes`."""
    return {**cdk_json_context()["table_capacity"], **changes}


def test_cdk_json_holds_the_documented_defaults() -> None:
    config = _config()
    assert config.shards == 4
    assert config.worker_timeout_seconds == 90
    assert config.worker_memory_mb == 512
    assert config.visibility_timeout_seconds == 540
    assert config.max_receive_count == 5
    assert config.run_retention_days == 30
    assert config.lookahead_seconds == 120
    assert config.delivery_lead_seconds == 2
    assert config.resend_after_seconds == 60
    assert {p: (c.batch_size, c.max_concurrency) for p, c in config.queue_capacity.items()} == {
        "HIGH": (10, 20),
        "NORMAL": (10, 10),
        "LOW": (10, 4),
    }
    # No target offered to every tenant: each names an execution role of its own.
    assert config.target_queue_arns == ()
    assert config.target_topic_arns == ()
    assert config.target_event_bus_arns == ()
    assert config.target_function_arns == ()
    assert config.table_capacity.mode == "ON_DEMAND"
    assert config.target_runs_per_minute is None
    assert not config.table_capacity.provisioned
    assert config.customer_managed_keys is True
    assert config.poller_reserved_concurrency == 8
    assert (config.api_throttle_rate, config.api_throttle_burst) == (500, 1000)
    assert config.target_private_cidrs == ()
    assert (config.tenant_max_jobs, config.tenant_max_firings_per_minute, config.min_interval_seconds) == (
        10_000,
        6_000,
        60,
    )
    assert config.allow_http_targets is False
    assert config.per_session_tenant_roles == ()
    # Only the stack's functions send to its queues until operators are listed.
    assert config.queue_sender_arns == ()


def test_cli_style_string_overrides_are_parsed() -> None:
    config = _config(
        shards="7",
        queue_capacity=(
            '{"HIGH": {"batch_size": 5, "max_concurrency": 50}, '
            '"NORMAL": {"batch_size": 10, "max_concurrency": 10}, '
            '"LOW": {"batch_size": 1, "max_concurrency": 2}}'
        ),
        target_queue_arns='["arn:aws:sqs:eu-west-1:111122223333:callbacks"]',
        target_topic_arns='["arn:aws:sns:eu-west-1:111122223333:alerts"]',
        target_event_bus_arns="[]",
        target_function_arns='["arn:aws:lambda:eu-west-1:111122223333:function:jobs-*"]',
    )
    assert config.shards == 7
    assert config.queue_capacity["HIGH"].max_concurrency == 50
    assert config.target_queue_arns == ("arn:aws:sqs:eu-west-1:111122223333:callbacks",)
    assert config.target_topic_arns == ("arn:aws:sns:eu-west-1:111122223333:alerts",)
    assert config.target_event_bus_arns == ()
    assert config.target_function_arns == ("arn:aws:lambda:eu-west-1:111122223333:function:jobs-*",)


@pytest.mark.parametrize(
    "override",
    [
        {"shards": 0},
        {"max_receive_count": 4},
        {"worker_timeout_seconds": 901},
        {"worker_memory_mb": 127},
        {"worker_memory_mb": 10_241},
        {"lookahead_seconds": 30},
        {"delivery_lead_seconds": 6},
        {"resend_after_seconds": 0},
        {"resend_after_seconds": 3601},
        {"claim_parallelism": 0},
        {"claim_parallelism": 33},
        {"log_level": "VERBOSE"},
        {"queue_capacity": {"HIGH": {"batch_size": 10, "max_concurrency": 1}}},
        {
            "queue_capacity": {
                "HIGH": {"batch_size": 10, "max_concurrency": 20},
                "NORMAL": {"batch_size": 10, "max_concurrency": 10},
                "LOW": {"batch_size": 10, "max_concurrency": 1},
            }
        },
        {"target_queue_arns": "arn:aws:sqs:eu-west-1:111122223333:not-a-list"},
        {"target_topic_arns": "arn:aws:sns:eu-west-1:111122223333:not-a-list"},
        {"target_event_bus_arns": {"bus": "arn:aws:events:eu-west-1:111122223333:event-bus/b"}},
        {"target_function_arns": [42]},
        {"table_capacity": {"mode": "RESERVED"}},
        {"table_capacity": {"mode": "PROVISIONED"}},
        {"table_capacity": "not json"},
        {"target_runs_per_minute": 30_000_001},
        {"table_capacity": _capacity(target_utilization_percent=95)},
        {"table_capacity": _capacity(mode="RESERVED")},
        {"table_capacity": _capacity(read={"min": 100, "max": 50})},
        {"table_capacity": _capacity(write={"min": 0, "max": 50})},
        {"table_capacity": _capacity(warm={"write": 3_999})},
        {"table_capacity": _capacity(warm={"read": 11_999})},
        {"table_capacity": _capacity(warm={"write": "lots"})},
        {"customer_managed_keys": "maybe"},
        {"customer_managed_keys": 1},
        {"poller_reserved_concurrency": 0},
        {"poller_reserved_concurrency": 1001},
        {"poller_reserved_concurrency": 3},
        {"poller_reserved_concurrency": 8, "shards": 9},
        {"api_throttle_rate": 0},
        {"api_throttle_rate": 10_001},
        {"api_throttle_burst": 0},
        {"api_throttle_burst": 5_001},
        {"per_session_tenant_roles": "AWSReservedSSO_*"},
        {"per_session_tenant_roles": ["role/with/slashes"]},
        {"queue_sender_arns": ["*"]},
        {"queue_sender_arns": ["arn:aws:iam::*:role/Ops"]},
        {"queue_sender_arns": ["arn:aws:iam::123456789012:role/*"]},
        {"queue_sender_arns": ["arn:aws:iam::123456789012:role/Opérateur"]},
        {"per_session_tenant_roles": ["*"]},
        {"queue_sender_arns": ["arn:aws:sts::123456789012:assumed-role/Ops/alice"]},
        {"queue_sender_arns": "arn:aws:iam::123456789012:role/Ops"},
    ],
)
def test_out_of_range_context_is_rejected_before_synthesis(override: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        _config(**override)


def _queues(**limits: Any) -> dict[str, dict[str, Any]]:
    """cdk.json's queue_capacity with `limits` for every priority."""
    return {p: {**c, **limits} for p, c in cdk_json_context()["queue_capacity"].items()}


def test_batches_above_ten_need_a_batching_window_inside_the_delivery_lead() -> None:
    # 3 s of lead: a second for the poller to see the message, one for the run's start, one
    # for the window.
    config = _config(
        delivery_lead_seconds=3, queue_capacity=_queues(batch_size=100, batching_window_seconds=1)
    )
    assert {c.batching_window_seconds for c in config.queue_capacity.values()} == {1}
    assert _config().queue_capacity["HIGH"].batching_window_seconds == 0  # optional, none by default
    with pytest.raises(
        ConfigError, match=r"batch_size 100 needs a batching window.*: set batching_window_seconds to 1$"
    ):
        _config(delivery_lead_seconds=3, queue_capacity=_queues(batch_size=100))
    # At the default 2 s lead there is no room for a window: the error says both settings.
    with pytest.raises(
        ConfigError, match=r"set delivery_lead_seconds to 3 and batching_window_seconds to 1$"
    ):
        _config(queue_capacity=_queues(batch_size=100))
    with pytest.raises(
        ConfigError,
        match=r"batching_window_seconds 1 leaves the run no time to start.*at most 0 or raise "
        r"delivery_lead_seconds to 3$",
    ):
        _config(queue_capacity=_queues(batching_window_seconds=1))
    # A longer lead makes room for a longer window.
    assert _config(delivery_lead_seconds=4, queue_capacity=_queues(batching_window_seconds=2))
    with pytest.raises(ConfigError, match=r"batch_size must be between 1 and 100, got 101"):
        _config(delivery_lead_seconds=3, queue_capacity=_queues(batch_size=101, batching_window_seconds=1))
    with pytest.raises(ConfigError, match=r"batching_window_seconds must be between 0 and 300, got -1"):
        _config(queue_capacity=_queues(batch_size=100, batching_window_seconds=-1))
    with pytest.raises(ConfigError, match="optionally"):
        _config(queue_capacity=_queues(batching_window_seconds="soon"))


def test_the_high_volume_context_is_valid_and_is_the_command_deploy_gives() -> None:
    config = _config(**HIGH_VOLUME_CONTEXT)
    assert (config.shards, config.claim_parallelism, config.worker_memory_mb) == (64, 32, 1024)
    assert config.delivery_lead_seconds == 3
    assert {(c.batch_size, c.batching_window_seconds) for c in config.queue_capacity.values()} == {(100, 1)}
    # docs/operations/deploy.md's command for 100,000 runs a minute sets exactly these values.
    guide = (REPO_ROOT / "docs/operations/deploy.md").read_text()
    command = guide[guide.index("npx aws-cdk@2 deploy -c shards=64") :]
    command = command[: command.index("```")]
    given = dict(re.findall(r"-c (\w+)=('[^']*'|\S+)", command.replace("\\\n", " ")))
    assert {key: json.loads(value.strip("'")) for key, value in given.items()} == HIGH_VOLUME_CONTEXT


def test_table_capacity_errors_say_what_to_write() -> None:
    assert _config(table_capacity={"mode": "on_demand"}).table_capacity.mode == "ON_DEMAND"
    with pytest.raises(ConfigError, match="mode must be one of"):
        _config(table_capacity={"mode": "RESERVED"})
    with pytest.raises(ConfigError, match=re.escape('"read": {"min": n, "max": n}')):
        _config(table_capacity={"mode": "PROVISIONED"})
    with pytest.raises(ConfigError, match=r"table_capacity.read.max must be between 100"):
        _config(table_capacity=_capacity(mode="PROVISIONED", read={"min": 100, "max": 50}))
    provisioned = _config(
        table_capacity='{"mode": "provisioned", "read": {"min": 1, "max": 2}, '
        '"write": {"min": 3, "max": 4}, "target_utilization_percent": 50}'
    )
    assert provisioned.table_capacity.provisioned
    warmed = _config(table_capacity={"mode": "ON_DEMAND", "warm": {"write": 100_000}}).table_capacity
    assert (warmed.warm_read, warmed.warm_write) == (None, 100_000)
    assert (provisioned.table_capacity.write_min, provisioned.table_capacity.write_max) == (3, 4)


def test_the_million_a_second_context_is_valid_and_is_the_command_deploy_gives() -> None:
    """What Deploy tells a user to set before a million one-offs due in one second, which the
    capacity simulation's midnight-warm runs (`bench.capacity.scenarios.midnight`)."""
    capacity = _config(**HIGH_VOLUME_CONTEXT | MILLION_A_SECOND_CONTEXT).table_capacity
    assert not capacity.provisioned
    assert (capacity.warm_read, capacity.warm_write) == (25_000, 100_000)
    guide = (REPO_ROOT / "docs/operations/deploy.md").read_text()
    command = guide[guide.index('npx aws-cdk@2 deploy -c table_capacity=\'{"mode": "ON_DEMAND"') :]
    command = command[: command.index("```")]
    given = dict(re.findall(r"-c (\w+)=('[^']*'|\S+)", command))
    assert {key: json.loads(value.strip("'")) for key, value in given.items()} == MILLION_A_SECOND_CONTEXT


def test_a_declared_target_rate_checks_the_shards_it_needs() -> None:
    """`target_runs_per_minute` does not change `shards` (lowering it would strand jobs): it
    refuses a count too small for the rate, and names the count to set."""
    assert shards_needed(100_000, 16) == 5
    assert shards_needed(100_000, 32) == 4  # then the due index's keys bound it
    assert shards_needed(1, 1) == 1
    assert _config(target_runs_per_minute=100_000, shards=5).shards == 5
    assert (
        _config(target_runs_per_minute="100000", shards=4, claim_parallelism=32).target_runs_per_minute
        == 100_000
    )
    with pytest.raises(ConfigError, match=r"context shards 4 is below the 5 .* set shards to 5 or more"):
        _config(target_runs_per_minute=100_000)
    with pytest.raises(ConfigError, match="whole number or null"):
        _config(target_runs_per_minute="lots")
    with pytest.raises(ConfigError, match="target_runs_per_minute must be between 1"):
        _config(target_runs_per_minute=0)


def test_target_arn_patterns_must_fit_the_api_functions_environment() -> None:
    """The api function carries them (Lambda allows 4 KB of environment in all)."""
    arns = [f"arn:aws:sns:eu-west-1:111122223333:topic-{n:04d}" for n in range(40)]
    assert _config(target_topic_arns=arns).target_topic_arns == tuple(arns)

    with pytest.raises(ConfigError, match="use wildcards"):
        _config(
            target_topic_arns=arns, target_function_arns=[arn.replace(":sns:", ":lambda:") for arn in arns]
        )


def test_synth_without_the_deps_layer_tells_you_to_run_make_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    monkeypatch.setattr(layers, "DEPS_LAYER_BUILT", tmp_path / "python" / ".built")
    with pytest.raises(layers.MissingDepsLayerError, match="make install"):
        layers.SharedLayers(Stack(App(), "Stack"), "Layers")


def test_deps_layer_is_built_from_wheels_for_the_functions_python() -> None:
    command = pip_command("/tmp/target")
    assert command[command.index("--python-version") + 1] == LAMBDA_PYTHON_VERSION
    assert command[command.index("--platform") + 1] == "manylinux2014_aarch64"
    assert "--only-binary=:all:" in command


def test_the_keys_switch_reads_cli_strings() -> None:
    """`cdk deploy -c customer_managed_keys=false` passes the string "false"."""
    assert _config(customer_managed_keys="false").customer_managed_keys is False
    assert _config(customer_managed_keys="True").customer_managed_keys is True
    assert _config(customer_managed_keys=False).customer_managed_keys is False


def test_the_poller_reserves_at_least_one_concurrent_poll_per_shard() -> None:
    assert _config(shards=12, poller_reserved_concurrency="24").poller_reserved_concurrency == 24
    assert _config(shards=12, poller_reserved_concurrency=12).poller_reserved_concurrency == 12
    with pytest.raises(ConfigError, match="poller_reserved_concurrency 8 is below shards 12"):
        _config(shards=12)


def test_private_target_networks_are_cidrs_and_never_link_local() -> None:
    assert _config(target_private_cidrs='["10.1.0.0/16"]').target_private_cidrs == ("10.1.0.0/16",)
    assert _config(allow_http_targets="true").allow_http_targets is True
    with pytest.raises(ConfigError, match="link-local"):
        _config(target_private_cidrs=["169.254.0.0/16"])
    with pytest.raises(ConfigError, match="link-local"):
        _config(target_private_cidrs=["0.0.0.0/0"])  # everything: link-local too
    with pytest.raises(ConfigError, match="target_private_cidrs"):
        _config(target_private_cidrs=["ten/8"])
    with pytest.raises(ConfigError, match="list of CIDRs"):
        _config(target_private_cidrs='"10.0.0.0/8"')
