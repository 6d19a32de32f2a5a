"""The SSRF guard's rule (domain/addresses.py) and its create-time check (TargetAccess):
every refused address form, in every spelling a URL host can take."""

from __future__ import annotations

import ipaddress

import pytest

from scheduler_core.domain.addresses import LOCAL_CLOUD_NETWORKS, AddressPolicy, ip_literal
from scheduler_core.domain.errors import InvalidRequest
from scheduler_core.domain.target_access import TargetAccess
from scheduler_core.domain.target_spec import HttpTarget

METADATA = ipaddress.ip_address("169.254.169.254")


@pytest.mark.parametrize(
    "host",
    [
        "169.254.169.254",
        "169.254.169.254.",  # a trailing dot
        "2852039166",  # decimal
        "0xa9fea9fe",  # hexadecimal
        "0XA9FEA9FE",
        "0251.0376.0251.0376",  # octal parts
        "0xa9.0xfe.0xa9.0xfe",
        "169.254.43518",  # a.b.c: the last part fills two bytes
        "169.16689662",  # a.b: the last part fills three bytes
        "0251.254.169.254",
    ],
)
def test_every_ipv4_spelling_of_the_metadata_address_is_read_as_it(host: str) -> None:
    assert ip_literal(host) == METADATA


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("[::ffff:169.254.169.254]", "::ffff:169.254.169.254"),
        ("::ffff:a9fe:a9fe", "::ffff:169.254.169.254"),
        ("[fe80::1%eth0]", "fe80::1"),
        ("[::1]", "::1"),
        ("127.1", "127.0.0.1"),
        ("0", "0.0.0.0"),
    ],
)
def test_other_literals_are_read(host: str, expected: str) -> None:
    assert ip_literal(host) == ipaddress.ip_address(expected)


@pytest.mark.parametrize(
    "host",
    [
        "example.com",
        "hooks.example.com.",
        "1.2.3.4.5",
        "256.1.1.1",
        "1.2.3.0x100",
        "08.1.1.1",
        "a..b",
        "",
        "1_27.0.0.1",
    ],
)
def test_names_and_impossible_numbers_are_no_literal(host: str) -> None:
    assert ip_literal(host) is None


REFUSED = [
    ("127.0.0.1", "loopback"),
    ("127.255.0.9", "loopback"),
    ("::1", "loopback"),
    ("169.254.169.254", "link-local"),
    ("169.254.0.1", "link-local"),
    ("fe80::1", "link-local"),
    ("fd00:ec2::254", "private"),  # the metadata service over IPv6 (Nitro)
    ("10.0.0.1", "private"),
    ("172.16.0.1", "private"),
    ("172.31.255.255", "private"),
    ("192.168.1.1", "private"),
    ("fc00::1", "private"),
    ("100.64.0.1", "shared (CGNAT)"),
    ("100.127.255.254", "shared (CGNAT)"),
    ("224.0.0.1", "multicast"),
    ("239.255.255.250", "multicast"),
    ("ff02::1", "multicast"),
    ("0.0.0.0", "unspecified"),
    ("::", "unspecified"),
    ("240.0.0.1", "reserved"),
    ("255.255.255.255", "reserved"),
    ("192.0.2.1", "reserved"),  # documentation (TEST-NET-1)
    ("::ffff:169.254.169.254", "link-local"),  # IPv4-mapped
    ("::ffff:10.0.0.1", "private"),
    ("64:ff9b::a9fe:a9fe", "link-local"),  # NAT64 of the metadata address
    ("2002:a9fe:a9fe::1", "link-local"),  # 6to4 of it
    ("64:ff9b:1::a9fe:a9fe", "link-local"),  # local-use NAT64
    ("::ffff:0:a9fe:a9fe", "link-local"),  # IPv4-translated
    ("::a9fe:a9fe", "link-local"),  # IPv4-compatible (deprecated)
    ("::7f00:1", "loopback"),
    ("fec0::1", "private"),  # site-local (deprecated)
]


@pytest.mark.parametrize(("address", "kind"), REFUSED)
def test_non_public_addresses_are_refused_saying_why(address: str, kind: str) -> None:
    reason = AddressPolicy().refusal(ipaddress.ip_address(address))

    assert reason is not None
    assert kind in reason


@pytest.mark.parametrize("address", ["93.184.215.14", "1.1.1.1", "2606:4700:4700::1111", "::ffff:8.8.8.8"])
def test_public_addresses_pass(address: str) -> None:
    assert AddressPolicy().refusal(ipaddress.ip_address(address)) is None


