"""The policies a job carries beside its schedule and target: retries, concurrency (see
`overlap`), the catch-up window of misfire CATCH_UP, and the payload's one rule. Pure."""

from __future__ import annotations

import math
from typing import Annotated

from pydantic import AfterValidator, Field, JsonValue, ValidationInfo, field_validator, model_validator

from scheduler_core.domain.strict import StrictModel
from scheduler_core.domain.vocabulary import (
    DEFAULT_CATCH_UP_WINDOW_SECONDS,
    MAX_RUNNING_LIMIT,
    MisfirePolicy,
    Overlap,
)


def _finite_numbers(value: JsonValue) -> JsonValue:
    """NaN and ±Infinity are not JSON: a payload holding one could not be delivered as JSON."""
    pending: list[JsonValue] = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, float) and not math.isfinite(item):
            raise ValueError("numbers must be finite; NaN and Infinity are not JSON")
        if isinstance(item, dict):
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return value


Payload = Annotated[JsonValue, AfterValidator(_finite_numbers)]


class RetryPolicy(StrictModel):
    max_attempts: int = Field(3, ge=1, le=20)
    backoff_seconds: float = Field(10, gt=0, le=86_400)
    max_backoff_seconds: float = Field(3_600, gt=0, le=7 * 86_400)


class ConcurrencyPolicy(StrictModel):
    """How many runs of a job may be RUNNING at once, and what a run due to start while that
    many are does (`overlap`). Manual runs and retries count and obey it like any run."""

    overlap: Overlap = Field(
        Overlap.SKIP,
        description="SKIP (default): the run ends SKIPPED. BUFFER_ONE: it waits and starts when a "
        "running one ends; a run due while one waits is SKIPPED. ALLOW: it starts; no limit.",
    )
    max_running: int | None = Field(
        None,
        ge=1,
        le=MAX_RUNNING_LIMIT,
        description="Runs of the job RUNNING at once (default 1); SKIP and BUFFER_ONE only (null "
        "with ALLOW, which has no limit).",
    )

    @field_validator("max_running")
    @classmethod
    def _only_with_a_limit(cls, value: int | None, info: ValidationInfo) -> int | None:
        if value is not None and info.data.get("overlap") is Overlap.ALLOW:
            raise ValueError("overlap ALLOW starts every run without a limit; leave max_running out")
        return value

    @model_validator(mode="after")
    def _default_limit(self) -> ConcurrencyPolicy:
        if self.max_running is None and self.overlap is not Overlap.ALLOW:
            self.max_running = 1
        return self


def catch_up_window_of(policy: MisfirePolicy | None, seconds: int | None) -> int | None:
    """A job's `catch_up_window_seconds` as given with `policy`: the default when a CATCH_UP
    job gives none; refused with another policy (a careful user who gives one meant CATCH_UP)."""
    if policy is MisfirePolicy.CATCH_UP:
        return DEFAULT_CATCH_UP_WINDOW_SECONDS if seconds is None else seconds
    if seconds is not None and policy is not None:
        raise ValueError(f"applies to misfire CATCH_UP only, not {policy}; leave it out")
    return seconds
