"""Kubernetes resource quantities ("2", "500m", "8Gi", "1e3") as integers.

The scheduler keeps every resource as an int: ``cpu`` in millicores, everything else in base
units (bytes for ``memory``/``storage``), so accounting is exact and comparisons are cheap.
Parsing is :mod:`ironpool.api.quantity`'s; this module only maps the exact value to those ints.
"""

from __future__ import annotations

from functools import lru_cache

from ironpool.api.quantity import parse_quantity as parse_api_quantity

MILLI_RESOURCES = frozenset({"cpu"})


@lru_cache(maxsize=8192)
def _to_int(value: str | int | float, milli: bool) -> int:
    # Cached because informers deliver the same few capacity strings for thousands of pools.
    q = parse_api_quantity(value)
    return q.milli_value() if milli else q.value()


def parse_int_quantity(value: object, resource: str = "", field: str | None = None) -> int:
    """Parse a quantity into an int; ``cpu`` comes back in millicores, other resources rounded up to units.

    Raises ValueError naming ``field`` (default: the resource) when the value is not a quantity.
    """
    where = field or resource or "quantity"
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError(f"{where}: not a quantity: {value!r}")
    try:
        number = _to_int(value, resource in MILLI_RESOURCES)
    except ValueError as exc:
        raise ValueError(f"{where}: not a quantity: {value!r}") from exc
    if number < 0:
        raise ValueError(f"{where}: must not be negative: {value!r}")
    return number


def parse_resource_list(values: object, field: str = "resources") -> dict[str, int]:
    """Parse a ResourceList mapping into ``{name: int}``; class-count keys (``class/...``) are kept."""
    if values is None:
        return {}
    if not isinstance(values, dict):
        raise ValueError(f"{field}: expected a mapping, got {type(values).__name__}")
    out: dict[str, int] = {}
    for name, raw in values.items():
        out[str(name)] = parse_int_quantity(raw, str(name), f"{field}.{name}")
    return out

