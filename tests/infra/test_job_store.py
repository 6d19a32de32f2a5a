"""The jobs table and the idempotency table (DESIGN §2)."""

from __future__ import annotations

from typing import Any

from aws_cdk.assertions import Match

from tests.infra.conftest import Synthesis

PITR_ON = {"PointInTimeRecoveryEnabled": True}


def _table(synthesis: Synthesis, table: Any) -> Any:
    return synthesis.resources("AWS::DynamoDB::Table")[synthesis.logical_id(table)]


def test_jobs_table_is_keyed_by_pk_and_sk_on_demand_with_pitr_and_run_ttl(synthesis: Synthesis) -> None:
    synthesis.template.has_resource_properties(
        "AWS::DynamoDB::Table",
        {
            "KeySchema": [
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
            "AttributeDefinitions": Match.array_with(
                [{"AttributeName": "pk", "AttributeType": "S"}, {"AttributeName": "sk", "AttributeType": "S"}]
            ),
            "BillingMode": "PAY_PER_REQUEST",
            "PointInTimeRecoverySpecification": PITR_ON,
            "TimeToLiveSpecification": {"AttributeName": "expires_at", "Enabled": True},
        },
    )


def test_jobs_table_has_the_sparse_due_index_and_the_tenant_listing_index(synthesis: Synthesis) -> None:
    jobs = _table(synthesis, synthesis.stack.store.jobs_table)["Properties"]
    indexes = {index["IndexName"]: index for index in jobs["GlobalSecondaryIndexes"]}
    attribute_types = {a["AttributeName"]: a["AttributeType"] for a in jobs["AttributeDefinitions"]}

    assert set(indexes) == {"due", "by_tenant"}
    assert indexes["due"]["KeySchema"] == [
        {"AttributeName": "due_pk", "KeyType": "HASH"},
        {"AttributeName": "due_sk", "KeyType": "RANGE"},
    ]
    assert indexes["by_tenant"]["KeySchema"] == [
        {"AttributeName": "tenant", "KeyType": "HASH"},
        {"AttributeName": "created_key", "KeyType": "RANGE"},
    ]
    # Keys only: a change of an item that keeps its index keys writes no index entry.
    assert all(index["Projection"] == {"ProjectionType": "KEYS_ONLY"} for index in indexes.values())
    # due_sk is the fire time in epoch milliseconds, so it sorts numerically.
    assert attribute_types == {
        "pk": "S",
        "sk": "S",
        "due_pk": "S",
        "due_sk": "N",
        "tenant": "S",
        "created_key": "S",
    }


def test_jobs_table_survives_stack_deletion(synthesis: Synthesis) -> None:
    jobs = _table(synthesis, synthesis.stack.store.jobs_table)
    assert jobs["DeletionPolicy"] == "Retain"
    assert jobs["UpdateReplacePolicy"] == "Retain"


def test_idempotency_table_has_the_powertools_layout(synthesis: Synthesis) -> None:
    table = _table(synthesis, synthesis.stack.store.idempotency_table)["Properties"]
    assert table["KeySchema"] == [{"AttributeName": "id", "KeyType": "HASH"}]
    assert table["AttributeDefinitions"] == [{"AttributeName": "id", "AttributeType": "S"}]
    assert table["TimeToLiveSpecification"] == {"AttributeName": "expiration", "Enabled": True}
    assert table["BillingMode"] == "PAY_PER_REQUEST"
    assert table["PointInTimeRecoverySpecification"] == PITR_ON


def test_tables_are_plain_tables_that_moto_can_deploy(synthesis: Synthesis) -> None:
    assert synthesis.resources("AWS::DynamoDB::GlobalTable") == {}
    assert len(synthesis.resources("AWS::DynamoDB::Table")) == 2


def test_the_integration_tests_table_is_the_stacks_table(synthesis: Synthesis) -> None:
    """tests/integration creates the jobs table in moto by hand; it must not drift from infra."""
    from tests.support.harness import JOBS_TABLE_DEFINITION

    jobs = _table(synthesis, synthesis.stack.store.jobs_table)["Properties"]

    def indexes(definition: Any) -> dict[str, Any]:
        return {
            index["IndexName"]: (index["KeySchema"], index["Projection"])
            for index in definition["GlobalSecondaryIndexes"]
        }

    assert jobs["KeySchema"] == JOBS_TABLE_DEFINITION["KeySchema"]
    assert sorted(jobs["AttributeDefinitions"], key=str) == sorted(
        JOBS_TABLE_DEFINITION["AttributeDefinitions"], key=str
    )
    assert indexes(jobs) == indexes(JOBS_TABLE_DEFINITION)


def test_on_demand_by_default_with_nothing_to_scale(synthesis: Synthesis) -> None:
    tables = synthesis.resources("AWS::DynamoDB::Table").values()
    assert {table["Properties"]["BillingMode"] for table in tables} == {"PAY_PER_REQUEST"}
    assert synthesis.resources("AWS::ApplicationAutoScaling::ScalableTarget") == {}


def test_provisioned_capacity_scales_every_table_and_index_on_utilization(narrowed: Synthesis) -> None:
    """Context `table_capacity.mode: PROVISIONED` (see NARROWED_CONTEXT): each table and each
    index starts at its least units and is scaled by target tracking between the bounds."""
    tables = {
        name: _table(narrowed, table)["Properties"]
        for name, table in (
            ("jobs", narrowed.stack.store.jobs_table),
            ("idempotency", narrowed.stack.store.idempotency_table),
        )
    }
    least = {"ReadCapacityUnits": 5, "WriteCapacityUnits": 10}
    for properties in tables.values():
        assert "BillingMode" not in properties or properties["BillingMode"] == "PROVISIONED"
        assert properties["ProvisionedThroughput"] == least
    assert [index["ProvisionedThroughput"] for index in tables["jobs"]["GlobalSecondaryIndexes"]] == [
        least,
        least,
    ]

    targets = narrowed.resources("AWS::ApplicationAutoScaling::ScalableTarget").values()
    scaled = sorted(
        (
            target["Properties"]["ScalableDimension"],
            target["Properties"]["MinCapacity"],
            target["Properties"]["MaxCapacity"],
        )
        for target in targets
    )
    reads = ("dynamodb:{}:ReadCapacityUnits", 5, 500)
    writes = ("dynamodb:{}:WriteCapacityUnits", 10, 40000)
    expected = [
        (dimension.format(kind), low, high)
        for kind, count in (("index", 2), ("table", 2))
        for dimension, low, high in (reads, writes)
        for _ in range(count)
    ]
    assert scaled == sorted(expected)
    policies = narrowed.resources("AWS::ApplicationAutoScaling::ScalingPolicy").values()
    assert len(policies) == 8
    assert {
        policy["Properties"]["TargetTrackingScalingPolicyConfiguration"]["TargetValue"] for policy in policies
    } == {70}


def test_warm_throughput_prepares_the_jobs_table_and_its_indexes_for_a_burst(
    synthesis: Synthesis, narrowed: Synthesis
) -> None:
    """Context `table_capacity.warm` (see NARROWED_CONTEXT): the jobs table and each index
    serve that many units a second at once; the idempotency table (creates only) is left."""
    warm = {"ReadUnitsPerSecond": 15_000, "WriteUnitsPerSecond": 20_000}
    jobs = _table(narrowed, narrowed.stack.store.jobs_table)["Properties"]
    assert jobs["WarmThroughput"] == warm
    assert [index["WarmThroughput"] for index in jobs["GlobalSecondaryIndexes"]] == [warm, warm]
    assert "WarmThroughput" not in _table(narrowed, narrowed.stack.store.idempotency_table)["Properties"]
    default = _table(synthesis, synthesis.stack.store.jobs_table)["Properties"]
    assert "WarmThroughput" not in default
