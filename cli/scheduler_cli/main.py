"""`scheduler`: the command line for a serverless-scheduler API — the local cloud's (`make
run`) or a deployed stack's, signed with your AWS credentials (scheduler_cli.client).

Exit codes, the same for every command: 0 success; 1 the API (or AWS) refused or failed, its
error code, message and the fields it names on stderr; 2 a usage error, including no API
named. `--output json` prints the API's body alone on stdout, for scripts and `jq`.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from scheduler_cli import dlq, jobs, runs, schedule, workflows
from scheduler_cli import options as o
from scheduler_cli.api import ApiError, call, state_of
from scheduler_cli.client import ENDPOINT_VARIABLE, TargetNotFound
from scheduler_cli.console.command import register as register_console
from scheduler_cli.render import emit, fields_table
from scheduler_cli.state import CliState, Output

AWS_ENDPOINT_VARIABLE = "SCHEDULER_AWS_ENDPOINT_URL"
CONNECTION = "Where the API is"


class SchedulerGroup(TyperGroup):
    """Turns the failures every command shares into their exit codes and stderr lines."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except ApiError as error:
            for line in error.lines():
                typer.echo(line, err=True)
            raise typer.Exit(1) from None
        except TargetNotFound as error:
            typer.echo(f"error: {error}", err=True)
            raise typer.Exit(2) from None


app = typer.Typer(
    name="scheduler",
    cls=SchedulerGroup,
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
    help="The command line of serverless-scheduler: jobs, runs, workflows, the DLQ, schedules.\n\n"
    f"Point it at the local cloud with --endpoint (or {ENDPOINT_VARIABLE}; `make run` prints the line), "
    "or at a deployed stack with --stack / --api-url (signed with your AWS credentials).\n\n"
    "Example:  export SCHEDULER_ENDPOINT=http://127.0.0.1:8080; scheduler jobs list",
)
app.add_typer(jobs.app, name="jobs")
app.add_typer(runs.app, name="runs")
app.add_typer(workflows.app, name="workflows")
app.add_typer(dlq.app, name="dlq")
app.add_typer(schedule.app, name="schedule")
register_console(app)


@app.command("tenant")
def tenant(ctx: typer.Context, output: o.OutputOpt = None) -> None:
    """Who you are to the scheduler: your tenant and the sts:ExternalId your execution roles'
    trust policies must require (GET /v1/tenant).

    Example:  scheduler tenant -o json | jq -r .external_id
    """
    state = state_of(ctx, output)
    emit(
        state,
        call(state, "GET", "/v1/tenant"),
        lambda body: fields_table(
            [
                ("tenant", body["tenant"]),
                ("principal", body["principal_arn"]),
                ("external id", body["external_id"]),
            ]
        ),
    )


@app.callback()
def root(
    ctx: typer.Context,
    endpoint: Annotated[
        str | None,
        typer.Option(
            "--endpoint",
            envvar=ENDPOINT_VARIABLE,
            help="The local cloud's API, e.g. http://127.0.0.1:8080 (unsigned).",
            rich_help_panel=CONNECTION,
        ),
    ] = None,
    api_url: Annotated[
        str | None,
        typer.Option(
            "--api-url",
            envvar="SCHEDULER_API_URL",
            help="A deployed stack's ApiUrl; requests are SigV4-signed.",
            rich_help_panel=CONNECTION,
        ),
    ] = None,
    stack: Annotated[
        str | None,
        typer.Option(
            "--stack",
            envvar="SCHEDULER_STACK",
            help="A deployed stack's name: its ApiUrl is read from CloudFormation; dlq reads its "
            "outputs (default ServerlessScheduler).",
            rich_help_panel=CONNECTION,
        ),
    ] = None,
    profile: Annotated[
        str | None,
        typer.Option("--profile", help="AWS profile (else AWS_PROFILE).", rich_help_panel=CONNECTION),
    ] = None,
    region: Annotated[
        str | None, typer.Option("--region", help="AWS region (else AWS_REGION).", rich_help_panel=CONNECTION)
    ] = None,
    aws_endpoint_url: Annotated[
        str | None,
        typer.Option(
            "--aws-endpoint-url",
            envvar=AWS_ENDPOINT_VARIABLE,
            help="dlq: the AWS endpoint, for the local cloud its moto URL (`make run` prints it).",
            rich_help_panel=CONNECTION,
        ),
    ] = None,
    output: Annotated[
        Output,
        typer.Option(
            "--output", "-o", envvar="SCHEDULER_OUTPUT", help="table (for people) or json (the API's body)."
        ),
    ] = Output.table,
) -> None:
    state = CliState(
        endpoint=endpoint,
        api_url=api_url,
        stack=stack,
        profile=profile,
        region=region,
        output=output,
        aws_endpoint_url=aws_endpoint_url,
    )
    ctx.obj = state
    ctx.call_on_close(state.close)


def main() -> None:
    app(prog_name="scheduler")


if __name__ == "__main__":
    main()
