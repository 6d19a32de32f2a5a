"""The command line's fast tests: Typer's CliRunner in process, with no API configured
unless a test names one (the loopback stand-in of tests/cli/loopback.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from typer.testing import CliRunner

from tests.cli.loopback import LoopbackApi, loopback_api

# Whatever the shell running the tests has set must not point the command line anywhere.
UNSET = {
    name: None
    for name in (
        "SCHEDULER_ENDPOINT",
        "SCHEDULER_API_URL",
        "SCHEDULER_STACK",
        "SCHEDULER_OUTPUT",
        "SCHEDULER_AWS_ENDPOINT_URL",
        "AWS_ENDPOINT_URL",
    )
}


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner(env=UNSET)


@pytest.fixture
def api() -> Iterator[LoopbackApi]:
    with loopback_api() as server:
        yield server
