"""The operator's dashboard, and the topic every alarm notifies (issue 14 §3)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from infra.config import PRIORITIES, REPO_ROOT
from infra.dashboard import RUN_OUTCOMES
from infra.observability import MAX_QUEUE_AGE_SECONDS, TOPIC_ENCRYPTION_CHECK, UNENCRYPTED_TOPIC_REASON
from tests.infra.conftest import Synthesis

# Where the functions publish their metrics (`metrics.add_metric(name="...")`).
METRIC_SOURCES = (REPO_ROOT / "layers/core/python/scheduler_core", REPO_ROOT / "functions")
CLOUDWATCH = "cloudwatch.amazonaws.com"


def _placeholder(token: Mapping[str, Any]) -> str:
    """A reference in the body's Fn::Join, as text: `${Logical}` or `${Logical.Attribute}`."""
    if "Ref" in token:
        return "${" + str(token["Ref"]) + "}"
    logical_id, attribute = token["Fn::GetAtt"]
    return "${" + f"{logical_id}.{attribute}" + "}"


def _dashboard(synthesis: Synthesis) -> tuple[str, Mapping[str, Any]]:
    """The one dashboard's logical id and its body, parsed (references as placeholders)."""
    ((logical_id, dashboard),) = synthesis.resources("AWS::CloudWatch::Dashboard").items()
    separator, parts = dashboard["Properties"]["DashboardBody"]["Fn::Join"]
    text = separator.join(part if isinstance(part, str) else _placeholder(part) for part in parts)
    return logical_id, json.loads(text)


def _widgets(synthesis: Synthesis) -> dict[str, Mapping[str, Any]]:
    """Title → the properties of each titled widget."""
    _, body = _dashboard(synthesis)
    return {w["properties"]["title"]: w["properties"] for w in body["widgets"] if "title" in w["properties"]}


def _metrics(synthesis: Synthesis) -> set[tuple[str, str, tuple[tuple[str, str], ...], str]]:
    """Every plain metric graphed: (namespace, name, dimensions, statistic)."""
    found = set()
    for widget in _widgets(synthesis).values():
        for line in widget.get("metrics", []):
            *names, options = line
            if not names:
                continue  # a math expression
            namespace, metric, *dimensions = names
            pairs = tuple(zip(dimensions[::2], dimensions[1::2], strict=True))
            found.add((namespace, metric, pairs, options.get("stat", "Average")))
    return found


def _expressions(synthesis: Synthesis) -> list[str]:
    return [
        line[0]["expression"]
        for widget in _widgets(synthesis).values()
        for line in widget.get("metrics", [])
        if "expression" in line[0]
    ]


def _ref(synthesis: Synthesis, construct: Any) -> str:
    return "${" + synthesis.logical_id(construct) + "}"


def _emitted_metric_names() -> set[str]:
    """The metric names the code publishes (literal names only)."""
    names: set[str] = set()
    for root in METRIC_SOURCES:
        for path in Path(root).rglob("*.py"):
            names |= set(re.findall(r'add_metric\(name="(\w+)"', path.read_text()))
    return names


def _environment(synthesis: Synthesis, function: str) -> Mapping[str, str]:
    return synthesis.function(function)["Properties"]["Environment"]["Variables"]  # type: ignore[no-any-return]


def test_the_stack_has_one_dashboard_named_after_the_stack_and_its_region(synthesis: Synthesis) -> None:
    ((_, dashboard),) = synthesis.resources("AWS::CloudWatch::Dashboard").items()
    assert dashboard["Properties"]["DashboardName"] == {
        "Fn::Join": ["", ["ServerlessScheduler-", {"Ref": "AWS::Region"}]]
    }
    logical_id, body = _dashboard(synthesis)
    assert body["widgets"]
    outputs = synthesis.template.find_outputs("*")
    assert outputs["DashboardName"]["Value"] == {"Ref": logical_id}


def test_runs_by_outcome_sum_each_outcome_over_every_function_that_counts_it(synthesis: Synthesis) -> None:
    expressions = _expressions(synthesis)
    for metric in RUN_OUTCOMES.values():
        search = f"SEARCH('{{ServerlessScheduler,service}} MetricName=\"{metric}\"', 'Sum', 60)"
        assert f"SUM({search})" in expressions, metric
    assert _widgets(synthesis)["Runs per minute by outcome"]["metrics"]


