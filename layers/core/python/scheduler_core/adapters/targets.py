"""Delivering a run to its job's target (DESIGN §7). Delivery never raises: whatever goes
wrong is a failed `Delivery`, so the run is always finished.

- HTTP: the payload as JSON with the scheduler's headers, through `GuardedHttp` (the SSRF
  guard: an address the deployment refuses is a final failure; one deadline for the whole
  call). 2xx is success; 408/429/5xx, timeouts and connection failures are worth retrying;
  any other 4xx is final, and so is a 3xx: redirects are not followed (a target that moved
  is a set-up to fix, not something a later attempt fixes). Errors name the URL's host and
  port only: a path or query can carry a token.
- SQS / SNS: the payload as the message (JSON), the scheduler's headers as message
  attributes; FIFO queues and topics get MessageGroupId = job id and MessageDeduplicationId =
  run id (`fifo_id`).
- EVENTBRIDGE / LAMBDA: `run_event` (the payload object plus the run's ids under
  "scheduler") as the event's `detail` (PutEvents) or as the event of an asynchronous
  invocation (InvocationType Event: success means Lambda accepted the event; the function's
  own errors are Lambda's to retry, as its asynchronous invocation settings say).

Every AWS error goes through `aws_errors.aws_failure`, the one classification.

An AWS target with an execution role (`role_arn`) is called with that role's temporary
credentials (`AssumedRoles`), never the worker's own; a role STS will not hand out fails the
run with what to fix in the role's trust policy (final, unless STS was throttled or down).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, assert_never
from urllib.parse import urlsplit

import httpcore
from botocore.exceptions import BotoCoreError, ClientError
from pydantic import ValidationError

from scheduler_core.adapters.assumed_roles import AssumedRoles, RoleNotAssumed
from scheduler_core.adapters.aws import AwsClients
from scheduler_core.adapters.aws_errors import aws_error_retryable, aws_failure
from scheduler_core.adapters.http_client import AddressRefused, GuardedHttp
from scheduler_core.domain import keys
from scheduler_core.domain.addresses import AddressPolicy
from scheduler_core.domain.clock import Clock, SystemClock
from scheduler_core.domain.entities import Job, Run, iso_or_none
from scheduler_core.domain.messages import fifo_id
from scheduler_core.domain.target_spec import (
    EventBridgeTarget,
    HttpTarget,
    LambdaTarget,
    SnsTarget,
    SqsTarget,
    reserved_header_reason,
)
from scheduler_core.domain.vocabulary import MAX_OUTPUT_BYTES, RUN_METADATA_KEY, JobKind
from scheduler_core.domain.webhooks import webhook_headers
from scheduler_core.observability import logger
from scheduler_core.ports import Delivery

USER_AGENT = "serverless-scheduler/0.1"
_RETRYABLE_HTTP = {408, 429}


def scheduler_headers(job: Job, run: Run) -> dict[str, str]:
    """The headers every delivery carries; `Idempotency-Key` lets targets drop repeats. A
    workflow task's also name its workflow run and task."""
    headers = {
        "Idempotency-Key": run.run_id,
        "X-Scheduler-Job-Id": job.job_id,
        "X-Scheduler-Run-Id": run.run_id,
        "X-Scheduler-Scheduled-For": iso_or_none(run.scheduled_for) or "",
        "X-Scheduler-Attempt": str(run.attempt),
    }
    if job.workflow_id is not None and job.task_id is not None:
        headers["X-Scheduler-Workflow-Run-Id"] = keys.run_id(job.workflow_id, run.scheduled_for_ms)
        headers["X-Scheduler-Task-Id"] = job.task_id
    return headers


def run_metadata(job: Job, run: Run) -> dict[str, Any]:
    """The run's ids, as an EVENTBRIDGE or LAMBDA target gets them under "scheduler"."""
    metadata: dict[str, Any] = {
        "job_id": job.job_id,
        "run_id": run.run_id,
        "scheduled_for": iso_or_none(run.scheduled_for),
        "attempt": run.attempt,
    }
    if job.workflow_id is not None and job.task_id is not None:
        metadata["workflow_run_id"] = keys.run_id(job.workflow_id, run.scheduled_for_ms)
        metadata["task_id"] = job.task_id
    return metadata


