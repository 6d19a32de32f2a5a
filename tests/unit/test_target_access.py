"""The target check at create and change: never the scheduler's own queues or functions, only
what the worker's IAM grants reach. Each known way around the old checks is a case here."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import TypeAdapter

from scheduler_core.domain.errors import InvalidRequest
from scheduler_core.domain.target_access import TargetAccess, arn_matches, queue_address
from scheduler_core.domain.target_spec import Target

ACCOUNT = "123456789012"
OTHER_ACCOUNT = "111122223333"
REGION = "us-east-1"
SQS_HOST = f"https://sqs.{REGION}.amazonaws.com"
OWN_QUEUE = "ServerlessScheduler-QueuesHigh8D1A5-x1Y2z3"
OWN_QUEUES = (
    f"{SQS_HOST}/{ACCOUNT}/{OWN_QUEUE}",
    f"{SQS_HOST}/{ACCOUNT}/ServerlessScheduler-QueuesDeadLetters-a1",
)
PREFIX = "ServerlessScheduler-"
# As an operator offering every tenant any resource of the kind in the stack's account and
# region (the old default grants; now opt-in: CDK context `target_*_arns`).
DEFAULT_PATTERNS = {
    "SQS": (f"arn:aws:sqs:{REGION}:{ACCOUNT}:*",),
    "SNS": (f"arn:aws:sns:{REGION}:{ACCOUNT}:*",),
    "EVENTBRIDGE": (f"arn:aws:events:{REGION}:{ACCOUNT}:event-bus/*",),
    "LAMBDA": (f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:*",),
}
RESOURCES = {"SQS": "queues", "SNS": "topics", "EVENTBRIDGE": "event buses", "LAMBDA": "functions"}
DEPLOYED = TargetAccess(
    partition="aws",
    region=REGION,
    account=ACCOUNT,
    own_queue_urls=OWN_QUEUES,
    own_function_prefix=PREFIX,
    allowed=DEFAULT_PATTERNS,
)
TARGET: TypeAdapter[Any] = TypeAdapter(Target)
ROLE = f"arn:aws:iam::{ACCOUNT}:role/tenants/alice-delivery"


def refusal(access: TargetAccess, target: dict[str, Any]) -> tuple[str, str] | None:
    """(field, message) of the 400 `access` answers for `target`, None if it passes."""
    refused: InvalidRequest | None = None
    try:
        access.check(TARGET.validate_python(target))
    except InvalidRequest as error:
        refused = error
    if refused is None:
        return None
    [detail] = refused.details
    assert refused.status == 400
    assert refused.message == f"{detail['field']} {detail['message']}"
    return detail["field"], detail["message"]


def sqs(url: str) -> dict[str, Any]:
    return {"type": "SQS", "queue_url": url}


def sns(arn: str) -> dict[str, Any]:
    return {"type": "SNS", "topic_arn": arn}


def bus(name_or_arn: str) -> dict[str, Any]:
    return {"type": "EVENTBRIDGE", "event_bus_name": name_or_arn, "source": "com.example", "detail_type": "T"}


def function(arn: str) -> dict[str, Any]:
    return {"type": "LAMBDA", "function_arn": arn}


# --- the scheduler's own queues ------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        f"{SQS_HOST}/{ACCOUNT}/{OWN_QUEUE}",
        f"{SQS_HOST}/{ACCOUNT}/{OWN_QUEUE}/",
        f"{SQS_HOST}/{ACCOUNT}/{OWN_QUEUE.replace('-', '%2D')}",
        f"{SQS_HOST}/{ACCOUNT}/%53erverlessScheduler-QueuesHigh8D1A5-x1Y2z3",
        f"{SQS_HOST}/%31%32%33456789012/{OWN_QUEUE}",
        f"{SQS_HOST}/{ACCOUNT}%2F{OWN_QUEUE}",
        f"https://SQS.US-EAST-1.AMAZONAWS.COM/{ACCOUNT}/{OWN_QUEUE}",
        f"HTTPS://sqs.us-east-1.amazonaws.com/{ACCOUNT}/{OWN_QUEUE}",
        f"https://queue.amazonaws.com/{ACCOUNT}/{OWN_QUEUE}",
        f"http://localhost:4566/{ACCOUNT}/{OWN_QUEUE}",
        f"https://sqs.{REGION}.amazonaws.com:443/{ACCOUNT}/{OWN_QUEUE}",
        f"{SQS_HOST}/{ACCOUNT}/ServerlessScheduler-QueuesDeadLetters-a1",
    ],
    ids=[
        "as given",
        "trailing slash",
        "percent-encoded dashes",
        "percent-encoded letter",
        "percent-encoded account",
        "percent-encoded slash",
        "host in capitals",
        "scheme in capitals",
        "legacy host",
        "local endpoint",
        "explicit port",
        "the DLQ",
    ],
)
def test_an_own_queue_is_refused_however_its_url_is_written(url: str) -> None:
    own = ("target.queue_url", "is one of the scheduler's own queues; target a queue of yours")
    assert refusal(DEPLOYED, sqs(url)) == own
    # A role of the tenant's that could reach it changes nothing.
    assert refusal(DEPLOYED, sqs(url) | {"role_arn": ROLE}) == own


@pytest.mark.parametrize(
    "url",
    [
        f"{SQS_HOST}/{ACCOUNT}/{OWN_QUEUE}?x",
        f"{SQS_HOST}/{ACCOUNT}/{OWN_QUEUE}?",
        f"{SQS_HOST}/{ACCOUNT}/{OWN_QUEUE}#frag",
        f"{SQS_HOST}/{ACCOUNT}/{OWN_QUEUE}/#",
        f"{SQS_HOST}/{ACCOUNT}/orders?Action=SendMessage",
    ],
    ids=["query", "empty query", "fragment", "empty fragment", "query on another queue"],
)
def test_a_queue_url_with_a_query_or_fragment_is_refused(url: str) -> None:
    field, message = refusal(DEPLOYED, sqs(url)) or ("", "")
    assert field == "target.queue_url"
    assert message.startswith("must not carry a query ('?…') or fragment ('#…')")
    assert "https://sqs.<region>.amazonaws.com/<account>/<queue name>" in message


@pytest.mark.parametrize(
    "url",
    [
        f"{SQS_HOST}//{ACCOUNT}/{OWN_QUEUE}",
        f"{SQS_HOST}/{ACCOUNT}//{OWN_QUEUE}",
        f"{SQS_HOST}/{ACCOUNT}/x/../{OWN_QUEUE}",
        f"{SQS_HOST}/{ACCOUNT}/./{OWN_QUEUE}",
        f"{SQS_HOST}/{ACCOUNT}/{OWN_QUEUE}%00",
        f"{SQS_HOST}/{ACCOUNT}/{OWN_QUEUE.replace('-', '%252D')}",
        f"{SQS_HOST}/prefix/{ACCOUNT}/{OWN_QUEUE}",
        f"{SQS_HOST}/{ACCOUNT}",
        f"{SQS_HOST}/12345/orders",
        f"{SQS_HOST}/{ACCOUNT}/" + "q" * 81,
        f"{SQS_HOST}/{ACCOUNT}/%D9%A1",
    ],
    ids=[
        "empty first segment",
        "empty middle segment",
        "dot-dot segment",
        "dot segment",
        "encoded NUL",
        "double encoding",
        "extra segment",
        "no queue name",
        "short account",
        "name over 80",
        "non-ASCII digit",
    ],
)
def test_a_path_other_than_account_and_queue_name_is_refused(url: str) -> None:
    field, message = refusal(DEPLOYED, sqs(url)) or ("", "")
    assert field == "target.queue_url"
    assert message.startswith("must be a queue URL such as https://sqs.<region>.amazonaws.com/")


@pytest.mark.parametrize(
    "url",
    [
        f"{SQS_HOST}/{ACCOUNT}/orders",
        f"{SQS_HOST}/{ACCOUNT}/orders.fifo",
        f"{SQS_HOST}/{ACCOUNT}/{OWN_QUEUE}-copy",
        f"{SQS_HOST}/{ACCOUNT}/{OWN_QUEUE.lower()}",  # queue names are case-sensitive
        f"http://127.0.0.1:41235/{ACCOUNT}/orders",
        f"{SQS_HOST}/{ACCOUNT}/" + "q" * 80,
    ],
)
def test_a_queue_of_another_name_in_the_account_passes(url: str) -> None:
    assert refusal(DEPLOYED, sqs(url)) is None


def test_a_queue_of_the_same_name_in_another_account_is_not_ours() -> None:
    unchecked = TargetAccess(own_queue_urls=OWN_QUEUES)

    assert refusal(unchecked, sqs(f"{SQS_HOST}/{OTHER_ACCOUNT}/{OWN_QUEUE}")) is None


def test_a_queue_in_another_region_is_refused_as_the_worker_sends_in_its_own() -> None:
    field, message = refusal(DEPLOYED, sqs(f"https://sqs.eu-west-1.amazonaws.com/{ACCOUNT}/orders")) or (
        "",
        "",
    )

    assert field == "target.queue_url"
    assert message == (
        f"names region eu-west-1, but the worker sends to SQS in {REGION}; give a queue of {REGION}"
    )


def test_queue_address_reads_the_region_the_host_names() -> None:
    assert (
        queue_address(f"https://sqs-fips.us-gov-west-1.amazonaws.com/{ACCOUNT}/q").region == "us-gov-west-1"
    )
    assert (
        queue_address(f"https://vpce-0a1b.sqs.eu-west-1.vpce.amazonaws.com/{ACCOUNT}/q").region == "eu-west-1"
    )
    assert queue_address(f"http://localhost:4566/{ACCOUNT}/q").region is None
    assert queue_address(f"{SQS_HOST}/{ACCOUNT}/a%2Db/") == queue_address(f"{SQS_HOST}/{ACCOUNT}/a-b")


def test_the_old_checks_with_no_deployment_known_still_refuse_own_queues() -> None:
    """Tests that build no deployment settings still get the own-queue check."""
    bare = TargetAccess(own_queue_urls=OWN_QUEUES)

    assert refusal(bare, sqs(f"{SQS_HOST}/{ACCOUNT}/{OWN_QUEUE}%2F")) is not None
    assert refusal(bare, sqs(f"{SQS_HOST}/{ACCOUNT}/{OWN_QUEUE}?x")) is not None
    assert refusal(bare, sqs(f"https://sqs.eu-west-1.amazonaws.com/{ACCOUNT}/orders")) is None


# --- the scheduler's own functions ------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "ServerlessScheduler-api",
        "ServerlessScheduler-worker",
        "ServerlessScheduler-poller",
        "ServerlessScheduler-api:live",
        "ServerlessScheduler-api:$LATEST",
        "ServerlessScheduler-api:3",
        "ServerlessScheduler-ApiFunction4B3D74B1-0PLIA7SCP48I",
    ],
)
def test_an_own_function_is_refused_with_or_without_a_qualifier(name: str) -> None:
    arn = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{name}"

    own = (
        "target.function_arn",
        "is one of the scheduler's own functions (named ServerlessScheduler-…); target a function of yours",
    )
    assert refusal(DEPLOYED, function(arn)) == own
    assert refusal(DEPLOYED, function(arn) | {"role_arn": ROLE}) == own


def test_an_own_function_is_refused_even_where_the_grants_would_reach_it() -> None:
    everything = TargetAccess(
        partition="aws",
        region=REGION,
        account=ACCOUNT,
        own_function_prefix=PREFIX,
        allowed={"LAMBDA": ("*",)},
    )
    arn = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:ServerlessScheduler-api"

    assert refusal(everything, function(arn)) is not None


@pytest.mark.parametrize(
    "arn",
    [
        f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:send-report",
        f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:ServerlessSchedulerApi",
        f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:my-ServerlessScheduler-api",
    ],
)
def test_a_function_of_another_name_passes(arn: str) -> None:
    assert refusal(DEPLOYED, function(arn)) is None


def test_a_function_of_the_same_name_in_another_account_or_region_is_not_ours() -> None:
    """It is then only as reachable as the grants say."""
    anywhere = TargetAccess(
        partition="aws", region=REGION, account=ACCOUNT, own_function_prefix=PREFIX, allowed={"LAMBDA": None}
    )
    for arn in (
        f"arn:aws:lambda:{REGION}:{OTHER_ACCOUNT}:function:ServerlessScheduler-api",
        f"arn:aws:lambda:eu-west-1:{ACCOUNT}:function:ServerlessScheduler-api",
    ):
        assert refusal(anywhere, function(arn)) is None, arn


# --- what the grants reach --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "arn", "context_key"),
    [
        (
            sns(f"arn:aws:sns:eu-west-1:{ACCOUNT}:alerts"),
            f"arn:aws:sns:eu-west-1:{ACCOUNT}:alerts",
            "target_topic_arns",
        ),
        (
            sns(f"arn:aws:sns:{REGION}:{OTHER_ACCOUNT}:alerts"),
            f"arn:aws:sns:{REGION}:{OTHER_ACCOUNT}:alerts",
            "target_topic_arns",
        ),
        (
            sns(f"arn:aws-cn:sns:{REGION}:{ACCOUNT}:alerts"),
            f"arn:aws-cn:sns:{REGION}:{ACCOUNT}:alerts",
            "target_topic_arns",
        ),
        (
            bus(f"arn:aws:events:eu-central-2:{ACCOUNT}:event-bus/orders"),
            f"arn:aws:events:eu-central-2:{ACCOUNT}:event-bus/orders",
            "target_event_bus_arns",
        ),
        (
            function(f"arn:aws:lambda:{REGION}:{OTHER_ACCOUNT}:function:send-report"),
            f"arn:aws:lambda:{REGION}:{OTHER_ACCOUNT}:function:send-report",
            "target_function_arns",
        ),
        (
            sqs(f"{SQS_HOST}/{OTHER_ACCOUNT}/orders"),
            f"arn:aws:sqs:{REGION}:{OTHER_ACCOUNT}:orders",
            "target_queue_arns",
        ),
    ],
    ids=[
        "topic in another region",
        "topic of another account",
        "topic in another partition",
        "bus in another region",
        "function of another account",
        "queue of another account",
    ],
)
def test_a_target_neither_listed_nor_given_a_role_is_refused_naming_role_arn(
    target: dict[str, Any], arn: str, context_key: str
) -> None:
    [pattern] = DEFAULT_PATTERNS[target["type"]]

    refused = refusal(DEPLOYED, target)

    assert refused == (
        "target.role_arn",
        f"is needed for {arn}: this deployment offers only the {RESOURCES[target['type']]} matching "
        f'{pattern}. Give role_arn, a role of yours the scheduler may assume (docs/security.md, "Execution '
        f'roles"), or ask the operator to list the ARN in CDK context `{context_key}`',
    )
    # With a role of the tenant's, the role decides what the target reaches.
    assert refusal(DEPLOYED, target | {"role_arn": ROLE}) is None


@pytest.mark.parametrize(
    "target",
    [
        sns(f"arn:aws:sns:{REGION}:{ACCOUNT}:alerts"),
        sns(f"arn:aws:sns:{REGION}:{ACCOUNT}:ledger.fifo"),
        bus("default"),
        bus("orders.prod/v1-x_y"),
        bus(f"arn:aws:events:{REGION}:{ACCOUNT}:event-bus/orders"),
        function(f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:send-report:live"),
        sqs(f"{SQS_HOST}/{ACCOUNT}/orders"),
        {"type": "HTTP", "url": "https://example.com/hook?x=1#y"},
    ],
)
def test_a_target_of_the_stacks_account_and_region_passes_the_default_grants(target: dict[str, Any]) -> None:
    assert refusal(DEPLOYED, target) is None


def test_an_event_bus_given_by_name_is_the_one_in_the_stacks_account_and_region() -> None:
    narrowed = TargetAccess(
        partition="aws",
        region=REGION,
        account=ACCOUNT,
        allowed={"EVENTBRIDGE": (f"arn:aws:events:{REGION}:{ACCOUNT}:event-bus/orders-*",)},
    )

    assert refusal(narrowed, bus("orders-eu")) is None
    refused = refusal(narrowed, bus("default"))
    assert refused is not None
    assert refused[1].startswith(f"is needed for arn:aws:events:{REGION}:{ACCOUNT}:event-bus/default:")


def test_narrowed_grants_reach_what_they_name_and_nothing_else() -> None:
    narrowed = TargetAccess(
        partition="aws",
        region=REGION,
        account=ACCOUNT,
        allowed={
            "SQS": (),
            "SNS": (f"arn:aws:sns:eu-west-1:{OTHER_ACCOUNT}:alerts",),
            "LAMBDA": (f"arn:aws:lambda:eu-west-1:{OTHER_ACCOUNT}:function:jobs-*",),
        },
    )

    assert refusal(narrowed, sns(f"arn:aws:sns:eu-west-1:{OTHER_ACCOUNT}:alerts")) is None
    assert refusal(narrowed, sns(f"arn:aws:sns:eu-west-1:{OTHER_ACCOUNT}:alerts-2")) is not None
    assert (
        refusal(narrowed, function(f"arn:aws:lambda:eu-west-1:{OTHER_ACCOUNT}:function:jobs-a:live")) is None
    )
    assert refusal(narrowed, function(f"arn:aws:lambda:eu-west-1:{OTHER_ACCOUNT}:function:other")) is not None
    assert refusal(narrowed, sqs(f"{SQS_HOST}/{ACCOUNT}/orders")) == (
        "target.role_arn",
        f"is needed for arn:aws:sqs:{REGION}:{ACCOUNT}:orders: this deployment offers no shared queues "
        "(CDK context `target_queue_arns` is []). Give role_arn, a role of yours the scheduler may assume "
        '(docs/security.md, "Execution roles"), or ask the operator to list the ARN in CDK context '
        "`target_queue_arns`",
    )
    # Not narrowed: not checked.
    assert refusal(narrowed, bus(f"arn:aws:events:eu-central-2:{OTHER_ACCOUNT}:event-bus/b")) is None


@pytest.mark.parametrize(
    ("pattern", "arn", "matches"),
    [
        ("arn:aws:sns:us-east-1:123456789012:*", "arn:aws:sns:us-east-1:123456789012:t", True),
        ("arn:aws:sns:us-east-1:123456789012:*", "arn:aws:sns:us-east-1:123456789013:t", False),
        ("arn:aws:sns:*:123456789012:t", "arn:aws:sns:eu-west-1:123456789012:t", True),
        ("arn:aws:sns:us-east-1:123456789012:t?", "arn:aws:sns:us-east-1:123456789012:t1", True),
        ("arn:aws:sns:us-east-1:123456789012:t?", "arn:aws:sns:us-east-1:123456789012:t", False),
        ("arn:aws:sns:us-east-1:123456789012:T", "arn:aws:sns:us-east-1:123456789012:t", False),
        ("arn:aws:sns:us-east-1:123456789012:[t]", "arn:aws:sns:us-east-1:123456789012:t", False),
        ("arn:aws:sns:us-east-1:123456789012:a.b", "arn:aws:sns:us-east-1:123456789012:axb", False),
        ("arn:aws:lambda:us-east-1:1:function:f*", "arn:aws:lambda:us-east-1:1:function:fn:live", True),
        ("arn:aws:lambda:us-east-1:1:function:fn", "arn:aws:lambda:us-east-1:1:function:fn:live", False),
        ("*", "arn:aws:lambda:us-east-1:1:function:fn", True),
    ],
)
def test_arn_patterns_match_as_iam_matches_them(pattern: str, arn: str, matches: bool) -> None:
    assert arn_matches(pattern, arn) is matches


def test_a_malformed_own_queue_url_fails_loudly() -> None:
    with pytest.raises(ValueError, match="must be a queue URL"):
        TargetAccess(own_queue_urls=("https://sqs.us-east-1.amazonaws.com/queue",))


# --- execution roles -----------------------------------------------------------------------------


def test_a_target_with_a_role_skips_the_listed_patterns_even_when_none_are_listed() -> None:
    """The role decides what the target reaches; the deployment offers nothing shared."""
    bare = TargetAccess(
        partition="aws",
        region=REGION,
        account=ACCOUNT,
        own_queue_urls=OWN_QUEUES,
        own_function_prefix=PREFIX,
        allowed={kind: () for kind in DEFAULT_PATTERNS},
    )
    for target in (
        sqs(f"{SQS_HOST}/{OTHER_ACCOUNT}/orders"),
        sns(f"arn:aws:sns:eu-west-1:{OTHER_ACCOUNT}:alerts"),
        bus("default"),
        function(f"arn:aws:lambda:{REGION}:{OTHER_ACCOUNT}:function:send-report"),
    ):
        field, message = refusal(bare, target) or ("", "")
        assert field == "target.role_arn", target
        assert "Give role_arn, a role of yours the scheduler may assume" in message
        assert refusal(bare, target | {"role_arn": ROLE}) is None


def test_a_queue_in_another_region_is_refused_with_a_role_too() -> None:
    """The worker's SQS client, its own or a role's, sends in the worker's region."""
    target = sqs(f"https://sqs.eu-west-1.amazonaws.com/{ACCOUNT}/orders") | {"role_arn": ROLE}
    field, message = refusal(DEPLOYED, target) or ("", "")
    assert (field, message.split(",")[0]) == ("target.queue_url", "names region eu-west-1")


def test_a_role_of_another_partition_is_refused() -> None:
    target = sns(f"arn:aws:sns:{REGION}:{ACCOUNT}:alerts") | {"role_arn": f"arn:aws-cn:iam::{ACCOUNT}:role/r"}
    assert refusal(DEPLOYED, target) == (
        "target.role_arn",
        "names partition aws-cn, but the scheduler runs in aws",
    )
