"""The overview's figures for a deployed stack, from CloudWatch: runs per minute by how they
ended and fire lateness p50/p99 over the last hour, for the whole stack (every tenant).

The page computes the same figures for the caller's own jobs from the public API; a
deployment also has the metrics its functions publish (Powertools' embedded metric format,
namespace `METRICS_NAMESPACE` of infra/function.py, one `service` dimension per function:
docs/operations/alarms.md). SEARCH expressions find them whatever that dimension says, so a
renamed function does not blank the overview. The console server calls this with the user's
own credentials (cloudwatch:GetMetricData); the local cloud has no CloudWatch metrics (its
functions print theirs), so there the page shows only what it computed.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import boto3
from botocore.exceptions import BotoCoreError, ClientError

if TYPE_CHECKING:
    from mypy_boto3_cloudwatch.type_defs import MetricDataQueryTypeDef

NAMESPACE = "ServerlessScheduler"  # infra/function.py METRICS_NAMESPACE (a test holds them equal)
WINDOW = timedelta(hours=1)
PERIOD_SECONDS = 60
# The run counts the overview draws, by the status each stands for.
RUN_COUNTS = {
    "SUCCEEDED": "RunsSucceeded",
    "FAILED": "RunsFailed",
    "RETRYING": "RunsRetried",
    "SKIPPED": "RunsSkipped",
}
LATENESS = "FireLateness"


def _search(metric: str, stat: str, period: int) -> str:
    return f"SEARCH('{{{NAMESPACE},service}} MetricName=\"{metric}\"', '{stat}', {period})"


def overview_queries() -> list[MetricDataQueryTypeDef]:
    """Per minute: each run count summed over the functions; over the hour: lateness p50, p99."""
    queries: list[MetricDataQueryTypeDef] = []
    for index, (status, metric) in enumerate(RUN_COUNTS.items()):
        queries.append(
            {"Id": f"s{index}", "Expression": _search(metric, "Sum", PERIOD_SECONDS), "ReturnData": False}
        )
        queries.append({"Id": f"c{index}", "Expression": f"SUM(s{index})", "Label": status})
    hour = int(WINDOW.total_seconds())
    for stat in ("p50", "p99"):
        queries.append({"Id": f"lateness_{stat}", "Expression": _search(LATENESS, stat, hour), "Label": stat})
    return queries


def stack_overview(session: boto3.session.Session, now: datetime | None = None) -> dict[str, Any]:
    """`{"source": "cloudwatch", "minutes": [...], "runs": {status: [count per minute]},
    "lateness_ms": {"p50", "p99"}}`, the minutes oldest first; or `{"source": "cloudwatch",
    "error": ...}` when CloudWatch cannot be read (no permission, no region)."""
    end = (now or datetime.now(UTC)).replace(second=0, microsecond=0)
    start = end - WINDOW
    minutes = [
        start + timedelta(seconds=PERIOD_SECONDS * i) for i in range(int(WINDOW.total_seconds()) // 60)
    ]
    try:
        client = session.client("cloudwatch")
        results: list[Any] = []
        pages = client.get_paginator("get_metric_data").paginate(
            MetricDataQueries=overview_queries(), StartTime=start, EndTime=end
        )
        for page in pages:
            results += page.get("MetricDataResults", [])
    except (BotoCoreError, ClientError) as error:
        return {"source": "cloudwatch", "error": str(error)}
    runs = {status: [0] * len(minutes) for status in RUN_COUNTS}
    lateness: dict[str, float | None] = {"p50": None, "p99": None}
    slot = {minute: i for i, minute in enumerate(minutes)}
    for result in results:
        label = result.get("Label", "")
        if result.get("Id", "").startswith("lateness_"):
            values = result.get("Values") or []
            lateness[result["Id"].removeprefix("lateness_")] = float(values[0]) if values else None
        elif label in runs:
            for stamp, value in zip(result.get("Timestamps", []), result.get("Values", []), strict=False):
                index = slot.get(stamp.astimezone(UTC).replace(second=0, microsecond=0))
                if index is not None:
                    runs[label][index] += int(value)
    return {
        "source": "cloudwatch",
        "minutes": [m.isoformat().replace("+00:00", "Z") for m in minutes],
        "runs": runs,
        "lateness_ms": lateness,
    }
