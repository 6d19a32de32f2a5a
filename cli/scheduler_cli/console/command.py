"""`scheduler console`: the admin console for the API the global options name, on a local
server, as `kubectl proxy` does for Kubernetes: the page's API calls go to 127.0.0.1 and are
forwarded signed with the user's AWS credentials, so the browser never holds a key.

The CLI's main module calls `register(app)`; the server itself is scheduler_cli.console.server.
"""

from __future__ import annotations

import webbrowser

import typer

DEFAULT_PORT = 8765


def register(app: typer.Typer) -> None:
    """Add the `console` command to `app`."""

    @app.command("console")
    def console(
        ctx: typer.Context,
        port: int = typer.Option(DEFAULT_PORT, "--port", help="Port on 127.0.0.1 (0: any free port)."),
        open_browser: bool = typer.Option(True, "--open/--no-open", help="Open the page in a browser."),
    ) -> None:
        """Serve the admin console on http://127.0.0.1:PORT/console/ until Ctrl-C."""
        # The server pulls in boto3, httpx and the operator: only this command needs them.
        from scheduler_cli.console.server import ConsoleUnavailable, serve_console

        try:
            serve_console(
                ctx.obj, port=port, open_browser=open_browser, announce=typer.echo, opener=webbrowser.open
            )
        except ConsoleUnavailable as error:
            typer.echo(f"scheduler console: {error}", err=True)
            raise typer.Exit(2) from error
