"""How long each AWS call takes in the simulation, and where each figure comes from.

Every latency is a lognormal draw given by its median and its p99 (service latencies are
right-skewed: most calls near the median, a tail of slow ones). The figures are round
numbers from AWS's published descriptions and from what this project measured; they are
named here, one place, so a reader can argue with each. The simulation's results move
with them: `python -m bench.capacity --latency-factor 2` runs the same scenario with every
AWS latency doubled.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass


@dataclass(frozen=True)
class Latency:
    median_ms: float
    p99_ms: float
    source: str

    def draw(self, rng: random.Random, factor: float = 1.0) -> float:
        """Seconds: lognormal with this median and p99."""
        sigma = math.log(self.p99_ms / self.median_ms) / 2.326  # z of the 99th percentile
        return factor * self.median_ms * math.exp(sigma * rng.gauss(0.0, 1.0)) / 1000.0


_DDB_SINGLE = (
    "AWS: DynamoDB 'consistent single-digit millisecond' reads and writes at any scale "
    "(aws.amazon.com/dynamodb); in-region Lambda clients commonly see 3-8 ms"
)
_DDB_TRANSACTION = (
    "AWS docs: a transaction does two underlying reads or writes per item (prepare and commit), "
    "so ~2x a single write; issue 10 cites 15-25 ms per claim transaction on AWS"
)
_SQS = "AWS: SQS API calls take 'tens of milliseconds'; SendMessage/SendMessageBatch ~10-20 ms in-region"

# Per (service, operation); `DEFAULT[service]` for operations not named.
LATENCIES: dict[tuple[str, str], Latency] = {
    ("dynamodb", "GetItem"): Latency(4, 12, _DDB_SINGLE),
    ("dynamodb", "PutItem"): Latency(6, 18, _DDB_SINGLE),
    ("dynamodb", "UpdateItem"): Latency(6, 18, _DDB_SINGLE),
    ("dynamodb", "DeleteItem"): Latency(6, 18, _DDB_SINGLE),
    ("dynamodb", "Query"): Latency(6, 20, _DDB_SINGLE + "; a query page reads a range, a little slower"),
    ("dynamodb", "BatchGetItem"): Latency(8, 25, _DDB_SINGLE + "; items fetched in parallel, slowest wins"),
    ("dynamodb", "TransactWriteItems"): Latency(15, 40, _DDB_TRANSACTION),
    ("dynamodb", "TransactGetItems"): Latency(10, 30, _DDB_TRANSACTION),
    ("sqs", "SendMessage"): Latency(12, 30, _SQS),
    ("sqs", "SendMessageBatch"): Latency(15, 40, _SQS),
    ("sqs", "ReceiveMessage"): Latency(15, 40, _SQS + "; a receive that finds messages answers at once"),
    ("sqs", "DeleteMessage"): Latency(10, 25, _SQS),
    ("sqs", "DeleteMessageBatch"): Latency(12, 30, _SQS),
    ("sqs", "ChangeMessageVisibility"): Latency(10, 25, _SQS),
}
DEFAULT: dict[str, Latency] = {
    "dynamodb": Latency(6, 18, _DDB_SINGLE),
    "sqs": Latency(12, 30, _SQS),
}
FALLBACK = Latency(20, 60, "any other AWS call: a generic in-region API call")

# The job's target: no real HTTP, a fixed answer time (issue 10 §1 asks for a fixed model).
TARGET_CALL_SECONDS = 0.020

# Lambda. Warm invoke overhead: AWS quotes single-digit ms of invoke overhead for a warm
# function; a Python 3 function with boto3 and Powertools cold-starts in ~300-800 ms
# (AWS Lambda docs "Understanding the Lambda execution environment lifecycle"; widely
# published Python init figures). The poller and worker both import boto3 and Powertools.
WARM_INVOKE = Latency(5, 15, "AWS: warm invoke overhead, single-digit ms")
COLD_START = Latency(450, 900, "Python 3 + boto3 + Powertools init, published figures 300-800 ms")

# How soon an event source mapping's long poll returns a message that became visible (a
# delayed message's delay ended): the project's own observation that queue pollers notice
# delayed messages 'about once a second' (scheduler_core/settings.py, delivery_lead_seconds).
DELAYED_PICKUP_MAX_SECONDS = 1.0
LONG_POLL_SECONDS = 20  # the mapping's long poll (AWS: event source mappings use 20 s)


class LatencyModel:
    """Draws call latencies from `LATENCIES`, seeded, scaled by `factor`."""

    def __init__(self, seed: int = 1, factor: float = 1.0) -> None:
        self._rng = random.Random(seed)
        self.factor = factor

    def call(self, service: str, operation: str) -> float:
        latency = LATENCIES.get((service, operation)) or DEFAULT.get(service) or FALLBACK
        return latency.draw(self._rng, self.factor)

    def draw(self, latency: Latency) -> float:
        return latency.draw(self._rng)

    def uniform(self, low: float, high: float) -> float:
        return self._rng.uniform(low, high)
