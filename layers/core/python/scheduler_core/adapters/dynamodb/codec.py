"""The item codec: jobs and runs as the items of the jobs table (DESIGN §2), and the typed
values of DynamoDB's wire format. Knows keys and attributes, not conditions."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer

from scheduler_core.domain import keys
from scheduler_core.domain.clock import from_ms, to_ms
from scheduler_core.domain.entities import Job, Run
from scheduler_core.domain.vocabulary import JobStatus

# The job's caught-up firings waiting their turn for a running slot, oldest first (`overlap`).
CATCH_UP_QUEUE = "catch_up_ms"
_serializer = TypeSerializer()
_deserializer = TypeDeserializer()


def to_item(values: Mapping[str, Any]) -> dict[str, Any]:
    """Typed attributes of `values`; None values are left out."""
    return {name: _serializer.serialize(value) for name, value in values.items() if value is not None}


def from_item(item: Mapping[str, Any]) -> dict[str, Any]:
    return {name: _deserializer.deserialize(value) for name, value in item.items()}


def from_value(value: Any) -> Any:
    return _deserializer.deserialize(value)


def expression_values(**values: Any) -> dict[str, Any]:
    """Expression attribute values: `expression_values(seen=3)` → `{":seen": {"N": "3"}}`."""
    return {f":{name}": _serializer.serialize(value) for name, value in values.items()}


class ItemCodec:
    """Jobs and runs to items and back, for a table whose due index has `shard_count` shards
    and whose runs are kept `retention_days` after they end."""

    def __init__(self, shard_count: int, retention_days: int) -> None:
        self._shards = shard_count
        self._retention = timedelta(days=retention_days)

    def job_item(self, job: Job) -> dict[str, Any]:
        values: dict[str, Any] = {
            "pk": keys.job_pk(job.job_id),
            "sk": keys.JOB_SK,
            "job_id": job.job_id,
            "tenant": job.tenant,
            "created_key": f"{to_ms(job.created_at):013d}#{job.job_id}",
            "name": job.name,
            "status": str(job.status),
            "priority": str(job.priority),
            "version": job.version,
            "created_at_ms": to_ms(job.created_at),
            "updated_at_ms": to_ms(job.updated_at),
            # UTF-8, not \u escapes: a payload of non-ASCII text stays the size it was sent.
            "spec": json.dumps(
                job.model_dump(
                    mode="json",
                    include={
                        "schedule",
                        "target",
                        "payload",
                        "retry",
                        "concurrency",
                        "misfire",
                        "catch_up_window_seconds",
                    },
                ),
                separators=(",", ":"),
                ensure_ascii=False,
            ),
        }
        if job.next_fire_at is not None:
            fire_ms = to_ms(job.next_fire_at)
            values["next_fire_at_ms"] = fire_ms
            # Only a scheduled job waits in the due index; a paused one keeps its next firing
            # (where a resume carries on from) out of it.
            if job.status is JobStatus.SCHEDULED:
                values |= {
                    "due_pk": keys.due_pk(fire_ms, keys.shard_for(job.job_id, self._shards)),
                    "due_sk": fire_ms,
                }
        if job.paused_at is not None:
            values["paused_at_ms"] = to_ms(job.paused_at)
        return to_item(values)

    @staticmethod
    def job_from_item(item: Mapping[str, Any]) -> Job:
        raw = from_item(item)
        spec = json.loads(raw["spec"])
        next_fire = raw.get("next_fire_at_ms")
        paused = raw.get("paused_at_ms")
        return Job.model_validate(
            {
                **spec,
                "job_id": raw["job_id"],
                "tenant": raw["tenant"],
                "name": raw["name"],
                "status": raw["status"],
                "priority": raw["priority"],
                "version": int(raw["version"]),
                "next_fire_at": from_ms(int(next_fire)) if next_fire is not None else None,
                "created_at": from_ms(int(raw["created_at_ms"])),
                "updated_at": from_ms(int(raw["updated_at_ms"])),
                "paused_at": from_ms(int(paused)) if paused is not None else None,
                "running_count": int(raw.get("running_count", 0)),
                "buffered_run_ms": int(raw["buffered_run_ms"]) if "buffered_run_ms" in raw else None,
                "catch_up_queue_ms": [int(ms) for ms in raw.get(CATCH_UP_QUEUE, [])],
            }
        )

    def run_item(self, run: Run, now: datetime) -> dict[str, Any]:
        scheduled_ms = run.scheduled_for_ms
        return to_item(
            {
                "pk": keys.job_pk(run.job_id),
                "sk": keys.run_sk(scheduled_ms),
                "run_id": run.run_id,
                "job_id": run.job_id,
                "status": str(run.status),
                "trigger": str(run.trigger),
                "priority": str(run.priority),
                "scheduled_for_ms": scheduled_ms,
                "attempt": run.attempt,
                "first_attempt": run.first_attempt,
                "next_attempt_at_ms": to_ms(run.next_attempt_at) if run.next_attempt_at else None,
                "caught_up": True if run.caught_up else None,
                "created_at_ms": to_ms(now),
                "expires_at": self.expiry(run.scheduled_for),
                **(self.due_attributes(run.job_id, run.due_at) if run.due_at else {}),
            }
        )

    def due_attributes(self, job_id: str, when: datetime) -> dict[str, Any]:
        """The due index keys that make the poller look at a job's item at `when`."""
        when_ms = to_ms(when)
        return {"due_pk": keys.due_pk(when_ms, keys.shard_for(job_id, self._shards)), "due_sk": when_ms}

    def expiry(self, when: datetime) -> int:
        """TTL (epoch seconds) that keeps run history for the retention period."""
        return int((when + self._retention).timestamp())

    @staticmethod
    def run_from_item(item: Mapping[str, Any]) -> Run:
        raw = from_item(item)

        def time_of(name: str) -> datetime | None:
            return from_ms(int(raw[name])) if name in raw else None

        return Run(
            run_id=raw["run_id"],
            job_id=raw["job_id"],
            status=raw["status"],
            trigger=raw["trigger"],
            priority=raw["priority"],
            scheduled_for=from_ms(int(raw["scheduled_for_ms"])),
            attempt=int(raw["attempt"]),
            first_attempt=int(raw.get("first_attempt", 1)),
            next_attempt_at=time_of("next_attempt_at_ms"),
            due_at=time_of("due_sk"),
            lease_until=time_of("lease_until_ms"),
            started_at=time_of("started_at_ms"),
            finished_at=time_of("finished_at_ms"),
            lateness_ms=int(raw["lateness_ms"]) if "lateness_ms" in raw else None,
            error=raw.get("error"),
            response_code=int(raw["response_code"]) if "response_code" in raw else None,
            holds_slot=bool(raw.get("slot", False)),
            caught_up=bool(raw.get("caught_up", False)),
            delivered_at=time_of("delivered_at_ms"),
            delivered_code=int(raw["delivered_code"]) if "delivered_code" in raw else None,
        )

    def run_key(self, job_id: str, scheduled_for_ms: int) -> dict[str, Any]:
        return to_item({"pk": keys.job_pk(job_id), "sk": keys.run_sk(scheduled_for_ms)})

    def job_key(self, job_id: str) -> dict[str, Any]:
        return to_item({"pk": keys.job_pk(job_id), "sk": keys.JOB_SK})
