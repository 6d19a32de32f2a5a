"""checkov, an outside scanner, finds nothing on the synthesized templates.

checkov lives in a venv of its own (`.venv-checkov`, built by `make install`): its pins
would move boto3 and botocore in `.venv`. A check that does not apply is skipped in the
resource's Metadata with its reason (`infra.compliance.skip_checkov_check`); every such skip
answers a finding that checkov makes without it, and is one of the reviewed ones below.
"""

from __future__ import annotations

import copy
import json
import subprocess
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from infra.compliance import CHECKOV_METADATA
from infra.config import REPO_ROOT
from infra.keys import AWS_KEYS_REASON
from infra.observability import TOPIC_ENCRYPTION_CHECK, UNENCRYPTED_TOPIC_REASON
from tests.infra.conftest import Synthesis

CHECKOV = REPO_ROOT / ".venv-checkov" / "bin" / "checkov"
# checkov's ids for what the stack answers with a reason, not a change.
IN_VPC, DEAD_LETTER_QUEUE, RESERVED_CONCURRENCY, API_CACHING = (
    "CKV_AWS_117",
    "CKV_AWS_116",
    "CKV_AWS_115",
    "CKV_AWS_120",
)
# The checks that ask for a customer managed key: tables, queues, log groups, environments.
CUSTOMER_MANAGED_KEY_CHECKS = {
    "AWS::DynamoDB::Table": "CKV_AWS_119",
    "AWS::SQS::Queue": "CKV_AWS_27",
    "AWS::Logs::LogGroup": "CKV_AWS_158",
    "AWS::Lambda::Function": "CKV_AWS_173",
}


@dataclass(frozen=True)
class Result:
    """One check on one resource of a template."""

    check_id: str
    check_name: str
    resource: str  # "<type>.<logical id>", as checkov names it
    comment: str | None  # a skip's reason

    @property
    def logical_id(self) -> str:
        return self.resource.rsplit(".", 1)[1]

    def __str__(self) -> str:
        return f"{self.check_id} on {self.resource}: {self.check_name}"


@dataclass(frozen=True)
class Scan:
    failed: list[Result]
    skipped: list[Result]
    passed: int


def _without_skips(template: Mapping[str, Any]) -> dict[str, Any]:
    """The template with every checkov skip taken out of its resources' Metadata."""
    stripped = copy.deepcopy(dict(template))
    for resource in stripped["Resources"].values():
        resource.get("Metadata", {}).pop(CHECKOV_METADATA, None)
    return stripped


def _checkov(templates: Mapping[str, Path]) -> dict[str, Scan]:
    """One checkov run over the templates (name → file), offline; each template's results."""
    if not CHECKOV.exists():
        pytest.fail(f"checkov is not installed at {CHECKOV}: run `make install`")
    command = [str(CHECKOV), "--framework", "cloudformation", "--output", "json", "--skip-download"]
    for path in templates.values():
        command += ["--file", str(path)]
    # Exit 1: some check failed; the results say which.
    run = subprocess.run(command, capture_output=True, text=True, check=False, timeout=600)
    assert run.returncode in (0, 1), run.stderr
    results = json.loads(run.stdout)["results"]
    names = {str(path): name for name, path in templates.items()}

    def of(kind: str) -> dict[str, list[Result]]:
        found: dict[str, list[Result]] = defaultdict(list)
        for check in results.get(kind, []):
            found[names[check["file_abs_path"]]].append(
                Result(
                    check["check_id"],
                    check["check_name"],
                    check["resource"],
                    check["check_result"].get("suppress_comment"),
                )
            )
        return found

    failed, skipped, passed = of("failed_checks"), of("skipped_checks"), of("passed_checks")
    return {name: Scan(failed[name], skipped[name], len(passed[name])) for name in templates}


