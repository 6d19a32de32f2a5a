"""The worker-CPU probe's own rules: when it can cap a process's CPU, and the cap it sets."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bench import worker_cpu


def test_without_a_cgroup_cpu_controller_the_probe_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(worker_cpu, "CPU_CGROUPS", tmp_path / "absent")
    assert worker_cpu.unavailable() == f"no cgroup v1 cpu controller at {tmp_path / 'absent'}"
    assert worker_cpu.measure_worker_cpu(stack=None) == {  # type: ignore[arg-type]
        "skipped": f"no cgroup v1 cpu controller at {tmp_path / 'absent'}"
    }


@pytest.mark.skipif(worker_cpu.unavailable() is not None, reason="needs root and cgroup v1's cpu controller")
def test_a_process_in_a_cpu_share_gets_no_more_than_that_share_and_the_group_goes_after() -> None:
    busy = "import time\nend = time.monotonic() + 1.5\nwhile time.monotonic() < end: pass\n"
    with worker_cpu.cpu_share(0.25) as group:
        assert (group / "cpu.cfs_quota_us").read_text().strip() == "25000"  # of each 100 ms
        child = subprocess.Popen(
            [sys.executable, "-c", f"{busy}import os; print(os.times().user)"],
            stdout=subprocess.PIPE,
            text=True,
        )
        (group / "cgroup.procs").write_text(str(child.pid))
        out, _ = child.communicate(timeout=30)
    # Busy for 1.5 s of wall time, it got at most a quarter of a CPU (and some before it was
    # moved into the group): a cap holds from above whatever else the machine does.
    assert float(out) < 1.0
    assert not group.exists()
