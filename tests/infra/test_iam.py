"""Least privilege: one role per function, named resources, no wildcard actions."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from tests.infra.conftest import NARROWED_FUNCTIONS, NARROWED_TOPIC, Synthesis
from tests.infra.grants import EXTERNAL_ID_REQUIRED, arn_of, as_list, grants_of, role_id

XRAY_ACTIONS = {"xray:PutTraceSegments", "xray:PutTelemetryRecords"}
ESM_ACTIONS = {
    "sqs:ReceiveMessage",
    "sqs:DeleteMessage",
    "sqs:ChangeMessageVisibility",
    "sqs:GetQueueAttributes",
    "sqs:GetQueueUrl",
}


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


def _actions(grants: Mapping[str, set[str]], service: str) -> dict[str, set[str]]:
    return {action: resources for action, resources in grants.items() if action.startswith(f"{service}:")}


def test_no_policy_statement_allows_every_action_or_a_whole_service(synthesis: Synthesis) -> None:
    statements = list(_identity_statements(synthesis))
    assert statements
    for logical_id, statement in statements:
        for action in as_list(statement["Action"]):
            assert action != "*", logical_id
            assert not action.endswith(":*"), (logical_id, action)


def test_only_xray_is_granted_on_every_resource(synthesis: Synthesis) -> None:
    for logical_id, statement in _identity_statements(synthesis):
        if "*" in as_list(statement["Resource"]):
            assert set(as_list(statement["Action"])) <= XRAY_ACTIONS, logical_id


def test_every_function_has_a_role_of_its_own_without_managed_policies(synthesis: Synthesis) -> None:
    roles = {name: role_id(synthesis, name) for name in synthesis.function_ids}
    assert len(set(roles.values())) == 3
    template_text = json.dumps(synthesis.template.to_json())
    all_roles = synthesis.resources("AWS::IAM::Role")
    # Referenced by its function, and by each of the four queues' policies as a sender allowed;
    # the worker's also where it is named as the role a tenant's execution role must trust:
    # its own and the api's environment, a stack output.
    queues = 4
    references = {"api": 1 + queues, "poller": 1 + queues, "worker": 4 + queues}
    for name, role in roles.items():
        assert template_text.count(json.dumps({"Fn::GetAtt": [role, "Arn"]})) == references[name], name
        assert "ManagedPolicyArns" not in all_roles[role]["Properties"], name
        assert all_roles[role]["Properties"]["AssumeRolePolicyDocument"]["Statement"] == [
            {"Action": "sts:AssumeRole", "Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}}
        ]
    for policy in synthesis.resources("AWS::IAM::Policy").values():
        assert len(policy["Properties"]["Roles"]) == 1


def test_functions_write_logs_only_to_their_own_log_group(synthesis: Synthesis) -> None:
    """And the api to the audit log group besides (docs/security.md)."""
    audit = arn_of(synthesis.logical_id(synthesis.stack.api.audit_logs))
    for name in synthesis.function_ids:
        log_group = synthesis.function(name)["Properties"]["LoggingConfig"]["LogGroup"]["Ref"]
        groups = {arn_of(log_group), audit} if name == "api" else {arn_of(log_group)}
        grants = _actions(grants_of(synthesis, name), "logs")
        assert grants == {"logs:CreateLogStream": groups, "logs:PutLogEvents": groups}, name


def test_api_writes_jobs_and_runs_and_lists_through_the_tenant_index_only(synthesis: Synthesis) -> None:
    jobs = synthesis.logical_id(synthesis.stack.store.jobs_table)
    table, by_tenant = arn_of(jobs), arn_of(jobs, "/index/by_tenant")
    _, idempotency = _tables(synthesis)
    assert _actions(grants_of(synthesis, "api"), "dynamodb") == {
        "dynamodb:GetItem": {table, idempotency},
        "dynamodb:BatchGetItem": {table},
        "dynamodb:PutItem": {table, idempotency},
        "dynamodb:UpdateItem": {table, idempotency},
        "dynamodb:DeleteItem": {idempotency},
        "dynamodb:Query": {table, by_tenant},
    }


def test_poller_claims_on_the_table_and_reads_only_the_due_index(synthesis: Synthesis) -> None:
    jobs = synthesis.logical_id(synthesis.stack.store.jobs_table)
    table, due = arn_of(jobs), arn_of(jobs, "/index/due")
    assert _actions(grants_of(synthesis, "poller"), "dynamodb") == {
        "dynamodb:GetItem": {table},
        "dynamodb:BatchGetItem": {table},
        "dynamodb:PutItem": {table},
        "dynamodb:UpdateItem": {table},
        "dynamodb:DeleteItem": {table},  # a due listing none of whose jobs waits any more
        "dynamodb:Query": {due},
    }


def _priority_queues(synthesis: Synthesis) -> set[str]:
    return {arn_of(synthesis.logical_id(q)) for q in synthesis.stack.queues.priority_queues}


def _dead_letter_queue(synthesis: Synthesis) -> str:
    return arn_of(synthesis.logical_id(synthesis.stack.queues.dead_letter_queue))


def _tables(synthesis: Synthesis) -> tuple[str, str]:
    store = synthesis.stack.store
    return arn_of(synthesis.logical_id(store.jobs_table)), arn_of(
        synthesis.logical_id(store.idempotency_table)
    )


def test_worker_moves_runs_on_the_jobs_table_only(synthesis: Synthesis) -> None:
    jobs, _ = _tables(synthesis)
    # On the jobs table only: reads (a job and its run in one BatchGetItem), conditional
    # updates, and the put of a workflow task's run its upstream released (if absent); never
    # a delete or a query. The run item is the run's idempotency record: no second table.
    assert _actions(grants_of(synthesis, "worker"), "dynamodb") == {
        "dynamodb:GetItem": {jobs},
        "dynamodb:BatchGetItem": {jobs},
        "dynamodb:UpdateItem": {jobs},
        "dynamodb:PutItem": {jobs},
    }


def test_only_the_api_may_touch_the_idempotency_table(synthesis: Synthesis) -> None:
    _, idempotency = _tables(synthesis)
    # Powertools idempotency reads, puts, updates (the job made) and deletes (a failed create).
    assert {
        action for action, resources in grants_of(synthesis, "api").items() if idempotency in resources
    } == {"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"}
    for name in ("worker", "poller"):
        resources = set().union(*grants_of(synthesis, name).values())
        assert idempotency not in resources, name


def test_api_may_only_send_to_the_priority_queues(synthesis: Synthesis) -> None:
    # Claims at create and re-drives of failed runs; the API never writes a DLQ record.
    assert _actions(grants_of(synthesis, "api"), "sqs") == {"sqs:SendMessage": _priority_queues(synthesis)}


def test_poller_sends_to_the_priority_queues_and_records_failed_runs_on_the_dlq(
    synthesis: Synthesis,
) -> None:
    assert _actions(grants_of(synthesis, "poller"), "sqs") == {
        "sqs:SendMessage": _priority_queues(synthesis) | {_dead_letter_queue(synthesis)}
    }


def _in_this_account(service: str, resource: str) -> str:
    """An ARN pattern of this stack's partition, region and account, as the template joins it."""
    partition, region, account = ({"Ref": f"AWS::{name}"} for name in ("Partition", "Region", "AccountId"))
    arn = {"Fn::Join": ["", ["arn:", partition, f":{service}:", region, ":", account, f":{resource}"]]}
    return json.dumps(arn, sort_keys=True)


