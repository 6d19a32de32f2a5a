"""The helpers the benchmarks share: the metrics namespace for a block, the command lines'
argument types, the figures' distribution and arrivals grouped by run."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from bench.common import metrics_namespace, positive_float, positive_int, recorded_options
from bench.receiver import Arrival, arrivals_by_run
from bench.report import distribution, format_ms
from scheduler_core.observability import metrics


def test_metrics_namespace_is_set_for_the_block_then_put_back_with_the_metrics_dropped() -> None:
    before = metrics.provider.namespace, metrics.provider.service
    with metrics_namespace("BenchNamespace", "bench-service"):
        assert metrics.provider.namespace == "BenchNamespace"
        assert metrics.provider.service == "bench-service"
        metrics.add_metric(name="Counted", unit="Count", value=1)
        assert metrics.metric_set
    assert (metrics.provider.namespace, metrics.provider.service) == before
    assert not metrics.metric_set


def test_metrics_namespace_leaves_the_service_alone_unless_given_and_restores_on_error() -> None:
    before = metrics.provider.namespace, metrics.provider.service
    seen: list[object] = []

    def failing_block() -> None:
        with metrics_namespace("BenchNamespace"):
            seen.append(metrics.provider.service)
            metrics.add_metric(name="Counted", unit="Count", value=1)
            raise RuntimeError("the block failed")

    with pytest.raises(RuntimeError):
        failing_block()
    assert seen == [before[1]]
    assert (metrics.provider.namespace, metrics.provider.service) == before
    assert not metrics.metric_set


def test_positive_arguments() -> None:
    assert positive_int("3") == 3
    assert positive_float("0.5") == 0.5
    with pytest.raises(argparse.ArgumentTypeError):
        positive_int("0")
    with pytest.raises(argparse.ArgumentTypeError):
        positive_float("0")


def test_recorded_options_hold_paths_as_text() -> None:
    args = argparse.Namespace(jobs=3, out=Path("bench-results/latest.json"), only=None)
    assert recorded_options(args) == {"jobs": 3, "out": "bench-results/latest.json", "only": None}


def test_distribution_gives_the_asked_percentiles_in_order() -> None:
    values = [float(v) for v in range(1, 101)]
    assert list(distribution(values).items()) == [
        ("count", 100),
        ("p50", 50),
        ("p95", 95),
        ("p99", 99),
        ("max", 100),
        ("min", 1),
    ]
    assert list(distribution(values, (50, 95))) == ["count", "p50", "p95", "max", "min"]
    assert distribution([]) == {"count": 0, "p50": None, "p95": None, "p99": None, "max": None, "min": None}
    assert format_ms(12.4) == "12 ms"
    assert format_ms(None) == "-"


def test_arrivals_by_run_first_arrived_first() -> None:
    late, early, other = (
        Arrival("r1", "", "1", 20.0),
        Arrival("r1", "", "2", 10.0),
        Arrival("r2", "", "1", 5.0),
    )
    by_run = arrivals_by_run([late, other, early])
    assert by_run == {"r1": [early, late], "r2": [other]}
    assert by_run["r3"] == []  # as before: a run never seen reads as no arrivals
