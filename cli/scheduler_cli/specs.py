"""From flags and files to the API's request bodies (docs/api.md: a job's fields).

A body can come from `--file` (JSON or YAML; `-` reads stdin) and from flags; flags win. A
schedule flag changes one part of the schedule and keeps the rest (its time zone, window and
jitter), as do the retry and concurrency flags; a target flag replaces the whole target, as
the API does (a target's secret headers read back as "***", so they are never merged). For
`jobs update` the parts kept are the job's as it is now.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, fields
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from scheduler_cli.api import usage

_RELATIVE = re.compile(r"^([+-])\s*(\d+)\s*([smhdw])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
SCHEDULE_KINDS = ("at", "cron", "rate")


def when(value: str, option: str) -> str:
    """An ISO-8601 time as given, or `now`, `+10s`, `-2h`, `+1d` (s, m, h, d, w) from now,
    in UTC."""
    text = value.strip()
    if text.lower() == "now":
        return _iso(datetime.now(UTC))
    found = _RELATIVE.match(text)
    if found:
        sign, amount, unit = found.groups()
        delta = timedelta(**{_UNITS[unit]: int(amount)})
        return _iso(datetime.now(UTC) + (delta if sign == "+" else -delta))
    try:
        datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        usage(f"{option}: {value!r} is not an ISO-8601 time, 'now' or a relative time such as +10s or -2h")
    return text


def _iso(moment: datetime) -> str:
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def json_value(value: str, option: str) -> Any:
    """JSON text, or @path to a JSON or YAML file."""
    if value.startswith("@"):
        return read_document(value[1:], option)
    try:
        return json.loads(value)
    except ValueError as error:
        usage(f"{option}: not JSON ({error}); give @file.json to read a file")


def read_document(path: str, option: str = "--file") -> Any:
    """A JSON or YAML document from `path` (`-`: stdin)."""
    try:
        raw = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except OSError as error:
        usage(f"{option}: cannot read {path}: {error.strerror or error}")
    try:
        return yaml.safe_load(raw) if raw.strip() else None
    except yaml.YAMLError as error:
        usage(f"{option}: {path} is neither JSON nor YAML: {error}")


def read_object(path: str | None) -> dict[str, Any]:
    if path is None:
        return {}
    document = read_document(path)
    if not isinstance(document, dict):
        usage(f"--file: {path} must hold one object (a job's or a workflow's fields)")
    found: dict[str, Any] = jsonable(document)
    return found


def jsonable(value: Any) -> Any:
    """YAML's own types (dates, times) as the JSON the API reads."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [jsonable(v) for v in value]
    if isinstance(value, datetime):
        return value.isoformat()
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return value


def headers(values: list[str] | None, option: str) -> dict[str, str] | None:
    """`Name: value` or `Name=value`, repeated."""
    if not values:
        return None
    found: dict[str, str] = {}
    for item in values:
        cut = min((i for i in (item.find(":"), item.find("=")) if i > 0), default=-1)
        if cut < 0:
            usage(f"{option}: {item!r} is not 'Name: value' or 'Name=value'")
        found[item[:cut].strip()] = item[cut + 1 :].strip()
    return found


@dataclass
class ScheduleFlags:
    at: str | None = None
    cron: str | None = None
    rate: str | None = None
    timezone: str | None = None
    start_at: str | None = None
    end_at: str | None = None
    jitter_seconds: int | None = None

    def given(self) -> dict[str, Any]:
        found = {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}
        for key in ("at", "start_at", "end_at"):
            if key in found:
                found[key] = when(found[key], "--" + key.replace("_", "-"))
        kinds = [kind for kind in SCHEDULE_KINDS if kind in found]
        if len(kinds) > 1:
            usage(f"give one of --at, --cron or --rate (got {', '.join('--' + k for k in kinds)})")
        return found

    def merged(self, current: Mapping[str, Any] | None) -> dict[str, Any] | None:
        """The schedule `current` becomes with these flags; None if no flag was given."""
        given = self.given()
        if not given:
            return None
        schedule = {k: v for k, v in (current or {}).items() if v is not None}
        if any(kind in given for kind in SCHEDULE_KINDS):
            for kind in SCHEDULE_KINDS:
                schedule.pop(kind, None)
            if "at" in given:  # a window is for cron and rate only
                schedule.pop("start_at", None)
                schedule.pop("end_at", None)
        return schedule | given


