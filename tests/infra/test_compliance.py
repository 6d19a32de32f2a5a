"""cdk-nag (AWS Solutions) and cfn-lint on the synthesized template."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import Validations

from tests.infra.conftest import NARROWED_FUNCTIONS, Synthesis

# cfn-lint warnings the template may have, and why.
ALLOWED_LINT_WARNINGS = {
    # lambda.Function always adds DependsOn on its role and the role's policy, so the function
    # is only created once it may write logs; the role part repeats the Role GetAtt. Harmless.
    "W3005",
}


def _acknowledgements(synthesis: Synthesis) -> dict[tuple[str, str], str]:
    """(construct path, acknowledged id) → reason, for every acknowledgement in the app."""
    found: dict[tuple[str, str], str] = {}
    for construct in synthesis.app.node.find_all():
        for entry in construct.node.metadata:
            if entry.type == Validations.ACKNOWLEDGED_RULES_METADATA_KEY:
                for rule_id, reason in entry.data.items():
                    found[(construct.node.path, rule_id)] = reason
    return found


def _suppressed(synthesis: Synthesis) -> list[dict[str, Any]]:
    return [
        violation
        for report in synthesis.validation_report["pluginReports"]
        for violation in report.get("suppressedViolations", [])
    ]


def test_cdk_nag_reports_no_unacknowledged_finding(synthesis: Synthesis) -> None:
    reports = synthesis.validation_report["pluginReports"]
    assert [report["pluginName"] for report in reports] == ["AwsSolutions"]
    for report in reports:
        assert report["conclusion"] == "success"
        assert report["violations"] == []


def test_every_acknowledged_finding_states_a_reason(synthesis: Synthesis) -> None:
    suppressed = _suppressed(synthesis)
    assert suppressed
    for violation in suppressed:
        assert len(violation["reason"].split()) >= 8, violation["acknowledgedId"]


def test_every_acknowledgement_is_for_a_finding_that_exists(synthesis: Synthesis) -> None:
    acknowledgements = _acknowledgements(synthesis)
    used = {
        (violation["acknowledgedAt"], violation["acknowledgedId"]) for violation in _suppressed(synthesis)
    }
    assert set(acknowledgements) == used
    assert all(reason.strip() for reason in acknowledgements.values())


def test_acknowledged_findings_are_the_reviewed_ones(synthesis: Synthesis) -> None:
    findings = {
        (violation["acknowledgedAt"].removeprefix("ServerlessScheduler/"), violation["ruleName"])
        for violation in _suppressed(synthesis)
    }
    # No shared target by default (context `target_*_arns` is []); the worker may assume a
    # tenant's role of any account (with an external id), the api read the account's roles.
    any_role = "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:iam::*:role/*]"
    account_roles = "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:iam::<AWS::AccountId>:role/*]"
    assert findings == {
        ("Api/Api/Role", "AwsSolutions-IAM5[Resource::*]"),
        ("Poller/Poller/Role", "AwsSolutions-IAM5[Resource::*]"),
        ("Workers/Worker/Role", "AwsSolutions-IAM5[Resource::*]"),
        ("Workers/Worker/Role", any_role),
        ("Api/Api/Role", account_roles),
        ("Api/RestApi", "AwsSolutions-COG4"),
        ("Api/RestApi", "AwsSolutions-APIG2"),
        ("Api/RestApi/DeploymentStage.prod", "AwsSolutions-APIG3"),
        (
            "Api/RestApi/CloudWatchRole",
            "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
            "AmazonAPIGatewayPushToCloudWatchLogs]",
        ),
    }


@pytest.mark.parametrize("which", ["synthesis", "narrowed"])
def test_cfn_lint_finds_no_errors_and_only_the_allowed_warnings(
    which: str, request: pytest.FixtureRequest
) -> None:
    """The default template, and the one with other context (provisioned tables among it)."""
    synthesis: Synthesis = request.getfixturevalue(which)
    cfn_lint = Path(sys.executable).with_name("cfn-lint")
    result = subprocess.run(
        [str(cfn_lint), "--format", "json", str(synthesis.template_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    matches = json.loads(result.stdout or "[]")
    errors = [m for m in matches if m["Level"] == "Error"]
    warnings = [
        m for m in matches if m["Level"] == "Warning" and m["Rule"]["Id"] not in ALLOWED_LINT_WARNINGS
    ]
    assert errors == []
    assert warnings == []
    # cfn-lint exits 0, or 4 when it found warnings only; anything else is a crash or an error.
    assert result.returncode in (0, 4), result.stderr


def test_a_deployers_wildcard_target_pattern_is_acknowledged_with_their_context_key(
    narrowed: Synthesis,
) -> None:
    """Context `target_function_arns: ["...:function:jobs-*"]`: cdk-nag flags the pattern, the
    acknowledgement names the context key that chose it; an exact ARN needs none."""
    for report in narrowed.validation_report["pluginReports"]:
        assert (report["conclusion"], report["violations"]) == ("success", [])
    worker = {
        violation["ruleName"]: violation["reason"]
        for violation in _suppressed(narrowed)
        if violation["acknowledgedAt"].endswith("Workers/Worker/Role")
    }
    pattern = f"AwsSolutions-IAM5[Resource::{NARROWED_FUNCTIONS}]"
    any_role = "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:iam::*:role/*]"
    assert set(worker) == {"AwsSolutions-IAM5[Resource::*]", any_role, pattern}
    assert "'target_function_arns'" in worker[pattern]
