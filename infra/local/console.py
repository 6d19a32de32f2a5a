"""What `make run` prints: where everything is, then one line per run as it finishes, and
errors from any function."""

from __future__ import annotations

import json
import sys
import threading
from datetime import UTC, datetime
from typing import TextIO

RUN_FINISHED = "run finished"  # the worker's log message of each attempt (scheduler_core.services.execution)


class Console:
    def __init__(self, out: TextIO = sys.stdout, verbose: bool = False) -> None:
        self._out = out
        self._verbose = verbose
        self._lock = threading.Lock()
        self._header_printed = False

    def print(self, text: str = "") -> None:
        with self._lock:
            self._out.write(text + "\n")
            self._out.flush()

    def function_log(self, function: str, line: str) -> None:
        """Every line a function writes: runs and errors are shown, the rest with --verbose."""
        try:
            record = json.loads(line)
        except ValueError:
            record = None
        if isinstance(record, dict) and record.get("message") == RUN_FINISHED:
            self._run_line(record)
            if self._verbose:  # the record itself too, for tools that read the log
                self.print(f"{_now()}  {short_name(function)}: {line}")
        elif (
            self._verbose
            or (isinstance(record, dict) and record.get("level") in ("ERROR", "CRITICAL"))
            or (record is None and ("Error" in line or "Traceback" in line))
        ):
            self.print(f"{_now()}  {short_name(function)}: {line}")

    def error(self, where: str, message: str) -> None:
        self.print(f"{_now()}  ! {short_name(where)}: {message}")

    def _run_line(self, record: dict[str, object]) -> None:
        if not self._header_printed:
            self._header_printed = True
            self.print(f"{'time':<13} {'job':<34} {'run':<48} {'lateness':>9}  status")
        lateness = record.get("lateness_ms")
        late = f"{lateness} ms" if lateness is not None else "-"
        error = f"  {record['error']}" if record.get("error") else ""
        self.print(
            f"{_now():<13} {record.get('job_id', '?')!s:<34} {record.get('run_id', '?')!s:<48} {late:>9}  "
            f"{record.get('status', '?')}{error}"
        )


def short_name(name: str) -> str:
    """`ServerlessScheduler-worker` → `worker` (the stack names its functions so); a name
    CloudFormation gave, `ServerlessScheduler-WorkersWorkerFunction4647CDED-0PLIA7SCP48I` →
    `WorkersWorkerFunction`."""
    tail = name.rsplit(":", 1)[-1]
    parts = tail.split("-")
    if len(parts) == 2:
        return parts[1]
    core = parts[1] if len(parts) >= 3 else tail
    return core.rstrip("0123456789ABCDEF") or core


def _now() -> str:
    return datetime.now(UTC).strftime("%H:%M:%S.%f")[:-3]