def test_the_schedulers_own_metrics_are_the_ones_its_functions_publish(synthesis: Synthesis) -> None:
    """Namespace and `service` dimension as Powertools publishes them (the functions'
    environment), names as the code counts them: fire lateness p50/p99 (worker), claims per
    poll (poller), and every run outcome."""
    worker, poller = _environment(synthesis, "worker"), _environment(synthesis, "poller")
    namespace = worker["POWERTOOLS_METRICS_NAMESPACE"]
    assert poller["POWERTOOLS_METRICS_NAMESPACE"] == namespace == "ServerlessScheduler"
    worker_service = (("service", worker["POWERTOOLS_SERVICE_NAME"]),)
    poller_service = (("service", poller["POWERTOOLS_SERVICE_NAME"]),)
    metrics = _metrics(synthesis)
    assert (namespace, "FireLateness", worker_service, "p50") in metrics
    assert (namespace, "FireLateness", worker_service, "p99") in metrics
    assert (namespace, "RunsClaimed", poller_service, "Average") in metrics  # one value per poll
    assert (namespace, "RunsClaimed", poller_service, "SampleCount") in metrics  # polls
    assert (namespace, "RunsSentUnclaimed", poller_service, "Average") in metrics  # one-offs claimed at start
    ours = {name for space, name, _, _ in metrics if space == namespace} | set(RUN_OUTCOMES.values())
    assert ours <= _emitted_metric_names()


def test_each_queue_shows_its_depth_and_each_priority_its_oldest_message(synthesis: Synthesis) -> None:
    metrics = _metrics(synthesis)
    queues = synthesis.stack.queues
    for priority in PRIORITIES:
        name = (("QueueName", _ref(synthesis, queues.by_priority[priority])[:-1] + ".QueueName}"),)
        assert ("AWS/SQS", "ApproximateNumberOfMessagesVisible", name, "Maximum") in metrics, priority
        assert ("AWS/SQS", "ApproximateAgeOfOldestMessage", name, "Maximum") in metrics, priority
    dlq = (("QueueName", _ref(synthesis, queues.dead_letter_queue)[:-1] + ".QueueName}"),)
    assert ("AWS/SQS", "ApproximateNumberOfMessagesVisible", dlq, "Maximum") in metrics
    # The line the backlog alarms fire above.
    (annotation,) = _widgets(synthesis)["Age of the oldest message"]["annotations"]["horizontal"]
    assert annotation["value"] == MAX_QUEUE_AGE_SECONDS


def test_the_poller_and_the_worker_show_duration_errors_and_throttles(synthesis: Synthesis) -> None:
    metrics = _metrics(synthesis)
    for name in ("poller", "worker"):
        function = (("FunctionName", "${" + synthesis.function_ids[name] + "}"),)
        for statistic in ("p50", "p99", "Maximum"):
            assert ("AWS/Lambda", "Duration", function, statistic) in metrics, (name, statistic)
        assert ("AWS/Lambda", "Errors", function, "Sum") in metrics, name
        assert ("AWS/Lambda", "Throttles", function, "Sum") in metrics, name
    timeout_ms = synthesis.function("poller")["Properties"]["Timeout"] * 1000
    (annotation,) = _widgets(synthesis)["Poller duration"]["annotations"]["horizontal"]
    assert annotation["value"] == timeout_ms


def test_the_api_shows_its_4xx_and_5xx(synthesis: Synthesis) -> None:
    ((_, rest_api),) = synthesis.resources("AWS::ApiGateway::RestApi").items()
    api = (("ApiName", rest_api["Properties"]["Name"]),)
    metrics = _metrics(synthesis)
    assert ("AWS/ApiGateway", "4XXError", api, "Sum") in metrics
    assert ("AWS/ApiGateway", "5XXError", api, "Sum") in metrics


def test_every_alarm_notifies_the_topic_when_it_fires_and_clears(synthesis: Synthesis) -> None:
    topic = {"Ref": synthesis.logical_id(synthesis.stack.alarms.topic)}
    alarms = synthesis.resources("AWS::CloudWatch::Alarm")
    assert len(alarms) == 1 + 3 + len(PRIORITIES)  # DLQ, three functions, three queues
    for logical_id, alarm in alarms.items():
        assert alarm["Properties"]["AlarmActions"] == [topic], logical_id
        assert alarm["Properties"]["OKActions"] == [topic], logical_id


