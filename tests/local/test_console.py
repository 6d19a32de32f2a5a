"""What `make run` prints of the worker's runs, and what `make chaos` reads back from it."""

from __future__ import annotations

import io
import json
from pathlib import Path

from bench.chaos import read_log
from infra.local.console import Console
from scheduler_core.domain.outcomes import RUN_FINISHED, TAKEN_OVER

WORKER = "ServerlessScheduler-WorkersWorkerFunction4647CDED-0PLIA7SCP48I"


def finished(run_id: str, status: str) -> str:
    record = {"level": "INFO", "message": RUN_FINISHED, "job_id": "j", "run_id": run_id, "status": status}
    return json.dumps(record | {"lateness_ms": 12, "error": None})


def test_each_attempt_is_one_line_with_its_status() -> None:
    out = io.StringIO()
    console = Console(out)
    console.function_log(WORKER, finished("j:1", "RETRYING"))
    console.function_log(WORKER, json.dumps({"level": "INFO", "message": "something else"}))

    lines = out.getvalue().splitlines()
    assert len(lines) == 2  # the header and the run
    assert "j:1" in lines[1]
    assert lines[1].endswith("RETRYING")


def test_the_chaos_soak_reads_succeeded_runs_from_a_verbose_log(tmp_path: Path) -> None:
    out = io.StringIO()
    console = Console(out, verbose=True)
    for run_id, status in [
        ("j:1", "SUCCEEDED"),
        ("j:1", "SUCCEEDED"),
        ("j:2", "FAILED"),
        ("j:3", "SUCCEEDED"),
    ]:
        console.function_log(WORKER, finished(run_id, status))
    log = tmp_path / "cloud.log"
    log.write_text(out.getvalue())

    assert read_log(log)["succeeded_logged"] == {"j:1": 2, "j:3": 1}


def test_the_chaos_soak_reads_which_attempts_logged_their_end(tmp_path: Path) -> None:
    out = io.StringIO()
    console = Console(out, verbose=True)
    console.function_log(WORKER, json.dumps({"message": RUN_FINISHED, "run_id": "j:1", "attempt": 1}))
    taken_over = {"message": f"{TAKEN_OVER}; result discarded", "run_id": "j:2", "attempt": 3}
    console.function_log(WORKER, json.dumps(taken_over))
    console.function_log(WORKER, json.dumps({"message": "run started", "run_id": "j:3", "attempt": 1}))
    log = tmp_path / "cloud.log"
    log.write_text(out.getvalue())

    assert read_log(log)["ended_attempts"] == {("j:1", "1"), ("j:2", "3")}