def json_output(body: bytes) -> str | None:
    """A 2xx answer's body as a task's output: JSON text of at most MAX_OUTPUT_BYTES, else
    none (not JSON, too big, empty)."""
    if not body or len(body) > MAX_OUTPUT_BYTES:
        return None
    try:
        return json.dumps(json.loads(body), separators=(",", ":"), ensure_ascii=False)
    except ValueError:
        return None


def id_output(value: object) -> str | None:
    """An AWS id (message, event, request) as a task's output: a JSON string."""
    return json.dumps(value) if isinstance(value, str) and value else None


def run_event(job: Job, run: Run) -> dict[str, Any]:
    """The event an EVENTBRIDGE target's `detail` or a LAMBDA target's event is: a JSON object,
    as EventBridge requires. A payload object's own fields, plus the run's ids under
    "scheduler" (validation keeps that key free; the scheduler's value wins regardless); any
    other payload (a list, a string, a number, true/false) sits under "payload"; no payload
    (null), just the ids."""
    payload = job.payload
    if isinstance(payload, dict):
        event: dict[str, Any] = dict(payload)
    elif payload is None:
        event = {}
    else:
        event = {"payload": payload}
    event[RUN_METADATA_KEY] = run_metadata(job, run)
    return event


# Characters JSON text may hold raw that SQS (and SNS through it) refuse in a message: lone
# surrogates and the non-characters U+FFFE/U+FFFF. They only occur inside JSON strings.
_NOT_IN_MESSAGES = re.compile("[\ud800-\udfff\ufffe\uffff]")


