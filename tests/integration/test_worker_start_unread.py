"""A one-off's run, kept on its job's item, is started by the worker without reading it
first when its job is idle (`RunExecutor._start_unread`): one UpdateItem where a read and an
UpdateItem were. When the job is not idle (here: paused), that write changes nothing and the
worker reads and decides as before."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

from tests.support.harness import FrozenClock, SchedulerHarness
from tests.support.helpers import iso
from tests.support.receiver import WebhookReceiver


@contextmanager
def dynamodb_calls(cloud: SchedulerHarness) -> Iterator[Counter[str]]:
    calls: Counter[str] = Counter()
    events = cloud.clients.dynamodb().meta.events

    def count(model: Any, **_: Any) -> None:
        calls[model.name] += 1

    events.register("before-call.dynamodb", count)
    try:
        yield calls
    finally:
        events.unregister("before-call.dynamodb", count)


def one_off(cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver) -> tuple[str, Any]:
    fire_at = clock.now() + timedelta(seconds=30)
    job = cloud.create(
        {"name": "once", "schedule": {"at": iso(fire_at)}, "target": {"type": "HTTP", "url": receiver.url}}
    )
    return job["job_id"], fire_at


def test_an_idle_one_offs_run_starts_without_a_read(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    job_id, fire_at = one_off(cloud, clock, receiver)
    clock.move_to(fire_at)
    with dynamodb_calls(cloud) as calls:
        assert cloud.deliver() == 1
    assert calls["BatchGetItem"] == 0
    assert calls["UpdateItem"] == 2  # the start, the end
    [run] = cloud.runs(job_id)
    assert (run["status"], run["attempt"], run["response_code"]) == ("SUCCEEDED", 1, 200)
    assert cloud.call("GET", f"/v1/jobs/{job_id}").body["status"] == "COMPLETED"
    assert len(receiver.requests) == 1


def test_a_paused_one_offs_run_is_read_and_set_aside_as_before(
    cloud: SchedulerHarness, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    job_id, fire_at = one_off(cloud, clock, receiver)
    assert cloud.call("POST", f"/v1/jobs/{job_id}/pause").status == 200
    clock.move_to(fire_at)
    with dynamodb_calls(cloud) as calls:
        cloud.deliver()
    assert calls["BatchGetItem"] >= 1  # the unread start wrote nothing; the worker read
    [run] = cloud.runs(job_id)
    assert (run["status"], run["started_at"]) == ("PENDING", None)
    assert receiver.requests == []
