"""`python -m bench --only worker-cpu`: how late a worker batch's runs fire when its records
share the CPU Lambda gives the worker at a memory size, measured.

Lambda gives a function CPU in proportion to its memory: one vCPU at 1,769 MB, that share of
one below. The worker runs a batch's records side by side (a thread each), so a batch of 100
asks its share for a hundred starts, calls and ends; the capacity simulation does not model
CPU. Here the real worker handler runs one batch in a process of its own, warm (imported,
its clients built), capped to the share by a cgroup (v1 `cpu.cfs_quota_us`; needs root),
against the stack on moto (its own process, not capped) and a webhook receiver (a third,
which takes the arrival times). The batch's messages are the queue's own, made by creating
that many one-off jobs due over one second, as a steady load's batch is; lateness is each
run's arrival less its time. Without the cgroup controller the part says so and measures
nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.receiver import ReceiverProcess
from bench.report import percentile, table
from bench.stack import TENANT, BenchStack, moto_session
from infra.local.deployment import REGION
from infra.local.event_sources import sqs_record
from scheduler_core.adapters.aws import AwsClients
from scheduler_core.adapters.queues import delete_received
from scheduler_core.composition import build_job_service
from scheduler_core.domain.api_shapes import JobCreate
from scheduler_core.domain.clock import SystemClock
from scheduler_core.domain.vocabulary import Priority

VCPU_MB = 1_769  # Lambda: the memory size that has one full vCPU
CPU_CGROUPS = Path("/sys/fs/cgroup/cpu")  # cgroup v1's cpu controller
PERIOD_US = 100_000
# (records a batch, the worker's memory): the default batch, then Deploy's batch of 100 at
# the default memory and with more; each at a full CPU too, the floor (moto's own pace).
CASES = ((10, 512), (10, VCPU_MB), (100, 512), (100, 768), (100, 1_024), (100, VCPU_MB))
REPEATS = 3  # batches a case; one more, first, warms moto and the receiver (not counted)
SPREAD_SECONDS = 1.0  # a batch's runs fall due over this long
FIRST_DUE_SECONDS = 8.0  # from the start of the creates to the first run's time
WAIT_SECONDS = 60.0  # for the batch's messages, and for the worker to finish


def unavailable() -> str | None:
    """Why the CPU cannot be capped here (None: it can)."""
    if not (CPU_CGROUPS / "cpu.cfs_quota_us").exists():
        return f"no cgroup v1 cpu controller at {CPU_CGROUPS}"
    if not os.access(CPU_CGROUPS, os.W_OK):
        return f"{CPU_CGROUPS} is not writable (the part needs root)"
    return None


@contextmanager
def cpu_share(share: float) -> Iterator[Path]:
    """A cgroup whose processes get `share` of one CPU: write a pid to its `cgroup.procs`."""
    group = CPU_CGROUPS / f"bench-worker-cpu-{os.getpid()}"
    group.mkdir(exist_ok=True)
    try:
        (group / "cpu.cfs_period_us").write_text(str(PERIOD_US))
        (group / "cpu.cfs_quota_us").write_text(str(max(1_000, round(PERIOD_US * share))))
        yield group
    finally:
        for pid in (group / "cgroup.procs").read_text().split():  # none once the worker exits
            (CPU_CGROUPS / "cgroup.procs").write_text(pid)
        group.rmdir()


def _create_due(stack: BenchStack, receiver_url: str, count: int) -> dict[str, datetime]:
    """`count` one-off NORMAL jobs due over SPREAD_SECONDS from FIRST_DUE_SECONDS on: their
    runs' times by job id. Due this soon, each is claimed and sent at its creation."""
    jobs = build_job_service(stack.settings, AwsClients(moto_session()), SystemClock())
    first = datetime.now(UTC) + timedelta(seconds=FIRST_DUE_SECONDS)
    due: dict[str, datetime] = {}
    for index in range(count):
        at = first + timedelta(seconds=SPREAD_SECONDS * index / count)
        request = JobCreate.model_validate(
            {
                "name": f"bench-worker-cpu-{index}",
                "schedule": {"at": at.isoformat(timespec="milliseconds")},
                "target": {"type": "HTTP", "url": receiver_url},
            }
        )
        job = jobs.create(TENANT, request)
        if job.fires_by.at is None:
            raise RuntimeError(f"job {job.job_id} has no time to fire")
        due[job.job_id] = job.fires_by.at
    return due


