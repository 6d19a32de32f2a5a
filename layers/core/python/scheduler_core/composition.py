"""The composition root: builds each function's service from settings, the client factory
and the system clock, once per process and on first use (never at import time)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from functools import lru_cache

from scheduler_core.adapters.assumed_roles import AssumedRoles
from scheduler_core.adapters.audit import CloudWatchAuditLog
from scheduler_core.adapters.aws import AwsClients, client_config
from scheduler_core.adapters.dynamodb import DUE_PAGE, DynamoJobStore
from scheduler_core.adapters.http_client import GuardedHttp
from scheduler_core.adapters.iam_roles import IamPrincipals, IamRoles
from scheduler_core.adapters.idempotency import IdempotentCreates
from scheduler_core.adapters.kms import KmsSecrets
from scheduler_core.adapters.queues import SqsDeadLetterQueue, SqsRunQueue
from scheduler_core.adapters.targets import TargetDelivery
from scheduler_core.domain.addresses import AddressPolicy
from scheduler_core.domain.clock import Clock, SystemClock
from scheduler_core.domain.quotas import QuotaLimits
from scheduler_core.domain.target_access import TargetAccess
from scheduler_core.domain.tenancy import Tenancy
from scheduler_core.domain.vocabulary import Priority
from scheduler_core.ports import AuditLog, CreateOnce, RunQueue, TargetInvoker
from scheduler_core.services.dispatch import SEND_BATCH, Dispatcher
from scheduler_core.services.execution import RunExecutor
from scheduler_core.services.jobs import JobService
from scheduler_core.services.lifecycle import RunLifecycle, TimerPolicy
from scheduler_core.services.parallel import Runner, Threads
from scheduler_core.services.polls import PollPolicy
from scheduler_core.services.quotas import TenantQuotas
from scheduler_core.services.redrive import DeadLetterRedriver
from scheduler_core.services.secret_headers import open_secret_headers
from scheduler_core.services.signing import SigningSecrets
from scheduler_core.services.target_check import TargetCheck
from scheduler_core.services.tenant_migration import TenantMigration
from scheduler_core.services.workflow_runs import WorkflowRunner
from scheduler_core.services.workflows import WorkflowService
from scheduler_core.settings import Settings, settings_from_env


def build_store(settings: Settings, clients: AwsClients, due_page: int = DUE_PAGE) -> DynamoJobStore:
    """`due_page`: see `DynamoJobStore`."""
    return DynamoJobStore(
        clients, settings.jobs_table_name, settings.shard_count, settings.run_retention_days, due_page
    )


def build_queue(settings: Settings, clients: AwsClients, clock: Clock) -> SqsRunQueue:
    return SqsRunQueue(
        clients,
        {priority: settings.queue_url(priority) for priority in Priority},
        clock,
        settings.delivery_lead_seconds,
        settings.dlq_url,
    )


def build_lifecycle(
    settings: Settings, clients: AwsClients, clock: Clock, store: DynamoJobStore | None = None
) -> RunLifecycle:
    timers = TimerPolicy(
        resend_after=timedelta(seconds=settings.resend_after_seconds),
        lookahead=timedelta(seconds=settings.lookahead_seconds),
    )
    store = store or build_store(settings, clients)
    return RunLifecycle(
        store, build_queue(settings, clients, clock), clock, timers, build_quotas(settings, store)
    )


def build_quotas(settings: Settings, store: DynamoJobStore) -> TenantQuotas:
    limits = QuotaLimits(
        max_jobs=settings.tenant_max_jobs,
        max_firings_per_minute=settings.tenant_max_firings_per_minute,
        min_interval_seconds=settings.min_interval_seconds,
    )
    return TenantQuotas(store, limits)


def build_dispatcher(
    settings: Settings,
    clients: AwsClients,
    clock: Clock,
    store: DynamoJobStore | None = None,
    runner: Runner | None = None,
    send_batch: int = SEND_BATCH,
    queue: RunQueue | None = None,
) -> Dispatcher:
    """`runner`: how a poll's claims run side by side (default: `claim_parallelism` threads);
    `send_batch`: see `Dispatcher`; `queue`: where the poll sends (default: the SQS queues)."""
    store = store or build_store(settings, clients)
    queue = queue or build_queue(settings, clients, clock)
    policy = PollPolicy(
        lookahead=timedelta(seconds=settings.lookahead_seconds),
        grace=timedelta(seconds=settings.poll_grace_seconds),
        first_poll_lookback=timedelta(seconds=settings.first_poll_lookback_seconds),
        max_buckets=settings.max_buckets_per_poll,
        send_unclaimed=settings.one_offs_claimed_at_start,
    )
    lifecycle = build_lifecycle(settings, clients, clock, store)
    runner = runner or Threads(settings.claim_parallelism)
    workflows = WorkflowRunner(store, queue, clock, lifecycle)
    return Dispatcher(store, queue, clock, policy, lifecycle, runner, send_batch, workflows)


def build_target_access(settings: Settings) -> TargetAccess:
    """The deployment's rules for a job's target: as the stack's IAM grants and deny allow."""
    return TargetAccess(
        partition=settings.stack_partition,
        region=settings.stack_region,
        account=settings.stack_account_id,
        own_queue_urls=tuple(
            url for url in (*(settings.queue_url(p) for p in Priority), settings.dlq_url) if url
        ),
        own_function_prefix=settings.function_name_prefix,
        allowed={
            "SQS": settings.target_queue_arns,
            "SNS": settings.target_topic_arns,
            "EVENTBRIDGE": settings.target_event_bus_arns,
            "LAMBDA": settings.target_function_arns,
        },
        addresses=address_policy(settings),
        allow_http=settings.allow_http_targets,
    )


