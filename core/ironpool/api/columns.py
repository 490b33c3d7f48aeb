"""Printer columns: how a kind is shown as a table, defined once for every printer.

Each kind's strategy lists its :class:`Column` s (:attr:`ironpool.api.strategy.Strategy.columns`);
the apiserver serves them as a ``Table`` (what kubectl and ``ironpool get`` ask for), with ``wide``
columns as Kubernetes' priority-1 columns. Getters work on the wire form (plain dicts).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ironpool.api.quantity import parse_quantity

Obj = dict[str, Any]
Getter = Callable[[Obj], Any]
NONE = "<none>"


@dataclass(frozen=True)
class Column:
    """One table column; ``wide`` columns only show with ``-o wide``."""

    header: str
    get: Getter
    wide: bool = False


@functools.lru_cache(maxsize=1024)
def _steps(path: str) -> tuple[str, ...]:
    return tuple(path.split("."))


def dig(obj: Any, path: str) -> Any:
    """``obj["a"]["b"]...`` for ``path`` ``"a.b"``; None where a step is missing."""
    cur = obj
    for part in _steps(path):
        if not isinstance(cur, dict):
            return None
        cur = cur.get(part)
    return cur


def condition(obj: Obj, ctype: str) -> Obj | None:
    """The status condition of type ``ctype``, or None."""
    for cond in dig(obj, "status.conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == ctype:
            return cond
    return None


def age(timestamp: str | None, now: datetime | None = None) -> str:
    """kubectl-style age of an RFC 3339 timestamp: ``45s``, ``3m12s``, ``5h``, ``2d3h``."""
    if not timestamp:
        return NONE
    try:
        then = datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    except ValueError:
        return "?"
    if then.tzinfo is None:
        then = then.replace(tzinfo=UTC)
    return age_of(int(((now or datetime.now(UTC)) - then).total_seconds()))


def age_of(seconds: int) -> str:
    """kubectl's rendering of a duration in seconds (``HumanDuration``)."""
    seconds = max(0, seconds)
    if seconds < 120:
        return f"{seconds}s"
    minutes, hours, days = seconds // 60, seconds // 3600, seconds // 86400
    if minutes < 10:
        return f"{minutes}m{seconds % 60}s"
    if hours < 3:
        return f"{minutes}m"
    if hours < 8:
        return f"{hours}h{minutes % 60}m"
    if days < 2:
        return f"{hours}h"
    if days < 8:
        return f"{days}d{hours % 24}h"
    return f"{days}d"


# -- getters -----------------------------------------------------------------------------------


def field(path: str) -> Getter:
    """The value at a dotted path."""
    return lambda obj: dig(obj, path)


def cond_status(ctype: str, fallback: str | None = None) -> Getter:
    """The status of a condition (or the value at ``fallback`` when the condition is absent)."""

    def get(obj: Obj) -> Any:
        cond = condition(obj, ctype)
        if cond is not None:
            return cond.get("status")
        return dig(obj, fallback) if fallback else None

    return get


def count(path: str) -> Getter:
    """How many items the list or map at ``path`` has."""
    return lambda obj: len(dig(obj, path) or [])


def names(path: str) -> Getter:
    """The ``name`` s of the items of a list, comma-separated."""

    def get(obj: Obj) -> Any:
        return ",".join(str(i.get("name")) for i in dig(obj, path) or [] if isinstance(i, dict)) or None

    return get


def taints(path: str) -> Getter:
    """Taints as ``kubectl taint`` writes them: ``key=value:effect`` (``key:effect`` without a value),
    comma-separated."""

    def get(obj: Obj) -> Any:
        out = [f"{t.get('key')}{'=' + str(t['value']) if t.get('value') else ''}:{t.get('effect')}"
               for t in dig(obj, path) or [] if isinstance(t, dict)]
        return ",".join(out) or None

    return get


def mapping(path: str) -> Getter:
    """A map as ``k=v,k=v``, sorted by key."""
    return lambda obj: ",".join(f"{k}={v}" for k, v in sorted((dig(obj, path) or {}).items())) or None


_BINARY_UNITS = (("Ei", 1 << 60), ("Pi", 1 << 50), ("Ti", 1 << 40), ("Gi", 1 << 30), ("Mi", 1 << 20),
                 ("Ki", 1 << 10))


_PLAIN_BYTES = re.compile(r"([0-9]{1,18})(Ki|Mi|Gi|Ti|Pi|Ei)?")
_UNIT_SIZE = dict(_BINARY_UNITS)


def human_bytes(value: Any) -> str:
    """A byte quantity for a person: ``24684092Ki`` -> ``23.5Gi`` (tables only; -o yaml stays exact)."""
    # Whole numbers with a binary suffix (what pools report) skip the exact parser: a Table of
    # thousands of pools renders two of them per row.
    plain = _PLAIN_BYTES.fullmatch(value) if isinstance(value, str) else None
    if plain is not None:
        n = int(plain[1]) * (_UNIT_SIZE[plain[2]] if plain[2] else 1)
    else:
        try:
            n = parse_quantity(value).value()
        except ValueError:
            return str(value)
    for unit, size in _BINARY_UNITS:
        if n >= size:
            return f"{n / size:.1f}".removesuffix(".0") + unit
    return str(n)


def free_of(resource: str) -> Getter:
    """``allocatable/capacity`` of one shared resource of a pool (bytes shown with binary units)."""
    show = str if resource == "cpu" else human_bytes

    def get(obj: Obj) -> Any:
        alloc, cap = dig(obj, f"status.allocatable.{resource}"), dig(obj, f"status.capacity.{resource}")
        if alloc is None and cap is None:
            return None
        return f"{show(alloc) if alloc is not None else '?'}/{show(cap) if cap is not None else '?'}"

    return get


def involved(obj: Obj) -> Any:
    """An Event's object as ``kind/name``."""
    ref = obj.get("involvedObject") or {}
    return f"{str(ref.get('kind', '')).lower()}/{ref.get('name', '')}"


def last_seen(obj: Obj) -> str:
    """The age of an Event's last occurrence."""
    return age(obj.get("lastTimestamp") or obj.get("eventTime") or dig(obj, "metadata.creationTimestamp"))


NAME = Column("NAME", field("metadata.name"))
AGE = Column("AGE", lambda obj: age(dig(obj, "metadata.creationTimestamp")))
