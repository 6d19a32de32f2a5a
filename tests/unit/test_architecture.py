"""Dependencies point one way: handlers → services → ports → adapters. Pure logic never
imports boto3, and services never import an adapter (the composition root wires them)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import scheduler_core

PACKAGE = Path(scheduler_core.__file__).parent
PURE = [
    "model", "schedule", "keys", "run_state", "retry", "misfire", "overlap",
    "messages", "clock", "cursors", "errors", "tenancy", "target_access",
]  # fmt: skip
SERVICES = ["jobs", "job_control", "dispatch", "execution", "lifecycle", "redrive"]
ADAPTERS = {"adapters", "queues", "targets", "idempotency", "aws", "composition"}


@pytest.mark.parametrize("module", PURE)
def test_pure_modules_load_without_boto(module: str) -> None:
    check = (
        f"import sys, scheduler_core.{module}; "
        "loaded = [m for m in ('boto3', 'botocore') if m in sys.modules]; "
        "assert not loaded, loaded"
    )
    result = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr


def imported_siblings(module: str) -> set[str]:
    tree = ast.parse((PACKAGE / f"{module}.py").read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module.startswith("scheduler_core."):
                names.add(node.module.split(".")[1])
            elif node.module == "scheduler_core":
                names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.Import):
            names |= {
                alias.name.split(".")[1] for alias in node.names if alias.name.startswith("scheduler_core.")
            }
    return names


@pytest.mark.parametrize("module", SERVICES)
def test_services_depend_on_ports_not_adapters(module: str) -> None:
    assert imported_siblings(module) & ADAPTERS == set()
