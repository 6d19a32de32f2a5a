"""Faults to inject into the real components: processes that die at a chosen point, and a
reader of the DLQ to check what they left behind."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from scheduler_core.composition import build_lifecycle, build_store, build_targets
from scheduler_core.domain.entities import Job, Run
from scheduler_core.domain.messages import DeadLetter
from scheduler_core.ports import Delivery, TargetInvoker
from scheduler_core.services.execution import RunExecutor
from tests.support.events import LambdaContext
from tests.support.harness import SchedulerHarness


class PollerDied(BaseException):
    """The poller's process ended (a timeout, an OOM): nothing after this point runs."""


class DiesBeforeSending:
    """The `RunQueue` of a poller that dies right after a claim committed, before its send."""

    def send_runs(self, runs: list[Run]) -> list[Run]:
        raise PollerDied(f"died before sending {[run.run_id for run in runs]}")

    def send_dead_letter(self, record: DeadLetter) -> bool:
        raise PollerDied(f"died before recording the failure of {record.run_id}")


class WorkerDied(BaseException):
    """The worker's process ended mid-invocation (a Lambda timeout, an OOM). A BaseException,
    so nothing on the way out (not the batch processor, not Powertools) handles it."""


class DiesAtTheCall:
    """A `TargetInvoker` whose worker dies at the target call: as soon as `inner` answered
    (the target was called; nothing after that is written), or just before calling it."""

    def __init__(self, inner: TargetInvoker, *, after_the_call: bool) -> None:
        self._inner = inner
        self._after_the_call = after_the_call

    def begin_invocation(self, context: Any) -> None:
        self._inner.begin_invocation(context)

    def deliver(self, job: Job, run: Run) -> Delivery:
        if self._after_the_call:
            self._inner.deliver(job, run)
        raise WorkerDied(run.run_id)


def dying_executor(cloud: SchedulerHarness, *, after_the_call: bool = True) -> RunExecutor:
    """The worker of one invocation that dies at its target call, after the target answered
    (by default) or just before calling it: its run stays RUNNING, leased, until the lease
    runs out."""
    settings, clients = cloud.settings, cloud.clients
    targets = DiesAtTheCall(build_targets(settings, clients, cloud.clock), after_the_call=after_the_call)
    store = build_store(settings, clients)
    executor = RunExecutor(
        store,
        targets,
        cloud.clock,
        lease=timedelta(seconds=settings.run_lease_seconds),
        lifecycle=build_lifecycle(settings, clients, cloud.clock, store),
    )
    executor.begin_invocation(LambdaContext())
    return executor


def dead_letters(cloud: SchedulerHarness) -> list[dict[str, Any]]:
    """Every message on the DLQ, each read once (parsed as JSON)."""
    sqs, records = cloud.clients.sqs(), list[dict[str, Any]]()
    while True:
        messages = sqs.receive_message(
            QueueUrl=cloud.settings.dlq_url, MaxNumberOfMessages=10, VisibilityTimeout=43_200
        ).get("Messages", [])
        if not messages:
            return records
        records += [json.loads(message["Body"]) for message in messages]
