"""The fairness benchmark's bookkeeping: the tenants it creates for and what it makes of arrivals."""

from __future__ import annotations

from bench.fairness import a_first, hand_over_positions, summarize
from bench.lateness import Created
from bench.receiver import Arrival
from scheduler_core.domain.clock import from_ms
from scheduler_core.domain.entities import iso_or_none

DUE_MS = 1_800_000_000_000


def test_a_first_puts_every_b_after_every_a() -> None:
    assert a_first(3, 2) == ["A", "A", "A", "B", "B"]


def _created(tenants: list[str]) -> list[Created]:
    return [Created(i, DUE_MS, 201, f"job-{i}", False, None, 0.01) for i in range(len(tenants))]


def _run(created: Created) -> str:
    assert created.run_id is not None
    return created.run_id


def _arrival(created: Created, after_ms: float) -> Arrival:
    return Arrival(_run(created), iso_or_none(from_ms(DUE_MS)) or "", "1", DUE_MS + after_ms)


def test_hand_over_positions_count_first_hand_overs_of_the_measured_runs_only() -> None:
    positions = hand_over_positions(["warm-up", "r2", "?", "r1", "r2", "r3"], {"r1", "r2", "r3"})

    assert positions == {"r2": 1, "r1": 2, "r3": 3}


def test_latency_per_tenant_from_first_arrivals_with_missed_and_duplicated() -> None:
    tenants = ["A", "A", "A", "A", "B", "B"]
    created = _created(tenants)
    arrivals = [
        _arrival(created[4], 30),
        _arrival(created[5], 60),
        _arrival(created[5], 1_400),  # a second delivery of the same run
        _arrival(created[0], 800),
        _arrival(created[1], 1_000),
        _arrival(created[2], 2_200),
        # created[3] never arrives
    ]
    handed_over = [_run(created[i]) for i in (4, 0, 5, 1, 2, 3)]

    result = summarize(created, tenants, DUE_MS, arrivals, handed_over)

    a, b = result["by_tenant"]["A"], result["by_tenant"]["B"]
    assert a["caller"].endswith("user/tenant-a")
    assert b["caller"].endswith("user/tenant-b")
    assert b["start_latency_ms"]["count"] == 2
    assert b["start_latency_ms"]["max"] == 60  # the first delivery counts
    assert b["duplicated_runs"] == 1
    assert b["missed"] == 0
    assert a["start_latency_ms"]["p50"] == 1_000
    assert a["missed"] == 1
    assert a["arrivals_per_second"] == [1, 1, 1]
    assert b["hand_over_position"]["min"] == 1
    assert b["hand_over_position"]["max"] == 3
    assert a["hand_over_position"]["max"] == 6
    assert a["claimed_at_create"] == 0
    assert result["goal_b_p95_below_a_p50"] is True
    assert result["every_run_delivered_once"] is False
    assert result["handed_over_runs"] == 6
    assert {run["tenant"] for run in result["runs"]} == {"A", "B"}


def test_goal_not_met_when_b_waits_as_long_as_a() -> None:
    tenants = ["A", "B"]
    created = _created(tenants)

    result = summarize(created, tenants, DUE_MS, [_arrival(created[0], 500), _arrival(created[1], 500)])

    assert result["goal_b_p95_below_a_p50"] is False
    assert result["every_run_delivered_once"] is True
    assert result["by_tenant"]["B"]["hand_over_position"]["count"] == 0  # no hand-overs recorded


def test_goal_not_met_when_b_never_arrives() -> None:
    tenants = ["A", "B"]
    created = _created(tenants)

    result = summarize(created, tenants, DUE_MS, [_arrival(created[0], 500)])

    assert result["goal_b_p95_below_a_p50"] is False
    assert result["by_tenant"]["B"]["missed"] == 1
