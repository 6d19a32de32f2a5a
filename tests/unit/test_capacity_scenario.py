"""A tiny capacity scenario end to end: the real services fire every run once."""

from __future__ import annotations

from bench.capacity.scenarios import OneOffLoad, midnight, run_one_off
from bench.capacity.world import World


def test_twenty_one_off_jobs_all_fire_once_and_on_time():
    world = World(seed=5)
    with world.running():
        result = run_one_off(world, OneOffLoad(jobs=20, spread_seconds=30.0, lead_seconds=30.0))
    assert result["jobs_created"] == 20
    assert result["runs_fired"] == 20
    assert result["missed"] == 0
    assert result["duplicated"] == 0
    assert result["task_failures"] == []
    assert result["lateness_ms"]["max"] < 1_000
    # Every run took at least its start and its end on the table.
    assert result["write_units_per_run"]["table"] >= 4
    assert result["aws_requests_per_run"]["functions"] >= 3


def test_a_sampled_midnight_fires_its_sample_and_models_the_rest():
    # 4,000 jobs due in one second, 20 of them run for real: the polls wait out the other
    # 3,980 claims (each with its share of a send) and their reads, and the table takes their
    # units. A one-off's claim writes its job's item only (its run is kept there): none on
    # the due index's hot key, which only the runs' ends (not sampled) write.
    result = midnight(scale=0.004, fraction=0.005)
    assert result["sampled"] is True
    assert result["fraction"] == 0.005
    assert result["runs_expected"] == 20
    assert result["runs_fired"] == 20
    assert result["missed"] == 0
    assert result["duplicated"] == 0
    assert result["task_failures"] == []
    assert result["shadow"]["modeled_claims"] == 20 * 199
    # 4,000 keys read 100 a call, less the real calls (at most one a sampled job)
    assert result["shadow"]["modeled_poller_calls"]["BatchGetItem"] >= 4_000 // 100 - 20
    assert result["peak_wcu_per_table_second"]["jobs"] >= 199
    assert result["peak_wcu_per_table_second"]["jobs/due"] < 199
