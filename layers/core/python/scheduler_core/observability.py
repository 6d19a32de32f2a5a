"""Logger, metrics and tracer, configured once for every function (Powertools reads
POWERTOOLS_SERVICE_NAME / POWERTOOLS_METRICS_NAMESPACE from the environment)."""

from __future__ import annotations

import threading
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer


class _ThreadSafeMetrics(Metrics):
    """Powertools' Metrics, whose `add_metric` reads then writes its metric set (and flushes
    at 100 values) unguarded: the worker's record threads and the poller's claim threads
    count at once, so additions and flushes take a lock."""

    _lock = threading.RLock()

    def add_metric(self, *args: Any, **kwargs: Any) -> None:
        with self._lock:
            super().add_metric(*args, **kwargs)

    def flush_metrics(self, *args: Any, **kwargs: Any) -> None:
        with self._lock:
            super().flush_metrics(*args, **kwargs)


logger = Logger()
metrics = _ThreadSafeMetrics()
tracer = Tracer()
