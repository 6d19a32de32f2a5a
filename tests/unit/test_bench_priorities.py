"""The priorities benchmark's bookkeeping: the mix it creates and what it makes of arrivals."""

from __future__ import annotations

from itertools import pairwise

from bench.lateness import Created
from bench.priorities import due_second, interleave, summarize
from bench.receiver import Arrival
from scheduler_core.domain.clock import from_ms
from scheduler_core.domain.entities import iso_or_none

DUE_MS = 1_800_000_000_000


def test_interleave_spreads_high_evenly_among_low() -> None:
    mix = interleave(300, 30)

    assert mix.count("LOW") == 300
    assert mix.count("HIGH") == 30
    highs = [i for i, priority in enumerate(mix) if priority == "HIGH"]
    assert all(10 <= b - a <= 12 for a, b in pairwise(highs))


def test_due_second_is_a_whole_second_at_least_the_lead_away() -> None:
    assert due_second(100.2, 3) == 104_000
    assert due_second(100.0, 3) == 103_000


def _created(mix: list[str]) -> list[Created]:
    return [Created(i, DUE_MS, 201, f"job-{i}", True, None, 0.01) for i in range(len(mix))]


def _arrival(created: Created, after_ms: float) -> Arrival:
    assert created.run_id is not None
    return Arrival(created.run_id, iso_or_none(from_ms(DUE_MS)) or "", "1", DUE_MS + after_ms)


def test_latency_per_priority_from_first_arrivals_with_missed_and_duplicated() -> None:
    mix = ["LOW", "HIGH", "LOW", "LOW", "HIGH"]
    created = _created(mix)
    arrivals = [
        _arrival(created[1], 20),
        _arrival(created[4], 40),
        _arrival(created[4], 1_500),  # a second delivery of the same run
        _arrival(created[0], 900),
        _arrival(created[2], 2_100),
        # created[3] never arrives
    ]

    result = summarize(created, mix, DUE_MS, arrivals)

    high, low = result["by_priority"]["HIGH"], result["by_priority"]["LOW"]
    assert high["start_latency_ms"]["count"] == 2
    assert high["start_latency_ms"]["max"] == 40  # the first delivery counts
    assert high["duplicated_runs"] == 1
    assert high["missed"] == 0
    assert low["start_latency_ms"]["p50"] == 900
    assert low["missed"] == 1
    assert low["arrivals_per_second"] == [1, 0, 1]
    assert result["goal_high_p95_below_low_p50"] is True
    assert result["every_run_delivered_once"] is False


def test_goal_not_met_when_high_waits_as_long_as_low() -> None:
    mix = ["HIGH", "LOW"]
    created = _created(mix)

    result = summarize(created, mix, DUE_MS, [_arrival(created[0], 500), _arrival(created[1], 500)])

    assert result["goal_high_p95_below_low_p50"] is False
    assert result["every_run_delivered_once"] is True
