"""Virtual time for unmodified production code.

SimPy keeps the virtual clock and the event queue. Production code is synchronous (boto3
calls, `Clock.sleep_until`, `time.sleep` in botocore's retries), so each simulated
invocation runs in a greenlet of its own: a task. Wherever the code would block, the task
switches back to the SimPy scheduler with the event it waits for (a timeout: an AWS call's
latency, a sleep), and the scheduler switches back into it once virtual time has reached
that event. Only one task runs at a time, on one thread, so nothing a task does between
two waits can interleave with another task: the order of effects is the order of virtual
time, as on a real system whose every operation takes the time the models say.
"""

from __future__ import annotations

import contextlib
import time
from collections import deque
from collections.abc import Callable, Generator, Iterable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any, SupportsIndex

import greenlet
import simpy

from scheduler_core.domain.clock import Clock


class Deadline(BaseException):
    """Thrown into a task that outlives its deadline (a Lambda function's timeout). A
    BaseException, like Lambda's own kill: production code's `except Exception` cannot
    swallow it."""


class Sim:
    """A SimPy environment whose processes may be plain synchronous functions (`spawn`)."""

    def __init__(self, start: datetime) -> None:
        if start.tzinfo is None:
            raise ValueError("the simulation needs a timezone-aware start time")
        self.env = simpy.Environment()
        self.start = start.astimezone(UTC)
        self.failures: list[tuple[str, BaseException]] = []  # exceptions that escaped a task
        self.timed_out: list[str] = []  # tasks killed at their deadline
        self._tasks: dict[Any, str] = {}  # running task greenlet → what it simulates

    # --- time -------------------------------------------------------------------------

    def now(self) -> datetime:
        return self.start + timedelta(seconds=self.env.now)

    def seconds_until(self, when: datetime) -> float:
        return (when - self.now()).total_seconds()

    def run(self, until: float | None = None) -> None:
        """Advance virtual time until `until` seconds from the start, or until nothing is left."""
        self.env.run(until=until)

    # --- tasks ------------------------------------------------------------------------

    def current_task(self) -> Any:
        """The greenlet of the running task, None outside any task."""
        current = greenlet.getcurrent()
        return current if current in self._tasks else None

    def in_task(self) -> bool:
        return self.current_task() is not None

    def wait(self, event: simpy.Event) -> Any:
        """Block the current task until `event` has happened in virtual time; its value."""
        task = self.current_task()
        if task is None:
            raise RuntimeError("only a simulated task can wait in virtual time")
        assert task.parent is not None
        return task.parent.switch(event)

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            self.wait(self.env.timeout(seconds))

    def wait_all(self, processes: list[simpy.Process]) -> None:
        if processes:
            self.wait(self.env.all_of(processes))

    def spawn(
        self, function: Callable[..., Any], *args: Any, name: str = "task", deadline: float | None = None
    ) -> simpy.Process:
        """Run `function(*args)` as a task from now on; the process's value is its result.
        With `deadline` (seconds), the task is killed (`Deadline`) if still running then."""
        return self.env.process(self._drive(function, args, name, deadline))

    def _drive(
        self, function: Callable[..., Any], args: tuple[Any, ...], name: str, deadline: float | None
    ) -> Generator[simpy.Event, Any, Any]:
        # Created here, while the scheduler runs this generator: the task's parent is the
        # scheduler's greenlet, which every wait switches back to.
        task = greenlet.greenlet(lambda: self._guarded(function, args, name))
        self._tasks[task] = name
        request = task.switch()
        expiry = self.env.timeout(deadline) if deadline is not None else None
        while not task.dead:
            if expiry is None:
                value = yield request
            else:
                yield request | expiry
                if not request.processed:
                    expiry = None  # thrown once; its clean-up may still wait
                    request = task.throw(Deadline(name))
                    continue
                value = request.value
            request = task.switch(value)
        del self._tasks[task]
        return request

    def _guarded(self, function: Callable[..., Any], args: tuple[Any, ...], name: str) -> Any:
        try:
            return function(*args)
        except Deadline:
            self.timed_out.append(name)
        except Exception as error:  # a bug or an unexpected AWS answer: kept for the report
            self.failures.append((name, error))
        return None


