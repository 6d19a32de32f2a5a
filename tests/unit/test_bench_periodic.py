"""The benchmarks' background sampler."""

from __future__ import annotations

import threading

from bench.periodic import Periodic


class Counter(Periodic):
    def __init__(
        self, stop_after: int | None = None, wait_first: bool = False, seconds: float = 0.01
    ) -> None:
        super().__init__(seconds, wait_first=wait_first)
        self.ticks = 0
        self.stop_after = stop_after
        self.ticked = threading.Event()

    def tick(self) -> bool:
        self.ticks += 1
        self.ticked.set()
        return self.stop_after is None or self.ticks < self.stop_after


def test_it_ticks_in_its_block_and_not_after() -> None:
    with Counter() as counter:
        assert counter.ticked.wait(10)
    ticks = counter.ticks
    assert ticks >= 1
    assert not counter.running
    assert counter.ticks == ticks


def test_a_tick_returning_false_ends_it() -> None:
    with Counter(stop_after=3) as counter:
        counter.wait_done(10)
        assert not counter.running
        assert counter.ticks == 3


def test_nothing_ticks_before_the_first_wait_when_told_so() -> None:
    with Counter(wait_first=True, seconds=60) as counter:
        assert not counter.ticked.wait(0.2)
    assert counter.ticks == 0
