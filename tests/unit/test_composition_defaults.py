"""Each Lambda process builds its services once: the `default_*` factories are cached (a
service built per request would lose its caches — opened secrets, signing keys, assumed
roles — and open an audit log stream per call)."""

from __future__ import annotations

import inspect

from scheduler_core import composition


def test_every_default_factory_is_built_once_per_process() -> None:
    defaults = [
        (name, member)
        for name, member in inspect.getmembers(composition)
        if name.startswith("default_") and callable(member)
    ]
    assert {name for name, _ in defaults} >= {
        "default_clients",
        "default_job_service",
        "default_dispatcher",
        "default_run_executor",
    }
    for name, factory in defaults:
        assert hasattr(factory, "cache_info"), f"{name} is not cached"
    assert not hasattr(composition.build_tenant_migration, "cache_info")
