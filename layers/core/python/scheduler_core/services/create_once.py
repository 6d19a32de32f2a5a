"""A create sent again with the same `Idempotency-Key` answers what the first one made (DESIGN
§7), for jobs and workflows alike: the key gives the item its id (so a create sent again
after the first failed past its write finds that item), and the idempotency record (the
`CreateOnce` port) tells a repeat from another request under the same key."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any, TypeVar

from scheduler_core.domain.errors import SchedulerError, Unprocessable, field_error
from scheduler_core.observability import logger
from scheduler_core.ports import CreateOnce, KeyInUse, KeyReused

# The namespace of the ids that idempotency keys give (uuid5 of tenant and key).
_IDEMPOTENCY_KEYS = uuid.UUID("5f0b7d3e-8a51-4c1e-9a63-1d2f6e4c8b70")
_FIELD = "Idempotency-Key"
T = TypeVar("T")


def created_once(
    creates: CreateOnce,
    tenant: str,
    key: str,
    body: dict[str, Any],
    create: Callable[[str], T],
    get: Callable[[str], T],
    kind: str = "",
) -> T:
    """What `create(id)` made for this tenant's `key`: made now, or by an earlier request with
    the same `body` (read with `get(id)`, as it is now). `id` is the key's own (a job's or
    workflow's id; a batch's, from which its jobs' ids follow). `kind` keeps one kind's keys
    apart from another's ("" for jobs, whose records predate workflows). 422 for the key sent
    with another body, 409 while the first request is still being served."""
    made: list[T] = []
    scoped = f"{kind}:{key}" if kind else key
    keyed_id = uuid.uuid5(_IDEMPOTENCY_KEYS, f"{tenant}\n{scoped}").hex
    what = kind or "job"

    def make() -> str:
        made.append(create(keyed_id))
        return keyed_id

    try:
        made_id = creates.job_id(tenant, scoped, body, make)
    except KeyReused:
        raise Unprocessable(
            f"this Idempotency-Key was sent before with another {what}; use a new key for a new {what}",
            [field_error(_FIELD, "was used with another request body")],
        ) from None
    except KeyInUse:
        raise SchedulerError(
            "the first request with this Idempotency-Key is still being served; try again shortly",
            [field_error(_FIELD, "is in use by a request in progress")],
            "CONFLICT",
            409,
        ) from None
    except Exception:
        if not made:
            raise
        # The item is written; only its key's record is not (the table throttled, say). A
        # create sent again finds the item by its id all the same.
        logger.exception("idempotency record not saved", extra={"keyed_id": keyed_id})
        return made[0]
    return made[0] if made else get(made_id)
