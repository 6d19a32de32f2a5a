"""The benchmarks' creates against the local cloud's API: a chaos soak's create that comes
too late for its planned time is made due a lead from then (`bench.chaos.LATE_CREATE_LEAD_MS`),
where without one the API refuses a time more than 60 s past; the soak makes its share of
jobs in batches, the others one by one."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from bench.chaos import create_jobs
from bench.lateness import create_all
from infra.local.cloud import LocalCloud
from scheduler_core.domain.clock import to_ms
from tests.e2e.api_client import ApiClient

pytestmark = pytest.mark.e2e

UNREACHABLE = "http://127.0.0.1:9/never-called"  # the jobs are cancelled long before they fire
HOUR_MS = 3_600_000  # a lead no job of this test reaches: it is cancelled first


def now_ms() -> int:
    return to_ms(datetime.now(UTC))


def test_a_create_too_late_for_its_time_is_made_due_the_lead_from_then(
    local_cloud: LocalCloud, api: ApiClient
) -> None:
    asked_ms = now_ms()
    planned = [asked_ms - 90_000, asked_ms + 2 * HOUR_MS]
    created = create_all(local_cloud.api_url, UNREACHABLE, planned, name="late-create", min_lead_ms=HOUR_MS)
    try:
        assert [c.status for c in created] == [201, 201], [c.error for c in created]
        moved, kept = created
        assert asked_ms + HOUR_MS <= moved.at_ms <= now_ms() + HOUR_MS
        assert kept.at_ms == planned[1]
        for made in created:
            assert made.job_id is not None
            job = api.job(made.job_id)
            assert to_ms(datetime.fromisoformat(job["schedule"]["at"])) == made.at_ms
    finally:
        for made in created:
            if made.job_id is not None:
                api.cancel(made.job_id)


def test_without_a_lead_a_create_asks_for_its_planned_time_and_a_past_one_is_refused(
    local_cloud: LocalCloud,
) -> None:
    past_ms = now_ms() - 90_000
    [refused] = create_all(local_cloud.api_url, UNREACHABLE, [past_ms], name="late-create")
    assert refused.status == 422
    assert refused.job_id is None
    assert refused.at_ms == past_ms
    assert refused.error is not None
    assert "schedule.at" in refused.error


def test_the_soak_makes_its_batched_share_of_blocks_by_one_batch_each(
    local_cloud: LocalCloud, api: ApiClient
) -> None:
    planned = [now_ms() + 2 * HOUR_MS + index for index in range(6)]
    created = create_jobs(local_cloud.api_url, UNREACHABLE, planned, None, batched_share=0.5, block_size=3)
    try:
        assert [c.status for c in created] == [201] * 6, [c.error for c in created]
        assert [c.batched for c in created] == [False] * 3 + [True] * 3
        assert [c.index for c in created] == list(range(6))
        for made, at_ms in zip(created, planned, strict=True):
            assert made.job_id is not None
            assert to_ms(datetime.fromisoformat(api.job(made.job_id)["schedule"]["at"])) == at_ms
    finally:
        for made in created:
            if made.job_id is not None:
                api.cancel(made.job_id)
