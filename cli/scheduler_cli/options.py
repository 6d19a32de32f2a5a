"""The flags several commands share, declared once (Typer reads them from the parameters'
`Annotated` types): a job's and a workflow's schedule, a target, the policies, a listing's
filters, and `--output`."""

from __future__ import annotations

from typing import Annotated

import typer

from scheduler_cli.state import Output
from scheduler_core.domain.vocabulary import JobStatus, MisfirePolicy, Overlap, Priority, RunStatus

SCHEDULE = "Schedule"
TARGET = "Target"
POLICIES = "Policies"

OutputOpt = Annotated[
    Output | None,
    typer.Option("--output", "-o", help="table (for people) or json (the API's body, for scripts)."),
]
FileOpt = Annotated[
    str | None,
    typer.Option("--file", "-f", help="The fields as a JSON or YAML file (- reads stdin); flags win."),
]

# --- schedule ---------------------------------------------------------------------------
At = Annotated[
    str | None,
    typer.Option(
        "--at", help="One-off: an ISO-8601 time, or +10s, +5m, +2h, +1d from now.", rich_help_panel=SCHEDULE
    ),
]
Cron = Annotated[
    str | None,
    typer.Option(
        "--cron", help="5-field cron, in --timezone, e.g. '0 9 * * MON-FRI'.", rich_help_panel=SCHEDULE
    ),
]
Rate = Annotated[
    str | None,
    typer.Option("--rate", help="Every '<n> minutes|hours|days'.", rich_help_panel=SCHEDULE),
]
Timezone = Annotated[
    str | None,
    typer.Option(
        "--timezone", "--tz", help="IANA time zone, e.g. Europe/Berlin (UTC).", rich_help_panel=SCHEDULE
    ),
]
StartAt = Annotated[
    str | None,
    typer.Option("--start-at", help="cron and rate: no firing before this time.", rich_help_panel=SCHEDULE),
]
EndAt = Annotated[
    str | None,
    typer.Option("--end-at", help="cron and rate: no firing after this time.", rich_help_panel=SCHEDULE),
]
Jitter = Annotated[
    int | None,
    typer.Option(
        "--jitter", min=0, help="Spread each start over this many seconds.", rich_help_panel=SCHEDULE
    ),
]

# --- target -----------------------------------------------------------------------------
Url = Annotated[
    str | None, typer.Option("--url", help="HTTP target: the webhook's URL.", rich_help_panel=TARGET)
]
Method = Annotated[
    str | None, typer.Option("--method", help="HTTP target's method (POST).", rich_help_panel=TARGET)
]
Header = Annotated[
    list[str] | None,
    typer.Option("--header", "-H", help="HTTP target header 'Name: value' (repeat).", rich_help_panel=TARGET),
]
SecretHeader = Annotated[
    list[str] | None,
    typer.Option(
        "--secret-header", help="HTTP header stored encrypted, shown as *** (repeat).", rich_help_panel=TARGET
    ),
]
Timeout = Annotated[
    int | None,
    typer.Option("--timeout", min=1, help="HTTP target's deadline in seconds (10).", rich_help_panel=TARGET),
]
QueueUrl = Annotated[
    str | None, typer.Option("--queue-url", help="SQS target: the queue's URL.", rich_help_panel=TARGET)
]
TopicArn = Annotated[
    str | None, typer.Option("--topic-arn", help="SNS target: the topic's ARN.", rich_help_panel=TARGET)
]
FunctionArn = Annotated[
    str | None,
    typer.Option("--function-arn", help="LAMBDA target: the function's ARN.", rich_help_panel=TARGET),
]
EventBus = Annotated[
    str | None,
    typer.Option("--event-bus", help="EVENTBRIDGE target: a bus name or ARN.", rich_help_panel=TARGET),
]
Source = Annotated[
    str | None, typer.Option("--source", help="EVENTBRIDGE target's source.", rich_help_panel=TARGET)
]
DetailType = Annotated[
    str | None,
    typer.Option("--detail-type", help="EVENTBRIDGE target's detail-type.", rich_help_panel=TARGET),
]
RoleArn = Annotated[
    str | None,
    typer.Option("--role-arn", help="AWS targets: your role the scheduler assumes.", rich_help_panel=TARGET),
]
TargetJson = Annotated[
    str | None,
    typer.Option("--target", help="Any target as JSON, or @file.json.", rich_help_panel=TARGET),
]

# --- policies ---------------------------------------------------------------------------
PriorityOpt = Annotated[
    Priority | None, typer.Option("--priority", help="Queue priority.", rich_help_panel=POLICIES)
]
MaxAttempts = Annotated[
    int | None, typer.Option("--max-attempts", min=1, help="Attempts per run (3).", rich_help_panel=POLICIES)
]
Backoff = Annotated[
    int | None,
    typer.Option("--backoff", min=0, help="Seconds before the first retry (10).", rich_help_panel=POLICIES),
]
MaxBackoff = Annotated[
    int | None,
    typer.Option(
        "--max-backoff", min=0, help="Longest wait between attempts (3600).", rich_help_panel=POLICIES
    ),
]
OverlapOpt = Annotated[
    Overlap | None,
    typer.Option("--overlap", help="A run due while max-running run (SKIP).", rich_help_panel=POLICIES),
]
MaxRunning = Annotated[
    int | None, typer.Option("--max-running", min=1, help="Runs at once (1).", rich_help_panel=POLICIES)
]
Misfire = Annotated[
    MisfirePolicy | None,
    typer.Option("--misfire", help="Firings missed while down or paused.", rich_help_panel=POLICIES),
]
CatchUpWindow = Annotated[
    int | None,
    typer.Option("--catch-up-window", help="CATCH_UP: how far back, in seconds.", rich_help_panel=POLICIES),
]
IdempotencyKey = Annotated[
    str | None,
    typer.Option("--idempotency-key", help="Send a create again safely: the same key makes no second one."),
]
IfMatch = Annotated[
    int | None, typer.Option("--if-match", help="Apply only to this version (412 otherwise).")
]

# --- listings ---------------------------------------------------------------------------
JobStatusOpt = Annotated[JobStatus | None, typer.Option("--status", help="Only in this status.")]
RunStatusOpt = Annotated[RunStatus | None, typer.Option("--status", help="Only runs in this status.")]
NamePrefix = Annotated[str | None, typer.Option("--name-prefix", help="Only names starting with this.")]
Limit = Annotated[int | None, typer.Option("--limit", min=1, max=100, help="At most this many per page.")]
Cursor = Annotated[str | None, typer.Option("--cursor", help="The page after this cursor.")]
AllPages = Annotated[bool, typer.Option("--all", help="Follow the cursor to the last page.")]
Wait = Annotated[bool, typer.Option("--wait", help="Wait for the run to end; exit 1 unless it succeeded.")]
WaitTimeout = Annotated[
    float, typer.Option("--wait-timeout", min=1, help="Give up waiting after this many seconds.")
]
Count = Annotated[int, typer.Option("--count", "-n", min=1, max=1000, help="How many firings.")]
