"""The composition root: builds each function's service from settings, the client factory
and the system clock, once per process and on first use (never at import time)."""

from __future__ import annotations

from datetime import timedelta
from functools import lru_cache

from scheduler_core.aws import AwsClients
from scheduler_core.clock import Clock, SystemClock
from scheduler_core.dispatch import Dispatcher, PollPolicy
from scheduler_core.execution import RunExecutor
from scheduler_core.jobs import JobService
from scheduler_core.model import Priority
from scheduler_core.queues import SqsRunQueue
from scheduler_core.settings import Settings, settings_from_env
from scheduler_core.store import DynamoJobStore
from scheduler_core.targets import TargetDispatcher


def build_store(settings: Settings, clients: AwsClients) -> DynamoJobStore:
    return DynamoJobStore(
        clients, settings.jobs_table_name, settings.shard_count, settings.run_retention_days
    )


def build_dispatcher(
    settings: Settings, clients: AwsClients, clock: Clock, store: DynamoJobStore | None = None
) -> Dispatcher:
    queue = SqsRunQueue(
        clients,
        {priority: settings.queue_url(priority) for priority in Priority},
        clock,
        settings.delivery_lead_seconds,
    )
    policy = PollPolicy(
        lookahead=timedelta(seconds=settings.lookahead_seconds),
        grace=timedelta(seconds=settings.poll_grace_seconds),
        first_poll_lookback=timedelta(seconds=settings.first_poll_lookback_seconds),
        max_buckets=settings.max_buckets_per_poll,
    )
    return Dispatcher(store or build_store(settings, clients), queue, clock, policy)


def build_job_service(settings: Settings, clients: AwsClients, clock: Clock) -> JobService:
    store = build_store(settings, clients)
    own_queues = {url for url in (*(settings.queue_url(p) for p in Priority), settings.dlq_url) if url}
    return JobService(store, build_dispatcher(settings, clients, clock, store), clock, own_queues)


def build_run_executor(settings: Settings, clients: AwsClients, clock: Clock) -> RunExecutor:
    return RunExecutor(
        build_store(settings, clients),
        TargetDispatcher(clients),
        clock,
        lease=timedelta(seconds=settings.run_lease_seconds),
    )


@lru_cache(maxsize=1)
def default_clients() -> AwsClients:
    return AwsClients()


@lru_cache(maxsize=1)
def default_job_service() -> JobService:
    return build_job_service(settings_from_env(), default_clients(), SystemClock())


@lru_cache(maxsize=1)
def default_dispatcher() -> Dispatcher:
    return build_dispatcher(settings_from_env(), default_clients(), SystemClock())


@lru_cache(maxsize=1)
def default_run_executor() -> RunExecutor:
    return build_run_executor(settings_from_env(), default_clients(), SystemClock())
