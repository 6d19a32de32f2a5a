"""The local cloud's child processes as Linux shows them in /proc: moto's server and the
function instances (`infra.local.runtime`)."""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass
from pathlib import Path

from infra.local.cloud import LocalCloud
from tests.e2e.polling import wait_for

PROC = Path("/proc")
LOCAL_CLOUD_PROGRAMS = ("infra.local.runtime", "infra.local.moto_process")


@dataclass(frozen=True)
class ChildProcess:
    pid: int
    parent: int
    state: str  # R, S, Z, ...
    command: str
    endpoint_url: str  # AWS_ENDPOINT_URL in its environment ("" when unset or unreadable)

    @property
    def running(self) -> bool:
        return self.state != "Z"


def proc_available() -> bool:
    return (PROC / str(os.getpid()) / "stat").exists()


def _read(pid: int) -> ChildProcess | None:
    try:
        stat = (PROC / str(pid) / "stat").read_text()
        command = (PROC / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
        environ = (PROC / str(pid) / "environ").read_bytes().split(b"\0")
    except OSError:  # gone meanwhile, or not ours to read
        return None
    # "pid (comm) state ppid ...": comm may hold spaces and parentheses.
    state, parent = stat.rpartition(")")[2].split()[:2]
    endpoint = next(
        (v.decode()[len("AWS_ENDPOINT_URL=") :] for v in environ if v.startswith(b"AWS_ENDPOINT_URL=")), ""
    )
    return ChildProcess(pid, int(parent), state, command, endpoint)


def descendants(root: int | None = None) -> list[ChildProcess]:
    """Every live process below `root` (default: this one), children first."""
    everything = [p for pid in PROC.iterdir() if pid.name.isdigit() if (p := _read(int(pid.name)))]
    below: list[ChildProcess] = []
    parents = {os.getpid() if root is None else root}
    while True:
        found = [p for p in everything if p.parent in parents and p not in below]
        if not found:
            return below
        below += found
        parents = {p.pid for p in found}


def local_cloud_processes(moto_url: str | None = None) -> list[ChildProcess]:
    """This process's running descendants that belong to a local cloud — to the one whose
    moto is at `moto_url` if given (its moto server, and the function instances pointed
    at it), else to any."""
    found = []
    for process in descendants():
        if not process.running or not any(p in process.command for p in LOCAL_CLOUD_PROGRAMS):
            continue
        if moto_url is not None:
            port = moto_url.rsplit(":", 1)[-1]
            is_its_moto = "infra.local.moto_process" in process.command and f"-p {port}" in process.command
            if not (is_its_moto or process.endpoint_url == moto_url):
                continue
        found.append(process)
    return found


def instances_starting(cloud: LocalCloud) -> int:
    """Function instances of `cloud` whose process runs but that no function host counts
    yet: they are still starting."""
    running = [p for p in local_cloud_processes(cloud.moto_url) if "infra.local.runtime" in p.command]
    return len(running) - sum(host.instances for host in cloud.hosts.values())


def assert_no_local_cloud_processes_left(moto_url: str | None = None) -> None:
    """After `stop()`: no moto server or function instance of ours still runs. Any found
    are killed (they are this process's children) and reported."""
    if not proc_available():
        return
    try:
        wait_for(lambda: not local_cloud_processes(moto_url), 5, "the local cloud's processes to end")
    except AssertionError:
        left = local_cloud_processes(moto_url)
        for process in left:
            os.kill(process.pid, signal.SIGKILL)
        raise AssertionError(f"still running after LocalCloud.stop(): {left}") from None
