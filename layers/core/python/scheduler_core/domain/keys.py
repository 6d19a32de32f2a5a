"""Item keys of the jobs table and the due index (DESIGN §2). Pure.

due_pk = "{yyyymmddHHMM}#{shard}" buckets everything due by minute and spreads one
minute's burst over `shard_count` index partitions; due_sk = fire time in epoch ms.
"""

from __future__ import annotations

import hashlib
import re
from datetime import UTC, datetime, timedelta

JOB_SK = "JOB"
RUN_SK_PREFIX = "RUN#"
WATERMARK_SK = "WATERMARK"
SIGNING_SK = "SIGNING_KEYS"
LISTING_SK = "LISTING"
LISTING_PK_PREFIX = "LISTING#"
DUE_LISTING_PK_PREFIX = "DUES#"
_DUE_LISTING_SK_PREFIX = "JOBS#"
_MINUTE_MS = 60_000
_CANONICAL_MS = re.compile(r"0|[1-9][0-9]*")


def job_pk(job_id: str) -> str:
    return f"JOB#{job_id}"


def listing_pk(listing_id: str) -> str:
    """Where the jobs a batch made are listed together (one tenant index entry for them all)."""
    return f"{LISTING_PK_PREFIX}{listing_id}"


def due_listing_pk(listing_id: str) -> str:
    """Where the one-offs a batch made due in one minute wait in the due index together (one
    entry for them all, never taken out: it expires)."""
    return f"{DUE_LISTING_PK_PREFIX}{listing_id}"


def due_listing_sk(jobs: int) -> str:
    """A due listing's sort key says how many jobs it lists: its index entry (keys only)
    weighs that much in a poll's page before the listing is read."""
    return f"{_DUE_LISTING_SK_PREFIX}{jobs}"


def due_listing_size(pk: str, sk: str) -> int | None:
    """How many jobs the due index entry (`pk`, `sk`) lists; None if it is not a due listing's."""
    if not pk.startswith(DUE_LISTING_PK_PREFIX) or not sk.startswith(_DUE_LISTING_SK_PREFIX):
        return None
    return int(sk[len(_DUE_LISTING_SK_PREFIX) :])


def workflows_of(tenant: str) -> str:
    """Where a tenant's workflows are listed in the tenant index (its jobs are under `tenant`)."""
    return f"WORKFLOWS#{tenant}"


def quota_pk(tenant: str) -> str:
    """Where a tenant's quota counters are kept."""
    return f"QUOTA#{tenant}"


def signing_pk(tenant: str) -> str:
    """Where a tenant's webhook signing keys are kept."""
    return f"SIGNING#{tenant}"


def task_job_id(workflow_id: str, task_id: str) -> str:
    """The job item a workflow's task runs belong to (a task id holds no dot)."""
    return f"{workflow_id}.{task_id}"


def task_of(job_id: str) -> tuple[str, str] | None:
    """(workflow id, task id) of a task's job item id; None for any other job's."""
    workflow_id, dot, task_id = job_id.rpartition(".")
    return (workflow_id, task_id) if dot else None


def run_sk(scheduled_for_ms: int) -> str:
    return f"{RUN_SK_PREFIX}{scheduled_for_ms:013d}"


def run_id(job_id: str, scheduled_for_ms: int) -> str:
    return f"{job_id}:{scheduled_for_ms}"


def parse_run_id(value: str) -> tuple[str, int]:
    """`{job_id}:{ms}` → (job_id, ms); ValueError if it is not a run id as `run_id` writes it."""
    job_id, sep, ms = value.rpartition(":")
    if not sep or not job_id or not _CANONICAL_MS.fullmatch(ms):
        raise ValueError(f"'{value}' is not a run id")
    return job_id, int(ms)


def run_time_of(job_id: str, run_id: str) -> int | None:
    """The time (ms) of `job_id`'s run named `run_id`; None if that is not one of its run ids
    (malformed, or another job's)."""
    try:
        owner, scheduled_ms = parse_run_id(run_id)
    except ValueError:
        return None
    return scheduled_ms if owner == job_id else None


def shard_pk(shard: int) -> str:
    return f"SHARD#{shard}"


def shard_for(job_id: str, shard_count: int) -> int:
    """Stable across processes and Python versions (unlike `hash()`)."""
    digest = hashlib.sha256(job_id.encode()).digest()
    return int.from_bytes(digest[:8], "big") % shard_count


def bucket_of(fire_at_ms: int) -> int:
    """The minute bucket (epoch ms of the minute's start) that holds `fire_at_ms`."""
    return fire_at_ms - fire_at_ms % _MINUTE_MS


def bucket_label(bucket_ms: int) -> str:
    return (datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=bucket_ms)).strftime("%Y%m%d%H%M")


def due_pk(fire_at_ms: int, shard: int) -> str:
    return f"{bucket_label(bucket_of(fire_at_ms))}#{shard}"


def buckets_between(first_ms: int, last_ms: int) -> list[int]:
    """Every minute bucket from the one holding `first_ms` to the one holding `last_ms`."""
    start, end = bucket_of(first_ms), bucket_of(last_ms)
    return list(range(start, end + 1, _MINUTE_MS))


def bucket_end(bucket_ms: int) -> int:
    """The last millisecond inside the bucket."""
    return bucket_ms + _MINUTE_MS - 1
