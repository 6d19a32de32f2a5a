"""Logger, metrics and tracer, configured once for every function (Powertools reads
POWERTOOLS_SERVICE_NAME / POWERTOOLS_METRICS_NAMESPACE from the environment)."""

from __future__ import annotations

from aws_lambda_powertools import Logger, Metrics, Tracer

logger = Logger()
metrics = Metrics()
tracer = Tracer()