def test_worker_consumes_the_priority_queues_and_sends_retries_and_dead_letters_there_only(
    synthesis: Synthesis,
) -> None:
    queues = _priority_queues(synthesis)
    grants = _actions(grants_of(synthesis, "worker"), "sqs")
    assert {action: grants[action] for action in ESM_ACTIONS} == {action: queues for action in ESM_ACTIONS}
    # No target queue by default (context `target_queue_arns` is []): its own queues only.
    assert grants["sqs:SendMessage"] == queues | {_dead_letter_queue(synthesis)}
    assert set(grants) == ESM_ACTIONS | {"sqs:SendMessage"}


def test_worker_has_no_target_permission_of_its_own_by_default_but_assumes_roles_with_an_external_id(
    synthesis: Synthesis,
) -> None:
    """Context `target_*_arns` empty (the default): no sns:Publish, events:PutEvents or
    lambda:InvokeFunction at all; sts:AssumeRole on any role, on the condition that an
    external id is sent (grants_of checks the condition: `EXTERNAL_ID_REQUIRED`)."""
    grants = grants_of(synthesis, "worker")
    assert _actions(grants, "sns") == _actions(grants, "events") == _actions(grants, "lambda") == {}
    any_role = {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":iam::*:role/*"]]}
    assert _actions(grants, "sts") == {"sts:AssumeRole": {json.dumps(any_role, sort_keys=True)}}
    [statement] = [
        statement
        for _, statement in _identity_statements(synthesis)
        if "sts:AssumeRole" in as_list(statement["Action"])
    ]
    assert statement["Condition"] == EXTERNAL_ID_REQUIRED
    for name in ("api", "poller"):
        assert _actions(grants_of(synthesis, name), "sts") == {}


