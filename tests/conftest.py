"""Process-wide test settings: fake AWS credentials (nothing here may reach AWS) and
Powertools configured for tests."""

from __future__ import annotations

import os

import pytest
from hypothesis import settings

# No per-example deadline: on a shared 2-core machine one scheduler stall of a few hundred
# ms fails an example of microseconds as "unreliable timings", which says nothing about
# the code. Speed is for the benchmarks (`make bench`), never for a test.
settings.register_profile("scheduler", deadline=None)
settings.load_profile("scheduler")

_TEST_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SECURITY_TOKEN": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "POWERTOOLS_SERVICE_NAME": "serverless-scheduler-tests",
    "POWERTOOLS_METRICS_NAMESPACE": "ServerlessSchedulerTests",
    "POWERTOOLS_TRACE_DISABLED": "true",
    "POWERTOOLS_LOG_LEVEL": "WARNING",
}
for _name, _value in _TEST_ENV.items():
    os.environ[_name] = _value
os.environ.pop("AWS_ENDPOINT_URL", None)
os.environ.pop("AWS_PROFILE", None)


def _serialize_in_process_moto() -> None:
    """moto's in-process backends are not thread-safe: `transact_write_items` deep-copies a
    table for rollback while other threads write to it ("dictionary changed size during
    iteration"). Our worker runs a batch's records concurrently, as it should, so in tests
    moto's request handling (not our code) is serialized. Real DynamoDB has no such race;
    moto's server mode, used by the local cloud, answers it with a 500 botocore retries."""
    import threading

    from moto.core.botocore_stubber import BotocoreStubber

    lock = threading.RLock()
    handle = BotocoreStubber.process_request

    def process_request_serially(self: BotocoreStubber, request: object) -> object:
        with lock:
            return handle(self, request)  # type: ignore[arg-type]

    BotocoreStubber.process_request = process_request_serially  # type: ignore[assignment,method-assign]


_serialize_in_process_moto()


# Under pytest-xdist (`make test` runs `-n auto --dist loadgroup`), tests that share an
# expensive session- or package-scoped fixture run on one worker, so it is built once: the
# local cloud (e2e) and the CDK syntheses (infra). Everything else is spread over the workers.
_GROUPS = {"e2e": "local-cloud", "infra": "synth"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        parts = item.nodeid.split("/")
        group = _GROUPS.get(parts[1]) if len(parts) > 2 and parts[0] == "tests" else None
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
