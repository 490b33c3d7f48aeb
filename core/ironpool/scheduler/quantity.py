"""Kubernetes resource quantities ("2", "500m", "8Gi", "1e3") as integers.

The scheduler keeps every resource as an int: ``cpu`` in millicores, everything else in base
units (bytes for ``memory``/``storage``), so accounting is exact and comparisons are cheap.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation

_SUFFIXES: dict[str, Decimal] = {
    "": Decimal(1),
    "m": Decimal(1) / 1000,
    "k": Decimal(10) ** 3, "M": Decimal(10) ** 6, "G": Decimal(10) ** 9,
    "T": Decimal(10) ** 12, "P": Decimal(10) ** 15, "E": Decimal(10) ** 18,
    "Ki": Decimal(2) ** 10, "Mi": Decimal(2) ** 20, "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40, "Pi": Decimal(2) ** 50, "Ei": Decimal(2) ** 60,
}
_RE = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$")

MILLI_RESOURCES = frozenset({"cpu"})


def parse_quantity(value: object, resource: str = "", field: str | None = None) -> int:
    """Parse a quantity; ``cpu`` comes back in millicores, other resources rounded up to units.

    Raises ValueError naming ``field`` (default: the resource) when the value is not a quantity.
    """
    where = field or resource or "quantity"
    if isinstance(value, bool):
        raise ValueError(f"{where}: not a quantity: {value!r}")
    if isinstance(value, int | float):
        number = Decimal(str(value))
    elif isinstance(value, str):
        m = _RE.match(value.strip())
        if not m:
            raise ValueError(f"{where}: not a quantity: {value!r}")
        try:
            number = Decimal(m.group(1)) * _SUFFIXES[m.group(2) or ""]
        except InvalidOperation as exc:
            raise ValueError(f"{where}: not a quantity: {value!r}") from exc
    else:
        raise ValueError(f"{where}: not a quantity: {value!r}")
    if resource in MILLI_RESOURCES:
        number *= 1000
    if number < 0:
        raise ValueError(f"{where}: must not be negative: {value!r}")
    return math.ceil(number)


def parse_resource_list(values: object, field: str = "resources") -> dict[str, int]:
    """Parse a ResourceList mapping into ``{name: int}``; class-count keys (``class/...``) are kept."""
    if values is None:
        return {}
    if not isinstance(values, dict):
        raise ValueError(f"{field}: expected a mapping, got {type(values).__name__}")
    out: dict[str, int] = {}
    for name, raw in values.items():
        out[str(name)] = parse_quantity(raw, str(name), f"{field}.{name}")
    return out


def format_quantity(value: int, resource: str) -> str:
    """Human form of an internal value, for messages."""
    if resource in MILLI_RESOURCES:
        return f"{value // 1000}" if value % 1000 == 0 else f"{value}m"
    for suffix in ("Ti", "Gi", "Mi", "Ki"):
        unit = int(_SUFFIXES[suffix])
        if value >= unit and value % unit == 0:
            return f"{value // unit}{suffix}"
    return str(value)
