"""What an operator sees and does that the API does not offer: the DLQ (peeked, and re-driven)
and the depth of every queue. It talks to AWS directly, with the operator's credentials and
the stack's outputs, as `make redrive` does (infra/redrive.py, whose pieces it reuses), because
the DLQ belongs to the deployment, not to a tenant. `scheduler dlq` and the console use it.

A peek receives the DLQ's messages hidden for a moment (so a pass sees each once) and makes
them visible again at once: nothing is consumed, but each peek counts as a receive.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import boto3
from botocore.exceptions import BotoCoreError, ClientError
from pydantic import ValidationError

from infra import redrive as wiring
from infra.config import STACK_NAME
from scheduler_core.domain.messages import BATCH_SIZE, DeadLetter, RunMessage
from scheduler_core.domain.vocabulary import Priority
from scheduler_core.services.redrive import RedriveOutcome, RedriveReport
from scheduler_core.settings import Settings

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

__all__ = ["DEFAULT_STACK", "Operator", "RedriveOutcome", "RedriveReport", "StackNotReady"]

StackNotReady = wiring.StackNotReady
DEFAULT_STACK = STACK_NAME
EXPLANATIONS = wiring.EXPLANATIONS
# How long a peek hides what it received before it makes it visible again (if the peek dies
# half way, the messages come back on their own after this).
PEEK_HOLD_SECONDS = 30
DLQ = "dlq"
# The queue attributes behind each depth.
_DEPTHS = {
    "visible": "ApproximateNumberOfMessages",
    "delayed": "ApproximateNumberOfMessagesDelayed",
    "in_flight": "ApproximateNumberOfMessagesNotVisible",
}
_AGE_WINDOW = timedelta(minutes=10)


@dataclass
class Operator:
    """One deployed (or local) stack, as its operator reaches it."""

    session: boto3.session.Session
    stack: str
    settings: Settings

    @classmethod
    def for_stack(
        cls, session: boto3.session.Session, stack: str, endpoint_url: str | None = None
    ) -> Operator:
        """The stack named `stack`, its settings read from its outputs (StackNotReady if it
        has none); every AWS call goes to `endpoint_url` when one is given (the local cloud's
        moto)."""
        if endpoint_url:
            session = wiring.with_endpoint(session, endpoint_url)
        settings = wiring.deployed_settings(session.client("cloudformation"), stack)
        return cls(session, stack, settings)

    @classmethod
    def from_options(
        cls,
        stack: str | None = None,
        *,
        profile: str | None = None,
        region: str | None = None,
        endpoint_url: str | None = None,
    ) -> Operator:
        """As the command line names a stack: your usual credentials (or `profile`) and region;
        with `endpoint_url` (or AWS_ENDPOINT_URL), fake credentials and us-east-1 when you have
        none, as the local cloud needs."""
        session = wiring.make_session(endpoint_url, region, profile)
        return cls.for_stack(session, stack or DEFAULT_STACK)

    @property
    def dlq_url(self) -> str:
        return self.settings.dlq_url

    def _sqs(self) -> SQSClient:
        return self.session.client("sqs")

    # --- the DLQ ---------------------------------------------------------------------------

    def dead_letters(self, limit: int = 50) -> list[dict[str, Any]]:
        """Up to `limit` messages of the DLQ, oldest first, left on it: each one's id, the
        job and run it is about (when it is readable), why it is there, when it was sent,
        how often it was received, and its body."""
        sqs = self._sqs()
        received: dict[str, dict[str, Any]] = {}
        handles: list[str] = []
        try:
            while len(received) < limit:
                reply = sqs.receive_message(
                    QueueUrl=self.dlq_url,
                    MaxNumberOfMessages=max(1, min(BATCH_SIZE, limit - len(received))),
                    VisibilityTimeout=PEEK_HOLD_SECONDS,
                    WaitTimeSeconds=0 if received else 1,
                    MessageSystemAttributeNames=["All"],
                    MessageAttributeNames=["All"],
                )
                fresh = [m for m in reply.get("Messages", []) if m["MessageId"] not in received]
                handles += [m["ReceiptHandle"] for m in reply.get("Messages", [])]
                if not fresh:
                    break
                for message in fresh:
                    received[message["MessageId"]] = describe_dead_letter(message)
        finally:
            self._release(sqs, handles)
        return sorted(received.values(), key=lambda letter: (letter["sent_at"] or "", letter["message_id"]))

    def _release(self, sqs: SQSClient, handles: list[str]) -> None:
        for start in range(0, len(handles), BATCH_SIZE):
            chunk = handles[start : start + BATCH_SIZE]
            # If this fails, they come back on their own after PEEK_HOLD_SECONDS.
            with contextlib.suppress(BotoCoreError, ClientError):
                sqs.change_message_visibility_batch(
                    QueueUrl=self.dlq_url,
                    Entries=[
                        {"Id": str(i), "ReceiptHandle": handle, "VisibilityTimeout": 0}
                        for i, handle in enumerate(chunk)
                    ],
                )

    def redrive(self, limit: int | None = None) -> RedriveReport:
        """One pass of `make redrive` over the DLQ (scheduler_core.services.redrive): FAILED
        runs get a new attempt, poison run messages go back to their queue, records of runs
        that moved on are dropped, the unreadable stay."""
        return wiring.redrive_pass(self.session, self.settings, limit)

    # --- the queues ------------------------------------------------------------------------

    def queue_urls(self) -> dict[str, str]:
        """ "high", "normal", "low" and "dlq" → the queue's URL."""
        return {str(p).lower(): self.settings.queue_url(p) for p in Priority} | {DLQ: self.dlq_url}

    def queue_depths(self) -> dict[str, dict[str, int]]:
        """Per queue ("high", "normal", "low", "dlq"): `visible`, `delayed` and `in_flight`
        messages (SQS's approximate counts), and `oldest_age_seconds` where CloudWatch has it
        (a deployed stack's queue metrics, a minute or so behind)."""
        sqs = self._sqs()
        urls = self.queue_urls()
        depths: dict[str, dict[str, int]] = {}
        for name, url in urls.items():
            reply = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])
            attributes = {str(key): value for key, value in reply["Attributes"].items()}
            depths[name] = {key: int(attributes.get(attribute, 0)) for key, attribute in _DEPTHS.items()}
        for name, age in self._oldest_ages(urls).items():
            depths[name]["oldest_age_seconds"] = age
        return depths

    def _oldest_ages(self, urls: dict[str, str]) -> dict[str, int]:
        """CloudWatch's latest ApproximateAgeOfOldestMessage per queue; none it lacks (no
        data yet, no permission, no CloudWatch)."""
        now = datetime.now(UTC)
        queries: list[Any] = [
            {
                "Id": f"q{index}",
                "Label": name,
                "MetricStat": {
                    "Metric": {
                        "Namespace": "AWS/SQS",
                        "MetricName": "ApproximateAgeOfOldestMessage",
                        "Dimensions": [{"Name": "QueueName", "Value": url.rstrip("/").rsplit("/", 1)[-1]}],
                    },
                    "Period": 60,
                    "Stat": "Maximum",
                },
            }
            for index, (name, url) in enumerate(urls.items())
        ]
        try:
            reply = self.session.client("cloudwatch").get_metric_data(
                MetricDataQueries=queries,
                StartTime=now - _AGE_WINDOW,
                EndTime=now,
                ScanBy="TimestampDescending",
            )
        except (BotoCoreError, ClientError):
            return {}
        names = {query["Id"]: query["Label"] for query in queries}
        return {
            names[result["Id"]]: int(result["Values"][0])
            for result in reply.get("MetricDataResults", [])
            if result.get("Values") and result.get("Id") in names
        }


