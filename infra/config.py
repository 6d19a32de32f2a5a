"""The stack's settings, read once from CDK context into one typed object.

Every default lives in cdk.json's "context"; `cdk -c key=value` (or `build_app(context=...)`)
overrides it. This module imports no CDK code so the deps-layer build can use it cheaply.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scheduler_core.domain.addresses import AddressPolicy

if TYPE_CHECKING:
    from constructs import Node

REPO_ROOT = Path(__file__).resolve().parent.parent
CDK_JSON = REPO_ROOT / "cdk.json"
FUNCTIONS_DIR = REPO_ROOT / "functions"
CORE_LAYER_DIR = REPO_ROOT / "layers" / "core"
DEPS_LAYER_DIR = REPO_ROOT / "layers" / "deps"
DEPS_REQUIREMENTS = DEPS_LAYER_DIR / "requirements.txt"
DEPS_LAYER_BUILT = DEPS_LAYER_DIR / "python" / ".built"

# The one place the Lambda Python version is named: the functions' runtime and the deps
# layer's wheels (pydantic-core is compiled per CPython version) must agree on it.
# The newest Python runtime aws-cdk-lib offers; its wheels were checked to install.
LAMBDA_PYTHON_VERSION = "3.14"
# Every function runs on Graviton (arm64): Lambda bills its GB-seconds 20 % below x86_64's
# ($0.0000133334 against $0.0000166667 in us-east-1, same request price) for code that, like
# ours, is pure Python but for manylinux wheels that PyPI has for both (issue 10: cost a run).
# The deps layer's wheels follow it (`infra.build_deps_layer`).
LAMBDA_ARCHITECTURE = "arm64"
DEPS_LAYER_PLATFORM = "manylinux2014_aarch64"

STACK_NAME = "ServerlessScheduler"
PRIORITIES = ("HIGH", "NORMAL", "LOW")
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
# The api function carries the target ARN patterns in its environment, which Lambda limits
# to 4 KB in all; the rest of it (tables, queue URLs, numbers) takes about 1 KB.
MAX_TARGET_PATTERN_CHARACTERS = 2048
# A queue_sender_arns entry: an IAM role's or user's ARN as aws:PrincipalArn gives it (a
# role's, not its session's), * and ? allowed but not for the account or the whole name.
_PRINCIPAL_ARN = re.compile(
    r"arn:aws[a-z-]*:iam::\d{12}:(role|user)/[A-Za-z0-9_+=,.@/*?-]*[A-Za-z0-9_+=,.@-][A-Za-z0-9_+=,.@/*?-]*"
)
# A per_session_tenant_roles entry: IAM role-name characters with * and ?, not only them
# (a bare * would make every role's sessions tenants each).
_ROLE_PATTERN = re.compile(r"(?=.*[A-Za-z0-9_+=,.@-])[A-Za-z0-9_+=,.@*?-]{1,64}")


class ConfigError(ValueError):
    """A context value is missing or out of range."""


@dataclass(frozen=True)
class QueueCapacity:
    """How one priority's event source mapping pulls from its queue."""

    batch_size: int
    max_concurrency: int
    # How long a poller gathers records for a batch before it invokes the worker (0: it
    # invokes with what one receive returns). Batches above 10 need one (AWS).
    batching_window_seconds: int = 0


# Sizing shards from a target rate (context `target_runs_per_minute`, `shards_needed`). A poll
# has about 55 s (the poller's 60 s timeout less dispatch.STOP_BEFORE_TIMEOUT); a claim takes
# about 20 ms on AWS (TransactWriteItems' median 15 ms and a tenth of a batch send:
# bench/capacity/latency.py), so one claim slot does 2,750 a poll: half of it is counted, for
# slower claims and throttling. And a shard's minute bucket is one key of the `due` index,
# 1,000 write units a second: every run writes about two entries on its shard's keys (the
# job's due entry leaves, the run's timer enters), so half of 60,000 a minute is counted.
CLAIMS_PER_SLOT_MINUTE = 1_375
RUNS_PER_SHARD_KEY_MINUTE = 30_000
TABLE_CAPACITY_MODES = ("ON_DEMAND", "PROVISIONED")
# Lambda's default concurrency quota per account and region; reserving more needs a raised quota.
MAX_RESERVED_CONCURRENCY = 1_000
# The most provisioned units a bound may name. DynamoDB's default quota is 40,000 per table
# (and per index); a deployer asks AWS to raise it before setting a bound above that.
MAX_PROVISIONED_UNITS = 1_000_000


