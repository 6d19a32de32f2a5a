"""`--wait`: poll a run until it ends, a spinner on stderr meanwhile. A run that ended other
than SUCCEEDED is a failure of the command (exit 1), so `scheduler jobs trigger ID --wait &&
next-step` reads as it should."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import typer

from scheduler_cli.render import note, spinner

ENDED = frozenset({"SUCCEEDED", "FAILED", "CANCELLED", "SKIPPED"})
POLL_SECONDS = 0.5


def wait_for_end(what: str, fetch: Callable[[], dict[str, Any]], timeout: float) -> dict[str, Any]:
    """The run `fetch` reads, once its status is one that ends it; exit 1 at `timeout`."""
    deadline = time.monotonic() + timeout
    with spinner(f"waiting for {what}") as status:
        while True:
            run = fetch()
            if run.get("status") in ENDED:
                return run
            if time.monotonic() >= deadline:
                note(f"error: {what} is still {run.get('status')} after {timeout:g} s")
                raise typer.Exit(1)
            status.update(f"waiting for {what}: {run.get('status')}")
            time.sleep(POLL_SECONDS)


def exit_unless_succeeded(what: str, run: dict[str, Any]) -> None:
    if run.get("status") != "SUCCEEDED":
        error = f": {run['error']}" if run.get("error") else ""
        note(f"error: {what} ended {run.get('status')}{error}")
        raise typer.Exit(1)
