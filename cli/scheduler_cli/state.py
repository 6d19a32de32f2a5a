"""What every `scheduler` command shares: where the API is (the global options) and how to
print. Commands take it from `typer.Context.obj`."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from scheduler_cli.client import ApiClient, ApiTarget, resolve_target


class Output(StrEnum):
    table = "table"
    json = "json"


@dataclass
class CliState:
    endpoint: str | None = None
    api_url: str | None = None
    stack: str | None = None
    profile: str | None = None
    region: str | None = None
    output: Output = Output.table
    # The AWS endpoint (the local cloud's moto) for what talks to AWS itself: `scheduler dlq`.
    aws_endpoint_url: str | None = None
    _client: ApiClient | None = field(default=None, repr=False)

    def target(self) -> ApiTarget:
        """The API the options name (raises client.TargetNotFound when they name none)."""
        return resolve_target(
            endpoint=self.endpoint,
            api_url=self.api_url,
            stack=self.stack,
            profile=self.profile,
            region=self.region,
        )

    def client(self) -> ApiClient:
        if self._client is None:
            self._client = ApiClient(self.target())
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
