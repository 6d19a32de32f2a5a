"""Item keys of the jobs table and the due index (DESIGN §2)."""

from __future__ import annotations

import itertools
import random
import uuid
from collections import Counter
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduler_core.domain import keys
from scheduler_core.domain.clock import to_ms

MAX_MS = 10**13 - 1  # the largest time run_sk's 13 digits hold (year 2286)
ms_values = st.integers(min_value=0, max_value=MAX_MS)


def ms(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0) -> int:
    return to_ms(datetime(year, month, day, hour, minute, second, tzinfo=UTC))


# --- job and run items --------------------------------------------------------------


def test_a_job_item_is_keyed_by_its_id() -> None:
    assert keys.job_pk("abc-123") == "JOB#abc-123"
    assert keys.JOB_SK == "JOB"


def test_a_shard_watermark_item_is_keyed_by_its_shard() -> None:
    assert keys.shard_pk(3) == "SHARD#3"
    assert keys.WATERMARK_SK == "WATERMARK"


def test_run_sort_key_zero_pads_the_time_to_13_digits() -> None:
    assert keys.run_sk(0) == "RUN#0000000000000"
    assert keys.run_sk(42) == "RUN#0000000000042"
    assert keys.run_sk(1_735_689_600_000) == "RUN#1735689600000"


@given(ms_values, ms_values)
def test_run_sort_keys_sort_lexically_in_time_order(a: int, b: int) -> None:
    assert (keys.run_sk(a) < keys.run_sk(b)) == (a < b)


def test_run_id_is_job_id_colon_milliseconds() -> None:
    assert keys.run_id("job-1", 1_735_689_600_000) == "job-1:1735689600000"


@given(job_id=st.text(min_size=1), scheduled_for_ms=ms_values)
def test_run_id_round_trips_through_parse_run_id(job_id: str, scheduled_for_ms: int) -> None:
    assert keys.parse_run_id(keys.run_id(job_id, scheduled_for_ms)) == (job_id, scheduled_for_ms)


def test_a_job_id_containing_colons_round_trips() -> None:
    run_id = keys.run_id("tenant:team:job", 1_000)

    assert run_id == "tenant:team:job:1000"
    assert keys.parse_run_id(run_id) == ("tenant:team:job", 1_000)


@pytest.mark.parametrize(
    "value",
    ["", "job", "job:", ":123", "job:abc", "job:-5", "job:+5", "job:1.5", "job:12 ", "job:1e3", "job:²"],
)
def test_parse_run_id_rejects_anything_that_is_not_a_run_id(value: str) -> None:
    with pytest.raises(ValueError):  # noqa: PT011 - any ValueError is the contract
        keys.parse_run_id(value)


def test_parse_run_id_rejects_non_ascii_digits() -> None:
    with pytest.raises(ValueError, match="not a run id"):
        keys.parse_run_id("job:١٢٣")


# --- shards -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("job_id", "shard_count", "shard"),
    [
        ("job-1", 4, 2),
        ("job-2", 4, 1),
        ("a", 4, 2),
        ("", 4, 0),
        ("job-1", 16, 10),
        ("00000000-0000-0000-0000-000000000000", 16, 4),
        ("a", 1000, 250),
    ],
)
def test_shard_for_is_stable_across_releases(job_id: str, shard_count: int, shard: int) -> None:
    # Fixed values: changing the hash would strand every job in the wrong index partition.
    assert keys.shard_for(job_id, shard_count) == shard


@given(job_id=st.text(), shard_count=st.integers(min_value=1, max_value=1000))
def test_shard_for_is_in_range_and_deterministic(job_id: str, shard_count: int) -> None:
    shard = keys.shard_for(job_id, shard_count)

    assert 0 <= shard < shard_count
    assert keys.shard_for(job_id, shard_count) == shard


def test_one_shard_holds_everything() -> None:
    assert {keys.shard_for(str(n), 1) for n in range(100)} == {0}


