"""The worker's event source mappings: weighted capacity per priority (DESIGN §4)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from infra.config import PRIORITIES
from tests.infra.conftest import Synthesis


def _mappings(synthesis: Synthesis) -> dict[str, Mapping[str, Any]]:
    """HIGH / NORMAL / LOW → the properties of the mapping that consumes that queue."""
    by_queue_id = {
        mapping["Properties"]["EventSourceArn"]["Fn::GetAtt"][0]: mapping["Properties"]
        for mapping in synthesis.resources("AWS::Lambda::EventSourceMapping").values()
    }
    return {
        priority: by_queue_id[synthesis.logical_id(queue)]
        for priority, queue in synthesis.stack.queues.by_priority.items()
    }


def test_each_priority_queue_has_one_mapping_to_the_worker(synthesis: Synthesis) -> None:
    mappings = _mappings(synthesis)
    assert set(mappings) == set(PRIORITIES)
    assert len(synthesis.resources("AWS::Lambda::EventSourceMapping")) == 3
    assert all(m["FunctionName"] == {"Ref": synthesis.function_ids["worker"]} for m in mappings.values())


def test_mappings_report_partial_batch_failures(synthesis: Synthesis) -> None:
    for priority, mapping in _mappings(synthesis).items():
        assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"], priority


def test_mappings_take_the_configured_batch_without_waiting(synthesis: Synthesis) -> None:
    for priority, mapping in _mappings(synthesis).items():
        assert mapping["BatchSize"] == synthesis.config.queue_capacity[priority].batch_size
        # By default no batching window: a lone message reaches the worker at once.
        assert mapping.get("MaximumBatchingWindowInSeconds", 0) == 0
    worker = synthesis.function("worker")["Properties"]
    assert worker["Environment"]["Variables"]["WORKER_BATCH_SIZE"] == "10"
    assert worker["MemorySize"] == synthesis.config.worker_memory_mb == 512


def test_batches_of_a_hundred_gather_within_their_window_and_size_the_workers_threads(
    narrowed: Synthesis,
) -> None:
    for priority, mapping in _mappings(narrowed).items():
        assert mapping["BatchSize"] == 100, priority
        assert mapping["MaximumBatchingWindowInSeconds"] == 1, priority
    assert narrowed.function("worker")["Properties"]["Environment"]["Variables"]["WORKER_BATCH_SIZE"] == "100"


def test_maximum_concurrency_is_weighted_with_high_the_largest(synthesis: Synthesis) -> None:
    concurrency = {
        priority: mapping["ScalingConfig"]["MaximumConcurrency"]
        for priority, mapping in _mappings(synthesis).items()
    }
    assert concurrency == {"HIGH": 20, "NORMAL": 10, "LOW": 4}
    assert concurrency["HIGH"] > concurrency["NORMAL"] > concurrency["LOW"] >= 2
