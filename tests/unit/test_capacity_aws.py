"""The simulated AWS's metering of sampled load (bench/capacity/aws.py)."""

from __future__ import annotations

import pytest

from bench.capacity.partitions import Charge
from bench.capacity.world import World
from bench.metering import item_size


def test_a_sampled_query_page_is_billed_on_the_full_pages_size_not_its_unit_times_the_sample():
    world = World(seed=1, fraction=0.0002)  # each real entry stands for 5,000
    with world.running():
        aws = world.aws
        entry = {"pk": {"S": "JOB#" + "a" * 32}, "sk": {"S": "JOB"}, "due_pk": {"S": "203001010003#7"}}
        size = item_size(entry)
        real = [Charge("jobs/due", "203001010003#7", 1.0)]  # a real page of one entry: a whole unit

        [shadow] = aws._shadow_query_charges({"ConsistentRead": True}, {"Items": [entry]}, real)
        [eventually] = aws._shadow_query_charges({}, {"Items": [entry]}, [Charge("jobs/due", "k", 0.5)])

    full_units = -(-size * 5_000 // 4096)  # 5,000 entries read together: a unit per started 4 KB
    assert (shadow.table, shadow.key) == ("jobs/due", "203001010003#7")
    assert shadow.units == pytest.approx(full_units - 1.0)
    assert shadow.units < aws.shadow / 10  # not the real page's unit 4,999 times over
    assert eventually.units == pytest.approx(full_units / 2 - 0.5)