def message_json(value: Any) -> str:
    """Compact JSON that keeps non-ASCII text as it is: AWS's size limits count UTF-8 bytes,
    and \\u escapes would double or triple the size of non-Latin text."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return _NOT_IN_MESSAGES.sub(lambda match: f"\\u{ord(match.group()):04x}", text)


def _fifo_ids(job: Job, run: Run) -> dict[str, str]:
    # One group per job keeps its runs in order; one deduplication id per run makes a repeat
    # of the same run within the 5-minute window (an attempt whose answer was lost) a no-op.
    return {"MessageGroupId": fifo_id(job.job_id), "MessageDeduplicationId": fifo_id(run.run_id)}


def _message_attributes(job: Job, run: Run) -> dict[str, dict[str, str]]:
    return {
        name: {"DataType": "String", "StringValue": value}
        for name, value in scheduler_headers(job, run).items()
    }


def http_retryable(status: int) -> bool:
    return status in _RETRYABLE_HTTP or status >= 500


class TargetDelivery:
    """`TargetInvoker` for every target type."""

    def __init__(
        self,
        clients: AwsClients,
        http: GuardedHttp | None = None,
        *,
        secret_headers: Callable[[Job], dict[str, str]] | None = None,
        signing_secrets: Callable[[str], list[str]] | None = None,
        clock: Clock | None = None,
        roles: AssumedRoles | None = None,
    ) -> None:
        """`http`: the HTTP client and its address policy (default: public addresses only);
        `secret_headers`: a job's secret headers, opened; `signing_secrets`: the secrets that
        sign a tenant's webhooks now (None, or none for the tenant: unsigned); `roles`: how
        the targets' execution roles are assumed (default: with `clients`)."""
        self._clients = clients
        self._http = http or GuardedHttp(AddressPolicy())
        self._secret_headers = secret_headers
        self._signing_secrets = signing_secrets
        self._clock = clock or SystemClock()
        self._roles = roles or AssumedRoles(clients, self._clock)

    def begin_invocation(self, context: Any) -> None:
        """Nothing to prepare: each delivery stands alone."""

    def deliver(self, job: Job, run: Run) -> Delivery:
        try:
            target = job.target
            if target is None:  # a workflow: the worker begins its runs, never delivers them
                return Delivery(ok=False, error="a workflow has no target of its own", retryable=False)
            if isinstance(target, HttpTarget):
                return self._deliver_http(target, job, run)
            try:
                # A target with an execution role is called as that role, never as the worker.
                clients = (
                    self._roles.clients(target.role_arn, job.tenant, run.run_id)
                    if target.role_arn
                    else self._clients
                )
            except RoleNotAssumed as refused:
                return Delivery(ok=False, error=str(refused), retryable=refused.retryable)
            try:
                if isinstance(target, SqsTarget):
                    return self._deliver_sqs(clients, target, job, run)
                if isinstance(target, SnsTarget):
                    return self._deliver_sns(clients, target, job, run)
                if isinstance(target, EventBridgeTarget):
                    return self._deliver_eventbridge(clients, target, job, run)
                if isinstance(target, LambdaTarget):
                    return self._deliver_lambda(clients, target, job, run)
                assert_never(target)
            except (ClientError, BotoCoreError) as error:
                return aws_failure(_SERVICE_NAMES[target.type], error)
        except Exception as error:
            # A bug, or input that validation let through: raising would leave the run RUNNING.
            logger.exception("delivery raised", extra={"job_id": job.job_id, "run_id": run.run_id})
            return Delivery(ok=False, error=f"{type(error).__name__}: {error}", retryable=False)

    def _deliver_http(self, target: HttpTarget, job: Job, run: Run) -> Delivery:
        # Validation already refuses headers the scheduler or HTTP owns; dropping them here too
        # (in any case) keeps the scheduler's own headers authoritative whatever the job holds.
        own = {name: value for name, value in target.headers.items() if reserved_header_reason(name) is None}
        # The API validated the target; once more here (microseconds) so that whatever a stored
        # job holds, no request goes out that the rules refuse (a CR LF in a header, a space
        # in the path): it fails for good instead, naming the fields, never their values (a
        # URL's path or a header can hold a token).
        try:
            target = HttpTarget.model_validate(target.model_dump() | {"headers": own})
        except ValidationError as invalid:
            fields = ", ".join(".".join(map(str, e["loc"])) for e in invalid.errors())
            return Delivery(
                ok=False, error=f"the stored target breaks today's rules: {fields}", retryable=False
            )
        parts = urlsplit(target.url)
        where = parts.netloc  # a URL's path and query can hold a token (chat webhooks): never named
        body = None if target.method == "GET" else json.dumps(job.payload).encode()
        chosen = {name.lower() for name in own}  # a job's own Content-Type or User-Agent wins
        headers = {
            name: value
            for name, value in {
                "Host": where,
                "Content-Type": "application/json",
                "User-Agent": USER_AGENT,
            }.items()
            if name.lower() not in chosen
        }
        try:
            secret = self._secret_headers(job) if self._secret_headers and job.sealed_headers else {}
            signing = self._signing_secrets(job.tenant) if self._signing_secrets else []
        except (ClientError, BotoCoreError) as error:  # KMS or DynamoDB: a throttle passes
            return aws_failure("opening the job's secrets", error)
        timestamp = int(self._clock.now().timestamp())
        headers |= own | secret | scheduler_headers(job, run)
        headers |= webhook_headers(signing, run.run_id, timestamp, body or b"")
        # Only a workflow task's answer body is read (its output); a plain job's is not waited for.
        wanted = MAX_OUTPUT_BYTES + 1 if job.kind is JobKind.TASK else 0
        try:
            answer = self._http.send(
                target.method,
                target.url,
                [(name.encode("latin-1"), value.encode("latin-1")) for name, value in headers.items()],
                body,
                target.timeout_seconds,
                read_body=wanted,
            )
        except AddressRefused as refused:
            return Delivery(ok=False, error=f"refused to call {where}: {refused}", retryable=False)
        except httpcore.TimeoutException:
            return Delivery(
                ok=False,
                error=f"{where} did not answer within {target.timeout_seconds}s (connect, send and answer)",
                retryable=True,
            )
        except (httpcore.LocalProtocolError, httpcore.UnsupportedProtocol) as error:
            # Its text can quote a header's value (a secret one too): the type only.
            return Delivery(
                ok=False,
                error=f"cannot send to {where}: the request is malformed ({type(error).__name__})",
                retryable=False,
            )
        except (httpcore.NetworkError, httpcore.ProtocolError) as error:
            return Delivery(
                ok=False, error=f"cannot reach {where}: {error or type(error).__name__}", retryable=True
            )
        status = answer.status
        if 200 <= status < 300:
            return Delivery(ok=True, status_code=status, output=json_output(answer.body) if wanted else None)
        if 300 <= status < 400:
            location = urlsplit(answer.headers.get("location", ""))
            to = f" to {location.scheme}://{location.netloc}" if location.netloc else ""
            return Delivery(
                ok=False,
                status_code=status,
                error=f"HTTP {status} from {where}: redirects{to} are not followed; point the target at "
                "the URL it redirects to",
                retryable=False,
            )
        return Delivery(
            ok=False,
            status_code=status,
            error=f"HTTP {status} from {where}",
            retryable=http_retryable(status),
        )

    def _deliver_sqs(self, clients: AwsClients, target: SqsTarget, job: Job, run: Run) -> Delivery:
        request: dict[str, Any] = {
            "QueueUrl": target.queue_url,
            "MessageBody": message_json(job.payload),
            "MessageAttributes": _message_attributes(job, run),
        }
        if target.fifo:
            request |= _fifo_ids(job, run)
        reply = clients.sqs().send_message(**request)
        return Delivery(ok=True, output=id_output(reply.get("MessageId")))

    def _deliver_sns(self, clients: AwsClients, target: SnsTarget, job: Job, run: Run) -> Delivery:
        request: dict[str, Any] = {
            "TopicArn": target.topic_arn,
            "Message": message_json(job.payload),
            "MessageAttributes": _message_attributes(job, run),
        }
        if target.fifo:
            request |= _fifo_ids(job, run)
        reply = clients.sns(target.region).publish(**request)
        return Delivery(ok=True, output=id_output(reply.get("MessageId")))

    def _deliver_eventbridge(
        self, clients: AwsClients, target: EventBridgeTarget, job: Job, run: Run
    ) -> Delivery:
        reply = clients.events(target.region).put_events(
            Entries=[
                {
                    "EventBusName": target.event_bus_name,
                    "Source": target.source,
                    "DetailType": target.detail_type,
                    "Detail": message_json(run_event(job, run)),
                }
            ]
        )
        # PutEvents answers 200 and reports a refused entry in the entry itself.
        failed = [entry for entry in reply.get("Entries", []) if entry.get("ErrorCode")]
        if not failed and not reply.get("FailedEntryCount"):
            entries = reply.get("Entries") or [{}]
            return Delivery(ok=True, output=id_output(entries[0].get("EventId")))
        code = failed[0].get("ErrorCode", "") if failed else ""
        message = failed[0].get("ErrorMessage", "") if failed else "no reason given"
        return Delivery(
            ok=False,
            error=f"EventBridge {code or 'failed entry'}: {message}",
            retryable=aws_error_retryable(code),
        )

    def _deliver_lambda(self, clients: AwsClients, target: LambdaTarget, job: Job, run: Run) -> Delivery:
        reply = clients.lambda_(target.region).invoke(
            FunctionName=target.function_arn,
            InvocationType="Event",
            Payload=message_json(run_event(job, run)).encode(),
        )
        status = reply.get("StatusCode", 0)
        # 202: Lambda queued the event. (It reports no function error for asynchronous calls.)
        if 200 <= status < 300:
            request_id = reply.get("ResponseMetadata", {}).get("RequestId")
            return Delivery(ok=True, output=id_output(request_id))
        return Delivery(
            ok=False,
            error=f"Lambda answered {status} to an asynchronous invocation",
            retryable=http_retryable(status),
        )


_SERVICE_NAMES = {
    "SQS": "SQS",
    "SNS": "SNS",
    "EVENTBRIDGE": "EventBridge",
    "LAMBDA": "Lambda",
    "HTTP": "HTTP",
}
