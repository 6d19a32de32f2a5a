"""The worker's HTTP client: httpcore's connection pool (keep-alive, per-phase timeouts, no
redirects: httpcore never follows one) over a network backend that guards every connection.

- The SSRF guard at connect time: the host is resolved here, every address it resolves to
  must pass the deployment's `AddressPolicy` (a name with one refused address is refused:
  no gamble on which one a retry would reach), the connection is made to that checked
  address, and the address actually connected to (the socket's peer) is checked again. So a
  name that resolved to a public address at create and rebinds to 169.254.169.254 later is
  caught, and TLS still verifies the certificate against the name (httpcore passes the
  URL's host as the server name).
- One deadline per request (connect + sending + the answer's headers and body): each socket
  read and write waits at most what is left of it, so a server that trickles a byte a
  second cannot hold a record until the Lambda function times out.
"""

from __future__ import annotations

import socket
import ssl
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpcore

from scheduler_core.domain.addresses import AddressPolicy, ip_literal

POOL_CONNECTIONS = 32
KEEPALIVE_SECONDS = 30.0


class AddressRefused(Exception):
    """The target's host is, or resolves to, an address the deployment's policy refuses."""

    def __init__(self, host: str, address: str, reason: str) -> None:
        literal = ip_literal(host) is not None
        where = f"{host}" if literal else f"{host} resolves to {address}, which"
        super().__init__(f"{where} {reason}")
        self.host = host
        self.address = address


class DeadlinePassed(httpcore.TimeoutException):
    """The request's overall deadline passed while it was connecting, sending or reading."""


_deadline = threading.local()


def _remaining(timeout: float | None) -> float | None:
    """`timeout` cut to what is left of this thread's request deadline; raises when none is."""
    deadline: float | None = getattr(_deadline, "at", None)
    if deadline is None:
        return timeout
    left = deadline - time.monotonic()
    if left <= 0:
        raise DeadlinePassed("deadline passed")
    return left if timeout is None else min(timeout, left)


@contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Every connect, read and write of this thread within the block ends by then."""
    _deadline.at = time.monotonic() + seconds
    try:
        yield
    finally:
        _deadline.at = None


class _DeadlineStream(httpcore.NetworkStream):
    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _remaining(timeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _remaining(timeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.NetworkStream:
        return _DeadlineStream(self._inner.start_tls(ssl_context, server_hostname, _remaining(timeout)))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


Resolver = Any  # socket.getaddrinfo's signature; injectable so tests can rebind a name


class GuardedBackend(httpcore.NetworkBackend):
    """httpcore's own socket backend, connecting only to addresses the policy allows."""

    def __init__(self, policy: AddressPolicy, resolve: Resolver = socket.getaddrinfo) -> None:
        self._policy = policy
        self._resolve = resolve
        self._sockets = httpcore.SyncBackend()

    def _addresses(self, host: str, port: int) -> list[str]:
        literal = ip_literal(host)
        if literal is not None:
            return [str(literal)]
        try:
            infos = self._resolve(host, port, type=socket.SOCK_STREAM)
        except OSError as error:
            raise httpcore.ConnectError(f"{host} does not resolve: {error}") from error
        return list(dict.fromkeys(str(info[4][0]).split("%", 1)[0] for info in infos))

    def check(self, host: str, address: str) -> None:
        literal = ip_literal(address)
        reason = "is not an IP address" if literal is None else self._policy.refusal(literal)
        if reason is not None:
            raise AddressRefused(host, address, reason)

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        host = host.strip("[]")
        addresses = self._addresses(host, port)
        for address in addresses:
            self.check(host, address)
        error: Exception = httpcore.ConnectError(f"{host} has no address")
        for address in addresses:
            try:
                stream = self._sockets.connect_tcp(
                    address, port, _remaining(timeout), local_address, socket_options
                )
            except httpcore.ConnectError as failed:
                error = failed
                continue
            peer = stream.get_extra_info("server_addr")
            try:
                self.check(host, str(peer[0]) if peer else "")
            except AddressRefused:
                stream.close()
                raise
            return _DeadlineStream(stream)
        raise error

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.NetworkStream:
        raise httpcore.ConnectError("targets are reached over TCP only")

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


@dataclass(frozen=True)
class Answer:
    """What a target answered: status, headers (names lower-cased) and as much of the body
    as was asked for."""

    status: int
    headers: dict[str, str]
    body: bytes


class GuardedHttp:
    """Sends one request at a time per calling thread; shared by the worker's threads."""

    def __init__(
        self, policy: AddressPolicy, resolve: Resolver = socket.getaddrinfo, callers: int = 0
    ) -> None:
        """`callers`: how many threads may send at once (the pool holds a connection for each,
        POOL_CONNECTIONS at least)."""
        self.backend = GuardedBackend(policy, resolve)
        self._pool = httpcore.ConnectionPool(
            max_connections=max(POOL_CONNECTIONS, callers),
            keepalive_expiry=KEEPALIVE_SECONDS,
            retries=0,
            network_backend=self.backend,
        )

    def send(
        self,
        method: str,
        url: str,
        headers: list[tuple[bytes, bytes]],
        body: bytes | None,
        timeout: float,
        read_body: int = 0,
    ) -> Answer:
        """The answer to one request, all of it (headers, and `read_body` bytes of the body at
        most: 0 waits for none) within `timeout` seconds. Raises AddressRefused, or an
        httpcore error (a TimeoutException when the deadline passes)."""
        phases = {"connect": timeout, "read": timeout, "write": timeout, "pool": timeout}
        with (
            deadline(timeout),
            self._pool.stream(
                method, url, headers=headers, content=body, extensions={"timeout": phases}
            ) as response,
        ):
            content = b""
            if read_body:
                for chunk in response.iter_stream():
                    content += chunk
                    if len(content) >= read_body:
                        break
            answer_headers = {
                name.decode("latin-1").lower(): value.decode("latin-1") for name, value in response.headers
            }
            return Answer(response.status, answer_headers, content[:read_body])

    def close(self) -> None:
        self._pool.close()
