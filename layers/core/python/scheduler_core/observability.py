"""Logger, metrics and tracer, configured once for every function (Powertools reads
POWERTOOLS_SERVICE_NAME / POWERTOOLS_METRICS_NAMESPACE from the environment)."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from aws_lambda_powertools import Logger, Metrics, Tracer

Handler = TypeVar("Handler", bound=Callable[..., Any])

# What Powertools' `inject_lambda_context` (and its formatter) put on every line that says
# the same on every line of a function's log group: its name and ARN (the log group's), its
# memory (Lambda's REPORT line), whether the container is cold (the metrics' ColdStart) and
# the line's place in the code (a message says what happened). About 215 B a line, most of
# the worker's one line a run (issue 10: logs are part of a run's cost). The request id and
# the X-Ray trace id stay.
SAME_ON_EVERY_LINE = ["function_name", "function_arn", "function_memory_size", "cold_start", "location"]


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


def inject_invocation(handler: Handler | None = None, **options: Any) -> Any:
    """`logger.inject_lambda_context(**options)` less SAME_ON_EVERY_LINE."""

    def decorate(function: Handler) -> Handler:
        @functools.wraps(function)
        def trimmed(event: Any, context: Any, *args: Any, **kwargs: Any) -> Any:
            logger.remove_keys(SAME_ON_EVERY_LINE)
            return function(event, context, *args, **kwargs)

        return logger.inject_lambda_context(trimmed, **options)  # type: ignore[return-value]

    return decorate if handler is None else decorate(handler)
