"""Running independent pieces of work side by side: one poll's claims, which are I/O (one
conditional write each) on different items. A `Runner` is a port: the deployed poller uses
threads; a simulation in virtual time brings its own."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Protocol, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class Runner(Protocol):
    def map(self, work: Callable[[T], R], items: Iterable[T]) -> list[R]:
        """`work` of each item, in the items' order; an exception of one is raised after all
        have run."""
        ...


class InOrder:
    """One after the other, on the caller's thread."""

    def map(self, work: Callable[[T], R], items: Iterable[T]) -> list[R]:
        return [work(item) for item in items]


class Threads:
    """Up to `workers` at a time on a pool of threads, kept for the process (a warm Lambda
    reuses it). Boto3 clients are thread-safe; the client's connection pool
    (`max_pool_connections`) must be at least `workers`."""

    def __init__(self, workers: int) -> None:
        self._workers = workers
        self._pool: ThreadPoolExecutor | None = None

    def map(self, work: Callable[[T], R], items: Iterable[T]) -> list[R]:
        todo = list(items)
        if len(todo) <= 1 or self._workers == 1:
            return [work(item) for item in todo]
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=self._workers, thread_name_prefix="claim")
        futures = [self._pool.submit(work, item) for item in todo]
        wait(futures)  # every item runs, even when one fails
        return [future.result() for future in futures]