def test_the_api_may_read_the_roles_of_its_account_and_knows_the_worker_role(synthesis: Synthesis) -> None:
    """GetRole, to read an execution role's trust policy at create (same account only)."""
    roles = {
        "Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":iam::", {"Ref": "AWS::AccountId"}, ":role/*"]]
    }
    assert _actions(grants_of(synthesis, "api"), "iam") == {
        "iam:GetRole": {json.dumps(roles, sort_keys=True)}
    }
    for name in ("poller", "worker"):
        assert _actions(grants_of(synthesis, name), "iam") == {}
    worker_role = {"Fn::GetAtt": [role_id(synthesis, "worker"), "Arn"]}
    for name in ("api", "worker"):
        assert (
            synthesis.function(name)["Properties"]["Environment"]["Variables"]["WORKER_ROLE_ARN"]
            == worker_role
        )


def test_worker_may_never_invoke_the_functions_of_its_own_stack(synthesis: Synthesis) -> None:
    """A LAMBDA target naming the API (a forged request acting as any tenant) or the worker
    (forged run messages) is refused by IAM, whatever the target grant allows."""
    prefix = f"{synthesis.stack.stack_name}-"
    own_functions = _in_this_account("lambda", f"function:{prefix}*")
    assert dict(grants_of(synthesis, "worker", "Deny")) == {"lambda:InvokeFunction": {own_functions}}
    for name in ("api", "poller"):
        assert dict(grants_of(synthesis, name, "Deny")) == {}
    # The deny relies on the names: ours, not CloudFormation's, all under the prefix (which
    # also covers any function CloudFormation would name "<stack name>-<logical id>-<suffix>").
    functions = synthesis.resources("AWS::Lambda::Function")
    assert len(functions) == 3
    for name in synthesis.function_ids:
        function_name = synthesis.function(name)["Properties"]["FunctionName"]
        assert function_name == f"{prefix}{name}"
        assert len(function_name) <= 64
    # The api refuses the same functions as targets: it is told the prefix.
    api = synthesis.function("api")["Properties"]["Environment"]["Variables"]
    assert api["FUNCTION_NAME_PREFIX"] == prefix


PSEUDO = {"AWS::Partition": "aws", "AWS::Region": "eu-west-1", "AWS::AccountId": "123456789012"}


def _render(value: Any) -> str:
    """A template string value (a literal, a pseudo parameter, or an Fn::Join of those) as
    CloudFormation resolves it, with `PSEUDO` for the stack's place."""
    if isinstance(value, str):
        return value
    if "Ref" in value:
        return PSEUDO[value["Ref"]]
    separator, parts = value["Fn::Join"]
    return str(separator).join(_render(part) for part in parts)


TARGET_VARIABLES = {
    "sqs:SendMessage": "TARGET_QUEUE_ARNS",
    "sns:Publish": "TARGET_TOPIC_ARNS",
    "events:PutEvents": "TARGET_EVENT_BUS_ARNS",
    "lambda:InvokeFunction": "TARGET_FUNCTION_ARNS",
}


def _target_grants(synthesis: Synthesis) -> dict[str, set[str]]:
    """The worker's target grants, rendered: the resources of each target action other than
    the scheduler's own queues."""
    own_queues = _priority_queues(synthesis) | {_dead_letter_queue(synthesis)}
    grants = grants_of(synthesis, "worker")
    return {
        action: {_render(json.loads(resource)) for resource in grants.get(action, set()) - own_queues}
        for action in TARGET_VARIABLES
    }


def _api_target_patterns(synthesis: Synthesis) -> dict[str, set[str]]:
    variables = synthesis.function("api")["Properties"]["Environment"]["Variables"]
    return {action: set(json.loads(_render(variables[name]))) for action, name in TARGET_VARIABLES.items()}


def test_the_api_checks_targets_against_exactly_the_worker_grants(synthesis: Synthesis) -> None:
    """A target without a role that the grants do not reach is a 400 at create, not an
    AccessDenied at run time. By default there is none: every target needs a role."""
    assert (
        _api_target_patterns(synthesis)
        == _target_grants(synthesis)
        == {
            "sqs:SendMessage": set(),
            "sns:Publish": set(),
            "events:PutEvents": set(),
            "lambda:InvokeFunction": set(),
        }
    )
    api = synthesis.function("api")["Properties"]["Environment"]["Variables"]
    assert {name: _render(api[name]) for name in ("STACK_PARTITION", "STACK_REGION", "STACK_ACCOUNT_ID")} == {
        "STACK_PARTITION": "aws",
        "STACK_REGION": "eu-west-1",
        "STACK_ACCOUNT_ID": "123456789012",
    }


def test_the_api_checks_targets_against_the_narrowed_grants_too(narrowed: Synthesis) -> None:
    assert (
        _api_target_patterns(narrowed)
        == _target_grants(narrowed)
        == {
            "sqs:SendMessage": set(),
            "sns:Publish": {NARROWED_TOPIC},
            "events:PutEvents": set(),
            "lambda:InvokeFunction": {NARROWED_FUNCTIONS},
        }
    )


def test_no_function_may_read_or_delete_from_the_dlq(synthesis: Synthesis) -> None:
    """Only people (and `make redrive`, with their credentials) consume the DLQ."""
    dead_letters = _dead_letter_queue(synthesis)
    for name in synthesis.function_ids:
        for action, resources in grants_of(synthesis, name).items():
            if dead_letters in resources:
                assert action == "sqs:SendMessage", (name, action)


def test_with_narrowed_targets_each_function_has_exactly_the_grants_it_needs(narrowed: Synthesis) -> None:
    """The whole policy of each role, with the worker's target grants as the context narrows
    them (no queues, no event buses, one topic, a pattern of functions): nothing more than the
    code paths call."""
    jobs, idempotency = _tables(narrowed)
    queues, dead_letters = _priority_queues(narrowed), _dead_letter_queue(narrowed)
    jobs_id = narrowed.logical_id(narrowed.stack.store.jobs_table)
    by_tenant, due = arn_of(jobs_id, "/index/by_tenant"), arn_of(jobs_id, "/index/due")

    secrets = arn_of(narrowed.logical_id(narrowed.stack.keys.secrets))

    def own(name: str) -> dict[str, set[str]]:
        log_group = arn_of(narrowed.function(name)["Properties"]["LoggingConfig"]["LogGroup"]["Ref"])
        return {
            "logs:CreateLogStream": {log_group},
            "logs:PutLogEvents": {log_group},
            **{action: {json.dumps("*")} for action in XRAY_ACTIONS},
        }

    audit = arn_of(narrowed.logical_id(narrowed.stack.api.audit_logs))
    api_logs = own("api")
    for action in ("logs:CreateLogStream", "logs:PutLogEvents"):
        api_logs[action] = api_logs[action] | {audit}  # and its audit lines
    assert dict(grants_of(narrowed, "api")) == api_logs | {
        "dynamodb:GetItem": {jobs, idempotency},
        "dynamodb:BatchGetItem": {jobs},
        "dynamodb:PutItem": {jobs, idempotency},
        "dynamodb:UpdateItem": {jobs, idempotency},
        "dynamodb:DeleteItem": {idempotency},
        "dynamodb:Query": {jobs, by_tenant},
        "sqs:SendMessage": queues,
        # Seals secret headers and signing secrets; opens a tenant's to rotate them.
        "kms:Encrypt": {secrets},
        "kms:Decrypt": {secrets},
        # Reads an execution role's trust policy at create.
        "iam:GetRole": {
            json.dumps(
                {
                    "Fn::Join": [
                        "",
                        ["arn:", {"Ref": "AWS::Partition"}, ":iam::", {"Ref": "AWS::AccountId"}, ":role/*"],
                    ]
                }
            )
        },
    }
    assert dict(grants_of(narrowed, "poller")) == own("poller") | {
        "dynamodb:GetItem": {jobs},
        "dynamodb:BatchGetItem": {jobs},
        "dynamodb:PutItem": {jobs},
        "dynamodb:UpdateItem": {jobs},
        "dynamodb:DeleteItem": {jobs},
        "dynamodb:Query": {due},
        "sqs:SendMessage": queues | {dead_letters},
    }
    assert dict(grants_of(narrowed, "worker")) == own("worker") | {
        "dynamodb:GetItem": {jobs},
        "dynamodb:BatchGetItem": {jobs},
        "dynamodb:UpdateItem": {jobs},
        "dynamodb:PutItem": {jobs},
        "sqs:SendMessage": queues | {dead_letters},
        **{action: queues for action in ESM_ACTIONS},
        "sns:Publish": {json.dumps(NARROWED_TOPIC)},
        "lambda:InvokeFunction": {json.dumps(NARROWED_FUNCTIONS)},
        "kms:Decrypt": {secrets},  # opens secret headers and signing secrets at call time
        # Tenants' execution roles, only with an external id (`EXTERNAL_ID_REQUIRED`).
        "sts:AssumeRole": {
            json.dumps({"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":iam::*:role/*"]]})
        },
    }


def test_worker_grants_one_action_per_listed_target_kind(narrowed: Synthesis) -> None:
    """Only the kinds the context lists (a topic, functions), with the one action each calls."""
    target_actions = {
        action
        for action in grants_of(narrowed, "worker")
        if action.split(":")[0] in {"sns", "events", "lambda"}
    }
    assert target_actions == {"sns:Publish", "lambda:InvokeFunction"}
