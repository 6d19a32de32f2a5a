"""Encryption at rest: the stack's customer managed keys (context `customer_managed_keys`,
on by default) or, switched off, AWS's own keys."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tests.infra.conftest import Synthesis
from tests.infra.grants import arn_of, grants_of


def _key_ids(synthesis: Synthesis) -> tuple[str, str]:
    keys = synthesis.stack.keys
    assert keys.data is not None
    assert keys.logs is not None
    return synthesis.logical_id(keys.data), synthesis.logical_id(keys.logs)


def _log_groups(synthesis: Synthesis) -> Mapping[str, Any]:
    return synthesis.resources("AWS::Logs::LogGroup")


def test_the_stack_has_a_data_key_and_a_logs_key_both_rotated_and_kept(synthesis: Synthesis) -> None:
    keys = synthesis.resources("AWS::KMS::Key")
    assert set(keys) == {*_key_ids(synthesis), synthesis.logical_id(synthesis.stack.keys.secrets)}
    for logical_id, key in keys.items():
        assert key["Properties"]["EnableKeyRotation"] is True, logical_id
        # The jobs table and the log groups are kept when the stack goes: so are their keys.
        assert key["DeletionPolicy"] == key["UpdateReplacePolicy"] == "Retain", logical_id


def test_tables_queues_and_environments_are_under_the_data_key(synthesis: Synthesis) -> None:
    data, _ = _key_ids(synthesis)
    data_arn = {"Fn::GetAtt": [data, "Arn"]}
    tables = synthesis.resources("AWS::DynamoDB::Table")
    assert len(tables) == 2
    for logical_id, table in tables.items():
        assert table["Properties"]["SSESpecification"] == {
            "SSEEnabled": True,
            "SSEType": "KMS",
            "KMSMasterKeyId": data_arn,
        }, logical_id
    queues = synthesis.resources("AWS::SQS::Queue")
    assert len(queues) == 4
    for logical_id, queue in queues.items():
        assert queue["Properties"]["KmsMasterKeyId"] == data_arn, logical_id
    for name in synthesis.function_ids:
        assert synthesis.function(name)["Properties"]["KmsKeyArn"] == data_arn, name


def test_every_log_group_is_under_the_logs_key(synthesis: Synthesis) -> None:
    _, logs = _key_ids(synthesis)
    log_groups = _log_groups(synthesis)
    assert len(log_groups) == 6  # three functions', the API's access, execution and audit logs
    for logical_id, log_group in log_groups.items():
        assert log_group["Properties"]["KmsKeyId"] == {"Fn::GetAtt": [logs, "Arn"]}, logical_id


def test_cloudwatch_logs_may_use_the_logs_key_for_this_accounts_log_groups_only(synthesis: Synthesis) -> None:
    data, logs = _key_ids(synthesis)
    keys = synthesis.resources("AWS::KMS::Key")

    def service_statements(key_id: str) -> list[Mapping[str, Any]]:
        statements = keys[key_id]["Properties"]["KeyPolicy"]["Statement"]
        return [statement for statement in statements if "Service" in statement["Principal"]]

    # The other service statement lets CloudWatch alarms publish to the alarm topic (test_dashboard).
    (statement,) = [
        s for s in service_statements(logs) if s["Principal"]["Service"] != "cloudwatch.amazonaws.com"
    ]
    principal = statement["Principal"]["Service"]["Fn::Join"][1]
    assert principal == ["logs.", {"Ref": "AWS::Region"}, ".", {"Ref": "AWS::URLSuffix"}]
    log_groups = statement["Condition"]["ArnLike"]["kms:EncryptionContext:aws:logs:arn"]["Fn::Join"][1]
    assert log_groups == [
        "arn:",
        {"Ref": "AWS::Partition"},
        ":logs:",
        {"Ref": "AWS::Region"},
        ":",
        {"Ref": "AWS::AccountId"},
        ":log-group:*",
    ]
    # No service may use the data key on its own: DynamoDB and SQS use it for their callers.
    assert service_statements(data) == []


def test_functions_may_decrypt_and_make_data_keys_with_the_data_key_only(synthesis: Synthesis) -> None:
    """Decrypt: DynamoDB reading the tables' key and SQS receiving for the function;
    GenerateDataKey: SQS sending for it. No function may use the logs key, and none may
    encrypt, re-encrypt or administer either key."""
    data, _ = _key_ids(synthesis)
    secrets = arn_of(synthesis.logical_id(synthesis.stack.keys.secrets))
    # The secrets key (docs/security.md): the api seals (and opens a signing secret to rotate
    # it), the worker opens; the poller never touches a secret.
    on_secrets = {"api": {"kms:Encrypt", "kms:Decrypt"}, "worker": {"kms:Decrypt"}, "poller": set()}
    for name in synthesis.function_ids:
        kms = {
            action: resources - {secrets}
            for action, resources in grants_of(synthesis, name).items()
            if "kms:" in action and resources - {secrets}
        }
        assert kms == {"kms:Decrypt": {arn_of(data)}, "kms:GenerateDataKey": {arn_of(data)}}, name
        secret_actions = {
            action for action, resources in grants_of(synthesis, name).items() if secrets in resources
        }
        assert secret_actions == on_secrets[name], name


def test_with_the_switch_off_aws_keys_encrypt_everything(narrowed: Synthesis) -> None:
    """Context `customer_managed_keys: false`: no key, no KMS grant; SQS's own encryption
    on the queues, DynamoDB's and Lambda's defaults (AWS-owned keys) elsewhere."""
    assert narrowed.stack.keys.data is None
    # Only the secrets key stays (it seals tenants' secrets whatever the switch says).
    assert set(narrowed.resources("AWS::KMS::Key")) == {narrowed.logical_id(narrowed.stack.keys.secrets)}
    secrets = arn_of(narrowed.logical_id(narrowed.stack.keys.secrets))
    for name in narrowed.function_ids:
        for action, resources in grants_of(narrowed, name).items():
            if action.startswith("kms:"):
                assert resources == {secrets}, (name, action)
    for logical_id, queue in narrowed.resources("AWS::SQS::Queue").items():
        assert queue["Properties"]["SqsManagedSseEnabled"] is True, logical_id
    for logical_id, table in narrowed.resources("AWS::DynamoDB::Table").items():
        assert "SSESpecification" not in table["Properties"], logical_id
    for logical_id, log_group in _log_groups(narrowed).items():
        assert "KmsKeyId" not in log_group["Properties"], logical_id
    for name in narrowed.function_ids:
        assert "KmsKeyArn" not in narrowed.function(name)["Properties"], name
