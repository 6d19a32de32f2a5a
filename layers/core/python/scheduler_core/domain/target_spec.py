"""A job's target (DESIGN §7): HTTP, SQS, SNS, EventBridge or Lambda, and the rules each
must meet as the API receives it, so a target that cannot be delivered is a 400 naming
its field, not a failed run later. Pure."""

from __future__ import annotations

import re
from typing import Annotated, Literal, get_args
from urllib.parse import quote, unquote, urlsplit

from pydantic import AfterValidator, Field, SecretStr, field_serializer, field_validator, model_validator

from scheduler_core.domain.strict import StrictModel
from scheduler_core.domain.vocabulary import MAX_HEADER_VALUE_LENGTH, MAX_HEADERS, MAX_URL_LENGTH

# What a secret header's value is shown as; in a change, what keeps the value held.
SECRET_MASK = "***"

# A DNS name or IPv4 address: labels of 1-63 letters, digits, '-' or '_', and an optional
# final dot. Anything else (a '%' that urllib would unquote, an empty label) breaks delivery.
_HOST_NAME = re.compile(r"(?:[A-Za-z0-9_-]{1,63}\.)*[A-Za-z0-9_-]{1,63}\.?")
# RFC 9110 §5.6.2: a field name is a token.
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
# Headers the scheduler sets on every delivery, or that HTTP derives from the request itself.
_HEADER_OWNERS = {
    "content-length": "is set by the HTTP client from the body",
    "transfer-encoding": "is set by the HTTP client",
    "connection": "is set by the HTTP client",
    "host": "is set by the HTTP client from the URL",
    "idempotency-key": "is set by the scheduler (to the run id)",
    "webhook-id": "is set by the scheduler (signed webhooks: the run id)",
    "webhook-timestamp": "is set by the scheduler (signed webhooks)",
    "webhook-signature": "is set by the scheduler (signed webhooks)",
}


def _is_control(char: str) -> bool:
    return ord(char) < 0x20 or char == "\x7f"


def _http_url(value: str) -> str:
    """An absolute http(s) URL that the worker can send to as it is: checked here, so a bad
    one is a 400 at create instead of a delivery that cannot even start."""
    bad = next((char for char in value if char.isspace() or _is_control(char)), None)
    if bad is not None:
        raise ValueError(
            "must not contain whitespace or control characters; "
            f"percent-encode them ({bad!r} is {quote(bad, safe='')})"
        )
    bad = next((char for char in value if not char.isascii()), None)
    if bad is not None:
        raise ValueError(f"must be ASCII; percent-encode other characters ({bad} is {quote(bad, safe='')})")
    try:
        parts = urlsplit(value)
    except ValueError as exc:  # e.g. a bracketed host that is no IPv6 address
        raise ValueError(f"is not a valid URL: {exc}") from exc
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError("must be an absolute http:// or https:// URL")
    if "@" in parts.netloc:
        raise ValueError("must not carry user:password@; send credentials in a header")
    host = parts.hostname or ""
    if not host:
        raise ValueError("must name a host")
    if not parts.netloc.startswith("[") and (len(host) > 253 or not _HOST_NAME.fullmatch(host)):
        raise ValueError(f"host {host!r} is not a valid DNS name or IP address")
    try:
        port = parts.port
    except ValueError:
        port = 0
    if port == 0:
        raise ValueError("port must be a number from 1 to 65535")
    return value


def reserved_header_reason(name: str) -> str | None:
    """Why a job may not set header `name` (any case), or None when it may."""
    lowered = name.lower()
    if lowered.startswith("x-scheduler-"):
        return "is set by the scheduler"
    return _HEADER_OWNERS.get(lowered)


def _header_name(name: str) -> str:
    if not _TOKEN.fullmatch(name):
        raise ValueError(
            "header name must be an HTTP token: letters, digits and !#$%&'*+-.^_`|~ (no spaces or colons)"
        )
    reason = reserved_header_reason(name)
    if reason is not None:
        raise ValueError(f"header {name} {reason}; remove it")
    return name


