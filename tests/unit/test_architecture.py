"""Dependencies point one way: handlers → services → ports → adapters. Pure logic never
imports boto3, and services never import an adapter (the composition root wires them)."""

from __future__ import annotations

import ast
import functools
import subprocess
import sys
from pathlib import Path

import pytest

import scheduler_core

PACKAGE = Path(scheduler_core.__file__).parent


def modules_in(folder: str) -> list[str]:
    return sorted(path.stem for path in (PACKAGE / folder).glob("*.py") if path.stem != "__init__")


DOMAIN = modules_in("domain")
SERVICES = modules_in("services")
# Pure too, beside the domain: the API's HTTP plumbing and the ports' interfaces.
PURE = [f"domain.{module}" for module in DOMAIN] + ["api", "ports", "poll_ports"]


def test_the_layers_are_folders() -> None:
    assert {"entities", "schedule", "vocabulary"} <= set(DOMAIN)
    assert {"dispatch", "execution", "jobs"} <= set(SERVICES)
    assert (PACKAGE / "adapters" / "dynamodb").is_dir()


@pytest.mark.parametrize("module", PURE)
def test_pure_modules_load_without_boto(module: str) -> None:
    check = (
        f"import sys, scheduler_core.{module}; "
        "loaded = [m for m in ('boto3', 'botocore') if m in sys.modules]; "
        "assert not loaded, loaded"
    )
    result = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr


def layers_imported(module: str) -> set[str]:
    """The parts of the package `module` imports (`domain`, `services`, `ports`, `adapters`,
    `composition`, ...), the module's own included."""
    return {imported.split(".")[1] for imported in import_graph()[module]}


@pytest.mark.parametrize("module", DOMAIN)
def test_the_domain_imports_only_the_domain(module: str) -> None:
    assert layers_imported(f"scheduler_core.domain.{module}") <= {"domain"}


@pytest.mark.parametrize("module", SERVICES)
def test_services_depend_on_ports_not_adapters(module: str) -> None:
    assert (
        layers_imported(f"scheduler_core.services.{module}") & {"adapters", "composition", "settings"}
        == set()
    )


def test_ports_name_domain_things_only() -> None:
    assert layers_imported("scheduler_core.poll_ports") <= {"domain"}
    assert layers_imported("scheduler_core.ports") <= {"domain", "poll_ports"}


def test_adapters_never_call_a_service() -> None:
    adapters = [name for name in import_graph() if name.startswith("scheduler_core.adapters.")]
    assert len(adapters) > 10
    assert {name: "services" for name in adapters if "services" in layers_imported(name)} == {}


@functools.cache
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
            if isinstance(node, ast.ImportFrom) and node.module:
                # `from scheduler_core.domain import keys` imports the module `keys` too.
                imported |= {node.module, *(f"{node.module}.{alias.name}" for alias in node.names)}
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
    assert import_graph()["scheduler_core.domain.vocabulary"] == set()
