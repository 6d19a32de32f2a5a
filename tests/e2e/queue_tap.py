"""What the SQS event source mappings hand to the functions, record by record, as Lambda
sees it: each record's `eventSourceARN` says which queue the message came out of."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from typing import Any

from infra.local.cloud import LocalCloud


@dataclass(frozen=True)
class QueuedRecord:
    queue_arn: str
    run_id: str
    job_id: str


class QueueTap:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._records: list[QueuedRecord] = []

    def attach(self, cloud: LocalCloud) -> None:
        """Look at every batch the cloud's queue mappings hand to a function."""
        cloud.observe_batches(self._note_batch)

    def _note_batch(self, queue_arn: str, records: list[dict[str, Any]]) -> None:
        for record in records:
            self._note(record)

    def _note(self, record: dict[str, Any]) -> None:
        try:
            body = json.loads(record["body"])
            run_id, job_id = str(body["run_id"]), str(body["job_id"])
        except (ValueError, KeyError, TypeError):
            run_id = job_id = ""  # not a run message: still a record from its queue
        with self._lock:
            self._records.append(QueuedRecord(record["eventSourceARN"], run_id, job_id))

    def records_of(self, job_id: str) -> list[QueuedRecord]:
        with self._lock:
            return [r for r in self._records if r.job_id == job_id]
