"""`scheduler dlq …`: the stack's dead-letter queue, which no API route reaches (it is the
deployment's, not a tenant's): `list` peeks at it, `redrive` is `make redrive`, `depths` shows
every queue. They talk to AWS with your credentials and the stack's outputs
(scheduler_cli.operator); for the local cloud, `--aws-endpoint-url` (or
SCHEDULER_AWS_ENDPOINT_URL) names its moto, as `make run` prints."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

import typer
from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, NoRegionError

from scheduler_cli import options as o
from scheduler_cli.api import state_of
from scheduler_cli.render import emit, new_table, note, spinner, text
from scheduler_cli.state import CliState

app = typer.Typer(
    help="The dead-letter queue (AWS credentials and the stack's outputs, not the API).", no_args_is_help=True
)
Limit = Annotated[int | None, typer.Option("--limit", min=1, help="At most this many messages.")]


@contextmanager
def _operator(state: CliState) -> Iterator[Any]:
    """The stack's operator; AWS failures as exit codes (2: not configured, 1: refused), and
    the scheduler's own log lines on stderr, warnings and worse only."""
    # boto3 wiring: only dlq needs it
    from infra.redrive import refusal
    from scheduler_cli.operator import Operator, StackNotReady
    from scheduler_core.observability import logger

    handler = logger.registered_handler
    stream = handler.stream if isinstance(handler, logging.StreamHandler) else None
    level = logger.log_level
    if isinstance(handler, logging.StreamHandler):
        handler.setStream(sys.stderr)
    logger.setLevel("WARNING")
    try:
        operator = Operator.from_options(
            state.stack, profile=state.profile, region=state.region, endpoint_url=state.aws_endpoint_url
        )
        yield operator
    except StackNotReady as error:
        note(f"error: {error}")
        raise typer.Exit(2) from None
    except (NoCredentialsError, NoRegionError) as error:
        note(
            f"error: {error}: configure AWS credentials and a region (--profile, --region), or for the "
            "local cloud pass --aws-endpoint-url (or SCHEDULER_AWS_ENDPOINT_URL) as `make run` prints it"
        )
        raise typer.Exit(2) from None
    except (BotoCoreError, ClientError) as error:
        note(f"error: {refusal(error)}")
        raise typer.Exit(1) from None
    finally:
        logger.setLevel(level)
        if isinstance(handler, logging.StreamHandler) and stream is not None:
            handler.setStream(stream)


@app.command("list")
def list_dead_letters(
    ctx: typer.Context,
    limit: Annotated[int, typer.Option("--limit", min=1, help="At most this many messages.")] = 50,
    output: o.OutputOpt = None,
) -> None:
    """Peek at the DLQ, oldest first: what each message is about and why it is there. Nothing
    is taken off it (each peek counts as a receive).

    Example:  scheduler --aws-endpoint-url http://127.0.0.1:5000 dlq list --limit 20
    """
    state = state_of(ctx, output)
    with _operator(state) as operator, spinner("reading the DLQ"):
        letters = operator.dead_letters(limit)
    body = {"stack": operator.stack, "dlq_url": operator.dlq_url, "items": letters}
    emit(state, body, _letters_table)


def _letters_table(body: dict[str, Any]) -> Any:
    table = new_table(
        "MESSAGE ID", "KIND", "RUN ID", "SENT", "RECEIVES", "REASON", title=f"DLQ {body['dlq_url']}"
    )
    for letter in body["items"]:
        table.add_row(
            letter["message_id"],
            letter["kind"],
            text(letter["run_id"]),
            text(letter["sent_at"]),
            str(letter["receive_count"]),
            letter["reason"],
        )
    if not body["items"]:
        note("the DLQ is empty")
    return table


@app.command("redrive")
def redrive(ctx: typer.Context, limit: Limit = None, output: o.OutputOpt = None) -> None:
    """Move the DLQ back (`make redrive`): FAILED runs get a new attempt, poison run messages
    go back to their queue, records of runs that moved on are dropped, the unreadable stay.

    Example:  scheduler dlq redrive --limit 100
    """
    from scheduler_cli.operator import EXPLANATIONS, RedriveOutcome

    state = state_of(ctx, output)
    with _operator(state) as operator, spinner(f"re-driving the DLQ of {operator.stack}"):
        report = operator.redrive(limit)
    body = {"stack": operator.stack, "dlq_url": operator.dlq_url} | report.as_dict()

    def table(found: dict[str, Any]) -> Any:
        shown = new_table("OUTCOME", "COUNT", "MEANING", title=f"DLQ of stack {found['stack']}")
        for outcome in RedriveOutcome:
            shown.add_row(str(outcome), str(found[str(outcome)]), EXPLANATIONS[outcome])
        note(f"received {found['received']}, deleted {found['deleted']}, left on the DLQ {found['kept']}")
        return shown

    emit(state, body, table)


@app.command("depths")
def depths(ctx: typer.Context, output: o.OutputOpt = None) -> None:
    """How many messages each queue holds: visible, delayed, in flight (and the age of the
    oldest where CloudWatch has it).

    Example:  scheduler dlq depths -o json
    """
    state = state_of(ctx, output)
    with _operator(state) as operator:
        found = operator.queue_depths()

    def table(body: dict[str, dict[str, int]]) -> Any:
        shown = new_table("QUEUE", "VISIBLE", "DELAYED", "IN FLIGHT", "OLDEST (S)")
        for name, depth in body.items():
            shown.add_row(
                name.upper(),
                str(depth["visible"]),
                str(depth["delayed"]),
                str(depth["in_flight"]),
                text(depth.get("oldest_age_seconds")),
            )
        return shown

    emit(state, found, table)
