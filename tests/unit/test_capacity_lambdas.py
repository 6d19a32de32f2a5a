"""Lambda in the capacity simulation: an SQS event source mapping's scale-up."""

from __future__ import annotations

from typing import Any

from bench.capacity.lambdas import EventSourceMapping, Function, provisioned
from bench.capacity.world import World
from scheduler_core.domain.messages import RunMessage
from scheduler_core.domain.vocabulary import Priority


class SlowExecutor:
    """Stands in for the worker's RunExecutor: every record takes a minute."""

    def __init__(self, world: World) -> None:
        self._world = world

    def execute(self, message: RunMessage, lease: Any) -> str:
        self._world.sim.sleep(60.0)
        return "SUCCEEDED"


def _mapping(world: World, max_concurrency: int, mode: Any = None) -> EventSourceMapping:
    worker: Function[Any] = Function(
        "worker", world.sim, world.aws, world.account, lambda _: SlowExecutor(world), 900
    )
    url = world.settings.queue_url(Priority.NORMAL)
    sqs = world.aws.plain_client("sqs")
    body = RunMessage(job_id="j", run_id="j:0", scheduled_for_ms=0, attempt=1).model_dump_json()
    for _ in range(40):  # 400 records: 40 batches of 10 (moto's send is O(queue length))
        sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": body} for i in range(10)])
    if mode is None:
        return EventSourceMapping(world.sim, world.aws, worker, url, 10, max_concurrency)
    return EventSourceMapping(world.sim, world.aws, worker, url, 10, max_concurrency, mode)


def test_a_mapping_starts_at_5_batches_and_adds_up_to_300_a_minute():
    world = World(seed=2)
    with world.running():
        mapping = _mapping(world, max_concurrency=1_000)
        mapping.start()
        world.sim.run(until=0.5)
        assert mapping.busy == 5
        world.sim.run(until=4.5)
        assert 20 <= mapping.busy <= 25  # 5 more a second: 300 a minute


def test_a_mapping_stops_at_its_maximum_concurrency():
    world = World(seed=2)
    with world.running():
        mapping = _mapping(world, max_concurrency=20)
        mapping.start()
        world.sim.run(until=10.0)
        assert mapping.stats.peak_concurrency == 20


def test_provisioned_mode_starts_at_its_minimum_and_scales_faster():
    world = World(seed=2)
    with world.running():
        mapping = _mapping(world, max_concurrency=1_000, mode=provisioned(20))
        mapping.start()
        world.sim.run(until=0.5)
        assert mapping.busy == 20
        world.sim.run(until=2.5)
        assert mapping.busy == 40  # every batch in flight, where standard mode has 15