def describe_dead_letter(message: Any) -> dict[str, Any]:
    """One received DLQ message as `dead_letters` gives it."""
    attributes = message.get("Attributes", {})
    raw = message.get("Body", "")
    body: Any
    try:
        body = json.loads(raw)
    except ValueError:
        body = raw
    letter: dict[str, Any] = {
        "message_id": message["MessageId"],
        "kind": "UNREADABLE",
        "job_id": None,
        "run_id": None,
        "reason": "unreadable: neither a RUN_FAILED record nor a run message",
        "attempts": None,
        "response_code": None,
        "failed_at": None,
        "sent_at": _from_ms(attributes.get("SentTimestamp")),
        "receive_count": int(attributes.get("ApproximateReceiveCount", 0)),
        "source_queue": attributes.get("DeadLetterQueueSourceArn"),
        "body": body,
    }
    try:
        record = DeadLetter.model_validate_json(raw)
    except ValidationError:
        pass
    else:
        return letter | {
            "kind": record.kind,
            "job_id": record.job_id,
            "run_id": record.run_id,
            "reason": f"failed after {record.attempts} attempt(s): {record.last_error or 'no error given'}",
            "attempts": record.attempts,
            "response_code": record.response_code,
            "failed_at": record.failed_at,
        }
    try:
        pointer = RunMessage.model_validate_json(raw)
    except ValidationError:
        return letter
    return letter | {
        "kind": "RUN_MESSAGE",
        "job_id": pointer.job_id,
        "run_id": pointer.run_id,
        "reason": "poison: workers received it from its queue and never finished it (maxReceiveCount)",
        "attempts": pointer.attempt,
    }


def _from_ms(value: str | None) -> str | None:
    if not value:
        return None
    moment = datetime.fromtimestamp(int(value) / 1000, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