def test_a_deployment_may_allow_private_networks_it_lists() -> None:
    vpc = AddressPolicy(("10.1.0.0/16", "fd12::/16"))

    assert vpc.refusal(ipaddress.ip_address("10.1.2.3")) is None
    assert vpc.refusal(ipaddress.ip_address("fd12::5")) is None
    assert vpc.refusal(ipaddress.ip_address("::ffff:10.1.2.3")) is None  # mapped: judged as IPv4
    assert vpc.refusal(ipaddress.ip_address("10.2.0.1")) is not None  # not listed
    assert vpc.refusal(ipaddress.ip_address("127.0.0.1")) is not None


def test_the_local_cloud_allows_loopback_but_never_the_metadata_service() -> None:
    local = AddressPolicy(LOCAL_CLOUD_NETWORKS)

    assert local.refusal(ipaddress.ip_address("127.0.0.1")) is None
    assert local.refusal(ipaddress.ip_address("::1")) is None
    assert local.refusal(METADATA) is not None
    assert local.refusal(ipaddress.ip_address("10.0.0.1")) is not None


@pytest.mark.parametrize("cidr", ["169.254.0.0/16", "169.254.169.254/32", "0.0.0.0/0", "fe80::/64", "::/0"])
def test_no_deployment_can_allow_link_local(cidr: str) -> None:
    with pytest.raises(ValueError, match="link-local"):
        AddressPolicy((cidr,))


def test_a_listed_network_that_is_no_cidr_is_refused() -> None:
    with pytest.raises(ValueError, match="does not appear to be"):
        AddressPolicy(("ten.0.0.0/8",))


# --- at create and PATCH: the target check ---------------------------------------------------


def http(url: str) -> HttpTarget:
    return HttpTarget.model_validate({"type": "HTTP", "url": url})


def refusal_of(access: TargetAccess, url: str) -> InvalidRequest:
    with pytest.raises(InvalidRequest) as refused:
        access.check(http(url))
    return refused.value


@pytest.mark.parametrize(
    "url",
    [
        "https://169.254.169.254/latest/meta-data/",
        "https://2852039166/latest/meta-data/",
        "https://0xa9fea9fe/",
        "https://0251.0376.0251.0376/",
        "https://169.254.169.254./",
        "https://[::ffff:169.254.169.254]/",
        "https://[::ffff:a9fe:a9fe]:8080/",
        "https://127.0.0.1:9001/2018-06-01/runtime/invocation/next",  # the Lambda runtime API
        "https://127.1/",
        "https://[::1]/",
        "https://10.0.0.8/internal",
        "https://192.168.0.1/",
        "https://[fd00::1]/",
        "https://100.100.100.200/",  # CGNAT (and another cloud's metadata address)
        "https://0.0.0.0:8080/",
        "https://224.0.0.1/",
    ],
)
def test_a_literal_host_that_is_not_public_is_a_400_naming_the_url(url: str) -> None:
    error = refusal_of(TargetAccess(), url)

    [detail] = error.details
    assert detail["field"] == "target.url"
    assert " address" in detail["message"]  # "… is a link-local address", "… a private address"


def test_the_refusal_says_which_address_a_disguised_literal_is() -> None:
    error = refusal_of(TargetAccess(), "https://2852039166/")

    assert "host 2852039166 is 169.254.169.254, which is a link-local address" in error.details[0]["message"]


def test_a_private_literal_passes_where_the_deployment_lists_it() -> None:
    vpc = TargetAccess(addresses=AddressPolicy(("10.0.0.0/8",)))

    vpc.check(http("https://10.0.0.8/internal"))
    assert "link-local" in refusal_of(vpc, "https://169.254.169.254/").details[0]["message"]


def test_a_name_is_left_to_the_worker_which_checks_what_it_resolves_to() -> None:
    TargetAccess().check(http("https://localhost.example.com/hook"))


def test_plain_http_is_refused_unless_the_deployment_allows_it() -> None:
    error = refusal_of(TargetAccess(), "http://hooks.example.com/")

    assert error.details[0]["field"] == "target.url"
    assert "https://" in error.details[0]["message"]
    assert "allow_http_targets" in error.details[0]["message"]
    TargetAccess(allow_http=True).check(http("http://hooks.example.com/"))