def build_target_check(settings: Settings, clients: AwsClients) -> TargetCheck:
    """What the API lets a tenant's job target: the deployment's rules, and an execution role
    of the stack's account only if its trust policy lets the worker in for that tenant."""
    return TargetCheck(build_target_access(settings), IamRoles(clients), settings.worker_role_arn)


def build_job_service(
    settings: Settings,
    clients: AwsClients,
    clock: Clock,
    store: DynamoJobStore | None = None,
    new_id: Callable[[], str] | None = None,
) -> JobService:
    """The API's service, jobs and workflows on one store, dispatcher, lifecycle, target
    access and idempotency records (one record table, one invocation context); `new_id`: as
    `JobService`'s (a simulation draws ids from its seed)."""
    store = store or build_store(settings, clients)
    dispatcher = build_dispatcher(settings, clients, clock, store)
    lifecycle = build_lifecycle(settings, clients, clock, store)
    targets = build_target_check(settings, clients)
    creates = build_create_once(settings, clients)
    runner = WorkflowRunner(store, build_queue(settings, clients, clock), clock, lifecycle)
    secrets = build_secrets(settings, clients)
    signing = build_signing(settings, clients, clock, store, secrets)
    quotas = build_quotas(settings, store)
    workflows = WorkflowService(
        store, runner, dispatcher, clock, lifecycle, targets, creates, signing, quotas
    )
    return JobService(
        store,
        dispatcher,
        clock,
        lifecycle,
        targets,
        creates,
        workflows=workflows,
        secrets=secrets,
        signing=signing,
        quotas=quotas,
        audit=build_audit_log(settings, clients, clock),
        tenancy=Tenancy(settings.per_session_tenant_roles),
        runner=Threads(settings.claim_parallelism),
        new_id=new_id,
    )


def build_create_once(settings: Settings, clients: AwsClients) -> CreateOnce | None:
    if not settings.idempotency_table_name:  # a deployment always sets it; some tests do not
        return None
    return IdempotentCreates(clients, settings.idempotency_table_name, settings.idempotency_expiry_seconds)


def build_audit_log(settings: Settings, clients: AwsClients, clock: Clock) -> AuditLog | None:
    """The API's audit lines; None in a deployment without an audit log group (some tests)."""
    return CloudWatchAuditLog(clients, settings.audit_log_group, clock) if settings.audit_log_group else None


def build_secrets(settings: Settings, clients: AwsClients) -> KmsSecrets | None:
    """Where secrets are sealed; None in a deployment without a secrets key (some tests)."""
    return KmsSecrets(clients, settings.secrets_key_id) if settings.secrets_key_id else None


