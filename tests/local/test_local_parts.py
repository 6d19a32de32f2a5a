"""The local cloud's pure parts: routing, schedule expressions, naming, layer selection."""

from __future__ import annotations

from pathlib import Path

import pytest

from infra.local.api_gateway import caller_arn, route_for
from infra.local.console import short_name
from infra.local.deployment import runs_here, sources_fingerprint
from infra.local.event_sources import sqs_record
from infra.local.schedules import cron_of, period_of

ARN = "arn:aws:lambda:us-east-1:123456789012:function:api"


def routes() -> list:  # type: ignore[type-arg]
    paths = [
        ("/v1/jobs", "GET"),
        ("/v1/jobs/{job_id}", "GET"),
        ("/v1/jobs/{job_id}/{proxy+}", "ANY"),
        ("/v1/jobs/{job_id}/runs", "GET"),
        ("/v1/openapi.json", "GET"),
    ]
    built = [route_for("api", path, method, ARN, "AWS_IAM") for path, method in paths]
    return sorted(built, key=lambda r: r.specificity, reverse=True)


def match(method: str, path: str) -> tuple[str, dict[str, str]] | None:
    for route in routes():
        if route.method in (method, "ANY") and (params := route.matches(path)) is not None:
            return route.resource, params
    return None


def test_literal_segments_win_over_parameters_and_greedy_paths() -> None:
    assert match("GET", "/v1/jobs/abc/runs") == ("/v1/jobs/{job_id}/runs", {"job_id": "abc"})
    assert match("POST", "/v1/jobs/abc/pause") == (
        "/v1/jobs/{job_id}/{proxy+}",
        {"job_id": "abc", "proxy": "pause"},
    )
    assert match("GET", "/v1/jobs/abc") == ("/v1/jobs/{job_id}", {"job_id": "abc"})


def test_a_greedy_path_takes_several_segments_and_parameters_are_url_decoded() -> None:
    assert match("GET", "/v1/jobs/a%20b/runs/x:1/retry") == (
        "/v1/jobs/{job_id}/{proxy+}",
        {"job_id": "a b", "proxy": "runs/x:1/retry"},
    )


def test_unknown_paths_and_methods_match_nothing() -> None:
    assert match("GET", "/v2/jobs") is None
    assert match("DELETE", "/v1/jobs") is None
    assert match("GET", "/v1/jobs/") is None


def test_a_bare_caller_name_becomes_an_iam_user_arn() -> None:
    assert caller_arn("bob", "123456789012") == "arn:aws:iam::123456789012:user/bob"
    assert caller_arn("arn:aws:sts::1:assumed-role/R/s", "123456789012") == "arn:aws:sts::1:assumed-role/R/s"


@pytest.mark.parametrize(
    ("expression", "seconds"),
    [("rate(1 minute)", 60), ("rate(5 minutes)", 300), ("rate(2 hours)", 7200), ("rate(1 day)", 86400)],
)
def test_rate_expressions_give_their_period(expression: str, seconds: int) -> None:
    assert period_of(expression) == seconds


def test_eventbridge_cron_drops_the_year_and_question_marks() -> None:
    assert cron_of("cron(0 12 ? * MON-FRI *)") == "0 12 * * MON-FRI"
    assert cron_of("rate(1 minute)") is None
    assert period_of("cron(0 12 * * ? *)") is None


def test_function_names_are_shortened_to_their_construct() -> None:
    assert (
        short_name("ServerlessScheduler-WorkersWorkerFunction4647CDED-0PLIA7SCP48I")
        == "WorkersWorkerFunction"
    )
    assert short_name("arn:aws:lambda:us-east-1:1:function:plain") == "plain"
    assert short_name("ServerlessScheduler-worker") == "worker"


def test_a_layer_with_modules_for_another_cpython_does_not_run_here(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "_core.cpython-399-x86_64-linux-gnu.so").write_bytes(b"")
    assert not runs_here(tmp_path)


def test_a_pure_python_layer_runs_here(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    assert runs_here(tmp_path)


def test_context_overrides_are_part_of_the_synthesis_fingerprint(tmp_path: Path) -> None:
    """A stack synthesized with other context (the chaos soak's short worker timeout) is
    synthesized again, not taken from a cache of the defaults."""
    (tmp_path / "cdk.json").write_text("{}")
    plain = sources_fingerprint(tmp_path)
    assert sources_fingerprint(tmp_path, {}) == plain
    short = sources_fingerprint(tmp_path, {"worker_timeout_seconds": 15})
    assert short != plain
    assert sources_fingerprint(tmp_path, {"worker_timeout_seconds": 20}) != short


def test_a_received_message_becomes_an_sqs_event_record() -> None:
    record = sqs_record(
        {
            "MessageId": "m1",
            "ReceiptHandle": "r1",
            "Body": "{}",
            "Attributes": {"ApproximateReceiveCount": "1"},
            "MessageAttributes": {"k": {"DataType": "String", "StringValue": "v"}},
        },
        "arn:aws:sqs:us-east-1:123456789012:q",
        "us-east-1",
    )
    assert record["messageId"] == "m1"
    assert record["receiptHandle"] == "r1"
    assert record["eventSource"] == "aws:sqs"
    assert record["eventSourceARN"] == "arn:aws:sqs:us-east-1:123456789012:q"
    assert record["messageAttributes"]["k"]["stringValue"] == "v"
    assert record["attributes"] == {"ApproximateReceiveCount": "1"}
