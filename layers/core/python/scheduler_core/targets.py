"""Delivering a run to its job's target (DESIGN §7). HTTP: the payload as JSON with the
scheduler's headers; 2xx is success, 408/429/5xx/timeouts are worth retrying, any other
4xx is final. SQS: the payload as the message body. Delivery never raises: whatever goes
wrong is a failed `Delivery`, so the run is always finished."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from scheduler_core.aws import AwsClients
from scheduler_core.model import HttpTarget, Job, Run, SqsTarget, iso_or_none, reserved_header_reason
from scheduler_core.observability import logger
from scheduler_core.ports import Delivery

USER_AGENT = "serverless-scheduler/0.1"
_RETRYABLE_HTTP = {408, 429}
_RETRYABLE_AWS = {
    "Throttling",
    "ThrottlingException",
    "RequestThrottled",
    "ServiceUnavailable",
    "InternalError",
}


def scheduler_headers(job: Job, run: Run) -> dict[str, str]:
    """The headers every delivery carries; `Idempotency-Key` lets targets drop repeats."""
    return {
        "Idempotency-Key": run.run_id,
        "X-Scheduler-Job-Id": job.job_id,
        "X-Scheduler-Run-Id": run.run_id,
        "X-Scheduler-Scheduled-For": iso_or_none(run.scheduled_for) or "",
        "X-Scheduler-Attempt": str(run.attempt),
    }


def http_retryable(status: int) -> bool:
    return status in _RETRYABLE_HTTP or status >= 500


class TargetDispatcher:
    """`TargetInvoker` for every target type."""

    def __init__(self, clients: AwsClients) -> None:
        self._clients = clients

    def begin_invocation(self, context: Any) -> None:
        """Nothing to prepare: each delivery stands alone."""

    def deliver(self, job: Job, run: Run) -> Delivery:
        try:
            if isinstance(job.target, HttpTarget):
                return self._deliver_http(job.target, job, run)
            return self._deliver_sqs(job.target, job, run)
        except Exception as error:
            # A bug, or input that validation let through: raising would leave the run RUNNING.
            logger.exception("delivery raised", extra={"job_id": job.job_id, "run_id": run.run_id})
            return Delivery(ok=False, error=f"{type(error).__name__}: {error}", retryable=False)

    def _deliver_http(self, target: HttpTarget, job: Job, run: Run) -> Delivery:
        # Validation already refuses headers the scheduler or HTTP owns; dropping them here too
        # (in any case) keeps the scheduler's own headers authoritative whatever the job holds.
        own = {name: value for name, value in target.headers.items() if reserved_header_reason(name) is None}
        headers = {"Content-Type": "application/json", "User-Agent": USER_AGENT}
        headers |= own | scheduler_headers(job, run)
        body = None if target.method == "GET" else json.dumps(job.payload).encode()
        request = urllib.request.Request(target.url, data=body, headers=headers, method=target.method)
        try:
            with urllib.request.urlopen(request, timeout=target.timeout_seconds) as response:
                return Delivery(ok=True, status_code=response.status)
        except urllib.error.HTTPError as error:
            return Delivery(
                ok=False,
                status_code=error.code,
                error=f"HTTP {error.code} from {target.url}",
                retryable=http_retryable(error.code),
            )
        except TimeoutError:
            return Delivery(ok=False, error=f"timed out after {target.timeout_seconds}s", retryable=True)
        except (urllib.error.URLError, OSError) as error:
            reason = getattr(error, "reason", error)
            return Delivery(ok=False, error=f"cannot reach {target.url}: {reason}", retryable=True)

    def _deliver_sqs(self, target: SqsTarget, job: Job, run: Run) -> Delivery:
        attributes = {
            name: {"DataType": "String", "StringValue": value}
            for name, value in scheduler_headers(job, run).items()
        }
        try:
            self._clients.sqs().send_message(
                QueueUrl=target.queue_url,
                MessageBody=json.dumps(job.payload),
                MessageAttributes=attributes,  # type: ignore[arg-type]
            )
        except ClientError as error:
            code = str(error.response.get("Error", {}).get("Code", ""))
            return Delivery(ok=False, error=f"SQS {code}: {error}", retryable=code in _RETRYABLE_AWS)
        except BotoCoreError as error:
            return Delivery(ok=False, error=f"SQS unreachable: {error}", retryable=True)
        return Delivery(ok=True)