@pytest.fixture(scope="module")
def scans(
    synthesis: Synthesis, narrowed: Synthesis, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Scan]:
    """checkov on the session's two syntheses as written, and on the default one without its skips."""
    without_skips = tmp_path_factory.mktemp("checkov") / "without-skips.template.json"
    without_skips.write_text(json.dumps(_without_skips(synthesis.template.to_json())))
    return _checkov(
        {
            "default": synthesis.template_path.resolve(),
            "narrowed": narrowed.template_path.resolve(),
            "without skips": without_skips.resolve(),
        }
    )


def _skips(scan: Scan) -> dict[str, set[str]]:
    """Logical id → the checks skipped on it."""
    skips: dict[str, set[str]] = defaultdict(set)
    for result in scan.skipped:
        skips[result.logical_id].add(result.check_id)
    return dict(skips)


def _reviewed_skips(synthesis: Synthesis) -> dict[str, set[str]]:
    """What does not apply to the stack, whatever its context: no VPC for any function; no
    Lambda DLQ (none is invoked asynchronously but the poller, whose events hold nothing to
    redrive); reserved concurrency for the poller only; no cache on a mutable API."""
    ids = synthesis.function_ids
    return {
        ids["api"]: {IN_VPC, DEAD_LETTER_QUEUE, RESERVED_CONCURRENCY},
        ids["poller"]: {IN_VPC, DEAD_LETTER_QUEUE},
        ids["worker"]: {IN_VPC, DEAD_LETTER_QUEUE, RESERVED_CONCURRENCY},
        synthesis.logical_id(synthesis.stack.api.rest_api.deployment_stage): {API_CACHING},
    }


@pytest.mark.parametrize("template", ["default", "narrowed"])
def test_checkov_fails_no_check(scans: dict[str, Scan], template: str) -> None:
    scan = scans[template]
    assert scan.passed >= 50  # it did scan the stack
    assert scan.failed == [], "checkov failed:\n" + "\n".join(str(result) for result in scan.failed)


def test_every_skip_answers_a_finding_checkov_makes_without_it(scans: dict[str, Scan]) -> None:
    """Taken out, the skips are exactly what fails: none is stale, and the scan can fail."""
    without = {(result.check_id, result.resource) for result in scans["without skips"].failed}
    skipped = {(result.check_id, result.resource) for result in scans["default"].skipped}
    assert without == skipped
    assert skipped


def test_the_skips_are_the_reviewed_ones(scans: dict[str, Scan], synthesis: Synthesis) -> None:
    assert _skips(scans["default"]) == _reviewed_skips(synthesis)


def test_without_customer_managed_keys_the_key_checks_name_the_deployers_choice(
    scans: dict[str, Scan], narrowed: Synthesis
) -> None:
    """Context `customer_managed_keys: false`: each check asking for a customer managed key is
    answered with that choice, on every table, queue, log group and function; the alarm topic,
    left unencrypted (no AWS key of SNS's lets alarms publish), says so."""
    resources = narrowed.template.to_json()["Resources"]
    expected = _reviewed_skips(narrowed)
    for logical_id, resource in resources.items():
        check = CUSTOMER_MANAGED_KEY_CHECKS.get(resource["Type"])
        if check is not None:
            expected.setdefault(logical_id, set()).add(check)
    topic = narrowed.logical_id(narrowed.stack.alarms.topic)
    expected[topic] = {TOPIC_ENCRYPTION_CHECK}
    assert _skips(scans["narrowed"]) == expected
    for result in scans["narrowed"].skipped:
        if result.check_id in CUSTOMER_MANAGED_KEY_CHECKS.values():
            assert result.comment == AWS_KEYS_REASON, result
        if result.check_id == TOPIC_ENCRYPTION_CHECK:
            assert result.comment == UNENCRYPTED_TOPIC_REASON, result


def test_every_skip_states_its_reason_on_one_line(scans: dict[str, Scan]) -> None:
    for result in scans["default"].skipped + scans["narrowed"].skipped:
        assert result.comment is not None, result
        assert "\n" not in result.comment, result
        assert len(result.comment.split()) >= 8, result
