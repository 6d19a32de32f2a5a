"""The contract of a one-off's create that claims its firing in the same write
(`put_job_claimed_if_absent`): the job, its run and the due index end up as a put followed by
the claim of that firing leaves them, on the DynamoDB adapter and the fake alike; and on
DynamoDB the very same item, in one request."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import boto3
from moto import mock_aws

from scheduler_core.adapters.aws import AwsClients
from scheduler_core.adapters.dynamodb import DynamoJobStore
from scheduler_core.domain import keys
from scheduler_core.domain.clock import to_ms
from scheduler_core.domain.entities import Job, Run
from scheduler_core.domain.schedule import ScheduleSpec
from scheduler_core.domain.vocabulary import RunStatus
from scheduler_core.ports import JobStore
from tests.support.builders import T0, a_job, a_run
from tests.support.harness import JOBS_TABLE, JOBS_TABLE_DEFINITION
from tests.support.store_contract import AT, LEASE, MINUTE, SHARDS, due_jobs, due_runs

SECOND = timedelta(seconds=1)


def one_off(job_id: str) -> Job:
    return a_job(job_id, schedule=ScheduleSpec(at=AT), next_fire_at=AT)


def the_run(job: Job, due_in: timedelta = 30 * SECOND) -> Run:
    return a_run(job, AT, due_at=AT + due_in)


def put_then_claimed(store: JobStore, job: Job, run: Run) -> Run:
    assert store.put_job_if_absent(job)
    claimed = store.claim_if_unchanged(job, run, None, T0)
    assert claimed is not None
    return claimed


def as_stored(store: JobStore, job_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The job and its run as the ports read them, without their ids."""
    job = store.get_job(job_id)
    run = store.get_run(job_id, to_ms(AT))
    assert job is not None
    assert run is not None
    return job.model_dump(exclude={"job_id", "name"}), run.model_dump(exclude={"job_id", "run_id"})


def test_a_job_put_claimed_is_as_a_put_and_a_claim_leave_it(store: JobStore) -> None:
    claimed = put_then_claimed(store, one_off("two-writes"), the_run(one_off("two-writes")))
    written = store.put_job_claimed_if_absent(one_off("one-write"), the_run(one_off("one-write")), T0)
    assert written is not None
    assert written.model_dump(exclude={"job_id", "run_id"}) == claimed.model_dump(
        exclude={"job_id", "run_id"}
    )
    assert as_stored(store, "one-write") == as_stored(store, "two-writes")
    for job_id in ("one-write", "two-writes"):
        # The poller watches the run there, as a run (not a job to claim).
        assert due_runs(store, one_off(job_id), AT, runs_until=AT + MINUTE) == ([to_ms(AT)], 0)
        assert due_jobs(store, one_off(job_id), AT) == []


def test_a_job_put_claimed_runs_as_any_claimed_run(store: JobStore) -> None:
    job = one_off("once")
    run = store.put_job_claimed_if_absent(job, the_run(job), T0)
    assert run is not None
    running = store.start_run_if_waiting(run, AT, AT + LEASE, "w1")
    assert running is not None
    assert store.finish_run_if_held(running, "w1", RunStatus.SUCCEEDED, AT + SECOND, complete_job=True)
    ended = store.get_run(job.job_id, run.scheduled_for_ms)
    assert ended is not None
    assert ended.status is RunStatus.SUCCEEDED


def test_a_job_put_claimed_is_put_once(store: JobStore) -> None:
    job = one_off("once")
    assert store.put_job_claimed_if_absent(job, the_run(job), T0) is not None
    assert store.put_job_claimed_if_absent(job, the_run(job), T0) is None
    assert not store.put_job_if_absent(job)


def test_on_dynamodb_it_is_the_very_item_in_one_request() -> None:
    with mock_aws():
        clients = AwsClients(boto3.session.Session(region_name="us-east-1"))
        ddb = clients.dynamodb()
        ddb.create_table(**JOBS_TABLE_DEFINITION)
        store = DynamoJobStore(clients, JOBS_TABLE, SHARDS, retention_days=30)
        requests: list[str] = []
        ddb.meta.events.register("before-call.dynamodb", lambda model, **_: requests.append(model.name))
        for due_in in (30 * SECOND, timedelta(minutes=10)):  # the entry left at the firing, or moved
            two, one = one_off(f"two-{due_in.seconds}"), one_off(f"one-{due_in.seconds}")
            put_then_claimed(store, two, the_run(two, due_in))
            requests.clear()
            assert store.put_job_claimed_if_absent(one, the_run(one, due_in), T0) is not None
            assert requests == ["PutItem"]
            items = [
                ddb.get_item(
                    TableName=JOBS_TABLE, Key={"pk": {"S": keys.job_pk(j.job_id)}, "sk": {"S": keys.JOB_SK}}
                )["Item"]
                for j in (two, one)
            ]
            ids = {"pk", "job_id", "name", "created_key", "due_pk"}
            assert [{k: v for k, v in item.items() if k not in ids} for item in items[:1]] == [
                {k: v for k, v in item.items() if k not in ids} for item in items[1:]
            ]
            # The same minute bucket (each job's shard is its own).
            assert len({item["due_pk"]["S"].rsplit("#", 1)[0] for item in items}) == 1
