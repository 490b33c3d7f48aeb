"""The parts of an etcd store's URL, its option values, and etcd's range end of a key prefix."""

from __future__ import annotations

import re
from urllib.parse import parse_qs

from ironpool.store.etcd_client import parse_endpoints

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m|h)?$")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


def range_end(key: bytes) -> bytes:
    """The smallest key above every key starting with ``key`` (etcd's prefix range end)."""
    end = bytearray(key)
    for i in reversed(range(len(end))):
        if end[i] < 0xFF:
            end[i] += 1
            return bytes(end[: i + 1])
    return b"\0"


def duration(value: str, name: str) -> float:
    """An etcd option's duration (``300s``, ``5m``, ``250ms``; a bare number is seconds)."""
    match = _DURATION.match(value)
    if match is None:
        raise ValueError(f"--store: etcd option {name}={value!r} must be a duration such as 300s or 5m")
    return float(match.group(1)) * _UNIT[match.group(2)]


def parse_url(rest: str) -> tuple[list[str], str, dict[str, str]]:
    """``HOST:PORT,...[/PREFIX][?OPTIONS]`` (what follows ``etcd://``) into its parts."""
    rest, _, query = rest.partition("?")
    hosts, slash, prefix = rest.partition("/")
    options = {k: v[-1] for k, v in parse_qs(query, keep_blank_values=True).items()}
    unknown = set(options) - {"ring", "ring-bytes", "compaction-interval"}
    if unknown:
        raise ValueError(f"--store: unknown etcd option(s) {sorted(unknown)}; "
                         "known: compaction-interval, ring, ring-bytes")
    return parse_endpoints(hosts), (slash + prefix).rstrip("/"), options