@dataclass
class TargetFlags:
    url: str | None = None
    method: str | None = None
    header: list[str] | None = None
    secret_header: list[str] | None = None
    timeout_seconds: int | None = None
    queue_url: str | None = None
    topic_arn: str | None = None
    function_arn: str | None = None
    event_bus: str | None = None
    source: str | None = None
    detail_type: str | None = None
    role_arn: str | None = None
    target: str | None = None

    def build(self) -> dict[str, Any] | None:
        """The target these flags name; None if none does."""
        kinds = {
            "--url": self.url,
            "--queue-url": self.queue_url,
            "--topic-arn": self.topic_arn,
            "--function-arn": self.function_arn,
            "--event-bus": self.event_bus,
            "--target": self.target,
        }
        named = [flag for flag, value in kinds.items() if value is not None]
        if len(named) > 1:
            usage(f"give one target (got {', '.join(named)})")
        if not named:
            extras = [
                name
                for name in ("method", "header", "secret_header", "timeout_seconds", "source", "role_arn")
                if getattr(self, name)
            ]
            if extras:
                usage(
                    "a target option needs its target: --url, --queue-url, --topic-arn, --function-arn, "
                    "--event-bus or --target"
                )
            return None
        if self.target is not None:
            target = json_value(self.target, "--target")
            if not isinstance(target, dict):
                usage('--target: give a JSON object such as \'{"type": "HTTP", "url": "https://…"}\'')
            return dict(target)
        if self.url is not None:
            target = {
                "type": "HTTP",
                "url": self.url,
                "method": self.method,
                "headers": headers(self.header, "--header"),
                "secret_headers": headers(self.secret_header, "--secret-header"),
                "timeout_seconds": self.timeout_seconds,
            }
        elif self.queue_url is not None:
            target = {"type": "SQS", "queue_url": self.queue_url}
        elif self.topic_arn is not None:
            target = {"type": "SNS", "topic_arn": self.topic_arn}
        elif self.function_arn is not None:
            target = {"type": "LAMBDA", "function_arn": self.function_arn}
        else:
            target = {
                "type": "EVENTBRIDGE",
                "event_bus_name": self.event_bus,
                "source": self.source,
                "detail_type": self.detail_type,
            }
        target["role_arn"] = self.role_arn
        return {k: v for k, v in target.items() if v is not None}


@dataclass
class PolicyFlags:
    priority: str | None = None
    max_attempts: int | None = None
    backoff_seconds: int | None = None
    max_backoff_seconds: int | None = None
    overlap: str | None = None
    max_running: int | None = None
    misfire: str | None = None
    catch_up_window_seconds: int | None = None

    def merged(self, current: Mapping[str, Any], *, with_retry: bool = True) -> dict[str, Any]:
        """The fields these flags change, each merged onto `current`'s."""
        found: dict[str, Any] = {}
        if self.priority is not None:
            found["priority"] = self.priority
        retry = {
            "max_attempts": self.max_attempts,
            "backoff_seconds": self.backoff_seconds,
            "max_backoff_seconds": self.max_backoff_seconds,
        }
        if with_retry and any(v is not None for v in retry.values()):
            found["retry"] = _merge(current.get("retry"), retry)
        concurrency = {"overlap": self.overlap, "max_running": self.max_running}
        if any(v is not None for v in concurrency.values()):
            merged = _merge(current.get("concurrency"), concurrency)
            if merged.get("overlap") == "ALLOW" and self.max_running is None:
                merged.pop("max_running", None)  # ALLOW has no limit
            found["concurrency"] = merged
        if self.misfire is not None:
            found["misfire"] = self.misfire
        if self.catch_up_window_seconds is not None:
            found["catch_up_window_seconds"] = self.catch_up_window_seconds
        return found


def _merge(current: Any, given: Mapping[str, Any]) -> dict[str, Any]:
    base = {k: v for k, v in (current or {}).items() if v is not None} if isinstance(current, dict) else {}
    return base | {k: v for k, v in given.items() if v is not None}


def needs_current(schedule: ScheduleFlags, policies: PolicyFlags) -> bool:
    """Whether the flags change part of a field, so the rest must be read first."""
    retry_or_concurrency = (
        policies.max_attempts,
        policies.backoff_seconds,
        policies.max_backoff_seconds,
        policies.overlap,
        policies.max_running,
    )
    return bool(schedule.given()) or any(v is not None for v in retry_or_concurrency)
