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
from scheduler_core.domain.entities import Attempt, Job, Run
from scheduler_core.domain.vocabulary import ENDED_JOB, JobKind, JobStatus, Trigger
from scheduler_core.domain.workflows import WorkflowState

# The job's caught-up firings waiting their turn for a running slot, oldest first (`overlap`).
CATCH_UP_QUEUE = "catch_up_ms"
# A one-off's scheduled run kept on its job's item (`Run.with_job`): its attributes carry this
# prefix, so none meets the job's own. Its timer is `r_due_ms`; the item's index entry
# (`due_pk`/`due_sk`) is where the poller looks, at or before that timer: the job's firing,
# left in place by the claim, or the timer itself once a write moved it.
WITH_JOB_PREFIX = "r_"
WITH_JOB_TIMER = "r_due_ms"
# What a run's own item holds that one kept with its job does not: the TTL (it is kept as long
# as its job) and the time its item was made.
NOT_KEPT_WITH_JOB = ("expires_at", "created_at_ms")
# Every attribute a run kept with its job may have on the job's item.
RUN_ATTRIBUTES = (
    "status", "trigger", "priority", "scheduled_for_ms", "attempt", "first_attempt",
    "next_attempt_at_ms", "caught_up", "created_at_ms", "expires_at", "started_at_ms",
    "lease_until_ms", "lease_owner", "slot", "finished_at_ms", "error", "response_code",
    "lateness_ms", "delivered_at_ms", "delivered_code", "past_attempts",
)  # fmt: skip
# What only a run of its own holds (never kept with its job): a workflow run's graph, phases
# and their version; a task's output.
WORKFLOW_RUN_ATTRIBUTES = ("workflow", "wf_version", "output")
_serializer = TypeSerializer()
_deserializer = TypeDeserializer()


def to_item(values: Mapping[str, Any]) -> dict[str, Any]:
    """Typed attributes of `values`; None values are left out."""
    return {name: _serializer.serialize(value) for name, value in values.items() if value is not None}


def from_item(item: Mapping[str, Any]) -> dict[str, Any]:
    return {name: _deserializer.deserialize(value) for name, value in item.items()}


def from_value(value: Any) -> Any:
    return _deserializer.deserialize(value)


def with_job_name(attribute: str) -> str:
    """The name a run's attribute has on its job's item (`due_sk`, its timer: `r_due_ms`)."""
    return WITH_JOB_TIMER if attribute == "due_sk" else WITH_JOB_PREFIX + attribute


def with_job_attributes() -> list[str]:
    """Every attribute of a run kept with its job, as named on the job's item."""
    return [with_job_name(name) for name in (*RUN_ATTRIBUTES, "due_sk")]


def holds_run_with_job(item: Mapping[str, Any] | None, scheduled_for_ms: int) -> bool:
    """Whether a job's item keeps the run of `scheduled_for_ms` (`Run.with_job`)."""
    field = item.get(with_job_name("scheduled_for_ms")) if item else None
    return field is not None and int(field["N"]) == scheduled_for_ms


def attempt_entry(attempt: Attempt) -> dict[str, Any]:
    """An earlier attempt as `past_attempts` keeps it: a small map, short names, no nulls."""
    entry = {
        "n": attempt.attempt,
        "st": str(attempt.status),
        "s": to_ms(attempt.started_at) if attempt.started_at else None,
        "f": to_ms(attempt.finished_at) if attempt.finished_at else None,
        "e": attempt.error,
        "c": attempt.response_code,
    }
    return {name: value for name, value in entry.items() if value is not None}


def attempt_from_entry(entry: Mapping[str, Any]) -> Attempt:
    return Attempt(
        attempt=int(entry["n"]),
        status=entry["st"],
        started_at=from_ms(int(entry["s"])) if "s" in entry else None,
        finished_at=from_ms(int(entry["f"])) if "f" in entry else None,
        error=entry.get("e"),
        response_code=int(entry["c"]) if "c" in entry else None,
    )