class SimClock(Clock):
    """`scheduler_core.domain.clock.Clock` in the simulation's virtual time."""

    def __init__(self, sim: Sim) -> None:
        self._sim = sim

    def now(self) -> datetime:
        return self._sim.now()

    def sleep_until(self, when: datetime) -> None:
        self._sim.sleep(self._sim.seconds_until(when))


@contextlib.contextmanager
def virtual_sleep(sim: Sim) -> Iterator[None]:
    """`time.sleep` inside a task waits in virtual time (botocore's retry backoff, the
    store's pauses between contended transactions); elsewhere it sleeps as usual."""
    real = time.sleep

    def sleep(seconds: float | SupportsIndex) -> None:
        seconds = float(seconds)
        if sim.in_task():
            sim.sleep(seconds)
        else:
            real(seconds)

    time.sleep = sleep
    try:
        yield
    finally:
        time.sleep = real


class TaskRunner:
    """`scheduler_core.services.parallel.Runner` in virtual time: a pool of `workers` tasks taking
    the items in order, each as soon as it is free, as the deployed poller's thread pool
    does (where the deployed poller uses threads, which the simulation cannot see: a call
    on another thread would take no virtual time and go uncounted).

    Sampled load (`shadow_per_item` > 0, see `scenarios`): before each real item, the pool
    also takes `shadow_per_item` modeled items (fractions carried over), a worker taking a
    share of them for `shadow_seconds(item, outcome, count)`, the time of `count` such
    items one after the other (`item`: the real one they stand beside; `outcome`: what the
    real item that finished last in this map returned, None before any did or if it raised):
    the claims of the jobs the sample leaves out, so the real items finish when they would
    in the full bucket. (One call a share, not an item: a sampled poll models millions.)"""

    def __init__(
        self,
        sim: Sim,
        workers: int,
        shadow_per_item: float = 0.0,
        shadow_seconds: Callable[[Any, Any, int], float] | None = None,
    ) -> None:
        self._sim = sim
        self._workers = max(1, workers)
        self._shadow_per_item = shadow_per_item
        self._shadow_seconds = shadow_seconds
        self.shadow_items = 0  # modeled items run so far

    def map(self, work: Callable[[Any], Any], items: Iterable[Any]) -> list[Any]:
        todo = list(items)
        # (position, item), or (-n, item): a run of n modeled items beside `item`.
        units: deque[tuple[int, Any]] = deque()
        owed = 0.0
        for position, item in enumerate(todo):
            if self._shadow_seconds is not None:
                owed += self._shadow_per_item
                if owed >= 1.0:
                    units.append((-int(owed), item))
                    owed -= int(owed)
            units.append((position, item))
        outcomes: list[tuple[bool, Any]] = [(False, RuntimeError("runner item stopped"))] * len(todo)
        stopped = False
        last: list[Any] = [None]  # the value of the real item that finished last

        def worker() -> None:
            while units and not stopped:
                position, item = units.popleft()
                if position >= 0:
                    outcomes[position] = ok, value = _captured(work, item)
                    last[0] = value if ok else None
                    continue
                # Modeled items, a worker's share of the run at a time (fewer events, the
                # same total): the rest stays first in line for the other workers.
                count = -position
                share = min(count, max(1, count // self._workers))
                if count > share:
                    units.appendleft((share - count, item))
                assert self._shadow_seconds is not None
                self.shadow_items += share
                self._sim.sleep(self._shadow_seconds(item, last[0], share))

        # As many workers as there are items, real and modeled (a run of n modeled items is n).
        pending = sum(1 if position >= 0 else -position for position, _ in units)
        processes = [
            self._sim.spawn(worker, name="runner worker") for _ in range(min(self._workers, pending))
        ]
        try:
            self._sim.wait_all(processes)
        except Deadline:
            stopped = True  # the function was stopped: its pool takes no further item
            raise
        for ok, value in outcomes:
            if not ok:
                raise value
        return [value for _, value in outcomes]


def _captured(work: Callable[[Any], Any], item: Any) -> tuple[bool, Any]:
    try:
        return True, work(item)
    except Exception as error:
        return False, error
