"""Runs the template's Lambda functions: a pool of warm runtime processes per function,
spawned on demand up to the function's concurrency."""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

LogSink = Callable[[str, str], None]  # (function name, log line)


@dataclass(frozen=True)
class FunctionSpec:
    """What the local cloud needs to run one function, from the deployed stack."""

    name: str
    arn: str
    handler: str
    code_dir: Path
    layer_dirs: tuple[Path, ...]
    environment: dict[str, str]
    timeout_seconds: int
    memory_mb: int
    concurrency: int
    skipped_layers: tuple[Path, ...] = field(default=())


class FunctionError(Exception):
    """The function raised, timed out or crashed; `body` is Lambda's error payload."""

    def __init__(self, body: dict[str, Any]) -> None:
        super().__init__(f"{body.get('errorType')}: {body.get('errorMessage')}")
        self.body = body


def die_with_parent() -> None:
    """Linux: the child gets SIGTERM when its parent dies, even by SIGKILL.

    Beware: the "parent" is the *thread* that started the child. Only use it for children
    started by a thread that lives as long as the local cloud (its starting thread)."""
    with contextlib.suppress(OSError):  # not Linux: Ctrl-C still stops children through stop()
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class RuntimeProcess:
    """One warm instance: a `infra.local.runtime` process serving invocations in turn."""

    def __init__(self, spec: FunctionSpec, base_env: dict[str, str], log: LogSink) -> None:
        self._spec = spec
        env = dict(base_env) | spec.environment
        env |= {
            "PYTHONPATH": os.pathsep.join(str(p) for p in (spec.code_dir, *spec.layer_dirs)),
            "PYTHONUNBUFFERED": "1",
            "_HANDLER": spec.handler,
            "LAMBDA_TASK_ROOT": str(spec.code_dir),
            "AWS_LAMBDA_FUNCTION_NAME": spec.name,
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(spec.memory_mb),
            "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
            "LOCAL_FUNCTION_ARN": spec.arn,
        }
        self._process = subprocess.Popen(
            [sys.executable, "-m", "infra.local.runtime"],
            cwd=spec.code_dir,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            # No die_with_parent here: instances are started by short-lived threads. An
            # instance serves its stdin, so it exits at EOF when the local cloud is gone.
        )
        self._replies: queue.Queue[dict[str, Any] | None] = queue.Queue()
        # Set when its stdout ends: the process is gone, though the kernel may close its pipes
        # a moment before `poll()` sees it exit (a killed instance would be handed out again).
        self._exited = threading.Event()
        assert self._process.stdout is not None
        assert self._process.stderr is not None
        self._pump(self._process.stdout, lambda line: self._replies.put(json.loads(line)), end=self._ended)
        self._pump(self._process.stderr, lambda line: log(spec.name, line.rstrip("\n")))
        ready = self._replies.get(timeout=60) or {"errorMessage": "the runtime process exited while starting"}
        if not ready.get("ready"):
            self.stop()
            cause = f"{ready.get('errorType', 'Error')}: {ready.get('errorMessage')}"
            raise FunctionError({"errorType": "Runtime.InitError", "errorMessage": cause})

    @staticmethod
    def _pump(
        stream: IO[str], handle: Callable[[str], Any], end: Callable[[None], Any] | None = None
    ) -> None:
        def run() -> None:
            for line in stream:
                handle(line)
            if end is not None:
                end(None)

        threading.Thread(target=run, daemon=True).start()

    def _ended(self, _: None) -> None:
        self._exited.set()
        self._replies.put(None)

    @property
    def alive(self) -> bool:
        return not self._exited.is_set() and self._process.poll() is None

    @property
    def process(self) -> subprocess.Popen[str]:
        """The runtime's own OS process."""
        return self._process

    @property
    def pid(self) -> int:
        return self._process.pid

    def invoke(self, event: Any) -> Any:
        deadline = time.time() + self._spec.timeout_seconds
        request = {"event": event, "request_id": str(uuid.uuid4()), "deadline_ms": int(deadline * 1000)}
        assert self._process.stdin is not None
        try:
            self._process.stdin.write(json.dumps(request) + "\n")
            self._process.stdin.flush()
            reply = self._replies.get(timeout=self._spec.timeout_seconds + 1)
        except (BrokenPipeError, queue.Empty):
            self.stop()
            raise FunctionError(
                {
                    "errorType": "Sandbox.Timedout",
                    "errorMessage": f"timed out after {self._spec.timeout_seconds}s",
                }
            ) from None
        if reply is None:
            raise FunctionError(
                {"errorType": "Runtime.ExitError", "errorMessage": "the runtime process exited"}
            )
        if not reply.get("ok"):
            raise FunctionError(reply)
        return reply.get("result")

    def stop(self) -> None:
        if self.alive:
            self._process.terminate()
            try:
                self._process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._process.kill()


class FunctionHost:
    """All instances of one function: reuses a warm one, starts another while below the
    function's concurrency, otherwise waits for one to be free (as throttled Lambda would
    make a caller retry)."""

    def __init__(self, spec: FunctionSpec, base_env: dict[str, str], log: LogSink) -> None:
        self.spec = spec
        self._base_env = base_env
        self._log = log
        self._idle: list[RuntimeProcess] = []
        self._all: list[RuntimeProcess] = []
        self._slots_taken = 0  # instances running or starting
        self._free = threading.Condition()
        self._stopped = False

    def warm(self) -> None:
        """Start one instance now, so the first invocation does not pay the cold start."""
        instance = self._acquire()
        self._release(instance)

    def _acquire(self) -> RuntimeProcess:
        with self._free:
            while True:
                if self._stopped:
                    raise FunctionError(
                        {"errorType": "Stopped", "errorMessage": "the local cloud is stopping"}
                    )
                while self._idle:
                    instance = self._idle.pop()
                    if instance.alive:
                        return instance
                    self._forget(instance)
                if self._slots_taken < self.spec.concurrency:
                    self._slots_taken += 1  # reserved before starting, so no two callers overshoot
                    break
                self._free.wait()
        try:
            instance = RuntimeProcess(self.spec, self._base_env, self._log)
        except BaseException:
            with self._free:
                self._slots_taken -= 1
                self._free.notify()
            raise
        with self._free:
            if not self._stopped:
                self._all.append(instance)
                return instance
            self._slots_taken -= 1
        instance.stop()  # it finished starting after stop(): stop() never saw it
        raise FunctionError({"errorType": "Stopped", "errorMessage": "the local cloud stopped"})

    def _forget(self, instance: RuntimeProcess) -> None:
        """Caller holds the lock: a dead instance gives its slot back."""
        if instance in self._all:
            self._all.remove(instance)
            self._slots_taken -= 1

    def _release(self, instance: RuntimeProcess) -> None:
        with self._free:
            if instance.alive and not self._stopped:
                self._idle.append(instance)
            else:
                self._forget(instance)
            self._free.notify()

    def invoke(self, event: Any) -> Any:
        """A synchronous (RequestResponse) invocation; FunctionError if the function failed."""
        instance = self._acquire()
        try:
            return instance.invoke(event)
        finally:
            self._release(instance)

    @property
    def instances(self) -> int:
        with self._free:
            return len(self._all)

    def pids(self) -> dict[int, bool]:
        """Process id → busy (serving an invocation) of every live instance."""
        with self._free:
            idle = {id(instance) for instance in self._idle}
            return {instance.pid: id(instance) not in idle for instance in self._all if instance.alive}

    def stop(self) -> None:
        with self._free:
            self._stopped = True
            instances = list(self._all)
            self._free.notify_all()
        for instance in instances:
            instance.stop()
