"""Settings: environment variables, read once into one typed model."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from scheduler_core.domain.vocabulary import Priority
from scheduler_core.settings import Settings

QUEUES = {
    "QUEUE_URL_HIGH": "https://sqs.local/000000000000/high",
    "QUEUE_URL_NORMAL": "https://sqs.local/000000000000/normal",
    "QUEUE_URL_LOW": "https://sqs.local/000000000000/low",
}


def test_from_env_reads_the_documented_variables() -> None:
    settings = Settings.from_env(
        {
            "JOBS_TABLE_NAME": "jobs",
            "IDEMPOTENCY_TABLE_NAME": "idempotency",
            "DLQ_URL": "https://sqs.local/000000000000/dlq",
            "SHARD_COUNT": "16",
            "LOOKAHEAD_SECONDS": "180",
            "RUN_LEASE_SECONDS": "300",
            **QUEUES,
        }
    )

    assert settings.jobs_table_name == "jobs"
    assert settings.idempotency_table_name == "idempotency"
    assert settings.dlq_url == "https://sqs.local/000000000000/dlq"
    assert settings.shard_count == 16
    assert settings.lookahead_seconds == 180
    assert settings.run_lease_seconds == 300
    assert settings.queue_url_normal == QUEUES["QUEUE_URL_NORMAL"]


def test_from_env_ignores_unrelated_variables() -> None:
    settings = Settings.from_env({"PATH": "/usr/bin", "AWS_REGION": "eu-west-1", "shard_count": "9"})

    assert settings == Settings.from_env({})


def test_from_env_defaults() -> None:
    settings = Settings.from_env({})

    assert settings.shard_count == 4
    assert settings.lookahead_seconds == 120
    assert settings.jobs_table_name == ""
    assert settings.run_retention_days == 30
    assert settings.max_request_bytes == 256 * 1024


def test_from_env_reads_the_process_environment_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JOBS_TABLE_NAME", "jobs-from-process")
    monkeypatch.setenv("SHARD_COUNT", "8")

    settings = Settings.from_env()

    assert (settings.jobs_table_name, settings.shard_count) == ("jobs-from-process", 8)


@pytest.mark.parametrize(
    ("name", "value"),
    [("SHARD_COUNT", "0"), ("SHARD_COUNT", "four"), ("LOOKAHEAD_SECONDS", "59"), ("LOOKAHEAD_SECONDS", "0")],
)
def test_from_env_rejects_out_of_range_values_naming_the_variable(name: str, value: str) -> None:
    with pytest.raises(ValidationError) as exc:
        Settings.from_env({name: value})

    assert [error["loc"] for error in exc.value.errors()] == [(name,)]


def test_a_lookahead_of_exactly_one_minute_is_allowed() -> None:
    assert Settings.from_env({"LOOKAHEAD_SECONDS": "60"}).lookahead_seconds == 60


@pytest.mark.parametrize(
    ("priority", "variable"),
    [
        (Priority.HIGH, "QUEUE_URL_HIGH"),
        (Priority.NORMAL, "QUEUE_URL_NORMAL"),
        (Priority.LOW, "QUEUE_URL_LOW"),
    ],
)
def test_queue_url_picks_the_queue_of_the_priority(priority: Priority, variable: str) -> None:
    assert Settings.from_env(QUEUES).queue_url(priority) == QUEUES[variable]


def test_settings_are_frozen() -> None:
    settings = Settings.from_env({})

    with pytest.raises(ValidationError):
        settings.shard_count = 8  # type: ignore[misc]


def test_settings_built_by_field_name_are_honoured() -> None:
    settings = Settings.model_validate({"shard_count": 8, "jobs_table_name": "jobs"})
    assert (settings.shard_count, settings.jobs_table_name) == (8, "jobs")


def test_a_misspelt_setting_is_refused_not_ignored() -> None:
    with pytest.raises(ValidationError):
        Settings.model_validate({"shard_cuont": 8})


def test_the_target_checks_settings_are_read_from_the_environment() -> None:
    """What the api's target check reads: the stack's place, its functions' name prefix and
    the ARN patterns the worker is granted, as JSON lists."""
    settings = Settings.from_env(
        {
            "STACK_PARTITION": "aws",
            "STACK_REGION": "eu-west-1",
            "STACK_ACCOUNT_ID": "123456789012",
            "FUNCTION_NAME_PREFIX": "ServerlessScheduler-",
            "TARGET_QUEUE_ARNS": "[]",
            "TARGET_TOPIC_ARNS": '["arn:aws:sns:eu-west-1:123456789012:*"]',
            "TARGET_FUNCTION_ARNS": json.dumps(
                ["arn:aws:lambda:eu-west-1:1:function:a-*", "arn:aws:lambda:*:1:function:b"]
            ),
        }
    )

    assert (settings.stack_partition, settings.stack_region, settings.stack_account_id) == (
        "aws",
        "eu-west-1",
        "123456789012",
    )
    assert settings.function_name_prefix == "ServerlessScheduler-"
    assert settings.target_queue_arns == ()
    assert settings.target_topic_arns == ("arn:aws:sns:eu-west-1:123456789012:*",)
    assert settings.target_function_arns == (
        "arn:aws:lambda:eu-west-1:1:function:a-*",
        "arn:aws:lambda:*:1:function:b",
    )
    assert settings.target_event_bus_arns == ()  # not given: no shared event buses
    assert settings.worker_role_arn == ""


@pytest.mark.parametrize("value", ["arn:aws:sns:eu-west-1:1:t", '{"a": 1}', "[1]", '["a"'])
def test_target_arn_patterns_that_are_no_json_list_of_strings_are_refused(value: str) -> None:
    with pytest.raises(ValidationError) as exc:
        Settings.from_env({"TARGET_TOPIC_ARNS": value})

    assert {error["loc"][0] for error in exc.value.errors()} == {"TARGET_TOPIC_ARNS"}