def expression_values(**values: Any) -> dict[str, Any]:
    """Expression attribute values: `expression_values(seen=3)` → `{":seen": {"N": "3"}}`."""
    return {f":{name}": _serializer.serialize(value) for name, value in values.items()}


class ItemCodec:
    """Jobs and runs to items and back, for a table whose due index has `shard_count` shards
    and whose runs are kept `retention_days` after they end."""

    def __init__(self, shard_count: int, retention_days: int) -> None:
        self._shards = shard_count
        self._retention = timedelta(days=retention_days)

    def job_item(self, job: Job, listed: bool = True, due_listed: bool = False) -> dict[str, Any]:
        """The item of `job`; not `listed`: a job listed in the tenant index by its batch's
        listing item (`list_together`), not by an entry of its own; `due_listed`: one whose
        firing waits in the due index through its batch's due listing (`list_due_together`),
        with no entry of its own."""
        values: dict[str, Any] = {
            "pk": keys.job_pk(job.job_id),
            "sk": keys.JOB_SK,
            "job_id": job.job_id,
            **self._listed(job, listed),
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
                        "tasks",
                        "workflow_id",
                        "task_id",
                        "sealed_headers",
                    },
                    # Absent is None (each such field's default): every byte of the item is
                    # paid for on each write of it, the runs' its item keeps included.
                    exclude_none=True,
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
            if job.status is JobStatus.SCHEDULED and not due_listed:
                values |= {
                    "due_pk": keys.due_pk(fire_ms, keys.shard_for(job.job_id, self._shards)),
                    "due_sk": fire_ms,
                }
        if job.paused_at is not None:
            values["paused_at_ms"] = to_ms(job.paused_at)
        if job.status in ENDED_JOB:  # its TTL: every write that ends a job sets it
            values["expires_at"] = self.expiry(job.updated_at)
        return to_item(values)

    def due_listing_item(self, listing_id: str, firings: Mapping[str, int]) -> dict[str, Any]:
        """A due listing (`list_due_together`): one-offs a batch made (`firings`: job id →
        its firing, epoch ms, all in one minute), in the due index by one entry at the first
        of them, in its own id's shard; it expires the run retention after that minute."""
        first = min(firings.values())
        return to_item(
            {
                "pk": keys.due_listing_pk(listing_id),
                "sk": keys.due_listing_sk(len(firings)),
                "due_pk": keys.due_pk(first, keys.shard_for(listing_id, self._shards)),
                "due_sk": first,
                "job_ids": set(firings),
                "expires_at": self.expiry(from_ms(keys.bucket_end(keys.bucket_of(first)))),
            }
        )

    @staticmethod
    def _listed(job: Job, listed: bool = True) -> dict[str, Any]:
        """Where the tenant index lists a job item (`tenant`, its key): a job under its tenant,
        a workflow under `keys.workflows_of` its tenant, a task nowhere (`tenant_id` then holds
        the tenant), nor a job its batch's listing item lists (`tenant_id` too)."""
        if job.kind is JobKind.JOB:
            return {"tenant": job.tenant} if listed else {"tenant_id": job.tenant}
        named = {"kind": str(job.kind), "tenant_id": job.tenant}
        if job.kind is JobKind.WORKFLOW:
            named["tenant"] = keys.workflows_of(job.tenant)
        return named

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
                "tenant": raw.get("tenant_id", raw.get("tenant")),
                "kind": raw.get("kind", str(JobKind.JOB)),
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
                **self.workflow_attributes(run.workflow),
                "output": run.output,
                # From its time, or from now for a run of a past firing (a backfill's, its
                # tasks'): never an item born past its TTL.
                "expires_at": self.expiry(max(run.scheduled_for, now)),
                **(self.due_attributes(run.job_id, run.due_at) if run.due_at else {}),
            }
        )

    def run_with_job_item(self, run: Run, now: datetime) -> dict[str, Any]:
        """The attributes a claimed run adds to its job's item (`Run.with_job`): what its own
        item would hold, but its keys and what goes without saying there (no TTL: it is kept
        as long as its job; a scheduled first round of attempts)."""
        item = self.run_item(run, now)
        implied = {"pk", "sk", "run_id", "job_id", "due_pk", *NOT_KEPT_WITH_JOB}
        if run.trigger is Trigger.SCHEDULE:
            implied.add("trigger")
        if run.first_attempt == 1:
            implied.add("first_attempt")
        return {with_job_name(name): value for name, value in item.items() if name not in implied}

    def run_with_job_from_item(self, item: Mapping[str, Any]) -> Run | None:
        """The run a job's item keeps (`Run.with_job`), or None."""
        if with_job_name("status") not in item:
            return None
        run_item = {
            name: item[with_job_name(name)]
            for name in (*RUN_ATTRIBUTES, "due_sk")
            if with_job_name(name) in item
        }
        job_id = item["job_id"]["S"]
        scheduled_ms = int(run_item["scheduled_for_ms"]["N"])
        run_item = to_item({"trigger": str(Trigger.SCHEDULE)}) | run_item
        run_item |= to_item({"job_id": job_id, "run_id": keys.run_id(job_id, scheduled_ms)})
        return self.run_from_item(run_item).model_copy(update={"with_job": True})

    def run_item_from_job_item(self, item: Mapping[str, Any]) -> dict[str, Any]:
        """The item of its own for the run a job's item keeps (`Run.with_job`), as it is: the
        same attributes, its timer as its own index entry."""
        job_id = item["job_id"]["S"]
        scheduled_ms = int(item[with_job_name("scheduled_for_ms")]["N"])
        own = {name: item[with_job_name(name)] for name in RUN_ATTRIBUTES if with_job_name(name) in item}
        own = to_item({"trigger": str(Trigger.SCHEDULE)}) | own
        own |= to_item(
            {
                "pk": keys.job_pk(job_id),
                "sk": keys.run_sk(scheduled_ms),
                "run_id": keys.run_id(job_id, scheduled_ms),
                "job_id": job_id,
                "expires_at": self.expiry(from_ms(scheduled_ms)),
            }
        )
        if WITH_JOB_TIMER in item:
            own |= to_item(self.due_attributes(job_id, from_ms(int(item[WITH_JOB_TIMER]["N"]))))
        return own

    @staticmethod
    def workflow_attributes(state: WorkflowState | None) -> dict[str, Any]:
        """A begun workflow run's graph and phases (one JSON text: they are written whole),
        and the version its joins are conditioned on (`wf_version`)."""
        if state is None:
            return {}
        text = state.model_dump_json(include={"graph", "phases", "cancelled"}, exclude_defaults=True)
        return {"workflow": text, "wf_version": state.version}

    def due_attributes(self, job_id: str, when: datetime) -> dict[str, Any]:
        """The due index keys that make the poller look at a job's item at `when`."""
        when_ms = to_ms(when)
        return {"due_pk": keys.due_pk(when_ms, keys.shard_for(job_id, self._shards)), "due_sk": when_ms}

    def expiry(self, when: datetime) -> int:
        """TTL (epoch seconds) that keeps run history (and an ended job) for the retention
        period from `when`."""
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
            workflow=(
                WorkflowState.model_validate_json(raw["workflow"]).model_copy(
                    update={"version": int(raw["wf_version"])}
                )
                if "workflow" in raw
                else None
            ),
            output=raw.get("output"),
            past_attempts=[attempt_from_entry(entry) for entry in raw.get("past_attempts", [])],
        )

    def run_key(self, job_id: str, scheduled_for_ms: int) -> dict[str, Any]:
        return to_item({"pk": keys.job_pk(job_id), "sk": keys.run_sk(scheduled_for_ms)})

    def job_key(self, job_id: str) -> dict[str, Any]:
        return to_item({"pk": keys.job_pk(job_id), "sk": keys.JOB_SK})
