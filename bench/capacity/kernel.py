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
from collections.abc import Callable, Generator, Iterable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any, SupportsIndex

import greenlet
import simpy

from scheduler_core.clock import Clock


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
    """`scheduler_core.clock.Clock` in the simulation's virtual time."""

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
    """`scheduler_core.parallel.Runner` in virtual time: up to `workers` items at a time,
    each its own task (where the deployed poller uses threads, which the simulation cannot
    see: a call on another thread would take no virtual time and go uncounted)."""

    def __init__(self, sim: Sim, workers: int) -> None:
        self._sim = sim
        self._workers = max(1, workers)

    def map(self, work: Callable[[Any], Any], items: Iterable[Any]) -> list[Any]:
        outcomes: list[tuple[bool, Any]] = []
        todo = list(items)
        for first in range(0, len(todo), self._workers):
            processes = [
                self._sim.spawn(_captured, work, item, name="runner item")
                for item in todo[first : first + self._workers]
            ]
            self._sim.wait_all(processes)
            outcomes += [
                process.value or (False, RuntimeError("runner item stopped")) for process in processes
            ]
        for ok, value in outcomes:
            if not ok:
                raise value
        return [value for _, value in outcomes]


def _captured(work: Callable[[Any], Any], item: Any) -> tuple[bool, Any]:
    try:
        return True, work(item)
    except Exception as error:
        return False, error
