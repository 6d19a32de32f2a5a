"""The runners a poll claims with: in order, or side by side on threads."""

from __future__ import annotations

import threading

import pytest

from scheduler_core.services.parallel import InOrder, Threads


def test_threads_run_the_items_side_by_side_and_answer_in_their_order() -> None:
    # Each item waits for all the others: only work that runs at once gets past the barrier.
    barrier = threading.Barrier(8, timeout=10)

    def meet(item: int) -> int:
        barrier.wait()
        return item * 10

    assert Threads(8).map(meet, range(8)) == [item * 10 for item in range(8)]


def test_in_order_runs_one_after_the_other_on_the_callers_thread() -> None:
    seen: list[tuple[int, str]] = []
    InOrder().map(lambda item: seen.append((item, threading.current_thread().name)), [1, 2, 3])
    assert seen == [(item, threading.current_thread().name) for item in (1, 2, 3)]


def test_a_failure_is_raised_after_every_item_ran() -> None:
    ran: list[int] = []

    def work(item: int) -> int:
        ran.append(item)
        if item == 0:
            raise ValueError("boom")
        return item

    with pytest.raises(ValueError, match="boom"):
        Threads(4).map(work, range(6))
    assert sorted(ran) == list(range(6))