def _header_value(value: str) -> str:
    # RFC 9110 §5.5: visible characters, spaces and tabs, and obs-text (Latin-1), no CR/LF/NUL.
    if any(_is_control(char) and char != "\t" for char in value):
        raise ValueError("header value must not contain CR, LF, NUL or other control characters")
    if value != value.strip(" \t"):  # RFC 9110 field-value: HTTP clients refuse to send it
        raise ValueError("header value must not start or end with a space or tab")
    try:
        value.encode("latin-1")
    except UnicodeEncodeError as exc:
        raise ValueError(
            f"header value must be Latin-1 text; {value[exc.start]!r} is not (percent-encode it)"
        ) from exc
    return value


def _secret_header_value(value: SecretStr) -> SecretStr:
    text = value.get_secret_value()
    if len(text.encode()) > MAX_HEADER_VALUE_LENGTH:  # sealed as UTF-8: KMS takes 4096 bytes
        raise ValueError(f"header value must be at most {MAX_HEADER_VALUE_LENGTH} bytes in UTF-8")
    _header_value(text)
    return value


HeaderName = Annotated[str, AfterValidator(_header_name)]
HeaderValue = Annotated[str, Field(max_length=MAX_HEADER_VALUE_LENGTH), AfterValidator(_header_value)]
# Held as SecretStr: its repr is masked, so no log line or error message can show it.
SecretHeaderValue = Annotated[SecretStr, AfterValidator(_secret_header_value)]


class HttpTarget(StrictModel):
    type: Literal["HTTP"]
    url: str = Field(
        max_length=MAX_URL_LENGTH,
        description="Absolute http(s) URL that receives the payload; ASCII only (percent-encode the rest).",
    )
    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE"] = "POST"
    headers: dict[HeaderName, HeaderValue] = Field(
        default_factory=dict,
        max_length=MAX_HEADERS,
        description="Extra request headers. Content-Length, Host, Transfer-Encoding, Connection, "
        "Idempotency-Key, webhook-id, webhook-timestamp, webhook-signature and X-Scheduler-* belong to "
        "the scheduler or HTTP and are refused.",
    )
    secret_headers: dict[HeaderName, SecretHeaderValue] = Field(
        default_factory=dict,
        max_length=MAX_HEADERS,
        description="Request headers whose values are secret (an Authorization token): the same rules "
        'as `headers`, stored encrypted (KMS), shown as "***" in every response and never logged. '
        'In a change, "***" keeps the value the job holds for that header.',
    )
    timeout_seconds: float = Field(
        10,
        gt=0,
        le=60,
        description="One deadline for the whole call: "
        "connecting, sending, and the answer's headers (and, for a workflow task, its body).",
    )

    @field_validator("url")
    @classmethod
    def _url_is_http(cls, value: str) -> str:
        return _http_url(value)

    @field_serializer("secret_headers")
    def _masked(self, values: dict[str, SecretStr]) -> dict[str, str]:
        """Shown, stored and fingerprinted as "***", whatever is held."""
        return dict.fromkeys(values, SECRET_MASK)

    @model_validator(mode="after")
    def _no_header_twice(self) -> HttpTarget:
        plain = {name.lower() for name in self.headers}
        both = [name for name in self.secret_headers if name.lower() in plain]
        if both:
            raise ValueError(
                f"header {both[0]} is in both headers and secret_headers; keep it in one of them"
            )
        return self


# ARNs (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference-arns.html): partitions such
# as aws, aws-cn, aws-us-gov; regions such as eu-west-1, us-gov-east-1, eusc-de-east-1;
# 12-digit accounts.
_PARTITION = re.compile(r"aws(?:-[a-z]+)*")
_REGION = re.compile(r"[a-z]{2,4}(?:-[a-z]+)+-\d{1,2}")
_ACCOUNT = re.compile(r"\d{12}")
_TOPIC_NAME = re.compile(r"[A-Za-z0-9_-]{1,256}|[A-Za-z0-9_-]{1,251}\.fifo")
_FUNCTION = re.compile(r"function:[A-Za-z0-9_-]{1,64}(?::(?:\$LATEST|[A-Za-z0-9_-]{1,128}))?")
_EVENT_BUS_NAME = re.compile(r"[/.\-_A-Za-z0-9]{1,256}")


