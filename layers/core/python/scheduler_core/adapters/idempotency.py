"""A create sent again with the same `Idempotency-Key` header returns the job the first one
made (DESIGN §7), through the Powertools idempotency utility on the idempotency table.

The record is keyed by the tenant and the key (so two tenants' keys never meet) and holds
the job id; the request body is its payload fingerprint, so the same key with another body
is refused rather than answered with a job the caller did not ask for. A create that fails
leaves no record (Powertools deletes it), so the caller may send it again. While the first
create runs its record is INPROGRESS until the API invocation's deadline.

The worker does not use this table: a run's own item fences its attempts (see `execution`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    idempotent_function,
)
from aws_lambda_powertools.utilities.idempotency.exceptions import (
    IdempotencyAlreadyInProgressError,
    IdempotencyPersistenceLayerError,
    IdempotencyValidationError,
)
from botocore.exceptions import ClientError

from scheduler_core.adapters.aws import AwsClients
from scheduler_core.ports import KeyInUse, KeyReused


class IdempotentCreates:
    """`CreateOnce` on Powertools idempotency: `create` runs once per (tenant, key) while its
    record lives (`expires_after_seconds`)."""

    def __init__(self, clients: AwsClients, table_name: str, expires_after_seconds: int) -> None:
        self._config = IdempotencyConfig(
            event_key_jmespath="[tenant, key]",
            payload_validation_jmespath="body",
            expires_after_seconds=expires_after_seconds,
        )
        persistence = DynamoDBPersistenceLayer(table_name=table_name, boto3_client=clients.dynamodb())

        @idempotent_function(  # type: ignore[untyped-decorator]
            data_keyword_argument="request", config=self._config, persistence_store=persistence
        )
        def create_once(*, request: dict[str, Any], create: Callable[[], str]) -> dict[str, str]:
            return {"job_id": create()}

        self._create_once = create_once

    def begin_invocation(self, context: Any) -> None:
        """An INPROGRESS record expires with the invocation that wrote it."""
        self._config.register_lambda_context(context)

    def job_id(self, tenant: str, key: str, body: dict[str, Any], create: Callable[[], str]) -> str:
        request = {"tenant": tenant, "key": key, "body": body}
        try:
            answer: dict[str, str] = self._create_once(request=request, create=create)
        except IdempotencyValidationError as exc:
            raise KeyReused(key) from exc
        except IdempotencyAlreadyInProgressError as exc:
            raise KeyInUse(key) from exc
        except IdempotencyPersistenceLayerError as exc:
            # The table's own error (throttled, say) as AWS gave it, for the caller to map.
            if isinstance(exc.__cause__, ClientError):
                raise exc.__cause__ from exc
            raise
        return answer["job_id"]
