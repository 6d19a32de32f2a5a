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
    "vocabulary", "strict", "wallclock", "schedule", "target_spec", "policies", "api_shapes",
    "entities", "keys", "run_state", "retry", "misfire", "overlap", "messages", "clock",
    "cursors", "errors", "tenancy", "target_access", "api", "resume", "job_firings", "outcomes",
]  # fmt: skip
SERVICES = ["jobs", "job_control", "dispatch", "execution", "admission", "lifecycle", "redrive"]
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


def import_graph() -> dict[str, set[str]]:
    """Every module of the package and the modules of the package it imports: anywhere in
    it, under `TYPE_CHECKING` and inside functions too."""
    modules = {
        ".".join(("scheduler_core", *path.relative_to(PACKAGE).with_suffix("").parts)).removesuffix(
            ".__init__"
        ): path
        for path in PACKAGE.rglob("*.py")
    }
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        imported: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "scheduler_core":
                imported |= {f"scheduler_core.{alias.name}" for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                imported.add(node.module)
            elif isinstance(node, ast.Import):
                imported |= {alias.name for alias in node.names}
        graph[name] = imported & set(modules)
    return graph


def test_no_module_imports_itself_back_even_for_type_checking() -> None:
    graph = import_graph()
    assert len(graph) > 30  # the package was found
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> None:
        if module in path:
            cycle = [*path[path.index(module) :], module]
            raise AssertionError("import cycle: " + " → ".join(cycle))
        if module in done:
            return
        for imported in sorted(graph[module]):
            visit(imported, [*path, module])
        done.add(module)

    for module in sorted(graph):
        visit(module, [])


def test_the_vocabulary_imports_nothing_of_ours() -> None:
    assert import_graph()["scheduler_core.vocabulary"] == set()
