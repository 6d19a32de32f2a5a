"""A tiny capacity scenario end to end: the real services fire every run once."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest

import bench.capacity.__main__ as capacity_main
from bench.capacity.__main__ import parse_args, run_side_by_side
from bench.capacity.scenarios import TENANT, OneOffLoad, midnight, put_jobs, run_one_off
from bench.capacity.world import TARGET_URL, World
from scheduler_core.domain.api_shapes import JobCreate
from scheduler_core.domain.entities import Run
from scheduler_core.domain.vocabulary import Priority, RunStatus, Trigger
from scheduler_core.services.polls import ClaimResult


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
    # the due index's hot key. Their runs' starts and ends are asked of the table when the
    # left-out batches make them, the ends taking the jobs' entries out of the due index.
    result = midnight(scale=0.004, fraction=0.005)
    assert result["sampled"] is True
    assert result["fraction"] == 0.005
    assert result["runs_expected"] == 20
    assert result["runs_fired"] == 20
    assert result["missed"] == 0
    assert result["duplicated"] == 0
    assert result["task_failures"] == []
    assert result["shadow"]["modeled_claims"] == 20 * 199
    assert result["shadow"]["modeled_unclaimed_sends"] == 0
    # 4,000 keys read 100 a call, less the real calls (at most one a sampled job)
    assert result["shadow"]["modeled_poller_calls"]["BatchGetItem"] >= 4_000 // 100 - 20
    assert result["peak_wcu_per_table_second"]["jobs"] >= 199
    # Each left-out run's start, end and due entry out (3 units), beside the claims' shadow.
    assert result["shadow"]["write_units"] >= 3 * 20 * 199
    assert result["peak_wcu_per_table_second"]["jobs/due"] >= 199


def test_a_sampled_midnight_with_one_offs_claimed_at_their_start_models_sends_not_claims():
    # The same burst with Deploy's switch: the polls send the left-out one-offs unclaimed
    # (their share of a send each, no claim), and the real ones' starts claim them.
    result = midnight(scale=0.004, fraction=0.005, context={"one_offs_claimed_at_start": True})
    assert result["configuration"]["one_offs_claimed_at_start"] is True
    assert result["runs_fired"] == 20
    assert result["missed"] == 0
    assert result["duplicated"] == 0
    assert result["task_failures"] == []
    assert result["shadow"]["modeled_unclaimed_sends"] == 20 * 199
    assert result["shadow"]["modeled_claims"] == 0
    calls = result["calls"]
    assert "poller dynamodb.TransactWriteItems" not in calls
    # The polls' writes are their watermarks and sent marks (two a poll at most: no claim);
    # each real start claims its run.
    assert calls.get("poller dynamodb.UpdateItem", 0) <= 2 * result["polls"]["polls"]
    assert calls["worker dynamodb.UpdateItem"] >= 2 * 20  # a claiming start and an end each


def test_a_midnight_on_a_pre_warmed_table_takes_the_warm_throughput_from_the_deploys_context():
    context = {"table_capacity": {"mode": "ON_DEMAND", "warm": {"read": 30_000, "write": 90_000}}}
    result = midnight(scale=0.004, fraction=0.005, context=context)
    assert result["runs_fired"] == 20
    assert result["assumptions"]["table_warm_rcu"] == 30_000
    assert result["assumptions"]["table_warm_wcu"] == 90_000
    assert result["assumptions"]["table_previous_peak_wcu"] == 45_000  # it serves double


def test_the_watchdogs_runs_are_modeled_as_claims_beside_the_jobs_a_poll_claims_or_sends():
    # A poll's pool maps jobs (claims, sends) and, for its watchdog, runs: each real item's
    # left-out peers are modeled by what it is (a run has no firing to send).
    world = World(seed=3, fraction=0.01, context={"one_offs_claimed_at_start": True})
    with world.running():
        world.poller._build(world.aws.clients("poller"))
        [runner] = world.runners
        now = world.clock.now()
        soon = put_jobs(
            world,
            [
                (
                    {"at": (now + timedelta(seconds=60)).isoformat()},
                    Priority.NORMAL,
                    now + timedelta(seconds=60),
                )
            ],
        )[0]
        run = Run(
            run_id=f"{soon.job_id}:1",
            job_id=soon.job_id,
            status=RunStatus.PENDING,
            trigger=Trigger.SCHEDULE,
            scheduled_for=now,
            attempt=1,
            priority=Priority.NORMAL,
        )
        shadow_seconds = runner._shadow_seconds
        assert shadow_seconds is not None
        assert shadow_seconds(run, None, 1) > 0
        assert shadow_seconds(soon, None, 1) > 0  # sent unclaimed: due within the lookahead
        sent = ClaimResult([run], soon, sent=True)
        assert shadow_seconds(soon, sent, 1) > 0
        assert shadow_seconds(soon, ClaimResult([], soon, waiting=True), 1) == 0.0
    assert world.modeled_work == {"watch": 1, "send": 2, "none": 1}


def _drawn_in(seed: int) -> tuple[list[str], float]:
    """The ids of three jobs a world of `seed` puts, and the next wait botocore's backoff
    would draw in it."""
    world = World(seed=seed)
    with world.running():
        at = world.clock.now() + timedelta(minutes=5)
        ids = [job.job_id for job in put_jobs(world, [({"at": at.isoformat()}, Priority.LOW, at)] * 3)]
        return ids, random.random()


def test_a_world_draws_its_job_ids_and_botocores_backoff_from_its_seed():
    # An id is its job's shard and keys, and a throttled call's retry waits a random share of
    # its backoff: with the same seed a scenario is the same run again (uuid4 ids and an
    # unseeded backoff moved a scenario's tail from run to run).
    random.seed("outside")
    outside = random.getstate()
    ids, backoff = _drawn_in(seed=7)
    assert random.getstate() == outside  # put back after the run
    assert (ids, backoff) == _drawn_in(seed=7)
    assert len(set(ids)) == 3
    other_ids, other_backoff = _drawn_in(seed=8)
    assert set(ids).isdisjoint(other_ids)
    assert backoff != other_backoff


def test_make_capacity_runs_scenarios_side_by_side_with_the_figures_each_gives_alone():
    # Each in a process of its own, two at a time (make capacity's default on two CPUs):
    # virtual time keeps a scenario's figures what it gives run alone in this process.
    args = parse_args(["--scale", "0.01", "--seed", "3", "--jobs", "2"])
    side_by_side = run_side_by_side(["validate", "midnight"], args)
    assert list(side_by_side) == ["validate", "midnight"]
    alone = midnight(scale=0.01, seed=3)
    figures = ("runs_fired", "missed", "duplicated", "lateness_ms", "throttles", "write_units_per_run")
    assert {key: side_by_side["midnight"][key] for key in figures} == {key: alone[key] for key in figures}
    assert side_by_side["validate"]["runs_fired"] == side_by_side["validate"]["runs_expected"] > 0


def test_a_scenario_that_fails_stops_make_capacity_and_shows_its_output(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(capacity_main, "scenario_argv", lambda *_: ["--scenario", "no-such-scenario"])
    with pytest.raises(RuntimeError, match="scenario validate failed"):
        run_side_by_side(["validate"], parse_args([]))
    assert "invalid choice: 'no-such-scenario'" in capsys.readouterr().out


def _made_by_the_api(seed: int) -> list[str]:
    """The ids of two jobs the api of a world of `seed` makes (as validate makes its jobs)."""
    world = World(seed=seed)
    made: list[str] = []
    with world.running():
        at = world.clock.now() + timedelta(minutes=5)
        target = {"type": "HTTP", "url": TARGET_URL}
        body = {"name": "seeded", "schedule": {"at": at.isoformat()}, "target": target}
        request = JobCreate.model_validate(body)

        def create() -> None:
            for _ in range(2):
                invoked, job_id = world.api.invoke(lambda c: c.service.create(TENANT, request).job_id)
                assert invoked
                made.append(job_id)

        world.sim.spawn(create, name="creator")
        world.sim.run(until=world.sim.env.now + 10)
    return made


def test_the_jobs_the_api_makes_in_a_world_draw_their_ids_from_its_seed():
    # validate makes its jobs through the api: random ids moved its figures from run to run.
    ids = _made_by_the_api(seed=7)
    assert ids == _made_by_the_api(seed=7)
    assert len(set(ids)) == 2
    assert set(ids).isdisjoint(_made_by_the_api(seed=8))
