"""Settings of every function, read once from environment variables into one typed model.

The CDK stack sets these variables on each Lambda function; tests build `Settings`
directly. Each function uses the subset it needs; the rest may stay empty.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from functools import lru_cache

from pydantic import BaseModel, ConfigDict, Field, field_validator

from scheduler_core.domain.vocabulary import Priority


class Settings(BaseModel):
    # Built from the environment (aliases) or by field name in tests; a misspelt name fails.
    model_config = ConfigDict(frozen=True, populate_by_name=True, extra="forbid")

    jobs_table_name: str = Field("", alias="JOBS_TABLE_NAME")
    idempotency_table_name: str = Field("", alias="IDEMPOTENCY_TABLE_NAME")
    queue_url_high: str = Field("", alias="QUEUE_URL_HIGH")
    queue_url_normal: str = Field("", alias="QUEUE_URL_NORMAL")
    queue_url_low: str = Field("", alias="QUEUE_URL_LOW")
    dlq_url: str = Field("", alias="DLQ_URL")
    shard_count: int = Field(4, alias="SHARD_COUNT", ge=1, le=1000)
    # How far ahead of now the poller (and the create path) claims runs. Must cover the
    # longest gap between two polls (EventBridge fires somewhere inside each minute).
    lookahead_seconds: int = Field(120, alias="LOOKAHEAD_SECONDS", ge=60, le=840)
    # Messages become visible this many seconds before their run's time and the worker waits
    # out the rest: queue pollers see delayed messages about once a second, and the worker's
    # conditional start (the slow step) happens before the run's time, not after it.
    delivery_lead_seconds: int = Field(2, alias="DELIVERY_LEAD_SECONDS", ge=0, le=5)
    # How far behind now the poller re-reads the due index: GSI reads are eventually
    # consistent, so a bucket is only left behind once this grace has passed.
    poll_grace_seconds: int = Field(120, alias="POLL_GRACE_SECONDS", ge=0, le=3600)
    # Where a shard with no watermark yet starts reading (first poll after deploy).
    first_poll_lookback_seconds: int = Field(900, alias="FIRST_POLL_LOOKBACK_SECONDS", ge=0)
    # How many of a bucket's jobs one poll claims at a time, and how many of a batch's jobs
    # the API writes at a time (threads; within the AWS client's connection pool,
    # `max_pool_connections`).
    claim_parallelism: int = Field(16, alias="CLAIM_PARALLELISM", ge=1, le=32)
    # A one-off's firing is sent by the poll unclaimed and claimed by its run's start, one
    # write where a claim and a start are two (services/unclaimed_sends.py; context
    # `one_offs_claimed_at_start`).
    one_offs_claimed_at_start: bool = Field(False, alias="ONE_OFFS_CLAIMED_AT_START")
    # The largest batch the worker's event source mappings hand it (context `queue_capacity`):
    # it runs a batch's records side by side, one thread each, so its AWS and HTTP connection
    # pools hold at least this many connections too.
    worker_batch_size: int = Field(10, alias="WORKER_BATCH_SIZE", ge=1, le=100)
    # Upper bound of buckets read by one poll, so a long outage is drained over several polls.
    max_buckets_per_poll: int = Field(240, alias="MAX_BUCKETS_PER_POLL", ge=1)
    # The run lease: how long a started run belongs to its worker. Matches the queues'
    # visibility timeout, set by the stack.
    run_lease_seconds: int = Field(180, alias="RUN_LEASE_SECONDS", ge=1)
    # A run whose message was sent but that has not started this long after its time is
    # sent again by the poller (the message was lost: a poller died between claim and send).
    resend_after_seconds: int = Field(60, alias="RESEND_AFTER_SECONDS", ge=1, le=3600)
    # How often a long target call renews its lease; 0: a third of the lease.
    heartbeat_seconds: float = Field(0, alias="HEARTBEAT_SECONDS", ge=0)
    # How long a create's Idempotency-Key is remembered (a create sent again gets its job).
    idempotency_expiry_seconds: int = Field(86400, alias="IDEMPOTENCY_EXPIRY_SECONDS", ge=60)
    run_retention_days: int = Field(30, alias="RUN_RETENTION_DAYS", ge=1)
    max_request_bytes: int = Field(256 * 1024, alias="MAX_REQUEST_BYTES", ge=1)
    # Where the stack runs: a queue URL naming no region, and an event bus given by name, are
    # there; so are the stack's own functions. Read by the api's target check.
    stack_partition: str = Field("", alias="STACK_PARTITION")
    stack_region: str = Field("", alias="STACK_REGION")
    stack_account_id: str = Field("", alias="STACK_ACCOUNT_ID")
    # Every function of the stack is named `<prefix><name>`; none of them is a job's target.
    function_name_prefix: str = Field("", alias="FUNCTION_NAME_PREFIX")
    # The ARN patterns (JSON lists) of the targets the operator offers every tenant, per kind:
    # CDK context `target_*_arns`, which the worker's own role is granted. Empty (the default):
    # none; a target then needs an execution role of the tenant's (`role_arn`).
    target_queue_arns: tuple[str, ...] = Field((), alias="TARGET_QUEUE_ARNS")
    target_topic_arns: tuple[str, ...] = Field((), alias="TARGET_TOPIC_ARNS")
    target_event_bus_arns: tuple[str, ...] = Field((), alias="TARGET_EVENT_BUS_ARNS")
    target_function_arns: tuple[str, ...] = Field((), alias="TARGET_FUNCTION_ARNS")
    # The worker function's role: what a tenant's execution role must trust (with the tenant's
    # external id), checked by the api at create and named by the worker when STS refuses.
    # "": unknown (roles are then not read at create; some tests).
    worker_role_arn: str = Field("", alias="WORKER_ROLE_ARN")

    # Networks (CIDR, JSON list) HTTP targets may reach although they are not public: CDK
    # context `target_private_cidrs`. Never link-local (domain/addresses.py).
    target_private_cidrs: tuple[str, ...] = Field((), alias="TARGET_PRIVATE_CIDRS")
    # Per-tenant quotas (domain/quotas.py; CDK context of the same names).
    tenant_max_jobs: int = Field(10_000, alias="TENANT_MAX_JOBS", ge=1)
    tenant_max_firings_per_minute: int = Field(6_000, alias="TENANT_MAX_FIRINGS_PER_MINUTE", ge=1)
    min_interval_seconds: int = Field(60, alias="MIN_INTERVAL_SECONDS", ge=60)
    # Role-name patterns whose sessions are tenants each (domain/tenancy.py; CDK context
    # `per_session_tenant_roles`).
    per_session_tenant_roles: tuple[str, ...] = Field((), alias="PER_SESSION_TENANT_ROLES")
    # The log group of the API's audit lines (one per mutating call); "": none written.
    audit_log_group: str = Field("", alias="AUDIT_LOG_GROUP")
    # The KMS key that seals secret headers and webhook signing secrets (None: neither kept).
    secrets_key_id: str = Field("", alias="SECRETS_KEY_ID")
    # Whether HTTP targets may use http:// (CDK context `allow_http_targets`); else https only.
    allow_http_targets: bool = Field(False, alias="ALLOW_HTTP_TARGETS")

    @field_validator(
        "target_private_cidrs",
        "per_session_tenant_roles",
        "target_queue_arns",
        "target_topic_arns",
        "target_event_bus_arns",
        "target_function_arns",
        mode="before",
    )
    @classmethod
    def _json_list(cls, value: object) -> object:
        # The environment carries each list as JSON text.
        return json.loads(value) if isinstance(value, str) else value

    def queue_url(self, priority: Priority) -> str:
        return {
            Priority.HIGH: self.queue_url_high,
            Priority.NORMAL: self.queue_url_normal,
            Priority.LOW: self.queue_url_low,
        }[priority]

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if environ is None else environ
        names = {field.alias for field in cls.model_fields.values() if field.alias}
        return cls.model_validate({k: v for k, v in env.items() if k in names})


@lru_cache(maxsize=1)
def settings_from_env() -> Settings:
    """The process's settings, parsed once on first use (never at import time)."""
    return Settings.from_env()
