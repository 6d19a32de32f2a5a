"""Helpers more than one benchmark uses: Powertools' metrics namespace for a block, and the
command lines' argument types, SIGTERM handling and recorded options."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

from scheduler_core.observability import metrics


@contextlib.contextmanager
def metrics_namespace(namespace: str, service: str | None = None) -> Iterator[None]:
    """Powertools' metrics under `namespace` (and `service`, if given) for the block, as in a
    function deployed with POWERTOOLS_METRICS_NAMESPACE (Powertools refuses a metric set
    without a namespace); after it, the metric set is dropped and both are put back."""
    saved = metrics.provider.namespace, metrics.provider.service
    metrics.provider.namespace = namespace
    if service is not None:
        metrics.provider.service = service
    try:
        yield
    finally:
        metrics.clear_metrics()
        metrics.provider.namespace, metrics.provider.service = saved


def positive_int(text: str) -> int:
    """An argparse type: an integer of at least 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def positive_float(text: str) -> float:
    """An argparse type: a number above 0."""
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError("must be above 0")
    return value


def interrupt(signum: int, _: Any) -> NoReturn:
    """The SIGTERM handler: unwinds like Ctrl-C, so every `finally` stops what it started."""
    raise KeyboardInterrupt(f"signal {signum}")


def recorded_options(args: argparse.Namespace) -> dict[str, Any]:
    """The command line's options as the figures' JSON records them (paths as text)."""
    return {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}
