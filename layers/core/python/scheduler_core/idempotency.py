"""The worker's target call inside the Powertools idempotency utility (DESIGN §3, "Work"),
keyed by `run_id` on the idempotency table.

Only a successful delivery is recorded: a duplicate of a run that already reached its
target (a message delivered twice, a worker that died after the call and before writing
SUCCEEDED) gets the recorded answer instead of a second call. A failed delivery leaves no
record, so the retry calls the target again. While a call is in flight its record is
INPROGRESS until the invocation's deadline (the Lambda context is registered), so a worker
that died mid-call does not block the run's next attempt for longer than that.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    idempotent_function,
)
from aws_lambda_powertools.utilities.idempotency.exceptions import IdempotencyAlreadyInProgressError

from scheduler_core.aws import AwsClients
from scheduler_core.model import Job, Run
from scheduler_core.ports import Delivery, TargetInvoker


class _NotDelivered(Exception):
    """Raised inside the idempotent call so that Powertools deletes the record: only
    successes are remembered."""

    def __init__(self, delivery: Delivery) -> None:
        super().__init__(delivery.error)
        self.delivery = delivery


class IdempotentTargets:
    """`TargetInvoker` that calls `inner` at most once per run for every successful call."""

    def __init__(
        self, inner: TargetInvoker, clients: AwsClients, table_name: str, expires_after_seconds: int
    ) -> None:
        self._inner = inner
        self._config = IdempotencyConfig(
            event_key_jmespath="run_id", expires_after_seconds=expires_after_seconds
        )
        persistence = DynamoDBPersistenceLayer(table_name=table_name, boto3_client=clients.dynamodb())

        @idempotent_function(  # type: ignore[untyped-decorator]
            data_keyword_argument="key", config=self._config, persistence_store=persistence
        )
        def deliver_once(*, key: dict[str, str], job: Job, run: Run) -> dict[str, Any]:
            delivery = self._inner.deliver(job, run)
            if not delivery.ok:
                raise _NotDelivered(delivery)
            return asdict(delivery)

        self._deliver_once = deliver_once

    def begin_invocation(self, context: Any) -> None:
        """An INPROGRESS record expires with the invocation that wrote it."""
        self._config.register_lambda_context(context)
        self._inner.begin_invocation(context)

    def deliver(self, job: Job, run: Run) -> Delivery:
        try:
            answer = self._deliver_once(key={"run_id": run.run_id}, job=job, run=run)
        except _NotDelivered as failed:
            return failed.delivery
        except IdempotencyAlreadyInProgressError:
            return Delivery(
                ok=False,
                error="another attempt of this run is still calling the target",
                retryable=True,
            )
        return Delivery(**answer)
