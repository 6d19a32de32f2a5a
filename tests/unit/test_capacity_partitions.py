"""DynamoDB's per-partition and per-table limits in the capacity simulation, and the
throttling botocore then retries."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from moto import mock_aws

from bench.capacity.aws import SimulatedAws
from bench.capacity.kernel import Sim, virtual_sleep
from bench.capacity.latency import LatencyModel
from bench.capacity.partitions import PEAK_SETTLE_SECONDS, CapacityModel, Charge
from scheduler_core.adapters.aws import AwsClients


def test_one_key_takes_1000_write_units_a_second_and_no_more():
    capacity = CapacityModel()
    assert capacity.admit_write(0.1, [Charge("jobs/due", "202601010000#0", 1000.0)]) is None
    refusal = capacity.admit_write(0.9, [Charge("jobs/due", "202601010000#0", 1.0)])
    assert refusal is not None
    assert refusal.startswith("IndexKeyRangeThroughputExceeded")
    assert capacity.admit_write(0.9, [Charge("jobs/due", "202601010000#1", 1.0)]) is None  # another key
    assert capacity.admit_write(1.0, [Charge("jobs/due", "202601010000#0", 1.0)]) is None  # next second
    assert capacity.writes.peak_key_units == 1000.0


def test_an_on_demand_table_starts_at_4000_write_units_and_doubles_its_peak_30_minutes_on():
    capacity = CapacityModel()
    for key in range(4):
        assert capacity.admit_write(0.0, [Charge("jobs", f"k{key}", 1000.0)]) is None
    assert capacity.admit_write(0.0, [Charge("jobs", "k4", 1.0)]) is not None
    # The next second the peak of 4,000 does not yet count: still 4,000 ...
    for key in range(4):
        assert capacity.admit_write(1.0, [Charge("jobs", f"k{key}", 1000.0)]) is None
    assert capacity.admit_write(1.0, [Charge("jobs", "k4", 1.0)]) is not None
    # ... 30 minutes after it, up to 8,000.
    later = 0.0 + PEAK_SETTLE_SECONDS
    for key in range(8):
        assert capacity.admit_write(later, [Charge("jobs", f"k{key}", 1000.0)]) is None
    assert capacity.admit_write(later, [Charge("jobs", "k9", 1.0)]) is not None


def test_a_peak_is_what_was_served_and_the_load_is_what_was_offered():
    capacity = CapacityModel()
    capacity.add_shadow_writes(0.0, [Charge("jobs", "", 12_000.0)])  # offered 3x the limit
    capacity.admit_write(1.0, [Charge("jobs", "k", 1.0)])
    assert capacity.write_load(1.5, ("jobs", "jobs/due")) == pytest.approx(3.0)
    assert capacity.writes.served_peaks["jobs"] == [(0, 4_000.0)]
    assert capacity.write_load(5.0, ("jobs",)) == 0.0  # nothing offered in second 4


def test_a_throttled_request_is_charged_nothing():
    capacity = CapacityModel()
    capacity.admit_write(0.0, [Charge("jobs", "a", 999.0)])
    assert capacity.admit_write(0.0, [Charge("jobs", "a", 2.0), Charge("jobs", "b", 5.0)]) is not None
    assert capacity.writes.total_units == 999.0


@pytest.fixture
def aws_on_one_table():
    with mock_aws():
        sim = Sim(datetime(2030, 1, 1, tzinfo=UTC))
        aws = SimulatedAws(sim, LatencyModel(seed=3), CapacityModel())
        aws.plain_client("dynamodb").create_table(
            TableName="hot",
            BillingMode="PAY_PER_REQUEST",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        )
        with virtual_sleep(sim):
            yield sim, aws


def test_writes_over_1000_wcu_a_second_on_one_key_are_throttled_and_botocore_retries_them(aws_on_one_table):
    sim, aws = aws_on_one_table
    clients = aws.clients("worker")
    errors: list[str] = []

    def put(index: int) -> None:
        try:
            clients.dynamodb().put_item(
                TableName="hot",
                Item={"pk": {"S": "one-key"}, "n": {"N": str(index)}, "pad": {"S": "x" * 6000}},
            )
        except Exception as error:
            errors.append(type(error).__name__)

    for index in range(200):  # 6 WCU each: 1,200 WCU asked of one key in the first moments
        sim.spawn(put, index)
    sim.run()
    label = "worker dynamodb.PutItem"
    assert aws.usage.throttled[label] > 0
    assert aws.usage.calls[label] == 200
    assert aws.usage.attempts[label] == 200 + aws.usage.throttled[label]  # each throttle retried
    assert errors == []  # botocore's retries (in virtual time) got every write through
    assert aws.capacity.writes.peak_key_units <= 1000.0
    assert sim.env.now > 1.0  # the retries waited into the next second


def test_a_throttled_write_leaves_the_item_as_it_was(aws_on_one_table):
    sim, aws = aws_on_one_table
    plain = aws.plain_client("dynamodb")
    plain.put_item(TableName="hot", Item={"pk": {"S": "k"}, "v": {"S": "before"}})
    aws.capacity.admit_write(0.0, [Charge("hot", "k", 1000.0)])  # the key is spent for second 0
    # botocore's `max_attempts` counts retries (1: one retry, after a random wait of up to
    # 1 s, that lands in second 1 about 1 % of the time and is served): `total_max_attempts`.
    no_retries = AwsClients(aws.session("api"), Config(retries={"mode": "standard", "total_max_attempts": 1}))
    errors: list[str] = []

    def write() -> None:
        try:
            no_retries.dynamodb().put_item(TableName="hot", Item={"pk": {"S": "k"}, "v": {"S": "after"}})
        except ClientError as error:
            errors.append(error.response["Error"]["Code"])

    sim.spawn(write)
    sim.run()
    assert errors == ["ProvisionedThroughputExceededException"]
    assert aws.usage.attempts["api dynamodb.PutItem"] == 1
    assert plain.get_item(TableName="hot", Key={"pk": {"S": "k"}})["Item"]["v"]["S"] == "before"


def test_shadow_units_go_on_shared_index_keys_and_on_the_table_for_a_job_s_own_item():
    with mock_aws():
        sim = Sim(datetime(2030, 1, 1, tzinfo=UTC))
        aws = SimulatedAws(sim, LatencyModel(seed=3), CapacityModel(), fraction=0.01)
        shadow = aws.shadow_charges(
            [
                Charge("jobs", "JOB#1", 2.0),
                Charge("jobs/due", "203001010000#1", 1.0),
                Charge("jobs", "SHARD#1", 1.0),
            ]
        )
    assert [(c.table, c.key, round(c.units, 6)) for c in shadow] == [
        ("jobs", "", 198.0),
        ("jobs/due", "203001010000#1", 99.0),
    ]


def test_shadow_units_crowd_out_real_writes_on_a_hot_key_but_never_count_on_a_job_s_key():
    capacity = CapacityModel()
    capacity.add_shadow_writes(0.0, [Charge("jobs/due", "bucket", 999.0), Charge("jobs", "", 3000.0)])
    assert capacity.writes.peak_key == "jobs/due bucket"
    assert capacity.admit_write(0.5, [Charge("jobs/due", "bucket", 2.0)]) is not None
    assert capacity.admit_write(0.5, [Charge("jobs", "JOB#1", 2.0)]) is None
    assert capacity.writes.peak_table_units["jobs"] == 3002.0


def test_a_table_that_peaked_before_serves_double_that_at_once():
    capacity = CapacityModel()
    capacity.assume_previous_peak({"jobs": 20_000.0})
    assert capacity.admit_write(0.0, [Charge("jobs", f"k{i}", 900.0) for i in range(44)]) is None
    assert capacity.admit_write(0.0, [Charge("jobs", "k99", 500.0)]) is not None
    # Reads as a new table's (12,000 a second) unless a read peak is given too.
    assert capacity.admit_read(0.0, [Charge("jobs", f"k{i}", 2_900.0) for i in range(5)]) is not None
    capacity.assume_previous_peak({}, {"jobs": 10_000.0})
    assert capacity.admit_read(0.0, [Charge("jobs", f"k{i}", 2_900.0) for i in range(6)]) is None


def test_a_sampled_write_s_shadow_is_spread_over_the_time_since_the_last_on_its_key():
    capacity = CapacityModel()
    capacity.add_shadow_writes(10.0, [Charge("jobs/due", "bucket", 100.0)])  # first: all now
    capacity.add_shadow_writes(20.5, [Charge("jobs/due", "bucket", 1000.0)])  # 10.5 s of writes
    assert capacity.writes.keys[("jobs/due", "bucket")].at(20) == pytest.approx(1000.0 * 0.5 / 10.5)
    assert capacity.shadow_write_units == 1100.0
