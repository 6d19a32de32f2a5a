"""Lambda in the capacity simulation: an SQS event source mapping's scale-up."""

from __future__ import annotations

from collections import Counter
from typing import Any

from bench.capacity.lambdas import EventSourceMapping, Function, LeftOutWrites, provisioned
from bench.capacity.partitions import Charge
from bench.capacity.world import World
from scheduler_core.domain import keys
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


def test_a_sampled_message_waits_in_line_with_its_left_out_peers_who_hold_the_mappings_batches():
    world = World(seed=1, fraction=0.01)  # each real message stands beside 99 left out
    with world.running():
        assert world.aws.shadow == 99
        worker: Function[Any] = Function(
            "worker", world.sim, world.aws, world.account, lambda _: SlowExecutor(world), 900
        )
        url = world.settings.queue_url(Priority.NORMAL)
        mapping = EventSourceMapping(world.sim, world.aws, worker, url, 10, max_concurrency=2)
        received: list[tuple[float, int, int, list[tuple[float, int]]]] = []
        invoke = mapping._invoke_real

        def noting_the_line(batch: Any) -> None:  # what was taken, and what still waits, as it is invoked
            waiting = [(cohort.visible_at, cohort.records) for cohort in mapping._shadow]
            received.append((world.sim.env.now, mapping.stats.modeled_records, batch.left_out, waiting))
            invoke(batch)

        mapping._invoke_real = noting_the_line  # type: ignore[method-assign]
        due_ms = int(world.sim.now().timestamp() * 1000) + 5_000
        body = RunMessage(job_id="j", run_id=f"j:{due_ms}", scheduled_for_ms=due_ms, attempt=1)
        world.aws.plain_client("sqs").send_message(QueueUrl=url, MessageBody=body.model_dump_json())
        mapping._notify()  # as a send through the simulated clients does
        mapping.start()
        world.sim.run(until=30.0)

    [(at, taken, beside_it, waiting)] = received
    # 84 ahead of it in line (this seed): taken first, in batches of 10, but for the last few,
    # which a second poller was gathering as this one received it; the batch that holds it
    # fills with those behind it. Every peer is taken once; only those behind it still wait.
    assert taken == 80
    assert beside_it == 9
    assert mapping.stats.modeled_records + beside_it == 99
    assert mapping.stats.modeled_batches == worker.stats.modeled_invocations
    assert (mapping.stats.batches, mapping.stats.records) == (1, 10)
    assert all(visible_at > 0 for visible_at, _ in waiting)
    assert mapping.stats.peak_concurrency <= 2
    # The first two peer batches held both of the mapping's batches until the runs' time.
    assert at >= 5.0
    assert worker.stats.modeled_busy_seconds >= 2 * 5.0


def test_a_batching_window_gathers_a_full_batch_across_receives():
    world = World(seed=1, fraction=0.01)  # each real message stands beside 99 left out
    with world.running():
        worker: Function[Any] = Function(
            "worker", world.sim, world.aws, world.account, lambda _: SlowExecutor(world), 900
        )
        url = world.settings.queue_url(Priority.NORMAL)
        mapping = EventSourceMapping(world.sim, world.aws, worker, url, 100, 1, window_seconds=1.0)
        now_ms = int(world.sim.now().timestamp() * 1000)
        for index in range(3):  # 3 real messages, 297 peers: due in 5 s
            due_ms = now_ms + 5_000
            body = RunMessage(
                job_id=f"j{index}", run_id=f"j{index}:{due_ms}", scheduled_for_ms=due_ms, attempt=1
            )
            world.aws.plain_client("sqs").send_message(QueueUrl=url, MessageBody=body.model_dump_json())
        mapping._notify()
        mapping.start()
        world.sim.run(until=200.0)

    stats = mapping.stats
    # 300 records in 3 full batches of 100, not 30 of 10: each real message's with its peers.
    assert stats.batches + stats.modeled_batches == 3
    assert stats.records + stats.modeled_records == 300
    assert stats.batches >= 1  # the real messages' batches hold their peers too


