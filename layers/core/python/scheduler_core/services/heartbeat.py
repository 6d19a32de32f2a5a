"""Keeping a run's lease while its target call runs (DESIGN §3, "Work"): the worker's one
background duty beside the call."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

from scheduler_core.domain.clock import Clock
from scheduler_core.domain.entities import Run
from scheduler_core.observability import logger, metrics
from scheduler_core.ports import MessageLease, RunTransitions


@contextmanager
def heartbeat(
    store: RunTransitions,
    clock: Clock,
    run: Run,
    owner: str,
    lease: timedelta,
    every: timedelta,
    message: MessageLease | None,
) -> Iterator[None]:
    """While the target call runs, renew the run's `lease` (and its message's visibility)
    `every` so often, so a long call is not taken for a dead worker. Stops when the call
    returns, or when the lease is lost (another attempt owns the run)."""
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(every.total_seconds()):
            lease_until = clock.now() + lease
            try:
                held = store.extend_lease_if_held(run, owner, lease_until)
            except Exception:  # throttled, unreachable: try again at the next beat
                logger.exception("lease not renewed", extra={"run_id": run.run_id})
                continue
            if not held:
                logger.warning("lease lost during the call", extra={"run_id": run.run_id})
                return
            if message is not None:
                message.hide_for(int(lease.total_seconds()))
            metrics.add_metric(name="LeaseRenewals", unit="Count", value=1)

    beater = threading.Thread(target=beat, name=f"heartbeat-{run.run_id}", daemon=True)
    beater.start()
    try:
        yield
    finally:
        stop.set()
        beater.join()