def _arn(value: str, service: str, example: str) -> tuple[str, str]:
    """Check `arn:<partition>:<service>:<region>:<account>:<resource>` part by part, so a
    refusal says which part is wrong; returns (region, resource)."""
    parts = value.split(":", 5)
    if len(parts) != 6 or parts[0] != "arn":
        raise ValueError(f"must be an ARN such as {example}")
    _, partition, named, region, account, resource = parts
    if not _PARTITION.fullmatch(partition):
        raise ValueError(f"partition {partition!r} is not an AWS partition (aws, aws-cn, aws-us-gov, ...)")
    if named != service:
        raise ValueError(f"must be an ARN of {service}, not of {named!r}, such as {example}")
    if not _REGION.fullmatch(region):
        raise ValueError(f"region {region!r} is not an AWS region such as eu-west-1")
    if not _ACCOUNT.fullmatch(account):
        raise ValueError(f"account {account!r} is not a 12-digit AWS account id")
    return region, resource


def _arn_region(arn: str) -> str:
    return arn.split(":", 5)[3]


# IAM (https://docs.aws.amazon.com/IAM/latest/APIReference/API_Role.html): a role name is 1-64
# letters, digits and +=,.@_-; a path is "/" or /<segments>/ of printable ASCII, at most 512.
_ROLE_NAME = re.compile(r"[A-Za-z0-9+=,.@_-]{1,64}")
_ROLE_PATH = re.compile(r"/(?:[!-.0-~]+/)*")
_ROLE_EXAMPLE = "arn:aws:iam::123456789012:role/scheduler-delivery"
MAX_ROLE_ARN_LENGTH = 2048  # AssumeRole's RoleArn


def _role_arn(value: str) -> str:
    """`arn:<partition>:iam::<account>:role/[<path>/]<name>`, checked part by part."""
    parts = value.split(":", 5)
    if len(parts) != 6 or parts[0] != "arn":
        raise ValueError(f"must be the ARN of an IAM role, such as {_ROLE_EXAMPLE}")
    _, partition, service, region, account, resource = parts
    if not _PARTITION.fullmatch(partition):
        raise ValueError(f"partition {partition!r} is not an AWS partition (aws, aws-cn, aws-us-gov, ...)")
    if service != "iam":
        raise ValueError(f"must be an ARN of iam, not of {service!r}, such as {_ROLE_EXAMPLE}")
    if region:
        raise ValueError(f"an IAM ARN names no region (arn:{partition}:iam::<account>:role/<name>)")
    if not _ACCOUNT.fullmatch(account):
        raise ValueError(f"account {account!r} is not a 12-digit AWS account id")
    if not resource.startswith("role/"):
        raise ValueError(f"resource {resource!r} is not a role (role/<name>, or role/<path>/<name>)")
    path, _, name = resource.removeprefix("role").rpartition("/")
    if not _ROLE_NAME.fullmatch(name):
        raise ValueError(f"role name {name!r} must be 1-64 letters, digits or the characters +=,.@_-")
    if len(path) > 511 or not _ROLE_PATH.fullmatch(path + "/"):
        raise ValueError(
            f"role path {path + '/'!r} must be printable ASCII without spaces, at most 512 characters"
        )
    return value


RoleArn = Annotated[str, Field(max_length=MAX_ROLE_ARN_LENGTH), AfterValidator(_role_arn)]
_ROLE_ARN_FIELD = Field(
    None,
    description="An IAM role of yours that the scheduler assumes to make this call, with "
    'sts:ExternalId = your tenant (docs/security.md, "Execution roles"). Without one, the target '
    "must be one the deployment offers every tenant (CDK context `target_*_arns`).",
    examples=[_ROLE_EXAMPLE],
)


_FIFO_IDS = "FIFO (name ending in .fifo): MessageGroupId = the job id, MessageDeduplicationId = the run id."


class SqsTarget(StrictModel):
    type: Literal["SQS"]
    queue_url: str = Field(
        max_length=MAX_URL_LENGTH,
        description=f"URL of the SQS queue that receives the payload as the message body. {_FIFO_IDS}",
    )
    role_arn: RoleArn | None = _ROLE_ARN_FIELD

    @field_validator("queue_url")
    @classmethod
    def _url_is_http(cls, value: str) -> str:
        return _http_url(value)

    @property
    def fifo(self) -> bool:
        # As the target check reads the queue's name: from the percent-decoded path.
        return unquote(urlsplit(self.queue_url).path).rstrip("/").endswith(".fifo")