def test_a_batching_window_waits_for_a_batch_to_fill_then_invokes_with_what_it_has():
    world = World(seed=2)
    with world.running():
        worker: Function[Any] = Function(
            "worker", world.sim, world.aws, world.account, lambda _: SlowExecutor(world), 900
        )
        url = world.settings.queue_url(Priority.NORMAL)
        mapping = EventSourceMapping(world.sim, world.aws, worker, url, 100, 1, window_seconds=1.0)
        sqs = world.aws.plain_client("sqs")
        now_ms = int(world.sim.now().timestamp() * 1000)

        def send(index: int) -> None:
            body = RunMessage(
                job_id=f"j{index}", run_id=f"j{index}:{now_ms}", scheduled_for_ms=now_ms, attempt=1
            )
            sqs.send_message(QueueUrl=url, MessageBody=body.model_dump_json())
            mapping._notify()

        send(0)
        mapping.start()
        world.sim.run(until=0.5)
        send(1)  # inside the first message's window: the same batch
        world.sim.run(until=5.0)
        send(2)  # long after: a batch of its own (once the first, a minute long, is done)
        world.sim.run(until=150.0)

    assert (mapping.stats.batches, mapping.stats.records) == (2, 3)


def test_unsampled_load_has_no_left_out_peers():
    world = World(seed=3)
    with world.running():
        mapping = _mapping(world, max_concurrency=20)
        mapping._notify()
        mapping.start()
        world.sim.run(until=1.0)
    assert mapping.stats.modeled_records == 0


SEED = 6


def test_left_out_ends_take_their_jobs_due_entries_out_on_every_shard_s_key_of_the_minute():
    writes = LeftOutWrites("jobs", shards=4)
    firing_ms = 1_893_456_180_000  # 2030-01-01 00:03:00
    cohorts = Counter({(firing_ms, True): 10, (firing_ms + 1, False): 5})
    charges = writes.end(cohorts, offset=3)
    assert Charge("jobs", "", 15.0) in charges  # every end on its run's own item
    entries = {charge.key: charge.units for charge in charges if charge.table == "jobs/due"}
    # Only the kept runs' entries (a cron run's moved at its claim), 10 over 4 shards from shard 3.
    assert entries == {
        keys.due_pk(firing_ms, 3): 3.0,
        keys.due_pk(firing_ms, 0): 3.0,
        keys.due_pk(firing_ms, 1): 2.0,
        keys.due_pk(firing_ms, 2): 2.0,
    }
    assert writes.start(15) == [Charge("jobs", "", 15.0)]


def test_a_left_out_write_refused_by_a_full_key_waits_for_a_later_second():
    world = World(seed=4, fraction=0.01)
    with world.running():
        worker: Function[Any] = Function(
            "worker", world.sim, world.aws, world.account, lambda _: SlowExecutor(world), 900
        )
        url = world.settings.queue_url(Priority.NORMAL)
        mapping = EventSourceMapping(
            world.sim, world.aws, worker, url, 10, 1, left_out_writes=LeftOutWrites("jobs", 4)
        )
        entry = [Charge("jobs/due", "203001010003#0", 1.0)]
        # The key has taken its 1,000 units of the current second.
        assert world.capacity.admit_write(0.0, [Charge("jobs/due", "203001010003#0", 1_000.0)]) is None
        done: list[float] = []

        def write() -> None:
            mapping._write_left_out(entry)
            done.append(world.sim.env.now)

        world.sim.spawn(write, name="left-out end")
        world.sim.run(until=60.0)
    [at] = done
    assert at >= 1.0  # not in the second that was full
    assert world.capacity.throttles["IndexKeyRangeThroughputExceeded"] >= 1
    assert world.capacity.shadow_write_units == 1.0