def _gather(stack: BenchStack, count: int) -> list[dict[str, Any]]:
    """The batch's messages, received from the NORMAL queue as a mapping would (10 a receive)
    once they become visible, `delivery_lead_seconds` before their runs' times."""
    sqs = AwsClients(moto_session()).client("sqs")
    queue_url = stack.settings.queue_url(Priority.NORMAL)
    deadline = time.monotonic() + WAIT_SECONDS
    messages: list[dict[str, Any]] = []
    while len(messages) < count and time.monotonic() < deadline:
        messages += sqs.receive_message(
            QueueUrl=queue_url,
            MaxNumberOfMessages=min(10, count - len(messages)),
            WaitTimeSeconds=1,
            AttributeNames=["All"],
        ).get("Messages", [])
    if len(messages) < count:
        raise RuntimeError(f"only {len(messages)} of the batch's {count} messages arrived")
    return messages


@contextmanager
def warm_worker(
    stack: BenchStack, memory_mb: int, workdir: Path
) -> Iterator[Callable[[dict[str, Any]], Any]]:
    """The worker handler in a process of its own, warm (imported, its clients built), then
    capped to `memory_mb`'s CPU share: call the yielded function with an SQS event, once."""
    environment = {
        **os.environ,
        **stack.environments["worker"],
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(memory_mb),
    }
    with cpu_share(min(1.0, memory_mb / VCPU_MB)) as group:
        child = subprocess.Popen(
            [sys.executable, "-m", "bench.worker_cpu", str(workdir)],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            env=environment,
            text=True,
        )
        try:
            deadline = time.monotonic() + WAIT_SECONDS
            while not (workdir / "ready").exists():
                if child.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the worker process did not get ready")
                time.sleep(0.05)
            (group / "cgroup.procs").write_text(str(child.pid))

            def invoke(event: dict[str, Any]) -> Any:
                (workdir / "event.json").write_text(json.dumps(event))
                assert child.stdin is not None
                child.stdin.write("go\n")
                child.stdin.close()
                if child.wait(timeout=WAIT_SECONDS):
                    raise RuntimeError(f"the worker process failed ({child.returncode})")
                return json.loads((workdir / "result.json").read_text())

            yield invoke
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()


def _batch(stack: BenchStack, receiver: ReceiverProcess, records: int, memory_mb: int) -> dict[str, Any]:
    """One batch of `records` through a worker of `memory_mb`, warm before its runs are made:
    each run's lateness (ms), the worker's CPU and invocation seconds."""
    sqs = AwsClients(moto_session()).client("sqs")
    queue_url = stack.settings.queue_url(Priority.NORMAL)
    attributes = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]
    with (
        tempfile.TemporaryDirectory(prefix="bench-worker-cpu-") as workdir,
        warm_worker(stack, memory_mb, Path(workdir)) as invoke,
    ):
        due = _create_due(stack, receiver.url, records)
        messages = _gather(stack, records)
        worker = invoke({"Records": [sqs_record(m, attributes["QueueArn"], REGION) for m in messages]})
    delete_received(sqs, queue_url, [m["ReceiptHandle"] for m in messages])  # as the mapping would
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:  # the receiver's last reports
        arrived = {a.job_id: a.arrived_ms for a in receiver.arrivals() if a.job_id in due}
        if len(arrived) == records:
            break
        time.sleep(0.1)
    return {
        "lateness_ms": [arrived[job_id] - due[job_id].timestamp() * 1000 for job_id in arrived],
        "failed_records": len(worker["batchItemFailures"]),
        "cpu_seconds": worker["cpu_seconds"],
        "seconds": worker["seconds"],
    }


