"""Functions run in real runtime processes: warm, bounded by their concurrency and timeout."""

from __future__ import annotations

import os
import signal
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from infra.local.functions import FunctionError, FunctionHost, FunctionSpec

HANDLER = """
import os, time
STARTED = time.time()

def handler(event, context):
    if event.get("sleep"):
        time.sleep(event["sleep"])
    if event.get("raise"):
        raise ValueError(event["raise"])
    print("log line from", context.function_name)
    return {"pid": os.getpid(), "started": STARTED, "event": event,
            "remaining": context.get_remaining_time_in_millis(), "env": os.environ.get("GREETING")}
"""


def make_host(tmp_path: Path, code: str = HANDLER, timeout: int = 5, concurrency: int = 2) -> FunctionHost:
    code_dir = tmp_path / "code"
    code_dir.mkdir(exist_ok=True)
    (code_dir / "handler.py").write_text(textwrap.dedent(code))
    spec = FunctionSpec(
        name="probe",
        arn="arn:aws:lambda:us-east-1:123456789012:function:probe",
        handler="handler.handler",
        code_dir=code_dir,
        layer_dirs=(),
        environment={"GREETING": "hello"},
        timeout_seconds=timeout,
        memory_mb=128,
        concurrency=concurrency,
    )
    logs.clear()
    return FunctionHost(spec, {"PATH": "/usr/bin:/bin"}, lambda name, line: logs.append(line))


logs: list[str] = []


@pytest.fixture
def host(tmp_path: Path) -> Iterator[FunctionHost]:
    function = make_host(tmp_path)
    yield function
    function.stop()


def test_an_invocation_returns_the_handlers_result_with_its_environment(host: FunctionHost) -> None:
    result = host.invoke({"n": 1})
    assert result["event"] == {"n": 1}
    assert result["env"] == "hello"
    assert 0 < result["remaining"] <= 5000
    # Logs come on stderr, read by their own thread: the line may land just after the reply.
    deadline = time.monotonic() + 10
    while not any("log line from probe" in line for line in logs) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert any("log line from probe" in line for line in logs)


def test_instances_stay_warm_between_invocations(host: FunctionHost) -> None:
    first, second = host.invoke({}), host.invoke({})
    assert first["pid"] == second["pid"]
    assert first["started"] == second["started"]


def test_concurrent_invocations_use_at_most_the_functions_concurrency(host: FunctionHost) -> None:
    results: list[dict[str, object]] = []
    threads = [threading.Thread(target=lambda: results.append(host.invoke({"sleep": 0.5}))) for _ in range(5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 5
    assert len({r["pid"] for r in results}) == 2
    assert host.instances == 2


def test_an_exception_is_a_function_error_and_the_instance_stays_usable(host: FunctionHost) -> None:
    with pytest.raises(FunctionError) as raised:
        host.invoke({"raise": "boom"})
    assert raised.value.body["errorType"] == "ValueError"
    assert raised.value.body["errorMessage"] == "boom"
    assert host.invoke({})["event"] == {}


def test_a_function_past_its_timeout_is_killed_and_replaced(tmp_path: Path) -> None:
    host = make_host(tmp_path, timeout=1)
    try:
        before = host.invoke({})["pid"]
        started = time.monotonic()
        with pytest.raises(FunctionError) as raised:
            host.invoke({"sleep": 30})
        assert raised.value.body["errorType"] == "Sandbox.Timedout"
        assert time.monotonic() - started < 10  # killed, not waited for
        assert host.invoke({})["pid"] != before
    finally:
        host.stop()


def test_a_killed_idle_instance_is_replaced_on_the_next_invocation(host: FunctionHost) -> None:
    killed = host.invoke({})["pid"]
    assert host.pids() == {killed: False}
    os.kill(killed, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while killed in host.pids():  # SIGKILL takes effect a moment later
        assert time.monotonic() < deadline, "the instance did not die"
        time.sleep(0.01)
    assert host.invoke({})["pid"] != killed
    assert host.instances == 1


def test_an_instance_killed_mid_invocation_fails_it_and_gives_its_slot_back(tmp_path: Path) -> None:
    """SIGKILL during a call (the chaos soak's worker kills): that invocation is a function
    error at once, and the function keeps serving up to its concurrency with new instances.
    (A long timeout: the new instance's cold start on a loaded machine must not time out.)"""
    host = make_host(tmp_path, timeout=60)
    try:
        _kill_both_and_serve_again(host)
    finally:
        host.stop()


def _kill_both_and_serve_again(host: FunctionHost) -> None:
    failures: list[FunctionError] = []

    def call() -> None:
        try:
            host.invoke({"sleep": 30})
        except FunctionError as error:
            failures.append(error)

    callers = [threading.Thread(target=call) for _ in range(2)]  # the host's whole concurrency
    for caller in callers:
        caller.start()
    deadline = time.monotonic() + 30
    while len(busy := [pid for pid, working in host.pids().items() if working]) < 2:
        assert time.monotonic() < deadline, "the invocations did not start"
        time.sleep(0.05)
    started = time.monotonic()
    for pid in busy:
        os.kill(pid, signal.SIGKILL)
    for caller in callers:
        caller.join(timeout=10)
    assert time.monotonic() - started < 10  # not left to the timeout
    assert [error.body["errorType"] for error in failures] == ["Runtime.ExitError"] * 2
    assert host.invoke({})["pid"] not in busy
    assert host.instances == 1


def test_an_import_error_is_an_init_error(tmp_path: Path) -> None:
    host = make_host(tmp_path, code="import does_not_exist\n")
    try:
        with pytest.raises(FunctionError) as raised:
            host.invoke({})
        assert raised.value.body["errorType"] == "Runtime.InitError"
        assert "does_not_exist" in raised.value.body["errorMessage"]
    finally:
        host.stop()


def test_an_instance_outlives_the_short_lived_thread_that_started_it(host: FunctionHost) -> None:
    starter = threading.Thread(target=host.warm)
    starter.start()
    starter.join()
    time.sleep(0.5)  # a child tied to its starting thread would be gone by now
    first = host.invoke({})
    assert host.instances == 1
    assert host.invoke({})["pid"] == first["pid"]


def test_an_instance_exits_when_the_local_cloud_goes_away(tmp_path: Path) -> None:
    """Its stdin closes with its parent, so no instance outlives the local cloud."""
    from infra.local.functions import RuntimeProcess

    instance = RuntimeProcess(make_host(tmp_path).spec, {"PATH": "/usr/bin:/bin"}, lambda *_: None)
    process = instance.process
    assert process.stdin is not None
    process.stdin.close()
    assert process.wait(timeout=10) == 0
