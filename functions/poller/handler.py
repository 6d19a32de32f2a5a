"""The poller: one invocation per shard per minute (EventBridge input `{"shard": n}`)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel, ConfigDict, Field

from scheduler_core.composition import default_dispatcher
from scheduler_core.observability import inject_invocation, logger, metrics, tracer
from scheduler_core.services.dispatch import Dispatcher


class PollEvent(BaseModel):
    model_config = ConfigDict(extra="ignore")
    shard: int = Field(ge=0)


@inject_invocation
@metrics.log_metrics
@tracer.capture_lambda_handler
def handler(
    event: dict[str, Any], context: LambdaContext, dispatcher: Dispatcher | None = None
) -> dict[str, Any]:
    shard = PollEvent.model_validate(event).shard
    dispatcher = dispatcher or default_dispatcher()
    # Read after the dispatcher is built: a cold start's set-up has taken its share.
    remaining_ms = context.get_remaining_time_in_millis()
    time_left = timedelta(milliseconds=remaining_ms) if remaining_ms > 0 else None
    report = dispatcher.poll_shard(shard, time_left)
    metrics.add_metric(name="RunsClaimed", unit="Count", value=len(report.claimed))
    if report.sent:  # one-offs claimed at their start
        metrics.add_metric(name="RunsSentUnclaimed", unit="Count", value=len(report.sent))
    summary = {
        "shard": shard,
        "buckets_read": report.buckets_read,
        "claimed": len(report.claimed),
        "sent_unclaimed": len(report.sent),  # one-offs' firings their start claims
        "lost_races": report.lost_races,
        "contended": report.contended,
        "skipped": report.skipped,  # jobs moved past missed firings, none of which ran (misfire)
        "left": report.left,  # jobs not tried: the poll stopped before its timeout (the next goes on)
        "unsent": len(report.unsent),
        "watched": report.watched,
        "watermark_ms": report.watermark_ms,
    }
    logger.info("poll finished", extra=summary)
    return summary
