"""The capacity simulation's virtual time: synchronous code in greenlets, waits in SimPy."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from bench.capacity.kernel import Sim, SimClock, TaskRunner, virtual_sleep

START = datetime(2030, 1, 1, tzinfo=UTC)


def test_a_sleep_advances_virtual_time_not_wall_time():
    sim = Sim(START)
    clock = SimClock(sim)
    seen: list[datetime] = []

    def task() -> None:
        clock.sleep_until(clock.now() + timedelta(hours=1))
        seen.append(clock.now())

    sim.spawn(task)
    wall = time.perf_counter()
    sim.run()
    assert seen == [START + timedelta(hours=1)]
    # Virtual time: an hour's sleep is not slept (far less than an hour of wall time, with
    # room for any stall of this machine).
    assert time.perf_counter() - wall < 60


def test_two_tasks_interleave_in_virtual_time_order():
    sim = Sim(START)
    order: list[tuple[str, float]] = []

    def task(name: str, pauses: list[float]) -> None:
        for pause in pauses:
            sim.sleep(pause)
            order.append((name, sim.env.now))

    sim.spawn(task, "a", [1.0, 3.0])  # at 1 and 4
    sim.spawn(task, "b", [2.0, 1.0, 5.0])  # at 2, 3 and 8
    sim.run()
    assert order == [("a", 1.0), ("b", 2.0), ("b", 3.0), ("a", 4.0), ("b", 8.0)]


def test_a_task_returns_its_value_to_a_task_waiting_for_it():
    sim = Sim(START)
    results: list[int] = []

    def child() -> int:
        sim.sleep(2.0)
        return 42

    def parent() -> None:
        results.append(sim.wait(sim.spawn(child)))
        results.append(int(sim.env.now))

    sim.spawn(parent)
    sim.run()
    assert results == [42, 2]


def test_a_task_past_its_deadline_is_stopped_and_its_finally_still_runs():
    sim = Sim(START)
    cleaned: list[float] = []

    def slow() -> None:
        try:
            sim.sleep(100.0)
        finally:
            cleaned.append(sim.env.now)

    sim.spawn(slow, name="slow", deadline=10.0)
    sim.run()
    assert sim.timed_out == ["slow"]
    assert cleaned == [10.0]


def test_time_sleep_inside_a_task_waits_virtual_time():
    sim = Sim(START)
    woke: list[float] = []

    def task() -> None:
        time.sleep(30)  # botocore's retry backoff and the store's pauses call this
        woke.append(sim.env.now)

    with virtual_sleep(sim):
        sim.spawn(task)
        sim.run()
    assert woke == [30.0]
    assert time.sleep.__module__ == "time"  # put back


def test_waiting_outside_a_task_is_refused():
    sim = Sim(START)
    with pytest.raises(RuntimeError, match="only a simulated task"):
        sim.sleep(1.0)


def test_an_exception_in_a_task_is_kept_for_the_report():
    sim = Sim(START)

    def broken() -> None:
        raise ValueError("bug")

    sim.spawn(broken, name="broken")
    sim.run()
    assert [(name, str(error)) for name, error in sim.failures] == [("broken", "bug")]


def test_a_task_runner_is_a_pool_each_worker_taking_the_next_item_when_free():
    sim = Sim(START)
    runner = TaskRunner(sim, workers=2)
    results: list[list[int]] = []

    def work(seconds: int) -> int:
        sim.sleep(seconds)
        return seconds * 10

    # Workers free up at different times: 3 | 1+1+1 → all done at 3, not at 3+1 (chunks).
    sim.spawn(lambda: results.append(runner.map(work, [3, 1, 1, 1])))
    sim.run()
    assert results == [[30, 10, 10, 10]]
    assert sim.env.now == 3.0


def test_modeled_items_take_the_pool_before_each_real_one():
    sim = Sim(START)
    runner = TaskRunner(
        sim, workers=2, shadow_per_item=3.0, shadow_seconds=lambda _item, _outcome, count: 1.0 * count
    )
    done: list[float] = []

    def work(item: str) -> str:
        sim.sleep(0.5)
        done.append(sim.env.now)
        return item

    sim.spawn(lambda: runner.map(work, ["a", "b"]))
    sim.run()
    # 3 modeled + a, 3 modeled + b on 2 workers: 8 items' worth of seconds, ~4 s.
    assert runner.shadow_items == 6
    assert done[-1] == pytest.approx(3.5)


def test_a_stopped_function_s_pool_takes_no_further_item():
    sim = Sim(START)
    runner = TaskRunner(sim, workers=1)
    ran: list[int] = []

    def work(item: int) -> None:
        sim.sleep(1.0)
        ran.append(item)

    sim.spawn(lambda: runner.map(work, [1, 2, 3, 4]), deadline=1.5)
    sim.run()
    assert ran == [1, 2]  # the second was in flight at the deadline; no third began
