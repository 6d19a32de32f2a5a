"""Least privilege: one role per function, named resources, no wildcard actions."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator, Mapping
from typing import Any

from tests.infra.conftest import Synthesis

XRAY_ACTIONS = {"xray:PutTraceSegments", "xray:PutTelemetryRecords"}
ESM_ACTIONS = {
    "sqs:ReceiveMessage",
    "sqs:DeleteMessage",
    "sqs:ChangeMessageVisibility",
    "sqs:GetQueueAttributes",
    "sqs:GetQueueUrl",
}


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _identity_statements(synthesis: Synthesis) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """(logical id, statement) of every identity policy in the template: policies and inline role policies."""
    for policy_type in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
        for logical_id, policy in synthesis.resources(policy_type).items():
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
                yield logical_id, statement
    for logical_id, role in synthesis.resources("AWS::IAM::Role").items():
        for inline in role["Properties"].get("Policies", []):
            for statement in inline["PolicyDocument"]["Statement"]:
                yield logical_id, statement


def _role_id(synthesis: Synthesis, function: str) -> str:
    role: str = synthesis.function(function)["Properties"]["Role"]["Fn::GetAtt"][0]
    return role


def _grants(synthesis: Synthesis, function: str) -> dict[str, set[str]]:
    """Action → the resources (as JSON text) the function's role may use it on."""
    role = {"Ref": _role_id(synthesis, function)}
    grants: dict[str, set[str]] = defaultdict(set)
    for policy in synthesis.resources("AWS::IAM::Policy").values():
        if role not in policy["Properties"]["Roles"]:
            continue
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            assert statement["Effect"] == "Allow"
            for action in _as_list(statement["Action"]):
                grants[action] |= {
                    json.dumps(resource, sort_keys=True) for resource in _as_list(statement["Resource"])
                }
    return grants


def _arn(logical_id: str, suffix: str = "") -> str:
    arn: Any = {"Fn::GetAtt": [logical_id, "Arn"]}
    if suffix:
        arn = {"Fn::Join": ["", [arn, suffix]]}
    return json.dumps(arn, sort_keys=True)


def _actions(grants: Mapping[str, set[str]], service: str) -> dict[str, set[str]]:
    return {action: resources for action, resources in grants.items() if action.startswith(f"{service}:")}


def test_no_policy_statement_allows_every_action_or_a_whole_service(synthesis: Synthesis) -> None:
    statements = list(_identity_statements(synthesis))
    assert statements
    for logical_id, statement in statements:
        for action in _as_list(statement["Action"]):
            assert action != "*", logical_id
            assert not action.endswith(":*"), (logical_id, action)


def test_only_xray_is_granted_on_every_resource(synthesis: Synthesis) -> None:
    for logical_id, statement in _identity_statements(synthesis):
        if "*" in _as_list(statement["Resource"]):
            assert set(_as_list(statement["Action"])) <= XRAY_ACTIONS, logical_id


def test_every_function_has_a_role_of_its_own_without_managed_policies(synthesis: Synthesis) -> None:
    roles = {name: _role_id(synthesis, name) for name in synthesis.function_ids}
    assert len(set(roles.values())) == 3
    template_text = json.dumps(synthesis.template.to_json())
    all_roles = synthesis.resources("AWS::IAM::Role")
    for name, role_id in roles.items():
        # Referenced by its function (and its own policy) only.
        assert template_text.count(json.dumps({"Fn::GetAtt": [role_id, "Arn"]})) == 1, name
        assert "ManagedPolicyArns" not in all_roles[role_id]["Properties"], name
        assert all_roles[role_id]["Properties"]["AssumeRolePolicyDocument"]["Statement"] == [
            {"Action": "sts:AssumeRole", "Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}}
        ]
    for policy in synthesis.resources("AWS::IAM::Policy").values():
        assert len(policy["Properties"]["Roles"]) == 1


def test_functions_write_logs_only_to_their_own_log_group(synthesis: Synthesis) -> None:
    for name in synthesis.function_ids:
        log_group = synthesis.function(name)["Properties"]["LoggingConfig"]["LogGroup"]["Ref"]
        grants = _actions(_grants(synthesis, name), "logs")
        assert grants == {
            "logs:CreateLogStream": {_arn(log_group)},
            "logs:PutLogEvents": {_arn(log_group)},
        }, name


def test_api_writes_jobs_and_runs_and_lists_through_the_tenant_index_only(synthesis: Synthesis) -> None:
    jobs = synthesis.logical_id(synthesis.stack.store.jobs_table)
    table, by_tenant = _arn(jobs), _arn(jobs, "/index/by_tenant")
    assert _actions(_grants(synthesis, "api"), "dynamodb") == {
        "dynamodb:GetItem": {table},
        "dynamodb:PutItem": {table},
        "dynamodb:UpdateItem": {table},
        "dynamodb:Query": {table, by_tenant},
    }


def test_poller_claims_on_the_table_and_reads_only_the_due_index(synthesis: Synthesis) -> None:
    jobs = synthesis.logical_id(synthesis.stack.store.jobs_table)
    table, due = _arn(jobs), _arn(jobs, "/index/due")
    assert _actions(_grants(synthesis, "poller"), "dynamodb") == {
        "dynamodb:GetItem": {table},
        "dynamodb:PutItem": {table},
        "dynamodb:UpdateItem": {table},
        "dynamodb:Query": {due},
    }


def test_worker_reads_jobs_and_moves_runs_with_conditional_updates(synthesis: Synthesis) -> None:
    jobs = _arn(synthesis.logical_id(synthesis.stack.store.jobs_table))
    assert _actions(_grants(synthesis, "worker"), "dynamodb") == {
        "dynamodb:GetItem": {jobs},
        "dynamodb:UpdateItem": {jobs},
    }


def test_api_and_poller_may_only_send_to_the_priority_queues(synthesis: Synthesis) -> None:
    queues = {_arn(synthesis.logical_id(q)) for q in synthesis.stack.queues.priority_queues}
    for name in ("api", "poller"):
        assert _actions(_grants(synthesis, name), "sqs") == {"sqs:SendMessage": queues}, name


def test_worker_consumes_the_priority_queues_and_sends_only_to_target_queues(
    synthesis: Synthesis,
) -> None:
    queues = {_arn(synthesis.logical_id(q)) for q in synthesis.stack.queues.priority_queues}
    grants = _actions(_grants(synthesis, "worker"), "sqs")
    assert {action: grants[action] for action in ESM_ACTIONS} == {action: queues for action in ESM_ACTIONS}
    (target_queues,) = grants["sqs:SendMessage"]
    # The default target pattern: any queue of this account and region, none of another's.
    partition, region, account = ({"Ref": f"AWS::{name}"} for name in ("Partition", "Region", "AccountId"))
    assert json.loads(target_queues) == {
        "Fn::Join": ["", ["arn:", partition, ":sqs:", region, ":", account, ":*"]]
    }
    assert set(grants) == ESM_ACTIONS | {"sqs:SendMessage"}


def test_worker_has_no_grant_for_target_kinds_it_cannot_deliver_to(synthesis: Synthesis) -> None:
    services = {action.split(":")[0] for action in _grants(synthesis, "worker")}
    assert services == {"logs", "xray", "dynamodb", "sqs"}
