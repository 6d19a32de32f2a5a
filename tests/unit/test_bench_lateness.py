"""The lateness benchmark's arithmetic: percentiles, moto's stalls as the probe saw them,
and which runs' paths were clear of them."""

from __future__ import annotations

import pytest

from bench.lateness import Created, net_of_moto, overlaps, run_paths, stall_spans, summarize
from bench.receiver import Arrival
from bench.report import percentile
from scheduler_core.domain.clock import from_ms
from scheduler_core.domain.entities import iso_or_none

T0 = 1_800_000_000_000  # epoch ms
T0_SECONDS = T0 / 1000


def test_percentile_is_the_nearest_rank() -> None:
    values = [float(v) for v in range(100, 0, -1)]  # 1..100, unsorted

    assert percentile(values, 0.50) == 50
    assert percentile(values, 0.99) == 99
    assert percentile(values, 1.0) == 100
    assert percentile([7.0], 0.99) == 7
    assert percentile([], 0.5) is None


def test_only_probe_calls_slower_than_the_threshold_are_stalls_spanning_the_call() -> None:
    samples = [(T0_SECONDS, 0.004), (T0_SECONDS + 1, 0.100), (T0_SECONDS + 2, 0.350)]

    spans = stall_spans(samples, threshold_ms=100)

    assert len(spans) == 1
    assert spans[0] == pytest.approx((T0 + 2_000, T0 + 2_350))


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ((T0 + 100, T0 + 200), True),  # the stall covers the whole path
        ((T0, T0 + 1_000), True),  # the path covers the whole stall
        ((T0 + 250, T0 + 900), True),  # the stall ends inside the path
        ((T0 + 250, T0 + 150), True),  # an early run: arrival before its due time
        ((T0 + 150, T0 + 150), True),  # arrived the instant it was due, during the stall
        ((T0 + 300, T0 + 900), False),  # the stall ended as the run fell due
        ((T0, T0 + 100), False),  # the run arrived as the stall began
        ((T0 + 400, T0 + 500), False),
    ],
)
def test_a_path_overlaps_a_stall_only_when_they_share_more_than_an_end(
    path: tuple[float, float], expected: bool
) -> None:
    assert overlaps(path, [(T0 + 100, T0 + 300)]) is expected


def test_run_paths_run_from_the_due_time_to_the_first_arrival_and_skip_missed_runs() -> None:
    created = [Created(i, T0 + i * 1_000, 201, f"job-{i}", False, None, 0.01) for i in range(3)]
    run_ids = [c.run_id or "" for c in created]
    arrivals = [
        Arrival(run_ids[0], _iso(T0), "1", T0 + 20),
        Arrival(run_ids[0], _iso(T0), "2", T0 + 900),  # a second delivery: not the path's end
        Arrival(run_ids[1], _iso(T0 + 1_000), "1", T0 + 1_500),
        # run 2 never arrives
    ]

    paths = run_paths(summarize(created, arrivals)["runs"])

    assert paths == {run_ids[0]: (T0, T0 + 20), run_ids[1]: (T0 + 1_000, T0 + 1_500)}


def test_net_of_moto_keeps_the_lateness_of_runs_whose_path_saw_no_stall() -> None:
    paths = {
        "before": (T0, T0 + 10),
        "across-the-stall": (T0 + 1_000, T0 + 2_600),  # late because moto stalled
        "slow-on-its-own": (T0 + 3_000, T0 + 3_700),  # late with moto answering fast
        "after": (T0 + 4_000, T0 + 4_030),
    }
    samples = [
        (T0_SECONDS - 5, 2.0),  # before the first due time (creation): not while firing
        (T0_SECONDS + 0.5, 0.005),
        (T0_SECONDS + 1.2, 1.2),  # a 1,200 ms stall
        (T0_SECONDS + 3.0, 0.050),  # slow, but under the threshold
        (T0_SECONDS + 4.0, 0.004),
        (T0_SECONDS + 4.020, 0.5),  # a stall that runs past the last arrival
    ]

    net = net_of_moto(paths, samples, threshold_ms=100)

    clean = net["clean_path_lateness_ms"]
    assert net["stall_threshold_ms"] == 100
    assert net["runs_with_a_stall_on_their_path"] == 2  # across the stall, and "after"
    assert clean["count"] == 2
    assert clean["max"] == 700  # a slow scheduler still shows
    assert clean["min"] == 10
    assert net["probe_call_ms"]["count"] == 5
    assert net["probe_call_ms"]["max"] == pytest.approx(1_200)
    assert net["stalls"] == 2
    assert net["stalled_seconds"] == pytest.approx(1.2 + 0.01)  # clipped at the last arrival
    assert net["window_seconds"] == 4.03


def test_net_of_moto_with_no_stalls_keeps_every_run() -> None:
    paths = {"a": (T0, T0 + 30), "b": (T0 + 100, T0 + 120)}

    net = net_of_moto(paths, [(T0_SECONDS, 0.003)], threshold_ms=100)

    assert net["clean_path_lateness_ms"]["count"] == 2
    assert net["clean_path_lateness_ms"]["p99"] == 30
    assert net["stalls"] == 0
    assert net["runs_with_a_stall_on_their_path"] == 0


def test_net_of_moto_with_no_runs_delivered_says_only_the_threshold() -> None:
    assert net_of_moto({}, [(T0_SECONDS, 1.0)], threshold_ms=100) == {
        "stall_threshold_ms": 100,
        "window_seconds": 0.0,
    }


def _iso(ms: int) -> str:
    return iso_or_none(from_ms(ms)) or ""