def measure_case(
    stack: BenchStack, receiver: ReceiverProcess, records: int, memory_mb: int
) -> dict[str, Any]:
    batches = [_batch(stack, receiver, records, memory_mb) for _ in range(REPEATS)]
    lateness = sorted(ms for batch in batches for ms in batch["lateness_ms"])
    return {
        "records": records,
        "memory_mb": memory_mb,
        "cpu_share": round(min(1.0, memory_mb / VCPU_MB), 3),
        "batches": REPEATS,
        "arrived": len(lateness),
        "failed_records": sum(batch["failed_records"] for batch in batches),
        "lateness_ms": {
            "p50": _rounded(percentile(lateness, 0.5)),
            "p99": _rounded(percentile(lateness, 0.99)),
            "max": _rounded(lateness[-1] if lateness else None),
        },
        "worker_cpu_seconds": round(sum(b["cpu_seconds"] for b in batches) / REPEATS, 3),
        "invocation_seconds": round(sum(b["seconds"] for b in batches) / REPEATS, 3),
    }


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def measure_worker_cpu(stack: BenchStack) -> dict[str, Any]:
    reason = unavailable()
    if reason:
        return {"skipped": reason}
    with ReceiverProcess() as receiver:
        _batch(stack, receiver, 10, VCPU_MB)
        cases = [measure_case(stack, receiver, records, memory) for records, memory in CASES]
    return {
        "method": f"{REPEATS} batches a case of the queue's messages, each's runs due over 1 s, through "
        "the worker handler in a warm process capped (cgroup v1 cpu.cfs_quota_us) to memory / 1,769 MB "
        "of one CPU of this machine; moto and the receiver uncapped, in processes of their own",
        "cases": cases,
    }


def print_worker_cpu(result: dict[str, Any]) -> None:
    if "skipped" in result:
        print(f"skipped: {result['skipped']}")
        return
    print("Worker batches on a Lambda-sized CPU share: lateness of a batch's runs (due over 1 s)")
    rows = [
        [
            c["records"],
            c["memory_mb"],
            f"{c['cpu_share']:.2f}",
            f"{c['arrived']}/{c['records'] * c['batches']}",
            c["lateness_ms"]["p50"],
            c["lateness_ms"]["p99"],
            c["lateness_ms"]["max"],
            c["worker_cpu_seconds"],
            c["invocation_seconds"],
        ]
        for c in result["cases"]
    ]
    print(
        table(
            [
                "records",
                "memory MB",
                "CPU share",
                "arrived",
                "late p50 ms",
                "p99 ms",
                "max ms",
                "CPU s/batch",
                "invocation s",
            ],
            rows,
        )
    )
    print(f"  {result['method']}")


def worker_cpu_headline(result: dict[str, Any]) -> str:
    if "skipped" in result:
        return f"skipped ({result['skipped']})"
    return "; ".join(
        f"{c['records']} records at {c['memory_mb']} MB p99 {c['lateness_ms']['p99']} ms"
        for c in result["cases"]
    )


def _child(workdir: Path) -> None:
    """The worker process: warm (imported, clients built), then one invocation on `go`."""
    from bench.api_calls import BenchLambdaContext
    from bench.stack import DeployedFunction
    from functions.worker.handler import handler, record_threads
    from scheduler_core.composition import default_clients, default_run_executor

    default_run_executor()
    for service in ("dynamodb", "sqs"):
        default_clients().client(service)
    record_threads()
    memory = int(os.environ["AWS_LAMBDA_FUNCTION_MEMORY_SIZE"])
    function = DeployedFunction("worker", memory, "x86_64", "INFO", "worker", "")
    (workdir / "ready").write_text("")
    sys.stdin.readline()
    event = json.loads((workdir / "event.json").read_text())
    started, cpu = time.perf_counter(), time.process_time()
    answer = handler(event, BenchLambdaContext(function, timeout_seconds=90))
    result = {**answer, "seconds": time.perf_counter() - started, "cpu_seconds": time.process_time() - cpu}
    (workdir / "result.json").write_text(json.dumps(result))


if __name__ == "__main__":
    _child(Path(sys.argv[1]))