@pytest.mark.parametrize("shard_count", [4, 16])
def test_shard_for_spreads_uuid_job_ids_evenly(shard_count: int) -> None:
    rng = random.Random(20250101)  # seeded uuid4s: the test is reproducible
    job_ids = [str(uuid.UUID(int=rng.getrandbits(128), version=4)) for _ in range(10_000)]

    counts = Counter(keys.shard_for(job_id, shard_count) for job_id in job_ids)

    mean = len(job_ids) / shard_count
    assert sorted(counts) == list(range(shard_count))
    assert all(abs(count - mean) <= 0.15 * mean for count in counts.values()), counts


# --- the due index's minute buckets ---------------------------------------------------


def test_due_pk_is_the_utc_minute_and_the_shard() -> None:
    fire_at = ms(2025, 1, 1, 12, 34, 56) + 789

    assert keys.due_pk(fire_at, 3) == "202501011234#3"


def test_due_pk_zero_pads_the_minute_label() -> None:
    assert keys.due_pk(ms(2025, 2, 3, 4, 5), 0) == "202502030405#0"


def test_bucket_of_is_the_start_of_the_minute() -> None:
    start = ms(2025, 1, 1, 12, 34)

    assert keys.bucket_of(start) == start
    assert keys.bucket_of(start + 59_999) == start
    assert keys.bucket_of(start + 60_000) == start + 60_000


def test_bucket_end_is_the_last_millisecond_inside_the_bucket() -> None:
    start = ms(2025, 1, 1, 12, 34)

    assert keys.bucket_end(start) == ms(2025, 1, 1, 12, 34, 59) + 999
    assert keys.bucket_of(keys.bucket_end(start)) == start
    assert keys.bucket_of(keys.bucket_end(start) + 1) == start + 60_000


def test_buckets_between_is_inclusive_of_both_ends() -> None:
    first, last = ms(2025, 1, 1, 12, 58, 30), ms(2025, 1, 1, 13, 1, 10)

    buckets = keys.buckets_between(first, last)

    assert [keys.bucket_label(b) for b in buckets] == [
        "202501011258",
        "202501011259",
        "202501011300",
        "202501011301",
    ]


def test_buckets_between_two_times_in_one_minute_is_that_minute() -> None:
    start = ms(2025, 1, 1, 12, 0)

    assert keys.buckets_between(start + 1, start + 59_999) == [start]


def test_buckets_between_crosses_a_day_and_year_boundary() -> None:
    first, last = ms(2024, 12, 31, 23, 59, 59) + 999, ms(2025, 1, 1, 0, 0)

    buckets = keys.buckets_between(first, last)

    assert [keys.bucket_label(b) for b in buckets] == ["202412312359", "202501010000"]


def test_buckets_between_a_later_and_an_earlier_time_is_empty() -> None:
    assert keys.buckets_between(ms(2025, 1, 1, 12, 5), ms(2025, 1, 1, 12, 0)) == []


@given(first=ms_values, span=st.integers(min_value=0, max_value=6 * 60 * 60_000))
def test_buckets_between_steps_one_minute_from_first_bucket_to_last(first: int, span: int) -> None:
    last = first + span

    buckets = keys.buckets_between(first, last)

    assert buckets[0] == keys.bucket_of(first)
    assert buckets[-1] == keys.bucket_of(last)
    assert all(b - a == 60_000 for a, b in itertools.pairwise(buckets))
    assert all(keys.bucket_of(b) == b for b in buckets)


def test_run_time_of_reads_a_jobs_own_run_ids_only() -> None:
    assert keys.run_time_of("j1", "j1:1700000000000") == 1_700_000_000_000
    assert keys.run_time_of("wf.a", "wf.a:5") == 5
    assert keys.run_time_of("j1", "j2:1700000000000") is None  # another job's
    assert keys.run_time_of("j1", "j1:017") is None  # not as run_id writes it
    assert keys.run_time_of("j1", "nonsense") is None
