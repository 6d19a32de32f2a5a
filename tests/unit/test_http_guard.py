"""The worker's HTTP client as the SSRF guard and deadline (adapters/http_client.py), through
`TargetDelivery`, against real sockets on loopback: names resolve through an injected
resolver (as a rebinding DNS server would answer), connections are real."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import boto3
import httpcore
import pytest

from scheduler_core.adapters.aws import AwsClients
from scheduler_core.adapters.http_client import GuardedHttp
from scheduler_core.adapters.targets import TargetDelivery
from scheduler_core.domain.addresses import LOCAL_CLOUD_NETWORKS, AddressPolicy
from scheduler_core.domain.entities import Job, Run
from scheduler_core.domain.target_access import TargetAccess
from tests.support.builders import a_job, a_run
from tests.support.receiver import WebhookReceiver

FIRE_AT = datetime(2030, 1, 1, 9, 0, tzinfo=UTC)


def resolving(answers: dict[str, list[str]]) -> Any:
    """A resolver answering `getaddrinfo` for the names in `answers`, as DNS would."""

    def getaddrinfo(host: str, port: int, *args: Any, **kwargs: Any) -> list[Any]:
        if host not in answers:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [
            (socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port))
            for a in answers[host]
        ]

    return getaddrinfo


def delivery(policy: AddressPolicy, answers: dict[str, list[str]] | None = None) -> TargetDelivery:
    http = GuardedHttp(policy, resolving(answers or {}))
    return TargetDelivery(AwsClients(boto3.session.Session(region_name="us-east-1")), http)


def job_to(url: str, timeout: float = 5) -> tuple[Job, Run]:
    job = a_job(target={"type": "HTTP", "url": url, "timeout_seconds": timeout})
    return job, a_run(job, FIRE_AT)


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    with WebhookReceiver() as running:
        yield running


def test_a_name_that_rebinds_to_the_metadata_address_is_refused_when_the_worker_connects() -> None:
    url = "https://hooks.attacker.example/hook"
    TargetAccess().check(job_to(url)[0].target)  # type: ignore[arg-type]  # a name passes at create
    rebound = delivery(AddressPolicy(LOCAL_CLOUD_NETWORKS), {"hooks.attacker.example": ["169.254.169.254"]})

    result = rebound.deliver(*job_to(url))

    assert (result.ok, result.retryable) == (False, False)
    assert "hooks.attacker.example resolves to 169.254.169.254, which is a link-local address" in (
        result.error or ""
    )


def test_a_name_that_resolves_to_loopback_is_refused_and_nothing_is_sent(receiver: WebhookReceiver) -> None:
    guarded = delivery(AddressPolicy(), {"inside.example": ["127.0.0.1"]})

    result = guarded.deliver(*job_to(f"http://inside.example:{receiver.port}/hook"))

    assert (result.ok, result.retryable) == (False, False)
    assert "refused to call inside.example" in (result.error or "")
    assert "loopback" in (result.error or "")
    assert receiver.requests == []


def test_a_name_with_one_refused_address_among_public_ones_is_refused() -> None:
    mixed = delivery(AddressPolicy(), {"mixed.example": ["93.184.215.14", "10.0.0.7"]})

    result = mixed.deliver(*job_to("https://mixed.example/"))

    assert (result.ok, result.retryable) == (False, False)
    assert "10.0.0.7" in (result.error or "")


def test_a_literal_in_another_spelling_is_refused_at_delivery_too(receiver: WebhookReceiver) -> None:
    guarded = delivery(AddressPolicy())

    result = guarded.deliver(*job_to(f"http://2130706433:{receiver.port}/"))  # 127.0.0.1

    assert (result.ok, result.retryable) == (False, False)
    assert receiver.requests == []


def test_an_allowed_name_is_called_at_the_address_checked_with_its_own_host_header(
    receiver: WebhookReceiver,
) -> None:
    local = delivery(AddressPolicy(LOCAL_CLOUD_NETWORKS), {"receiver.internal": ["127.0.0.1"]})
    port = receiver.port

    result = local.deliver(*job_to(f"http://receiver.internal:{port}/hook"))

    assert result.ok, result.error
    [request] = receiver.requests
    assert request.headers["host"] == f"receiver.internal:{port}"


def test_the_address_actually_connected_to_is_checked(receiver: WebhookReceiver) -> None:
    """A connection that lands elsewhere than the address asked for (a NAT, a proxy in the
    way) is judged by where it landed: 127.0.0.2 is allowed, 127.0.0.1 is not."""
    port = receiver.port

    class Redirected(httpcore.SyncBackend):
        def connect_tcp(self, host: str, *args: Any, **kwargs: Any) -> httpcore.NetworkStream:
            return super().connect_tcp("127.0.0.1", *args, **kwargs)

    http = GuardedHttp(AddressPolicy(("127.0.0.2/32",)), resolving({"twisted.example": ["127.0.0.2"]}))
    http.backend._sockets = Redirected()
    guarded = TargetDelivery(AwsClients(boto3.session.Session(region_name="us-east-1")), http)

    result = guarded.deliver(*job_to(f"http://twisted.example:{port}/"))

    assert (result.ok, result.retryable) == (False, False)
    assert "127.0.0.1" in (result.error or "")
    assert receiver.requests == []


def test_a_name_that_does_not_resolve_is_worth_retrying() -> None:
    result = delivery(AddressPolicy()).deliver(*job_to("https://gone.example/"))

    assert (result.ok, result.retryable) == (False, True)
    assert "gone.example does not resolve" in (result.error or "")


# --- redirects and the deadline ------------------------------------------------------------


class _Server:
    """A loopback server whose handler is given, on its own thread."""

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_a_redirect_is_not_followed_and_fails_for_good(receiver: WebhookReceiver) -> None:
    inside = f"http://127.0.0.1:{receiver.port}/latest/meta-data/"

    class Redirecting(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.send_response(302)
            self.send_header("Location", inside)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = _Server(Redirecting)
    try:
        result = delivery(AddressPolicy(LOCAL_CLOUD_NETWORKS)).deliver(
            *job_to(f"http://127.0.0.1:{server.port}/hook")
        )
    finally:
        server.close()

    assert (result.ok, result.status_code, result.retryable) == (False, 302, False)
    assert "redirects to http://127.0.0.1" in (result.error or "")
    assert "are not followed" in (result.error or "")
    assert receiver.requests == []


def test_a_server_that_trickles_its_answer_is_cut_off_at_the_deadline() -> None:
    """Each byte comes well within the per-read timeout; the answer as a whole would take
    10 s. The one deadline (0.5 s) ends the call; a per-read timeout alone never would."""
    trickled = threading.Event()

    class Trickling(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            answer = b"HTTP/1.1 200 OK\r\nX-Padding: " + b"x" * 200 + b"\r\nContent-Length: 0\r\n\r\n"
            try:
                for byte in answer:
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                    time.sleep(0.05)
                trickled.set()
            except OSError:
                pass  # the client hung up: what the test expects

        def log_message(self, *args: Any) -> None:
            pass

    server = _Server(Trickling)
    try:
        result = delivery(AddressPolicy(LOCAL_CLOUD_NETWORKS)).deliver(
            *job_to(f"http://127.0.0.1:{server.port}/", timeout=0.5)
        )
    finally:
        server.close()

    assert (result.ok, result.retryable) == (False, True)
    assert "did not answer within 0.5s (connect, send and answer)" in (result.error or "")
    assert not trickled.is_set()
