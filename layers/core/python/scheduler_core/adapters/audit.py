"""`AuditLog` on CloudWatch Logs: one JSON line per mutating API call, in the stack's audit
log group (its own: retention, access and alarms apart from the functions' logs). Each
api instance writes its own stream, made on its first line."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Mapping
from typing import Any

from scheduler_core.adapters.aws import AwsClients
from scheduler_core.domain.clock import Clock, to_ms


class CloudWatchAuditLog:
    def __init__(self, clients: AwsClients, group: str, clock: Clock) -> None:
        self._clients = clients
        self._group = group
        self._clock = clock
        self._stream: str | None = None
        self._lock = threading.Lock()

    def _stream_name(self) -> str:
        with self._lock:
            if self._stream is None:
                name = f"{self._clock.now():%Y/%m/%d}/api/{uuid.uuid4().hex}"
                self._clients.logs().create_log_stream(logGroupName=self._group, logStreamName=name)
                self._stream = name
            return self._stream

    def record(self, entry: Mapping[str, Any]) -> None:
        self._clients.logs().put_log_events(
            logGroupName=self._group,
            logStreamName=self._stream_name(),
            logEvents=[{"timestamp": to_ms(self._clock.now()), "message": json.dumps(dict(entry))}],
        )