@dataclass(frozen=True)
class TableCapacity:
    """How the tables and their indexes are billed. ON_DEMAND: per request (the default; no
    capacity to plan, $0.625 per million write units). PROVISIONED: units reserved by the
    hour (about 40% of that at a steady load), scaled by Application Auto Scaling between
    `min` and `max` of each of `read` and `write` to keep `target_utilization_percent` used;
    the same bounds for the jobs table, each of its indexes and the idempotency table.
    `warm_read`/`warm_write` (either mode, optional): the units a second the jobs table and
    each of its indexes serve at once (DynamoDB warm throughput, "pre-warming"), for a burst
    beyond double the table's previous peak."""

    mode: str
    read_min: int
    read_max: int
    write_min: int
    write_max: int
    target_utilization_percent: int
    warm_read: int | None = None
    warm_write: int | None = None

    @property
    def provisioned(self) -> bool:
        return self.mode == "PROVISIONED"

    def check(self) -> None:
        if self.mode not in TABLE_CAPACITY_MODES:
            raise ConfigError(
                f"context table_capacity.mode must be one of {TABLE_CAPACITY_MODES}, got {self.mode!r}"
            )
        for kind, low, high in (
            ("read", self.read_min, self.read_max),
            ("write", self.write_min, self.write_max),
        ):
            _check_range(f"table_capacity.{kind}.min", low, 1, MAX_PROVISIONED_UNITS)
            _check_range(f"table_capacity.{kind}.max", high, low, MAX_PROVISIONED_UNITS)
        # Application Auto Scaling's bounds for DynamoDB target tracking.
        _check_range("table_capacity.target_utilization_percent", self.target_utilization_percent, 20, 90)
        # Below what a new on-demand table serves already (12,000 reads, 4,000 writes), warm
        # throughput buys nothing.
        if self.warm_read is not None:
            _check_range("table_capacity.warm.read", self.warm_read, 12_000, MAX_PROVISIONED_UNITS)
        if self.warm_write is not None:
            _check_range("table_capacity.warm.write", self.warm_write, 4_000, MAX_PROVISIONED_UNITS)


# On demand (the default); its bounds are what a switch to PROVISIONED starts from in cdk.json.
ON_DEMAND = TableCapacity("ON_DEMAND", 5, 4000, 5, 4000, 70)