def build_signing(
    settings: Settings,
    clients: AwsClients,
    clock: Clock,
    store: DynamoJobStore | None = None,
    secrets: KmsSecrets | None = None,
) -> SigningSecrets | None:
    """`secrets`: the process's secrets adapter, shared (default: one of its own)."""
    secrets = secrets or build_secrets(settings, clients)
    if secrets is None:
        return None
    return SigningSecrets(store or build_store(settings, clients), secrets, clock)


def build_targets(
    settings: Settings,
    clients: AwsClients,
    clock: Clock,
    store: DynamoJobStore | None = None,
    roles: AssumedRoles | None = None,
) -> TargetInvoker:
    """`clock`: what a delivery's `webhook-timestamp`, a signing secret's overlap and an
    assumed role's expiry read; `roles`: how targets' execution roles are assumed (default:
    with `clients`' STS)."""
    secrets = build_secrets(settings, clients)
    signing = build_signing(settings, clients, clock, store, secrets)  # one cache of opened values
    return TargetDelivery(
        clients,
        GuardedHttp(address_policy(settings), callers=settings.worker_batch_size),
        secret_headers=(lambda job: open_secret_headers(secrets, job)) if secrets else None,
        signing_secrets=signing.signing if signing else None,
        clock=clock,
        roles=roles or AssumedRoles(clients, clock, worker_role_arn=settings.worker_role_arn),
    )


def address_policy(settings: Settings) -> AddressPolicy:
    """The SSRF guard's rule: public addresses, and the networks the deployment lists."""
    return AddressPolicy(settings.target_private_cidrs)


def build_run_executor(
    settings: Settings,
    clients: AwsClients,
    clock: Clock,
    store: DynamoJobStore | None = None,
    targets: TargetInvoker | None = None,
    lifecycle: RunLifecycle | None = None,
) -> RunExecutor:
    store = store or build_store(settings, clients)
    lifecycle = lifecycle or build_lifecycle(settings, clients, clock, store)
    workflows = WorkflowRunner(store, build_queue(settings, clients, clock), clock, lifecycle)
    return RunExecutor(
        store,
        targets or build_targets(settings, clients, clock, store),
        clock,
        lease=timedelta(seconds=settings.run_lease_seconds),
        lifecycle=lifecycle,
        heartbeat_every=timedelta(seconds=settings.heartbeat_seconds) if settings.heartbeat_seconds else None,
        workflows=workflows,
    )


def build_redriver(
    settings: Settings, clients: AwsClients, clock: Clock, *, wait_seconds: int = 1
) -> DeadLetterRedriver:
    """The DLQ re-drive (`make redrive`) with the deployed functions' settings.
    `wait_seconds`: long polling of the DLQ (0 for moto under a frozen clock)."""
    store = build_store(settings, clients)
    queue = build_queue(settings, clients, clock)
    lifecycle = build_lifecycle(settings, clients, clock, store)
    return DeadLetterRedriver(
        store,
        queue,
        lifecycle,
        SqsDeadLetterQueue(clients, settings.dlq_url, wait_seconds=wait_seconds),
        WorkflowRunner(store, queue, clock, lifecycle),
    )


@lru_cache(maxsize=1)
def default_clients() -> AwsClients:
    """The process's AWS clients: one connection per thread that may call at once (a poll's
    claims, a batch's writes, the worker's records)."""
    return AwsClients(config=client_config(settings_from_env().worker_batch_size))


def build_tenant_migration(
    settings: Settings, clients: AwsClients, clock: Clock, account: str
) -> TenantMigration:
    """`python -m infra.migrate_tenants`: the stack's table, IAM and secrets key."""
    return TenantMigration(
        build_store(settings, clients),
        IamPrincipals(clients),
        build_secrets(settings, clients),
        clock,
        account,
        settings.per_session_tenant_roles,
    )


@lru_cache(maxsize=1)
def default_job_service() -> JobService:
    return build_job_service(settings_from_env(), default_clients(), SystemClock())


@lru_cache(maxsize=1)
def default_dispatcher() -> Dispatcher:
    return build_dispatcher(settings_from_env(), default_clients(), SystemClock())


@lru_cache(maxsize=1)
def default_run_executor() -> RunExecutor:
    return build_run_executor(settings_from_env(), default_clients(), SystemClock())
