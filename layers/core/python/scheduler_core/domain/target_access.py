"""Which targets a deployment may reach, checked when a job is created or changed (pure: no
AWS here), so a target the worker could not or must not reach is a 400 naming the field
instead of a run that fails with AccessDenied.

- The scheduler's own queues (a job could forge run messages) and functions (an event shaped
  as an API request could act as another tenant) are never targets. Queues are compared by
  account and name, read from the URL's percent-decoded path; functions by the prefix every
  function of the stack is named with (`<stack name>-`), which the worker's IAM deny names too.
- A queue URL names its queue plainly: no query or fragment, a path `/<account>/<queue name>`,
  and no region other than the worker's (its SQS client sends in its own region).
- An HTTP target uses https:// unless the deployment allows http:// (CDK context
  `allow_http_targets`), and a host that is an IP address literal (in any spelling) must be
  one the SSRF guard lets the worker reach (domain/addresses.py); a name is checked by the
  worker when it connects, against whatever the name then resolves to.
- An AWS target reaches what its execution role (`role_arn`) reaches: the role decides, and
  whether it lets the worker in is checked apart (services/target_check.py), so its ARN is
  not compared with any pattern; the role must be of the worker's partition. Without a role,
  the target's ARN (a queue's and a bus name's as IAM sees them) must match one of the
  patterns the operator offers every tenant and grants the worker's own role: CDK context
  `target_queue_arns`, `target_topic_arns`, `target_event_bus_arns`, `target_function_arns`
  (by default none); else it is a 400 naming `target.role_arn`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from urllib.parse import unquote, urlsplit

from scheduler_core.domain.addresses import AddressPolicy, ip_literal
from scheduler_core.domain.errors import InvalidRequest, field_error
from scheduler_core.domain.target_spec import (
    EventBridgeTarget,
    HttpTarget,
    LambdaTarget,
    SnsTarget,
    SqsTarget,
    Target,
)

# A queue URL's path, percent-decoded: /<account>/<queue name>, optionally with a trailing
# slash. Queue names are 1-80 letters, digits, '-' and '_'; a FIFO queue's ends in .fifo.
_QUEUE_PATH = re.compile(r"/(?P<account>[0-9]{12})/(?P<name>[A-Za-z0-9_-]{1,80}|[A-Za-z0-9_-]{1,75}\.fifo)/?")
# Where a target's execution role goes, and what a target that needs one is refused under.
ROLE_FIELD = "target.role_arn"
# A host label that is a region, as in sqs.eu-west-1.amazonaws.com or us-gov-west-1.
_REGION_LABEL = re.compile(r"[a-z]{2,4}(?:-[a-z]+)+-[0-9]{1,2}")


@dataclass(frozen=True)
class TargetKind:
    """What a refusal of one kind of target names: its field, the resources in words and
    the CDK context key that lists the ARN patterns the worker may reach."""

    field: str
    resources: str
    context_key: str


KINDS: Mapping[str, TargetKind] = {
    "SQS": TargetKind("target.queue_url", "queues", "target_queue_arns"),
    "SNS": TargetKind("target.topic_arn", "topics", "target_topic_arns"),
    "EVENTBRIDGE": TargetKind("target.event_bus_name", "event buses", "target_event_bus_arns"),
    "LAMBDA": TargetKind("target.function_arn", "functions", "target_function_arns"),
}


@dataclass(frozen=True)
class QueueAddress:
    """What a queue URL names: the queue's account and name, and the region its host names
    (None for a host that names none, such as a local endpoint)."""

    region: str | None
    account: str
    name: str


def queue_address(url: str) -> QueueAddress:
    """The queue a URL names; a ValueError saying what is wrong with it otherwise."""
    if "?" in url or "#" in url:
        raise ValueError(
            "must not carry a query ('?…') or fragment ('#…'); give the queue URL as SQS "
            "returns it, https://sqs.<region>.amazonaws.com/<account>/<queue name>"
        )
    parts = urlsplit(url)
    match = _QUEUE_PATH.fullmatch(unquote(parts.path))
    if match is None:
        raise ValueError(
            "must be a queue URL such as https://sqs.<region>.amazonaws.com/<account>/<queue name>: "
            "a 12-digit account, then the queue name (1-80 letters, digits, '-' or '_'; a FIFO "
            "queue's ends in .fifo)"
        )
    regions = [label for label in (parts.hostname or "").split(".") if _REGION_LABEL.fullmatch(label)]
    return QueueAddress(regions[0] if regions else None, match["account"], match["name"])


@lru_cache(maxsize=256)
def _pattern(pattern: str) -> re.Pattern[str]:
    return re.compile("".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern), re.S)


def arn_matches(pattern: str, arn: str) -> bool:
    """Whether `arn` matches an ARN pattern of an IAM policy's Resource: `*` any run of
    characters, `?` any one, everything else as it is, case-sensitively (fnmatchcase without
    its `[...]` sets, which IAM does not have). IAM stops a `*` in the middle of an ARN
    segment at a colon; this does not, so it never refuses what IAM allows."""
    return _pattern(pattern).fullmatch(arn) is not None


def _refused(kind: TargetKind, reason: str) -> InvalidRequest:
    return InvalidRequest(f"{kind.field} {reason}", [field_error(kind.field, reason)])


@dataclass(frozen=True)
class TargetAccess:
    """The deployment as the target check sees it. Empty strings and None mean unknown or
    unchecked (a deployment sets them all; some tests do not)."""

    partition: str = ""
    region: str = ""
    account: str = ""
    # The priority queues and the DLQ.
    own_queue_urls: tuple[str, ...] = ()
    # Every function of the stack is named with it (the worker's IAM deny names it too).
    own_function_prefix: str = ""
    # The ARN patterns every tenant may reach without a role of its own (the worker's grants),
    # by target type; (): none; None or missing: not checked (some tests).
    allowed: Mapping[str, tuple[str, ...] | None] = field(default_factory=dict)
    # The addresses HTTP targets may reach, and whether http:// is allowed besides https://.
    addresses: AddressPolicy = field(default_factory=AddressPolicy)
    allow_http: bool = False
    # (account, name) of each own queue.
    _own_queues: frozenset[tuple[str, str]] = field(init=False, repr=False, default=frozenset())

    def __post_init__(self) -> None:
        # Raises for a URL that names no queue: the scheduler's own are never malformed.
        own = frozenset((queue.account, queue.name) for queue in map(queue_address, self.own_queue_urls))
        object.__setattr__(self, "_own_queues", own)

    def check(self, target: Target) -> None:
        """Raises a 400 naming the target's field when the worker could not or must not reach it."""
        if isinstance(target, HttpTarget):
            self._check_http(target.url)
            return
        self._check_role(target.role_arn)
        if isinstance(target, SqsTarget):
            self._check_queue(target.queue_url, target.role_arn)
        elif isinstance(target, SnsTarget):
            self._check_allowed("SNS", target.topic_arn, target.role_arn)
        elif isinstance(target, EventBridgeTarget):
            self._check_allowed("EVENTBRIDGE", self._bus_arn(target.event_bus_name), target.role_arn)
        elif isinstance(target, LambdaTarget):
            self._check_function(target.function_arn, target.role_arn)

    def _check_role(self, role_arn: str | None) -> None:
        # Validated as arn:<partition>:iam::<account>:role/...; STS hands out no role of another
        # partition.
        partition = (role_arn or "").split(":")[1:2]
        if self.partition and partition and partition[0] != self.partition:
            reason = f"names partition {partition[0]}, but the scheduler runs in {self.partition}"
            raise InvalidRequest(f"{ROLE_FIELD} {reason}", [field_error(ROLE_FIELD, reason)])

    def _check_http(self, url: str) -> None:
        parts = urlsplit(url)
        if parts.scheme != "https" and not self.allow_http:
            reason = (
                "must use https://; this deployment does not allow http:// (CDK context `allow_http_targets`)"
            )
            raise InvalidRequest(f"target.url {reason}", [field_error("target.url", reason)])
        address = ip_literal(parts.hostname or "")
        refusal = None if address is None else self.addresses.refusal(address)
        if refusal is not None:
            reason = (
                f"host {parts.hostname} is {address}, which {refusal}"
                if str(address) != parts.hostname
                else (f"host {address} {refusal}")
            )
            raise InvalidRequest(f"target.url {reason}", [field_error("target.url", reason)])

    def _check_queue(self, url: str, role_arn: str | None) -> None:
        kind = KINDS["SQS"]
        try:
            address = queue_address(url)
        except ValueError as exc:
            raise _refused(kind, str(exc)) from exc
        if self.region and address.region and address.region != self.region:
            raise _refused(
                kind,
                f"names region {address.region}, but the worker sends to SQS in {self.region}; "
                f"give a queue of {self.region}",
            )
        if (address.account, address.name) in self._own_queues:
            raise _refused(kind, "is one of the scheduler's own queues; target a queue of yours")
        region = address.region or self.region
        self._check_allowed(
            "SQS", f"arn:{self.partition}:sqs:{region}:{address.account}:{address.name}", role_arn
        )

    def _check_function(self, arn: str, role_arn: str | None) -> None:
        # Validated as arn:<partition>:lambda:<region>:<account>:function:<name>[:<qualifier>].
        _, partition, _, region, account, _, name, *_ = arn.split(":")
        ours = [(self.partition, partition), (self.region, region), (self.account, account)]
        if (
            self.own_function_prefix
            and name.startswith(self.own_function_prefix)
            and all(known == given for known, given in ours if known)
        ):
            raise _refused(
                KINDS["LAMBDA"],
                f"is one of the scheduler's own functions (named {self.own_function_prefix}…); "
                "target a function of yours",
            )
        self._check_allowed("LAMBDA", arn, role_arn)

    def _bus_arn(self, name_or_arn: str) -> str:
        """A bus given by name is the one of that name in the worker's account and region."""
        if name_or_arn.startswith("arn:"):
            return name_or_arn
        return f"arn:{self.partition}:events:{self.region}:{self.account}:event-bus/{name_or_arn}"

    def _check_allowed(self, target_type: str, arn: str, role_arn: str | None) -> None:
        """Without an execution role, the ARN must be one the deployment offers every tenant.
        The refusal is the same whether the resource exists or not: nothing is looked up."""
        patterns = self.allowed.get(target_type)
        if role_arn or patterns is None or any(arn_matches(pattern, arn) for pattern in patterns):
            return
        kind = KINDS[target_type]
        if not patterns:
            offered = (
                f"this deployment offers no shared {kind.resources} (CDK context `{kind.context_key}` is [])"
            )
        else:
            offered = f"this deployment offers only the {kind.resources} matching {', '.join(patterns)}"
        reason = (
            f"is needed for {arn}: {offered}. Give role_arn, a role of yours the scheduler may assume "
            '(docs/security.md, "Execution roles"), or ask the operator to list the ARN in CDK context '
            f"`{kind.context_key}`"
        )
        raise InvalidRequest(f"{ROLE_FIELD} {reason}", [field_error(ROLE_FIELD, reason)])