def shards_needed(runs_per_minute: int, claim_parallelism: int) -> int:
    """The fewest shards whose polls claim `runs_per_minute` in time (see
    CLAIMS_PER_SLOT_MINUTE and RUNS_PER_SHARD_KEY_MINUTE)."""
    by_claims = -(-runs_per_minute // (claim_parallelism * CLAIMS_PER_SLOT_MINUTE))
    by_index_key = -(-runs_per_minute // RUNS_PER_SHARD_KEY_MINUTE)
    return max(1, by_claims, by_index_key)


@dataclass(frozen=True)
class SchedulerConfig:
    """Every context setting of the stack. The target ARN patterns are the targets offered to
    every tenant without an execution role of its own (empty: none, the default)."""

    shards: int
    lookahead_seconds: int
    delivery_lead_seconds: int
    resend_after_seconds: int
    worker_timeout_seconds: int
    max_receive_count: int
    run_retention_days: int
    log_level: str
    queue_capacity: Mapping[str, QueueCapacity]
    target_queue_arns: tuple[str, ...]
    target_topic_arns: tuple[str, ...]
    target_event_bus_arns: tuple[str, ...]
    target_function_arns: tuple[str, ...]
    # How many of a bucket's jobs a poll claims at a time (the poller's threads).
    claim_parallelism: int = 16
    one_offs_claimed_at_start: bool = False
    # The worker's memory, and with it its share of a vCPU (1,769 MB is one): a batch's records
    # share it.
    worker_memory_mb: int = 512
    table_capacity: TableCapacity = field(default_factory=lambda: ON_DEMAND)
    # The runs a minute the deployment is sized for (None: not declared); `shards` must be at
    # least `shards_needed` for it.
    target_runs_per_minute: int | None = None
    # Tables, queues, log groups and the functions' environment under keys of the stack's own
    # (rotated yearly, in this account); False: AWS's keys (no KMS charges).
    customer_managed_keys: bool = True
    # Concurrency set aside for the poller alone, so that no flood of API calls or worker
    # batches starves the polls of the account's concurrency.
    poller_reserved_concurrency: int = 8
    # The API stage's throttle: requests a second, steady, and the most at once (a token bucket).
    api_throttle_rate: int = 500
    api_throttle_burst: int = 1000
    # Networks HTTP targets may reach although they are not public (docs/security.md); never
    # link-local. And whether http:// targets are allowed besides https://.
    target_private_cidrs: tuple[str, ...] = ()
    allow_http_targets: bool = False
    # Per-tenant quotas (docs/security.md, "Quotas").
    tenant_max_jobs: int = 10_000
    tenant_max_firings_per_minute: int = 6_000
    min_interval_seconds: int = 60
    # Role-name patterns whose sessions are tenants each (docs/security.md, "Tenants").
    per_session_tenant_roles: tuple[str, ...] = ()
    # Principals (ARN patterns) besides the stack's functions that may send to its queues:
    # the operators who run `make redrive` (docs/operations/redrive.md).
    queue_sender_arns: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        try:
            AddressPolicy(self.target_private_cidrs)
        except ValueError as error:
            raise ConfigError(f"context target_private_cidrs: {error}") from error
        _check_range("shards", self.shards, 1, 1000)
        # Within the poller's AWS client connection pool (scheduler_core.adapters.aws, 32).
        _check_range("claim_parallelism", self.claim_parallelism, 1, 32)
        # The same bounds the functions' Settings model enforces.
        _check_range("lookahead_seconds", self.lookahead_seconds, 60, 840)
        _check_range("delivery_lead_seconds", self.delivery_lead_seconds, 0, 5)
        _check_range("resend_after_seconds", self.resend_after_seconds, 1, 3600)
        _check_range("worker_timeout_seconds", self.worker_timeout_seconds, 1, 900)
        _check_range("worker_memory_mb", self.worker_memory_mb, 128, 10_240)  # Lambda's bounds
        # Fewer receives would send a message to the DLQ after a couple of throttles.
        _check_range("max_receive_count", self.max_receive_count, 5, 1000)
        _check_range("run_retention_days", self.run_retention_days, 1, 3650)
        self.table_capacity.check()
        if self.target_runs_per_minute is not None:
            # 1,000 shards (their ceiling) at RUNS_PER_SHARD_KEY_MINUTE each.
            _check_range(
                "target_runs_per_minute", self.target_runs_per_minute, 1, 1000 * RUNS_PER_SHARD_KEY_MINUTE
            )
            needed = shards_needed(self.target_runs_per_minute, self.claim_parallelism)
            if self.shards < needed:
                raise ConfigError(
                    f"context shards {self.shards} is below the {needed} that target_runs_per_minute "
                    f"{self.target_runs_per_minute:,} needs with claim_parallelism {self.claim_parallelism}: "
                    f"set shards to {needed} or more (raise it only: lowering it strands the jobs of the "
                    "shards above the new count)"
                )
        _check_range(
            "poller_reserved_concurrency", self.poller_reserved_concurrency, 1, MAX_RESERVED_CONCURRENCY
        )
        # Every shard is polled at the same moment each minute: fewer would throttle polls.
        if self.poller_reserved_concurrency < self.shards:
            raise ConfigError(
                f"context poller_reserved_concurrency {self.poller_reserved_concurrency} is below shards "
                f"{self.shards}: each minute polls every shard at once (twice shards leaves room for a "
                "retried or slow poll)"
            )
        # API Gateway's default account quotas: 10,000 requests a second, a burst of 5,000.
        _check_range("api_throttle_rate", self.api_throttle_rate, 1, 10_000)
        _check_range("api_throttle_burst", self.api_throttle_burst, 1, 5_000)
        _check_range("tenant_max_jobs", self.tenant_max_jobs, 1, 100_000_000)
        _check_range("tenant_max_firings_per_minute", self.tenant_max_firings_per_minute, 1, 100_000_000)
        _check_range("min_interval_seconds", self.min_interval_seconds, 60, 86_400)
        if self.log_level not in LOG_LEVELS:
            raise ConfigError(f"context log_level must be one of {LOG_LEVELS}, got {self.log_level!r}")
        if set(self.queue_capacity) != set(PRIORITIES):
            raise ConfigError(f"context queue_capacity needs exactly the keys {PRIORITIES}")
        for priority, capacity in self.queue_capacity.items():
            # The worker runs a batch's records side by side, a thread each: 100 at most.
            _check_range(f"queue_capacity.{priority}.batch_size", capacity.batch_size, 1, 100)
            _check_batching_window(priority, capacity, self.delivery_lead_seconds)
            # Lambda's own bounds for an SQS event source's maximum concurrency.
            _check_range(f"queue_capacity.{priority}.max_concurrency", capacity.max_concurrency, 2, 1000)
        patterns = [
            list(arns)
            for arns in (
                self.target_queue_arns,
                self.target_topic_arns,
                self.target_event_bus_arns,
                self.target_function_arns,
            )
            if arns
        ]
        if len(json.dumps(patterns)) > MAX_TARGET_PATTERN_CHARACTERS:
            raise ConfigError(
                f"context target_*_arns hold over {MAX_TARGET_PATTERN_CHARACTERS} characters of ARN "
                "patterns, which the api function must carry in its 4 KB environment: use wildcards"
            )

    @property
    def visibility_timeout_seconds(self) -> int:
        """The queues' visibility timeout, which is also the run lease.

        AWS asks for six times the consuming function's timeout, so a message is not
        redelivered while a slow batch (with retries of throttled invocations) still runs.
        """
        return 6 * self.worker_timeout_seconds

    @classmethod
    def from_context(cls, node: Node) -> SchedulerConfig:
        """Read the settings from a construct's context (the App's, in practice)."""

        def required(key: str) -> Any:
            value = node.try_get_context(key)
            if value is None:
                raise ConfigError(f"context {key!r} is missing: its default belongs in cdk.json")
            return value

        def required_int(key: str) -> int:
            try:
                return int(required(key))
            except ValueError as error:
                raise ConfigError(f"context {key} must be a whole number") from error

        return cls(
            shards=required_int("shards"),
            lookahead_seconds=required_int("lookahead_seconds"),
            delivery_lead_seconds=required_int("delivery_lead_seconds"),
            resend_after_seconds=required_int("resend_after_seconds"),
            worker_timeout_seconds=required_int("worker_timeout_seconds"),
            max_receive_count=required_int("max_receive_count"),
            run_retention_days=required_int("run_retention_days"),
            log_level=str(required("log_level")).upper(),
            queue_capacity=parse_queue_capacity(required("queue_capacity")),
            target_queue_arns=_arn_list(node, "target_queue_arns"),
            target_topic_arns=_arn_list(node, "target_topic_arns"),
            target_event_bus_arns=_arn_list(node, "target_event_bus_arns"),
            target_function_arns=_arn_list(node, "target_function_arns"),
            claim_parallelism=required_int("claim_parallelism"),
            one_offs_claimed_at_start=_bool(
                required("one_offs_claimed_at_start"), "one_offs_claimed_at_start"
            ),
            worker_memory_mb=required_int("worker_memory_mb"),
            table_capacity=parse_table_capacity(required("table_capacity")),
            target_runs_per_minute=_optional_int(node, "target_runs_per_minute"),
            customer_managed_keys=_bool(required("customer_managed_keys"), "customer_managed_keys"),
            poller_reserved_concurrency=required_int("poller_reserved_concurrency"),
            api_throttle_rate=required_int("api_throttle_rate"),
            api_throttle_burst=required_int("api_throttle_burst"),
            target_private_cidrs=_cidr_list(required("target_private_cidrs")),
            allow_http_targets=_bool(required("allow_http_targets"), "allow_http_targets"),
            tenant_max_jobs=required_int("tenant_max_jobs"),
            tenant_max_firings_per_minute=required_int("tenant_max_firings_per_minute"),
            min_interval_seconds=required_int("min_interval_seconds"),
            per_session_tenant_roles=_role_patterns(required("per_session_tenant_roles")),
            queue_sender_arns=_principal_arns(required("queue_sender_arns")),
        )


def output_key(variable: str) -> str:
    """The stack output that carries the functions' setting `variable`: DLQ_URL → DlqUrl."""
    return "".join(part.title() for part in variable.split("_"))


def output_variable(key: str) -> str:
    """The setting a stack output carries, the inverse of `output_key`: DlqUrl → DLQ_URL."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", key).upper()


# The context docs/operations/deploy.md gives for 100,000 runs a minute (and a million due in
# one second), over cdk.json's defaults: the settings of Benchmarks' "tuned" rows and of its
# cost table. Mappings take batches of 100, gathered for up to a second (a window a 3 s
# delivery lead makes room for), so an invocation's wait for its runs' time is shared by a
# hundred runs; the caps leave a burst room to drain (a steady 100,000 a minute keeps about 60
# batches busy); a worker of 1,024 MB has the CPU a hundred records ask for
# (`python -m bench --only worker-cpu`); a one-off's start claims its firing (a write unit and
# a request less a run).
HIGH_VOLUME_CONTEXT: dict[str, Any] = {
    "shards": 64,
    "claim_parallelism": 32,
    "one_offs_claimed_at_start": True,
    "poller_reserved_concurrency": 128,
    "worker_memory_mb": 1024,
    "delivery_lead_seconds": 3,
    "queue_capacity": {
        priority: {"batch_size": 100, "batching_window_seconds": 1, "max_concurrency": concurrency}
        for priority, concurrency in (("HIGH", 150), ("NORMAL", 450), ("LOW", 150))
    },
}

# On top of HIGH_VOLUME_CONTEXT, what Deploy ("Table capacity") tells a user to set, a day
# before, for a million one-offs due in the same second: the jobs table and its indexes
# pre-warmed (DynamoDB warm throughput) to serve at once the burst's reads (the polls' reads
# of a million items before it) and writes (each run's start and end, its due entry's
# removal). The capacity simulation's midnight-warm runs it (docs/benchmarks.md).
MILLION_A_SECOND_CONTEXT: dict[str, Any] = {
    "table_capacity": {"mode": "ON_DEMAND", "warm": {"read": 25_000, "write": 100_000}},
}


def cdk_json_context() -> dict[str, Any]:
    """The context defaults in cdk.json (the CDK CLI passes them itself; plain Python does not)."""
    context: dict[str, Any] = json.loads(CDK_JSON.read_text())["context"]
    return context


def _check_range(name: str, value: int, low: int, high: int) -> None:
    if not low <= value <= high:
        raise ConfigError(f"context {name} must be between {low} and {high}, got {value}")


def _json_value(key: str, value: Any) -> Any:
    # `cdk -c key=value` passes strings; lists and objects arrive as JSON text.
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except json.JSONDecodeError as error:
        raise ConfigError(f"context {key} must be JSON, got {value!r}") from error


# A poller sees a delayed message up to a second after it becomes visible (settings.py,
# delivery_lead_seconds), and the run's start takes its share of a second too: what is left
# of the lead for a batching window to hold a message.
LEAD_BEFORE_WINDOW_SECONDS = 2


def _check_batching_window(priority: str, capacity: QueueCapacity, lead_seconds: int) -> None:
    """A window holds a message that long before the worker sees it: it must fit inside the
    delivery lead with the pickup and the start, or a lone message's run starts late."""
    name = f"queue_capacity.{priority}"
    window = capacity.batching_window_seconds
    _check_range(f"{name}.batching_window_seconds", window, 0, 300)  # Lambda's bounds
    room = lead_seconds - LEAD_BEFORE_WINDOW_SECONDS
    if capacity.batch_size > 10 and window < 1:
        fix = "set batching_window_seconds to 1"
        if room < 1:
            lead = LEAD_BEFORE_WINDOW_SECONDS + 1
            fix = f"set delivery_lead_seconds to {lead} and batching_window_seconds to 1"
        raise ConfigError(
            f"context {name}.batch_size {capacity.batch_size} needs a batching window (SQS event sources "
            f"take more than 10 messages only with one): {fix}"
        )
    if window > max(0, room):
        raise ConfigError(
            f"context {name}.batching_window_seconds {window} leaves the run no time to start: a poller "
            f"sees a message up to 1 s after it becomes visible, delivery_lead_seconds ({lead_seconds}) "
            f"before its run's time, and the window holds it that long again; set it to at most "
            f"{max(0, room)} or raise delivery_lead_seconds to {window + LEAD_BEFORE_WINDOW_SECONDS}"
        )


def parse_queue_capacity(value: Any) -> dict[str, QueueCapacity]:
    """Context `queue_capacity`: each priority's mapping settings."""
    capacity = _json_value("queue_capacity", value)
    try:
        return {
            str(priority): QueueCapacity(
                batch_size=int(limits["batch_size"]),
                max_concurrency=int(limits["max_concurrency"]),
                batching_window_seconds=int(limits.get("batching_window_seconds", 0)),
            )
            for priority, limits in capacity.items()
        }
    except (AttributeError, KeyError, TypeError, ValueError) as error:
        raise ConfigError(
            'context queue_capacity must map each priority to {"batch_size": n, "max_concurrency": n} '
            '(and, optionally, "batching_window_seconds": n)'
        ) from error


def _bool(value: Any, key: str) -> bool:
    if isinstance(value, bool):
        return value
    # `cdk -c key=false` passes the string "false".
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise ConfigError(f"context {key} must be true or false, got {value!r}")


def _optional_int(node: Node, key: str) -> int | None:
    value = node.try_get_context(key)
    if value is None:
        return None
    try:
        return int(value)
    except (TypeError, ValueError) as error:
        raise ConfigError(f"context {key} must be a whole number or null, got {value!r}") from error


def parse_table_capacity(value: Any) -> TableCapacity:
    capacity = _json_value("table_capacity", value)
    shape = (
        'context table_capacity must be {"mode": "ON_DEMAND"|"PROVISIONED", '
        '"read": {"min": n, "max": n}, "write": {"min": n, "max": n}, "target_utilization_percent": n, '
        '"warm": {"read": n, "write": n} (optional)}'
    )
    if not isinstance(capacity, Mapping):
        raise ConfigError(shape)
    mode = str(capacity.get("mode", "")).upper()
    if mode not in TABLE_CAPACITY_MODES:
        raise ConfigError(f"context table_capacity.mode must be one of {TABLE_CAPACITY_MODES}, got {mode!r}")
    if mode == "ON_DEMAND":  # the bounds are unused: ON_DEMAND's where left out
        capacity = {
            "read": {"min": ON_DEMAND.read_min, "max": ON_DEMAND.read_max},
            "write": {"min": ON_DEMAND.write_min, "max": ON_DEMAND.write_max},
            "target_utilization_percent": ON_DEMAND.target_utilization_percent,
        } | dict(capacity)
    try:
        return TableCapacity(
            mode=mode,
            read_min=int(capacity["read"]["min"]),
            read_max=int(capacity["read"]["max"]),
            write_min=int(capacity["write"]["min"]),
            write_max=int(capacity["write"]["max"]),
            target_utilization_percent=int(capacity["target_utilization_percent"]),
            warm_read=_optional_units(capacity, "read"),
            warm_write=_optional_units(capacity, "write"),
        )
    except (KeyError, TypeError, ValueError) as error:
        raise ConfigError(shape) from error


def _optional_units(capacity: Mapping[str, Any], kind: str) -> int | None:
    """`warm.<kind>` of a table_capacity, if given."""
    value = (capacity.get("warm") or {}).get(kind)
    return None if value is None else int(value)


def _cidr_list(value: Any) -> tuple[str, ...]:
    cidrs = _json_value("target_private_cidrs", value)
    if not isinstance(cidrs, list) or not all(isinstance(cidr, str) for cidr in cidrs):
        raise ConfigError(
            f'context target_private_cidrs must be a list of CIDRs such as ["10.0.0.0/16"], got {value!r}'
        )
    return tuple(cidrs)


def _role_patterns(value: Any) -> tuple[str, ...]:
    patterns = _json_value("per_session_tenant_roles", value)
    if not isinstance(patterns, list) or not all(
        isinstance(p, str) and _ROLE_PATTERN.fullmatch(p) for p in patterns
    ):
        raise ConfigError(
            "context per_session_tenant_roles must be a list of role names or patterns such as "
            f'["AWSReservedSSO_*", "ci-deployer"], got {value!r}'
        )
    return tuple(patterns)


def _principal_arns(value: Any) -> tuple[str, ...]:
    arns = _json_value("queue_sender_arns", value)
    if not isinstance(arns, list) or not all(
        isinstance(a, str) and _PRINCIPAL_ARN.fullmatch(a) for a in arns
    ):
        raise ConfigError(
            "context queue_sender_arns must be a list of IAM role or user ARNs of one account (12 digits), "
            "whose names may hold * and ? but not only them (role/* would let every role of the account "
            'send), such as ["arn:aws:iam::123456789012:role/aws-reserved/sso.amazonaws.com/'
            f'*AdministratorAccess*"], got {value!r}'
        )
    return tuple(arns)


def _arn_list(node: Node, key: str) -> tuple[str, ...]:
    value = node.try_get_context(key)
    if value is None:
        # null once meant "any of the account and region": that is now spelt out, on purpose.
        raise ConfigError(
            f"context {key} must be a list of ARN patterns offered to every tenant ([] for none, the "
            'default; e.g. ["arn:aws:sqs:eu-west-1:123456789012:shared-*"]), got null'
        )
    arns = _json_value(key, value)
    if not isinstance(arns, list) or not all(isinstance(arn, str) for arn in arns):
        raise ConfigError(f"context {key} must be a list of ARNs, got {value!r}")
    return tuple(arns)