class SnsTarget(StrictModel):
    type: Literal["SNS"]
    topic_arn: str = Field(
        description=f"ARN of the SNS topic that receives the payload as the message. {_FIFO_IDS}",
        examples=["arn:aws:sns:eu-west-1:123456789012:reports"],
    )
    role_arn: RoleArn | None = _ROLE_ARN_FIELD

    @field_validator("topic_arn")
    @classmethod
    def _is_a_topic_arn(cls, value: str) -> str:
        _, name = _arn(value, "sns", "arn:aws:sns:eu-west-1:123456789012:my-topic")
        if not _TOPIC_NAME.fullmatch(name):
            raise ValueError(
                f"topic name {name!r} must be 1-256 letters, digits, '-' or '_' "
                "(a FIFO topic's ends in .fifo, within the 256)"
            )
        return value

    @property
    def fifo(self) -> bool:
        return self.topic_arn.endswith(".fifo")

    @property
    def region(self) -> str:
        return _arn_region(self.topic_arn)


class EventBridgeTarget(StrictModel):
    type: Literal["EVENTBRIDGE"]
    event_bus_name: str = Field(
        description="Name (this account and region, e.g. 'default') or ARN of the event bus.",
        examples=["default", "arn:aws:events:eu-west-1:123456789012:event-bus/orders"],
    )
    source: str = Field(
        min_length=1,
        max_length=256,
        description="The events' `source`; names starting with 'aws.' belong to AWS services.",
        examples=["com.example.billing"],
    )
    detail_type: str = Field(
        min_length=1, max_length=128, description="The events' `detail-type`.", examples=["InvoiceDue"]
    )
    role_arn: RoleArn | None = _ROLE_ARN_FIELD

    @field_validator("event_bus_name")
    @classmethod
    def _is_a_bus_name_or_arn(cls, value: str) -> str:
        name = value
        if value.startswith("arn:"):
            _, resource = _arn(value, "events", "arn:aws:events:eu-west-1:123456789012:event-bus/my-bus")
            if not resource.startswith("event-bus/"):
                raise ValueError(f"resource {resource!r} is not an event bus (event-bus/<name>)")
            name = resource.removeprefix("event-bus/")
        if not _EVENT_BUS_NAME.fullmatch(name):
            raise ValueError(
                f"event bus name {name!r} must be 1-256 letters, digits or the characters / . - _"
            )
        return value

    @field_validator("source", "detail_type")
    @classmethod
    def _no_control_characters(cls, value: str) -> str:
        if any(_is_control(char) for char in value):
            raise ValueError("must not contain control characters")
        return value

    @field_validator("source")
    @classmethod
    def _not_an_aws_source(cls, value: str) -> str:
        if value.lower().startswith("aws."):
            raise ValueError("sources starting with 'aws.' are reserved for AWS services")
        return value

    @property
    def region(self) -> str | None:
        """The region of a bus given by ARN; None for a name (the scheduler's own region)."""
        return _arn_region(self.event_bus_name) if self.event_bus_name.startswith("arn:") else None


class LambdaTarget(StrictModel):
    type: Literal["LAMBDA"]
    function_arn: str = Field(
        description="ARN of the Lambda function (optionally with a version or alias), invoked "
        "asynchronously (InvocationType Event).",
        examples=["arn:aws:lambda:eu-west-1:123456789012:function:send-report"],
    )
    role_arn: RoleArn | None = _ROLE_ARN_FIELD

    @field_validator("function_arn")
    @classmethod
    def _is_a_function_arn(cls, value: str) -> str:
        _, resource = _arn(value, "lambda", "arn:aws:lambda:eu-west-1:123456789012:function:my-function")
        if not _FUNCTION.fullmatch(resource):
            raise ValueError(
                f"resource {resource!r} must be function:<name>[:<version or alias>], the name "
                "1-64 letters, digits, '-' or '_'"
            )
        return value

    @property
    def region(self) -> str:
        return _arn_region(self.function_arn)


Target = Annotated[
    HttpTarget | SqsTarget | SnsTarget | EventBridgeTarget | LambdaTarget, Field(discriminator="type")
]
# The `type` tags of the target models, e.g. ("HTTP", "SQS", ...).
TARGET_TYPES: tuple[str, ...] = tuple(
    tag
    for member in get_args(get_args(Target)[0])
    for tag in get_args(member.model_fields["type"].annotation)
)
