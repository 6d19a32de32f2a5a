"""The priority queues and the dead-letter queue (DESIGN §3, §4)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from infra.config import PRIORITIES
from tests.infra.conftest import NARROWED_OPERATORS, Synthesis

FOURTEEN_DAYS = 14 * 24 * 3600


def _queues(synthesis: Synthesis) -> dict[str, Mapping[str, Any]]:
    """HIGH / NORMAL / LOW / DLQ → the queue's properties."""
    queues = synthesis.resources("AWS::SQS::Queue")
    constructs = {**synthesis.stack.queues.by_priority, "DLQ": synthesis.stack.queues.dead_letter_queue}
    return {name: queues[synthesis.logical_id(queue)]["Properties"] for name, queue in constructs.items()}


def test_there_are_three_priority_queues_and_one_dead_letter_queue(synthesis: Synthesis) -> None:
    assert set(_queues(synthesis)) == {*PRIORITIES, "DLQ"}
    assert len(synthesis.resources("AWS::SQS::Queue")) == 4


def test_every_queue_is_encrypted_at_rest(synthesis: Synthesis) -> None:
    for name, queue in _queues(synthesis).items():
        assert queue.get("SqsManagedSseEnabled") is True or "KmsMasterKeyId" in queue, name


def test_every_queue_denies_requests_without_tls(synthesis: Synthesis) -> None:
    policies = synthesis.resources("AWS::SQS::QueuePolicy").values()
    queues = synthesis.stack.queues
    for name, queue in {**queues.by_priority, "DLQ": queues.dead_letter_queue}.items():
        queue_id = synthesis.logical_id(queue)
        denies_plain_http = [
            statement
            for policy in policies
            if {"Ref": queue_id} in policy["Properties"]["Queues"]
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]
            if statement["Effect"] == "Deny"
            and statement["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
            and statement["Resource"] == {"Fn::GetAtt": [queue_id, "Arn"]}
        ]
        assert denies_plain_http, name


def test_priority_queues_redrive_to_the_dlq_after_at_least_five_receives(synthesis: Synthesis) -> None:
    queues = _queues(synthesis)
    dlq_id = synthesis.logical_id(synthesis.stack.queues.dead_letter_queue)
    for priority in PRIORITIES:
        redrive = queues[priority]["RedrivePolicy"]
        assert redrive["deadLetterTargetArn"] == {"Fn::GetAtt": [dlq_id, "Arn"]}
        assert redrive["maxReceiveCount"] >= 5
        assert redrive["maxReceiveCount"] == synthesis.config.max_receive_count
    assert "RedrivePolicy" not in queues["DLQ"]


def test_priority_queues_hide_a_message_for_six_worker_timeouts(synthesis: Synthesis) -> None:
    worker_timeout = synthesis.function("worker")["Properties"]["Timeout"]
    for priority, queue in _queues(synthesis).items():
        if priority != "DLQ":
            assert queue["VisibilityTimeout"] >= 6 * worker_timeout, priority


def test_dead_letters_are_kept_fourteen_days(synthesis: Synthesis) -> None:
    assert _queues(synthesis)["DLQ"]["MessageRetentionPeriod"] == FOURTEEN_DAYS


def _senders_allowed(synthesis: Synthesis) -> dict[str, list[Any]]:
    """Queue → the principals its policy's Deny of sqs:SendMessage exempts."""
    policies = synthesis.resources("AWS::SQS::QueuePolicy").values()
    queues = synthesis.stack.queues
    allowed: dict[str, list[Any]] = {}
    for name, queue in {**queues.by_priority, "DLQ": queues.dead_letter_queue}.items():
        [statement] = [
            statement
            for policy in policies
            if {"Ref": synthesis.logical_id(queue)} in policy["Properties"]["Queues"]
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]
            if statement["Effect"] == "Deny" and statement["Action"] == "sqs:SendMessage"
        ]
        assert statement["Principal"] == {"AWS": "*"}
        assert statement["Resource"] == {"Fn::GetAtt": [synthesis.logical_id(queue), "Arn"]}
        # AWS services acting for the stack carry no aws:PrincipalArn: they are not denied.
        assert statement["Condition"]["Bool"] == {"aws:PrincipalIsAWSService": "false"}
        allowed[name] = statement["Condition"]["ArnNotLike"]["aws:PrincipalArn"]
    return allowed


def test_only_the_stacks_functions_may_send_to_its_queues(synthesis: Synthesis) -> None:
    roles = [
        {"Fn::GetAtt": [synthesis.logical_id(synthesis.stack.api.function.role), "Arn"]},
        {"Fn::GetAtt": [synthesis.logical_id(synthesis.stack.poller.function.role), "Arn"]},
        {"Fn::GetAtt": [synthesis.logical_id(synthesis.stack.workers.function.role), "Arn"]},
    ]
    for name, allowed in _senders_allowed(synthesis).items():
        assert allowed == roles, name


def test_the_operators_listed_may_send_too(narrowed: Synthesis) -> None:
    for name, allowed in _senders_allowed(narrowed).items():
        assert allowed[-1] == NARROWED_OPERATORS, name
        assert len(allowed) == 4, name
