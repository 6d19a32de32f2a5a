"""The API refuses, at create and at change, a target the worker could not or must not reach:
the scheduler's own queues and functions however they are written, and, for a target without
an execution role, ARNs outside what the deployment offers every tenant (another region,
another account, another name). A 400 naming the field and saying what to do, instead of a
run that fails with AccessDenied. (Targets with a role: test_execution_roles.py.)"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from scheduler_core.settings import Settings
from tests.support.events import ACCOUNT
from tests.support.harness import FrozenClock, SchedulerHarness

REGION = "us-east-1"
OTHER_ACCOUNT = "111122223333"
PREFIX = "ServerlessScheduler-"


def deployment(cloud: SchedulerHarness, **variables: str) -> SchedulerHarness:
    """The API with the settings the stack gives its api function (infra/targets.py): its
    account and region, its functions' name prefix and shared targets as an operator may list
    them (any queue, topic, event bus and function of its account and region), with
    `variables` on top."""
    settings = Settings.model_validate(
        cloud.settings.model_dump(by_alias=True)
        | {
            "STACK_PARTITION": "aws",
            "STACK_REGION": REGION,
            "STACK_ACCOUNT_ID": ACCOUNT,
            "FUNCTION_NAME_PREFIX": PREFIX,
            "TARGET_QUEUE_ARNS": json.dumps([f"arn:aws:sqs:{REGION}:{ACCOUNT}:*"]),
            "TARGET_TOPIC_ARNS": json.dumps([f"arn:aws:sns:{REGION}:{ACCOUNT}:*"]),
            "TARGET_EVENT_BUS_ARNS": json.dumps([f"arn:aws:events:{REGION}:{ACCOUNT}:event-bus/*"]),
            "TARGET_FUNCTION_ARNS": json.dumps([f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:*"]),
        }
        | variables
    )
    return SchedulerHarness(cloud.clients, settings, cloud.clock)


@pytest.fixture
def deployed(cloud: SchedulerHarness) -> SchedulerHarness:
    return deployment(cloud)


def job_to(target: dict[str, Any]) -> dict[str, Any]:
    return {"name": "targeted", "schedule": {"cron": "0 2 * * *"}, "target": target}


def refusal(reply: Any) -> tuple[str, str]:
    """(field, message) of a 400 with one detail."""
    assert reply.status == 400, reply.body
    error = reply.body["error"]
    assert error["code"] == "VALIDATION_ERROR"
    [detail] = error["details"]
    assert error["message"] == f"{detail['field']} {detail['message']}"
    return detail["field"], detail["message"]


def bus(name_or_arn: str) -> dict[str, Any]:
    return {"type": "EVENTBRIDGE", "event_bus_name": name_or_arn, "source": "com.example", "detail_type": "T"}


# --- the scheduler's own queues and functions ---------------------------------------------------


@pytest.mark.parametrize(
    "rewrite",
    [
        lambda url: url,
        lambda url: url + "/",
        lambda url: url.replace("scheduler-normal", "scheduler%2Dnormal"),
        lambda url: url.replace("sqs.us-east-1.amazonaws.com", "SQS.US-EAST-1.AMAZONAWS.COM"),
        lambda url: url.replace("https://sqs.us-east-1.amazonaws.com", "http://localhost:4566"),
    ],
    ids=["as given", "trailing slash", "percent-encoded", "host in capitals", "another host"],
)
def test_an_own_queue_is_refused_however_its_url_is_written(deployed: SchedulerHarness, rewrite: Any) -> None:
    url = rewrite(deployed.settings.queue_url_normal)

    assert refusal(deployed.call("POST", "/v1/jobs", job_to({"type": "SQS", "queue_url": url}))) == (
        "target.queue_url",
        "is one of the scheduler's own queues; target a queue of yours",
    )


@pytest.mark.parametrize("suffix", ["?x", "#frag", "?"])
def test_a_queue_url_with_a_query_or_fragment_is_refused(deployed: SchedulerHarness, suffix: str) -> None:
    url = deployed.settings.queue_url_normal + suffix

    field, message = refusal(deployed.call("POST", "/v1/jobs", job_to({"type": "SQS", "queue_url": url})))

    assert field == "target.queue_url"
    assert "must not carry a query" in message
    assert "give the queue URL as SQS returns it" in message


def test_own_queues_are_refused_without_deployment_settings_too(cloud: SchedulerHarness) -> None:
    url = cloud.settings.dlq_url.replace("scheduler-dlq", "scheduler%2Ddlq") + "/"

    field, _ = refusal(cloud.call("POST", "/v1/jobs", job_to({"type": "SQS", "queue_url": url})))

    assert field == "target.queue_url"


@pytest.mark.parametrize("name", ["ServerlessScheduler-api", "ServerlessScheduler-worker:live"])
def test_an_own_function_is_refused(deployed: SchedulerHarness, name: str) -> None:
    target = {"type": "LAMBDA", "function_arn": f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{name}"}

    assert refusal(deployed.call("POST", "/v1/jobs", job_to(target))) == (
        "target.function_arn",
        "is one of the scheduler's own functions (named ServerlessScheduler-…); target a function of yours",
    )


# --- what the grants reach ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "context_key"),
    [
        (
            {"type": "SNS", "topic_arn": f"arn:aws:sns:eu-west-1:{ACCOUNT}:alerts"},
            "target_topic_arns",
        ),
        (
            {"type": "SNS", "topic_arn": f"arn:aws:sns:{REGION}:{OTHER_ACCOUNT}:alerts"},
            "target_topic_arns",
        ),
        (
            bus(f"arn:aws:events:eu-central-2:{ACCOUNT}:event-bus/orders"),
            "target_event_bus_arns",
        ),
        (
            {"type": "LAMBDA", "function_arn": f"arn:aws:lambda:eu-west-1:{ACCOUNT}:function:send-report"},
            "target_function_arns",
        ),
        (
            {"type": "SQS", "queue_url": f"https://sqs.{REGION}.amazonaws.com/{OTHER_ACCOUNT}/orders"},
            "target_queue_arns",
        ),
    ],
    ids=[
        "topic in another region",
        "topic of another account",
        "bus in another region",
        "function in another region",
        "queue of another account",
    ],
)
def test_a_target_not_listed_and_without_a_role_is_a_400_naming_role_arn(
    deployed: SchedulerHarness, target: dict[str, Any], context_key: str
) -> None:
    refused_field, message = refusal(deployed.call("POST", "/v1/jobs", job_to(target)))

    assert refused_field == "target.role_arn"
    assert "this deployment offers only the " in message
    assert f":{REGION}:{ACCOUNT}:" in message  # the pattern it offers
    assert "Give role_arn, a role of yours the scheduler may assume" in message
    assert message.endswith(f"ask the operator to list the ARN in CDK context `{context_key}`")


def test_a_queue_in_another_region_is_refused(deployed: SchedulerHarness) -> None:
    url = f"https://sqs.eu-west-1.amazonaws.com/{ACCOUNT}/orders"

    field, message = refusal(deployed.call("POST", "/v1/jobs", job_to({"type": "SQS", "queue_url": url})))

    assert field == "target.queue_url"
    assert (
        message
        == f"names region eu-west-1, but the worker sends to SQS in {REGION}; give a queue of {REGION}"
    )


def test_a_kind_the_deployment_grants_none_of_is_refused(cloud: SchedulerHarness) -> None:
    narrowed = deployment(cloud, TARGET_TOPIC_ARNS="[]")
    target = {"type": "SNS", "topic_arn": f"arn:aws:sns:{REGION}:{ACCOUNT}:alerts"}

    field, message = refusal(narrowed.call("POST", "/v1/jobs", job_to(target)))

    assert field == "target.role_arn"
    assert "this deployment offers no shared topics (CDK context `target_topic_arns` is [])" in message


@pytest.mark.parametrize(
    "target",
    [
        {"type": "SNS", "topic_arn": f"arn:aws:sns:{REGION}:{ACCOUNT}:alerts"},
        bus("default"),
        bus(f"arn:aws:events:{REGION}:{ACCOUNT}:event-bus/orders"),
        {"type": "LAMBDA", "function_arn": f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:send-report:live"},
        {"type": "SQS", "queue_url": f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/orders.fifo"},
        {"type": "HTTP", "url": "https://example.com/hook?tenant=acme#x"},
    ],
    ids=["topic", "bus by name", "bus by ARN", "function alias", "FIFO queue", "HTTP with a query"],
)
def test_targets_the_grants_reach_are_accepted(deployed: SchedulerHarness, target: dict[str, Any]) -> None:
    created = deployed.create(job_to(target))["target"]

    assert {name: created[name] for name in target} == target


def test_a_queue_of_another_name_is_accepted_and_delivered_to(
    deployed: SchedulerHarness, clock: FrozenClock
) -> None:
    url = deployed.clients.sqs().create_queue(QueueName="scheduler-normal-copy")["QueueUrl"]
    job = deployed.create(
        {
            "name": "to-a-queue",
            "schedule": {"at": (clock.now() + timedelta(seconds=2)).isoformat()},
            "target": {"type": "SQS", "queue_url": url},
            "payload": {"order": 1},
        }
    )

    clock.advance(2)
    deployed.deliver()

    [run] = deployed.call("GET", f"/v1/jobs/{job['job_id']}/runs").body["items"]
    assert run["status"] == "SUCCEEDED", run
    [message] = deployed.clients.sqs().receive_message(QueueUrl=url)["Messages"]
    assert json.loads(message["Body"]) == {"order": 1}


# --- a change goes through the same check -----------------------------------------------------


@pytest.mark.parametrize(
    ("target", "field"),
    [
        ({"type": "SNS", "topic_arn": f"arn:aws:sns:eu-west-1:{ACCOUNT}:alerts"}, "target.role_arn"),
        (
            {
                "type": "LAMBDA",
                "function_arn": f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:ServerlessScheduler-api",
            },
            "target.function_arn",
        ),
        ({"type": "SQS", "queue_url": "OWN?x"}, "target.queue_url"),
    ],
    ids=["topic out of reach", "own function", "own queue with a query"],
)
def test_a_patch_to_a_target_out_of_reach_is_refused_and_changes_nothing(
    deployed: SchedulerHarness, target: dict[str, Any], field: str
) -> None:
    if target["type"] == "SQS":
        target = {
            "type": "SQS",
            "queue_url": target["queue_url"].replace("OWN", deployed.settings.queue_url_high),
        }
    original = {"type": "SNS", "topic_arn": f"arn:aws:sns:{REGION}:{ACCOUNT}:alerts"}
    job = deployed.create(job_to(original))

    reply = deployed.call("PATCH", f"/v1/jobs/{job['job_id']}", {"target": target})

    assert refusal(reply)[0] == field
    after = deployed.call("GET", f"/v1/jobs/{job['job_id']}").body
    assert (after["target"], after["version"]) == (original | {"role_arn": None}, job["version"])
