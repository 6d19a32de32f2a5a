"""`python -m infra.local` (what `make run` runs): starts, says where everything is, and
Ctrl-C stops it with every child process."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from infra.config import REPO_ROOT


def children_of(pid: int) -> set[int]:
    """Every descendant process of `pid`, read from /proc."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        parents[int(stat.parent.name)] = int(fields[1])
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def test_make_run_serves_the_api_and_ctrl_c_leaves_no_process_behind() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "infra.local", "--port", "0"],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=os.environ | {"PYTHONUNBUFFERED": "1"},
    )
    assert process.stdout is not None
    screen: list[str] = []
    deadline = time.monotonic() + 120
    try:
        for line in process.stdout:
            screen.append(line)
            if "Ctrl-C stops everything" in line or time.monotonic() > deadline:
                break
        text = "".join(screen)
        api = re.search(r"API\s+(http://127\.0\.0\.1:\d+)/v1", text)
        assert api, text
        assert re.search(r"moto\s+http://127\.0\.0\.1:\d+", text), text
        assert "curl" in text
        with urllib.request.urlopen(f"{api.group(1)}/v1/jobs", timeout=30) as reply:
            assert json.load(reply) == {"items": [], "next_cursor": None}

        children = children_of(process.pid)
        assert len(children) >= 4  # moto and one warm instance per function at least
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0
        deadline = time.monotonic() + 10
        while any(alive(child) for child in children) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not [child for child in children if alive(child)]
    finally:
        if process.poll() is None:
            process.kill()
