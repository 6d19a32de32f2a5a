"""An outside API fuzzer (schemathesis) against the local cloud, from the OpenAPI document the
API serves: no answer is a 5xx, and every answer the document describes (each route's success
and its errors) matches the schema it gives.

Its phases: the document's examples (they make jobs and workflows), coverage (the edges of
every parameter and body, methods no route takes, bodies that are not UTF-8), fuzzing and
stateful sequences (create, then read, change, trigger, cancel what was made). Generation is
derandomized, so a finding shows up on every run; 10 examples per operation bound it to about
two minutes here. The fuzzer acts as its own tenant, whose jobs and workflows are cancelled
after it; their HTTP targets (example.com) do not resolve offline, so their runs fail fast.

To run it alone and read every request it made: `make run`, then the command in `fuzz_command`
with the local cloud's URL."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from infra.local.api_gateway import CALLER_HEADER
from infra.local.cloud import LocalCloud
from tests.e2e.api_client import ApiClient

pytestmark = pytest.mark.e2e

FUZZ_TENANT = "api-fuzzer"
CHECKS = ("not_a_server_error", "response_schema_conformance")
MAX_EXAMPLES = 10  # per operation, for fuzzing and stateful; coverage has its own fixed cases
RUN_TIMEOUT_SECONDS = 600  # about 120 s here; past this the fuzzer is stuck, not slow
# Where schemathesis's own output ends and its findings begin.
FINDINGS = ("=== ERRORS ===", "=== FAILURES ===")


def fuzz_command(api_url: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "schemathesis.cli",
        "run",
        f"{api_url}/v1/openapi.json",
        "--url",
        api_url,
        "--checks",
        ",".join(CHECKS),
        "--max-examples",
        str(MAX_EXAMPLES),
        # Derandomized, remembering nothing between runs: each run is the same run.
        "--generation-deterministic",
        # One worker: the local cloud serves about as fast, and Hypothesis under several
        # worker threads has failed runs with its own errors.
        "--workers",
        "1",
        "--header",
        f"{CALLER_HEADER}: {FUZZ_TENANT}",
        "--request-timeout",
        "30",
        "--no-color",
    ]


@pytest.fixture
def fuzz_tenant(api: ApiClient) -> Iterator[str]:
    """The fuzzer's tenant; what it made is cancelled afterwards, so none of it fires while
    the rest of the suite runs."""
    yield FUZZ_TENANT
    for collection, id_field in (("jobs", "job_id"), ("workflows", "workflow_id")):
        for status in ("SCHEDULED", "PAUSED"):
            while True:
                listed = api.call("GET", f"/v1/{collection}?status={status}&limit=100", caller=FUZZ_TENANT)
                assert listed.status == 200, listed.body
                if not listed.body["items"]:
                    break
                for item in listed.body["items"]:
                    path = f"/v1/{collection}/{item[id_field]}"
                    cancelled = api.call("DELETE", path, caller=FUZZ_TENANT)
                    assert cancelled.status == 200, (path, cancelled.body)


def findings(output: str) -> str:
    """What schemathesis found, from its report: its errors and failures, each with a curl
    command that reproduces it; else its whole output."""
    starts = [output.find(marker) for marker in FINDINGS if marker in output]
    return output[min(starts) :] if starts else output


def test_the_api_fuzzer_finds_no_server_error_and_no_answer_off_the_openapi_document(
    local_cloud: LocalCloud, fuzz_tenant: str, tmp_path: Path
) -> None:
    # In a directory of its own: schemathesis reads a config file from where it runs.
    fuzzed = subprocess.run(
        fuzz_command(local_cloud.api_url),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_SECONDS,
        check=False,
    )

    assert fuzzed.returncode == 0, f"schemathesis found:\n{findings(fuzzed.stdout)}\n{fuzzed.stderr}"
