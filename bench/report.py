"""What the figures were measured on, and how they are printed."""

from __future__ import annotations

import math
import os
import platform
import sys
from collections.abc import Sequence
from importlib.metadata import version
from typing import Any


def machine() -> dict[str, Any]:
    """The machine and the versions the figures depend on."""
    memory_kb = 0
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemTotal:"):
                    memory_kb = int(line.split()[1])
    except OSError:
        pass
    return {
        "cpus": os.cpu_count(),
        "memory_gib": round(memory_kb / 1024 / 1024, 1),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "moto": version("moto"),
        "boto3": version("boto3"),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
    }


def describe_machine(info: dict[str, Any]) -> str:
    load = ", ".join(str(x) for x in info["load_average_at_start"])
    return (
        f"machine: {info['cpus']} CPUs, {info['memory_gib']} GiB RAM, {info['platform']}; "
        f"Python {info['python']}, moto {info['moto']}, boto3 {info['boto3']}; load average at start {load}"
    )


def percentile(values: Sequence[float], fraction: float) -> float | None:
    """Nearest-rank percentile (`fraction` in 0..1); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


def distribution(
    values: Sequence[float], percentiles: Sequence[int] = (50, 95, 99)
) -> dict[str, float | None]:
    """How many values, the given percentiles (as `p50`, ...), the largest and the smallest."""
    return {
        "count": len(values),
        **{f"p{n}": percentile(values, n / 100) for n in percentiles},
        "max": max(values) if values else None,
        "min": min(values) if values else None,
    }


def format_ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f} ms"


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A plain text table: the first column left-aligned, the others right-aligned."""
    cells = [[str(h) for h in headers], *[[_cell(value) for value in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]

    def line(row: list[str]) -> str:
        return "  ".join(
            cell.ljust(width) if i == 0 else cell.rjust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=True))
        ).rstrip()

    rule = "  ".join("-" * width for width in widths)
    return "\n".join([line(cells[0]), rule, *(line(row) for row in cells[1:])])


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.2f}" if abs(value) < 100 else f"{value:.0f}"
    return str(value)
