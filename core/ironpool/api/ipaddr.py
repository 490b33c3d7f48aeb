"""IP addresses, prefixes, IP families and MAC addresses as the networking and ipam kinds write them.

IronCore spells families ``IPv4``/``IPv6`` (Kubernetes' ``IPFamily``), addresses as literals
(``10.0.0.7``, ``fd00::7``) and prefixes in CIDR form (``10.0.0.0/24``). The parsers here return
the standard library's objects and ``None`` for malformed input, so validation can name the field;
:func:`canonical_ip` and :func:`canonical_prefix` give the one string form the store keeps.
"""

from __future__ import annotations

import functools
import ipaddress
import re
from typing import Literal

IPFamily = Literal["IPv4", "IPv6"]
IPV4: IPFamily = "IPv4"
IPV6: IPFamily = "IPv6"
FAMILY_BITS: dict[str, int] = {IPV4: 32, IPV6: 128}

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

_MAC_RE = re.compile(r"^[0-9a-f]{2}(:[0-9a-f]{2}){5}$")


@functools.lru_cache(maxsize=8192)  # the same strings are parsed by defaulting, validation and IPAM
def parse_ip(value: str) -> IPAddress | None:
    """An address literal, or None (scoped IPv6 literals such as ``fe80::1%eth0`` are refused)."""
    try:
        ip = ipaddress.ip_address(value)
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.scope_id:
        return None
    return ip


@functools.lru_cache(maxsize=8192)
def parse_prefix(value: str, *, strict: bool = True) -> IPNetwork | None:
    """A CIDR prefix, or None. ``strict`` refuses host bits (``10.0.0.5/24``)."""
    if "/" not in value:
        return None
    try:
        return ipaddress.ip_network(value, strict=strict)
    except ValueError:
        return None


def family_of(ip: IPAddress | IPNetwork) -> IPFamily:
    return IPV4 if ip.version == 4 else IPV6


def canonical_ip(value: str) -> str:
    """The stored form of an address literal (``fd00:0::7`` -> ``fd00::7``); unchanged if malformed."""
    ip = parse_ip(value)
    return value if ip is None else str(ip)


def canonical_prefix(value: str) -> str:
    """The stored form of a CIDR prefix; unchanged if malformed (validation reports it)."""
    net = parse_prefix(value)
    return value if net is None else str(net)


def single(ip: IPAddress) -> IPNetwork:
    """The /32 (or /128) prefix of one address."""
    return ipaddress.ip_network(ip)


def normalize_mac(value: str) -> str:
    """``52-54-00-AB-CD-EF`` or ``52:54:00:ab:cd:ef`` -> ``52:54:00:ab:cd:ef``."""
    return value.strip().lower().replace("-", ":")


def mac_problems(value: str) -> tuple[str, ...]:
    """Why ``value`` (normalized) is not a MAC a NIC may carry; empty if it is one."""
    if not _MAC_RE.match(value):
        return ("must be a MAC address of six hexadecimal octets (e.g. '52:54:00:12:34:56')",)
    if int(value[:2], 16) & 1:
        return ("must be a unicast address (the lowest bit of the first octet is 0)",)
    if value == "00:00:00:00:00:00":
        return ("must not be all zeros",)
    return ()
