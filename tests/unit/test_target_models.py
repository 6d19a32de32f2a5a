"""The SNS, EventBridge and Lambda target models and FIFO queues (DESIGN §7): strict ARNs,
each refusal at the field with the part that is wrong; what delivery reads from them."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from scheduler_core.domain.api_shapes import JobCreate
from scheduler_core.domain.target_spec import EventBridgeTarget, LambdaTarget, SnsTarget, SqsTarget

ACCOUNT = "123456789012"


def job(target: dict[str, Any], payload: Any = None) -> JobCreate:
    return JobCreate.model_validate(
        {"name": "n", "schedule": {"cron": "0 2 * * *"}, "target": target, "payload": payload}
    )


def refusal(target: dict[str, Any], payload: Any = None) -> tuple[tuple[int | str, ...], str]:
    with pytest.raises(ValidationError) as exc:
        job(target, payload)
    [error] = exc.value.errors()
    return tuple(error["loc"]), error["msg"]


def topic(arn: str) -> dict[str, Any]:
    return {"type": "SNS", "topic_arn": arn}


def function(arn: str) -> dict[str, Any]:
    return {"type": "LAMBDA", "function_arn": arn}


def bus(name: str, **fields: str) -> dict[str, Any]:
    return {
        "type": "EVENTBRIDGE",
        "event_bus_name": name,
        "source": "com.example",
        "detail_type": "T",
        **fields,
    }


# --- SNS ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arn", "fifo", "region"),
    [
        (f"arn:aws:sns:eu-west-1:{ACCOUNT}:reports", False, "eu-west-1"),
        (f"arn:aws:sns:us-east-1:{ACCOUNT}:ledger.fifo", True, "us-east-1"),
        (f"arn:aws-cn:sns:cn-northwest-1:{ACCOUNT}:a_b-C9", False, "cn-northwest-1"),
        (f"arn:aws-eusc:sns:eusc-de-east-1:{ACCOUNT}:t", False, "eusc-de-east-1"),
        (f"arn:aws-us-gov:sns:us-gov-east-1:{ACCOUNT}:{'t' * 251}.fifo", True, "us-gov-east-1"),
    ],
)
def test_a_topic_arn_is_accepted_and_tells_its_kind_and_region(arn: str, fifo: bool, region: str) -> None:
    target = job(topic(arn)).target

    assert isinstance(target, SnsTarget)
    assert (target.topic_arn, target.fifo, target.region) == (arn, fifo, region)


@pytest.mark.parametrize(
    ("arn", "reason"),
    [
        ("reports", "must be an ARN such as arn:aws:sns:"),
        (f"arn:aws:sns:eu-west-1:{ACCOUNT}", "must be an ARN such as"),
        (f"urn:aws:sns:eu-west-1:{ACCOUNT}:t", "must be an ARN such as"),
        (f"arn:azure:sns:eu-west-1:{ACCOUNT}:t", "partition 'azure'"),
        (f"arn:aws:sqs:eu-west-1:{ACCOUNT}:t", "must be an ARN of sns, not of 'sqs'"),
        (f"arn:aws:sns:EU-WEST-1:{ACCOUNT}:t", "region 'EU-WEST-1'"),
        (f"arn:aws:sns::{ACCOUNT}:t", "region ''"),
        ("arn:aws:sns:eu-west-1:12345678901:t", "account '12345678901' is not a 12-digit"),
        ("arn:aws:sns:eu-west-1:12345678901a:t", "account '12345678901a'"),
        (f"arn:aws:sns:eu-west-1:{ACCOUNT}:", "topic name ''"),
        (f"arn:aws:sns:eu-west-1:{ACCOUNT}:a.b", "topic name 'a.b'"),
        (f"arn:aws:sns:eu-west-1:{ACCOUNT}:t:sub", "topic name 't:sub'"),
        (f"arn:aws:sns:eu-west-1:{ACCOUNT}:{'t' * 257}", "must be 1-256"),
        (f"arn:aws:sns:eu-west-1:{ACCOUNT}:{'t' * 252}.fifo", "must be 1-256"),
    ],
)
def test_a_bad_topic_arn_is_refused_at_the_field_naming_the_bad_part(arn: str, reason: str) -> None:
    location, message = refusal(topic(arn))

    assert location == ("target", "SNS", "topic_arn")
    assert reason in message


# --- Lambda -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "resource",
    ["function:f", "function:send_report-2", "function:f:$LATEST", "function:f:12", "function:f:live"],
)
def test_a_function_arn_with_or_without_a_qualifier_is_accepted(resource: str) -> None:
    arn = f"arn:aws:lambda:ap-southeast-2:{ACCOUNT}:{resource}"
    target = job(function(arn)).target

    assert isinstance(target, LambdaTarget)
    assert (target.function_arn, target.region) == (arn, "ap-southeast-2")


@pytest.mark.parametrize(
    ("arn", "reason"),
    [
        ("send-report", "must be an ARN such as arn:aws:lambda:"),
        (f"arn:aws:lambda:eu-west-1:{ACCOUNT}:send-report", "must be function:<name>"),
        (f"arn:aws:lambda:eu-west-1:{ACCOUNT}:layer:l:1", "must be function:<name>"),
        (f"arn:aws:lambda:eu-west-1:{ACCOUNT}:function:", "must be function:<name>"),
        (f"arn:aws:lambda:eu-west-1:{ACCOUNT}:function:f:", "must be function:<name>"),
        (f"arn:aws:lambda:eu-west-1:{ACCOUNT}:function:f:a:b", "must be function:<name>"),
        (f"arn:aws:lambda:eu-west-1:{ACCOUNT}:function:{'f' * 65}", "1-64 letters"),
        (f"arn:aws:lambda:eu-west-1:{ACCOUNT}:function:f.g", "must be function:<name>"),
        ("arn:aws:lambda:eu-west-1:account:function:f", "account 'account'"),
    ],
)
def test_a_bad_function_arn_is_refused_at_the_field_naming_the_bad_part(arn: str, reason: str) -> None:
    location, message = refusal(function(arn))

    assert location == ("target", "LAMBDA", "function_arn")
    assert reason in message


# --- EventBridge --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "region"),
    [
        ("default", None),
        ("orders.prod/v1-x_y", None),
        (f"arn:aws:events:eu-central-2:{ACCOUNT}:event-bus/orders", "eu-central-2"),
    ],
)
def test_an_event_bus_is_named_or_given_by_arn(name: str, region: str | None) -> None:
    target = job(bus(name)).target

    assert isinstance(target, EventBridgeTarget)
    assert (target.event_bus_name, target.region) == (name, region)


@pytest.mark.parametrize(
    ("target", "field", "reason"),
    [
        (bus(""), "event_bus_name", "event bus name ''"),
        (bus("a b"), "event_bus_name", "event bus name 'a b'"),
        (bus("x" * 257), "event_bus_name", "must be 1-256"),
        (bus(f"arn:aws:events:eu-west-1:{ACCOUNT}:rule/r"), "event_bus_name", "is not an event bus"),
        (bus(f"arn:aws:sns:eu-west-1:{ACCOUNT}:event-bus/b"), "event_bus_name", "must be an ARN of events"),
        (bus(f"arn:aws:events:eu-west-1:{ACCOUNT}:event-bus/a b"), "event_bus_name", "event bus name 'a b'"),
        (bus("default", source="aws.ec2"), "source", "reserved for AWS services"),
        (bus("default", source="AWS.custom"), "source", "reserved for AWS services"),
        (bus("default", source="s" * 257), "source", "at most 256"),
        (bus("default", source="a\tb"), "source", "control characters"),
        (bus("default", detail_type=""), "detail_type", "at least 1"),
        (bus("default", detail_type="t" * 129), "detail_type", "at most 128"),
        (bus("default", detail_type="a\x00"), "detail_type", "control characters"),
    ],
)
def test_a_bad_event_bus_target_is_refused_at_its_field(
    target: dict[str, Any], field: str, reason: str
) -> None:
    location, message = refusal(target)

    assert location == ("target", "EVENTBRIDGE", field)
    assert reason in message


# --- the payload key the run's ids use ------------------------------------------------------------


@pytest.mark.parametrize(
    "target",
    [bus("default"), function(f"arn:aws:lambda:eu-west-1:{ACCOUNT}:function:f")],
    ids=["bus", "function"],
)
def test_a_payload_object_may_not_hold_the_key_of_the_run_ids_for_event_targets(
    target: dict[str, Any],
) -> None:
    location, message = refusal(target, payload={"scheduler": "nightly"})

    assert location == ("payload",)
    assert "'scheduler' is where the target gets the run's ids" in message


@pytest.mark.parametrize(
    "payload", [{"schedule": 1}, ["scheduler"], "scheduler", {"nested": {"scheduler": 1}}]
)
def test_other_payloads_are_free_for_event_targets(payload: Any) -> None:
    assert job(bus("default"), payload=payload).payload == payload


# --- SQS ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "fifo"),
    [
        (f"https://sqs.eu-west-1.amazonaws.com/{ACCOUNT}/orders", False),
        (f"https://sqs.eu-west-1.amazonaws.com/{ACCOUNT}/orders.fifo", True),
        (f"http://127.0.0.1:4566/{ACCOUNT}/orders.fifo", True),
    ],
)
def test_standard_and_fifo_queues_are_targets(url: str, fifo: bool) -> None:
    target = job({"type": "SQS", "queue_url": url}).target

    assert isinstance(target, SqsTarget)
    assert target.fifo is fifo
