"""The poller's schedule: one EventBridge target per shard, every minute (DESIGN §3)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest

from tests.infra.conftest import Synthesis, synthesize


@pytest.fixture(scope="module")
def seven_shards(tmp_path_factory: pytest.TempPathFactory) -> Synthesis:
    """A second synthesis, with more shards than one rule can target."""
    return synthesize(tmp_path_factory.mktemp("cdk.out-7-shards"), context={"shards": 7})


def _poll_rules(synthesis: Synthesis) -> list[Mapping[str, Any]]:
    return [rule["Properties"] for rule in synthesis.resources("AWS::Events::Rule").values()]


def _polled_shards(synthesis: Synthesis) -> list[int]:
    return [
        json.loads(target["Input"])["shard"] for rule in _poll_rules(synthesis) for target in rule["Targets"]
    ]


def test_poll_rules_fire_every_minute(synthesis: Synthesis) -> None:
    rules = _poll_rules(synthesis)
    assert rules
    assert all(rule["ScheduleExpression"] == "rate(1 minute)" for rule in rules)
    assert all(rule["State"] == "ENABLED" for rule in rules)


def test_poll_rules_target_only_the_poller_with_a_shard_input(synthesis: Synthesis) -> None:
    poller_arn = {"Fn::GetAtt": [synthesis.function_ids["poller"], "Arn"]}
    for rule in _poll_rules(synthesis):
        for target in rule["Targets"]:
            assert target["Arn"] == poller_arn
            assert set(json.loads(target["Input"])) == {"shard"}


def test_every_shard_is_polled_exactly_once(synthesis: Synthesis) -> None:
    assert synthesis.config.shards == 4
    assert sorted(_polled_shards(synthesis)) == [0, 1, 2, 3]


def test_no_poll_rule_has_more_than_five_targets(synthesis: Synthesis) -> None:
    assert all(len(rule["Targets"]) <= 5 for rule in _poll_rules(synthesis))


def test_seven_shards_take_two_rules_and_each_shard_once(seven_shards: Synthesis) -> None:
    assert [len(rule["Targets"]) for rule in _poll_rules(seven_shards)] == [5, 2]
    assert sorted(_polled_shards(seven_shards)) == list(range(7))


def test_shard_count_reaches_the_functions_that_hash_jobs_to_shards(seven_shards: Synthesis) -> None:
    for name in ("api", "poller", "worker"):
        assert seven_shards.function(name)["Properties"]["Environment"]["Variables"]["SHARD_COUNT"] == "7"


def test_eventbridge_may_invoke_the_poller(synthesis: Synthesis) -> None:
    rule_ids = set(synthesis.resources("AWS::Events::Rule"))
    permissions = [
        permission["Properties"]
        for permission in synthesis.resources("AWS::Lambda::Permission").values()
        if permission["Properties"]["Principal"] == "events.amazonaws.com"
    ]
    assert {p["SourceArn"]["Fn::GetAtt"][0] for p in permissions} == rule_ids
    assert all(
        p["FunctionName"] == {"Fn::GetAtt": [synthesis.function_ids["poller"], "Arn"]} for p in permissions
    )


def test_the_poller_has_concurrency_of_its_own_from_the_context(
    synthesis: Synthesis, narrowed: Synthesis
) -> None:
    """Reserved for it alone: a flood of API calls or worker batches cannot take the polls'
    concurrency. At least one per shard (the config refuses fewer); the others reserve none."""
    for stack, expected in ((synthesis, 8), (narrowed, 4)):
        assert stack.function("poller")["Properties"]["ReservedConcurrentExecutions"] == expected
        assert expected >= stack.config.shards
        for name in ("api", "worker"):
            assert "ReservedConcurrentExecutions" not in stack.function(name)["Properties"], name