def test_the_dashboard_shows_every_alarms_state(synthesis: Synthesis) -> None:
    _, body = _dashboard(synthesis)
    (widget,) = [w for w in body["widgets"] if w["type"] == "alarm"]
    names = {
        alarm["Properties"]["AlarmName"] for alarm in synthesis.resources("AWS::CloudWatch::Alarm").values()
    }
    assert "ServerlessScheduler-DeadLetters" in names
    prefix = "arn:${AWS::Partition}:cloudwatch:${AWS::Region}:${AWS::AccountId}:alarm:"
    assert set(widget["properties"]["alarms"]) == {prefix + name for name in names}


def test_the_topic_is_a_stack_output(synthesis: Synthesis) -> None:
    outputs = synthesis.template.find_outputs("*")
    assert outputs["AlarmTopicArn"]["Value"] == {"Ref": synthesis.logical_id(synthesis.stack.alarms.topic)}


def _topic_policy(synthesis: Synthesis) -> list[Mapping[str, Any]]:
    topic = {"Ref": synthesis.logical_id(synthesis.stack.alarms.topic)}
    ((_, policy),) = synthesis.resources("AWS::SNS::TopicPolicy").items()
    assert policy["Properties"]["Topics"] == [topic]
    return policy["Properties"]["PolicyDocument"]["Statement"]  # type: ignore[no-any-return]


def test_the_topic_is_tls_only_and_only_this_accounts_alarms_may_publish(synthesis: Synthesis) -> None:
    topic = {"Ref": synthesis.logical_id(synthesis.stack.alarms.topic)}
    statements = _topic_policy(synthesis)
    (deny,) = [s for s in statements if s["Effect"] == "Deny"]
    assert deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    assert (deny["Principal"], deny["Action"], deny["Resource"]) == ("*", "sns:Publish", topic)
    (allow,) = [s for s in statements if s["Effect"] == "Allow"]
    assert (allow["Principal"], allow["Action"], allow["Resource"]) == (
        {"Service": CLOUDWATCH},
        "sns:Publish",
        topic,
    )
    assert allow["Condition"]["StringEquals"] == {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}
    assert allow["Condition"]["ArnLike"]["aws:SourceArn"]["Fn::Join"][1][-2:] == [
        {"Ref": "AWS::AccountId"},
        ":alarm:*",
    ]


def test_the_topic_is_under_the_logs_key_which_alarms_may_use_for_this_accounts_topics(
    synthesis: Synthesis,
) -> None:
    keys = synthesis.stack.keys
    assert keys.logs is not None
    logs = synthesis.logical_id(keys.logs)
    ((_, topic),) = synthesis.resources("AWS::SNS::Topic").items()
    assert topic["Properties"]["KmsMasterKeyId"] == {"Fn::GetAtt": [logs, "Arn"]}
    statements = synthesis.resources("AWS::KMS::Key")[logs]["Properties"]["KeyPolicy"]["Statement"]
    (statement,) = [s for s in statements if s["Principal"] == {"Service": CLOUDWATCH}]
    assert statement["Action"] == ["kms:Decrypt", "kms:GenerateDataKey*"]
    topics = statement["Condition"]["ArnLike"]["kms:EncryptionContext:aws:sns:topicArn"]["Fn::Join"][1]
    assert topics == [
        "arn:",
        {"Ref": "AWS::Partition"},
        ":sns:",
        {"Ref": "AWS::Region"},
        ":",
        {"Ref": "AWS::AccountId"},
        ":*",
    ]
    # Neither the data key nor the secrets key lets CloudWatch in.
    for key in (keys.data, keys.secrets):
        assert key is not None
        policy = synthesis.resources("AWS::KMS::Key")[synthesis.logical_id(key)]["Properties"]["KeyPolicy"]
        assert all(s["Principal"] != {"Service": CLOUDWATCH} for s in policy["Statement"])


def test_without_customer_managed_keys_the_unencrypted_topic_says_why(narrowed: Synthesis) -> None:
    """No key of SNS's own lets alarms publish: the topic stays unencrypted, TLS-only, and
    answers checkov's encryption check with that reason (cdk-nag has no such rule)."""
    ((_, topic),) = narrowed.resources("AWS::SNS::Topic").items()
    assert "KmsMasterKeyId" not in topic["Properties"]
    assert any(s["Effect"] == "Deny" for s in _topic_policy(narrowed))
    assert topic["Metadata"]["checkov"]["skip"] == [
        {"id": TOPIC_ENCRYPTION_CHECK, "comment": UNENCRYPTED_TOPIC_REASON}
    ]
    for report in narrowed.validation_report["pluginReports"]:
        assert (report["conclusion"], report["violations"]) == ("success", [])
        assert "/Alarms/Topic" not in json.dumps(report["suppressedViolations"])
