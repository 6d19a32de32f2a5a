"""Which network addresses an HTTP target may reach: the SSRF guard's one rule (pure).

A target's address must be a public (globally routable, unicast) one. Everything else —
loopback, link-local (169.254.0.0/16 and fe80::/10: the instance metadata service), private
(10/8, 172.16/12, 192.168/16, fc00::/7), shared/CGNAT (100.64/10), multicast, unspecified,
reserved and documentation ranges — is refused, unless the deployment lists it in
`allowed_networks` (CDK context `target_private_cidrs`: a VPC-internal target list; the
local cloud lists loopback, where its receivers live). Link-local is refused even when
listed: no deployment needs its functions to call the metadata service on a tenant's behalf.

An IPv6 address that carries an IPv4 one (IPv4-mapped ::ffff:a.b.c.d, NAT64 64:ff9b::/96,
6to4 2002::/16) is judged by the IPv4 address it carries.

`ip_literal` reads a URL host the way resolvers and browsers do (the WHATWG URL standard's
IPv4 parser, which glibc's inet_aton also follows): `2852039166`, `0xa9fea9fe`,
`0251.0376.0251.0376`, `169.254.43518` and `169.254.169.254.` are all 169.254.169.254, so a
literal in any spelling is checked at create; a name is checked when the worker connects.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass, field

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

LINK_LOCAL = (ipaddress.ip_network("169.254.0.0/16"), ipaddress.ip_network("fe80::/10"))
LOOPBACK = (ipaddress.ip_network("127.0.0.0/8"), ipaddress.ip_network("::1/128"))
# IPv6 forms whose last 32 bits are an IPv4 address: NAT64 (well-known and local-use),
# IPv4-translated, and the deprecated IPv4-compatible ::a.b.c.d (not :: and ::1 themselves).
_CARRY_LAST_32_BITS = tuple(
    ipaddress.ip_network(cidr) for cidr in ("64:ff9b::/96", "64:ff9b:1::/48", "::ffff:0:0:0/96", "::/96")
)
_NOT_CARRYING = (ipaddress.ip_address("::"), ipaddress.ip_address("::1"))
_SHARED = ipaddress.ip_network("100.64.0.0/10")
_PRIVATE = tuple(
    ipaddress.ip_network(cidr) for cidr in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7")
)


def _ipv4_part(text: str) -> int | None:
    """One dotted part as resolvers read it: 0x… hex, 0… octal, else decimal."""
    if not text:
        return None
    if not text.isascii() or not text.replace("x", "").replace("X", "").isalnum():
        return None  # int() would take "1_27" or " 1": no resolver does
    base = 10
    if text[:2].lower() == "0x":
        text, base = text[2:], 16
        if not text:
            return 0
    elif len(text) > 1 and text[0] == "0":
        text, base = text[1:], 8
    try:
        return int(text, base)
    except ValueError:
        return None


def _ipv4_literal(host: str) -> ipaddress.IPv4Address | None:
    parts = host.split(".")
    if len(parts) > 4:
        return None
    numbers = [_ipv4_part(part) for part in parts]
    if any(number is None for number in numbers):
        return None
    values = [number for number in numbers if number is not None]
    *leading, last = values
    if any(value > 255 for value in leading) or last >= 256 ** (5 - len(values)):
        return None
    address = last
    for index, value in enumerate(leading):
        address += value << (8 * (3 - index))
    return ipaddress.IPv4Address(address)


def ip_literal(host: str) -> IPAddress | None:
    """The address a URL host names literally (any IPv4 spelling, an IPv6 address with or
    without its brackets and zone, one trailing dot), or None when the host is a name."""
    host = host.strip("[]")
    if host.endswith(".") and not host.endswith(".."):
        host = host[:-1]
    if ":" in host:
        try:
            return ipaddress.IPv6Address(host.split("%", 1)[0])
        except ValueError:
            return None
    return _ipv4_literal(host) if host else None


def embedded_ipv4(address: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one carries (mapped, NAT64 or 6to4), if any."""
    if isinstance(address, ipaddress.IPv4Address) or address in _NOT_CARRYING:
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if any(address in network for network in _CARRY_LAST_32_BITS):
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return address.sixtofour


def _kind(address: IPAddress) -> str | None:
    """What makes `address` non-public, in words; None for a public unicast address."""
    if address.is_loopback:
        return "a loopback address"
    if address.is_link_local or any(address in network for network in LINK_LOCAL):
        return "a link-local address (the instance metadata service lives there)"
    if address.is_unspecified:
        return "the unspecified address"
    if address.is_multicast:
        return "a multicast address"
    if isinstance(address, ipaddress.IPv4Address) and address in _SHARED:
        return "a shared (CGNAT) address"
    if any(address in network for network in _PRIVATE) or (
        isinstance(address, ipaddress.IPv6Address) and address.is_site_local
    ):
        return "a private address"
    if not address.is_global:  # reserved, documentation, benchmarking, IETF protocol ranges
        return "a reserved address"
    return None


def _parse_networks(cidrs: Iterable[str]) -> tuple[IPNetwork, ...]:
    networks = tuple(ipaddress.ip_network(cidr, strict=False) for cidr in cidrs)
    for network in networks:
        if any(
            network.overlaps(link_local) for link_local in LINK_LOCAL if link_local.version == network.version
        ):
            raise ValueError(f"{network} overlaps link-local addresses, which no target may reach")
    return networks


@dataclass(frozen=True)
class AddressPolicy:
    """The deployment's rule; `allowed_networks` as CIDR text (a ValueError for a CIDR that
    is not one or that overlaps link-local)."""

    allowed_networks: tuple[str, ...] = ()
    _networks: tuple[IPNetwork, ...] = field(init=False, repr=False, default=())

    def __post_init__(self) -> None:
        object.__setattr__(self, "_networks", _parse_networks(self.allowed_networks))

    def refusal(self, address: IPAddress) -> str | None:
        """Why a target may not reach `address`, or None when it may."""
        carried = embedded_ipv4(address)
        if carried is not None:
            reason = self.refusal(carried)
            return None if reason is None else f"carries {carried}, {reason.removeprefix('is ')}"
        kind = _kind(address)
        if kind is None:
            return None
        if "link-local" not in kind and any(address in network for network in self._networks):
            return None
        hint = (
            ""
            if "link-local" in kind
            else "; a deployment may allow it in CDK context `target_private_cidrs`"
        )
        return f"is {kind}{hint}"


LOCAL_CLOUD_NETWORKS = tuple(str(network) for network in LOOPBACK)
"""What the local cloud (and the test harness) allows: its receivers listen on loopback."""
