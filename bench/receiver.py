"""A webhook receiver on loopback that answers 200 (or, with a failure rate, 500 to that
share of calls at random), after a delay if asked (a slow target), and records when each
delivery arrived and what it was answered.

`Receiver` runs in the calling process (enough for counting requests). `ReceiverProcess`
runs the same server in a process of its own, so arrival times are taken on a clock and
a GIL that the benchmark's other threads cannot delay; it reports one JSON line per
delivery (`python -m bench.receiver`).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import dataclasses
import json
import random
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any

READY = "listening on port "


@dataclass(frozen=True)
class Arrival:
    run_id: str
    scheduled_for: str  # the X-Scheduler-Scheduled-For header, ISO-8601 with ms
    attempt: str
    arrived_ms: float  # epoch milliseconds, taken as soon as the request's headers are read
    status: int = 200  # what the receiver answered
    idempotency_key: str = ""  # the Idempotency-Key header
    job_id: str = ""  # the X-Scheduler-Job-Id header


def arrivals_by_run(arrivals: Iterable[Arrival]) -> defaultdict[str, list[Arrival]]:
    """Each run's arrivals, first arrived first."""
    by_run: defaultdict[str, list[Arrival]] = defaultdict(list)
    for arrival in sorted(arrivals, key=lambda a: a.arrived_ms):
        by_run[arrival.run_id].append(arrival)
    return by_run


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # Deliveries come in bursts; with the default backlog of 5 a dropped SYN costs the
    # sender a 1 s retransmit, which would show up as lateness that is not the scheduler's.
    request_queue_size = 128


class Receiver:
    """Answers every request with 200, or a `fail_rate` share of them at random with 500,
    `delay_seconds` after it arrived (each request on a thread of its own, so slow answers
    do not delay the next arrivals), and hands each arrival to `record`."""

    def __init__(
        self,
        record: Callable[[Arrival], None],
        fail_rate: float = 0.0,
        seed: int | None = None,
        delay_seconds: float = 0.0,
    ) -> None:
        draw = random.Random(seed)
        lock = threading.Lock()

        def answer() -> int:
            if not fail_rate:
                return 200
            with lock:
                return 500 if draw.random() < fail_rate else 200

        class Handler(BaseHTTPRequestHandler):
            def _handle(self) -> None:
                arrived_ms = time.time() * 1000
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                status = answer()
                if delay_seconds > 0:
                    time.sleep(max(0.0, arrived_ms / 1000 + delay_seconds - time.time()))
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()
                record(
                    Arrival(
                        run_id=self.headers.get("X-Scheduler-Run-Id", ""),
                        scheduled_for=self.headers.get("X-Scheduler-Scheduled-For", ""),
                        attempt=self.headers.get("X-Scheduler-Attempt", ""),
                        arrived_ms=arrived_ms,
                        status=status,
                        idempotency_key=self.headers.get("Idempotency-Key", ""),
                        job_id=self.headers.get("X-Scheduler-Job-Id", ""),
                    )
                )

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle  # noqa: N815

            def log_message(self, format: str, *args: Any) -> None:
                return

        self._server = _Server(("127.0.0.1", 0), Handler)
        self.port: int = self._server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/hook"

    def serve_forever(self) -> None:
        self._server.serve_forever()

    def __enter__(self) -> Receiver:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._server.shutdown()
        self._server.server_close()


def _die_with_parent() -> None:
    """Linux: the receiver gets SIGTERM when the benchmark dies, even by SIGKILL."""
    with contextlib.suppress(OSError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class ReceiverProcess:
    """`Receiver` in a child process; `arrivals()` is what it has reported so far."""

    def __init__(
        self,
        start_timeout: float = 30,
        fail_rate: float = 0.0,
        seed: int | None = None,
        delay_seconds: float = 0.0,
    ) -> None:
        options = ["--fail-rate", str(fail_rate), "--delay-seconds", str(delay_seconds)]
        options += ["--seed", str(seed)] if seed is not None else []
        self._process = subprocess.Popen(
            [sys.executable, "-m", "bench.receiver", *options],
            stdout=subprocess.PIPE,
            text=True,
            cwd=Path(__file__).resolve().parent.parent,
            preexec_fn=_die_with_parent,
        )
        self._arrivals: list[Arrival] = []
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self.url = ""
        threading.Thread(target=self._read, daemon=True).start()
        if not self._ready.wait(start_timeout):
            self.stop()
            raise RuntimeError("the webhook receiver did not start")

    def _read(self) -> None:
        assert self._process.stdout is not None
        for line in self._process.stdout:
            if line.startswith(READY):
                self.url = f"http://127.0.0.1:{int(line[len(READY) :])}/hook"
                self._ready.set()
                continue
            with self._lock:
                self._arrivals.append(Arrival(**json.loads(line)))

    def arrivals(self) -> list[Arrival]:
        with self._lock:
            return list(self._arrivals)

    def stop(self) -> None:
        if self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(timeout=5)

    def __enter__(self) -> ReceiverProcess:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.receiver", description=__doc__)
    parser.add_argument("--fail-rate", type=float, default=0.0, help="share of calls answered 500 (0)")
    parser.add_argument("--seed", type=int, default=None, help="seed of the failure draws")
    parser.add_argument(
        "--delay-seconds", type=float, default=0.0, help="answer each call this long after it arrived (0)"
    )
    args = parser.parse_args(argv)
    lock = threading.Lock()

    def report(arrival: Arrival) -> None:
        with lock:
            sys.stdout.write(json.dumps(dataclasses.asdict(arrival)) + "\n")
            sys.stdout.flush()

    receiver = Receiver(report, args.fail_rate, args.seed, args.delay_seconds)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print(f"{READY}{receiver.port}", flush=True)
    receiver.serve_forever()


if __name__ == "__main__":
    main()
