"""EventBridge scheduled rules on the wall clock: each target invoked with its input."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from croniter import croniter

from infra.local.functions import FunctionError, FunctionHost

_RATE = re.compile(r"^rate\((\d+) (minute|minutes|hour|hours|day|days)\)$")
_UNIT_SECONDS = {"minute": 60, "hour": 3600, "day": 86400}


@dataclass(frozen=True)
class ScheduledTarget:
    rule: str
    expression: str
    host: FunctionHost
    event: Any


def period_of(expression: str) -> float | None:
    match = _RATE.match(expression)
    if not match:
        return None
    return int(match.group(1)) * _UNIT_SECONDS[match.group(2).rstrip("s")]


def cron_of(expression: str) -> str | None:
    """EventBridge's 6-field `cron(m h dom mon dow year)` as a 5-field croniter expression."""
    if not (expression.startswith("cron(") and expression.endswith(")")):
        return None
    minute, hour, dom, month, dow, _year = expression[5:-1].split()
    return " ".join(field.replace("?", "*") for field in (minute, hour, dom, month, dow))


def scheduled_targets(aws: Any, hosts: dict[str, FunctionHost]) -> list[ScheduledTarget]:
    """Every enabled scheduled rule's Lambda targets, from the deployed EventBridge."""
    events = aws.client("events")
    targets = []
    for rule in events.list_rules()["Rules"]:
        expression = rule.get("ScheduleExpression")
        if not expression or rule.get("State") != "ENABLED":
            continue
        for target in events.list_targets_by_rule(Rule=rule["Name"])["Targets"]:
            if target["Arn"] in hosts:
                event = json.loads(target["Input"]) if "Input" in target else _scheduled_event(rule)
                targets.append(ScheduledTarget(rule["Name"], expression, hosts[target["Arn"]], event))
    return targets


def _scheduled_event(rule: dict[str, Any]) -> dict[str, Any]:
    return {
        "version": "0",
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "resources": [rule["Arn"]],
        "detail": {},
    }


class ScheduleDriver:
    """Fires each rule at once on start (so a fresh local cloud polls without waiting a
    minute), then on its schedule. Invocations are asynchronous, as EventBridge's are."""

    def __init__(
        self, targets: list[ScheduledTarget], on_error: Callable[[ScheduledTarget, str], None]
    ) -> None:
        self._targets = targets
        self._on_error = on_error
        self._stop = threading.Event()
        self._pool = ThreadPoolExecutor(max_workers=max(1, len(targets)), thread_name_prefix="eventbridge")

    def start(self) -> None:
        for expression in {t.expression for t in self._targets}:
            group = [t for t in self._targets if t.expression == expression]
            threading.Thread(target=self._run, args=(expression, group), daemon=True).start()

    def _run(self, expression: str, group: list[ScheduledTarget]) -> None:
        period, cron = period_of(expression), cron_of(expression)
        next_at = time.time()
        while not self._stop.is_set():
            for target in group:
                self._pool.submit(self._invoke, target)
            if period is not None:
                next_at += period
            elif cron is not None:
                next_at = croniter(cron, datetime.now(UTC)).get_next(float)
            else:
                return
            self._stop.wait(max(0.0, next_at - time.time()))

    def _invoke(self, target: ScheduledTarget) -> None:
        try:
            target.host.invoke(target.event)
        except FunctionError as error:
            if not self._stop.is_set():
                self._on_error(target, str(error))

    def stop(self) -> None:
        self._stop.set()
        self._pool.shutdown(wait=False, cancel_futures=True)
