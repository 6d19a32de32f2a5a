"""The functions' IAM grants as the synthesized template states them, for the IAM tests."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from tests.infra.conftest import Synthesis


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def role_id(synthesis: Synthesis, function: str) -> str:
    role: str = synthesis.function(function)["Properties"]["Role"]["Fn::GetAtt"][0]
    return role


# The one condition a grant may carry: the worker assumes a tenant's execution role only with
# an external id (the tenant's: docs/security.md, "Execution roles").
EXTERNAL_ID_REQUIRED = {"Null": {"sts:ExternalId": "false"}}


def grants_of(synthesis: Synthesis, function: str, effect: str = "Allow") -> dict[str, set[str]]:
    """Action → the resources (as JSON text) the function's role may use it on (or, with
    effect "Deny", may never use it on). No statement carries a condition, but for
    sts:AssumeRole, which carries exactly `EXTERNAL_ID_REQUIRED`."""
    role = {"Ref": role_id(synthesis, function)}
    grants: dict[str, set[str]] = defaultdict(set)
    for policy in synthesis.resources("AWS::IAM::Policy").values():
        if role not in policy["Properties"]["Roles"]:
            continue
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            assert statement["Effect"] in ("Allow", "Deny")
            if "Condition" in statement:
                assert (statement["Action"], statement["Condition"]) == (
                    "sts:AssumeRole",
                    EXTERNAL_ID_REQUIRED,
                )
            if statement["Effect"] != effect:
                continue
            for action in as_list(statement["Action"]):
                grants[action] |= {
                    json.dumps(resource, sort_keys=True) for resource in as_list(statement["Resource"])
                }
    return grants


def arn_of(logical_id: str, suffix: str = "") -> str:
    arn: Any = {"Fn::GetAtt": [logical_id, "Arn"]}
    if suffix:
        arn = {"Fn::Join": ["", [arn, suffix]]}
    return json.dumps(arn, sort_keys=True)
