"""The benchmarks' one background sampler: `tick` from a daemon thread every few seconds
while in a `with` block."""

from __future__ import annotations

import threading
from typing import Self


class Periodic:
    """Calls `tick` every `seconds` from a daemon thread, between `__enter__` and
    `__exit__`: at once and then after each wait, or (`wait_first`) after each wait only.
    `tick` returning False ends the thread early."""

    def __init__(self, seconds: float, *, wait_first: bool = False, name: str | None = None) -> None:
        self._seconds = seconds
        self._wait_first = wait_first
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def tick(self) -> bool | None:
        raise NotImplementedError

    def _run(self) -> None:
        if self._wait_first and self._stop.wait(self._seconds):
            return
        while not self._stop.is_set():
            if self.tick() is False:
                return
            if self._stop.wait(self._seconds):
                return

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def wait_done(self, timeout: float) -> None:
        """Wait (up to `timeout` seconds) for the thread to end by itself."""
        self._thread.join(timeout)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
