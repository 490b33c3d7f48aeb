"""Reservation: capacity held for Machines to come, namespaced, as IronCore's IEP-11 draft has it
(see :mod:`ironpool.api.reservation` for what it means to every layer).

The spec is fixed once made, but for ``ttlSecondsAfterCreation`` (a Reservation may be given longer,
or less, time). Resource names are IronCore's: ``class/machine.<class>`` counts whole machines,
``cpu`` and ``memory`` a block of that size; anything else is refused naming the key.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, ClassVar

from ironpool.api.columns import AGE, NAME, Column, age_of, dig, mapping
from ironpool.api.compute import COMPUTE_GROUP, COMPUTE_VERSION, Reservation
from ironpool.api.fieldpath import FieldErrors, child, dns1123_subdomain, index, validate_labels
from ironpool.api.quantity import Quantity, parse_quantity
from ironpool.api.reservation import (
    MACHINE_CLASS_PREFIX,
    SCHEDULED,
    SHARED_RESOURCES,
    class_of_key,
    condition,
    expires_at,
    pool_entries,
    summary,
)
from ironpool.api.resource_info import ResourceInfo
from ironpool.api.rules import immutable, ref_name
from ironpool.api.strategy import Obj, Strategy

_FIXED = ("pools", "poolSelector", "resources", "zoneSpread", "dryRun")


def validate_resources(resources: Mapping[str, Quantity], path: str, errs: FieldErrors, *,
                       allow_zero: bool = False) -> None:
    """Whole machines per class and a cpu/memory block; any other name is refused, naming the key."""
    for key, q in resources.items():
        p = child(path, key)
        cls = class_of_key(key)
        if cls is not None:
            for msg in dns1123_subdomain(cls):
                errs.invalid(p, key, f"the class name {msg}")
            if q.fraction.denominator != 1 or q.sign() < 0 or (q.sign() == 0 and not allow_zero):
                errs.invalid(p, str(q), "must be a whole number of machines greater than zero")
        elif key in SHARED_RESOURCES:
            if q.sign() < 0 or (q.sign() == 0 and not allow_zero):
                errs.invalid(p, str(q), "must be greater than zero")
        else:
            detail = f"unknown resource: a Reservation holds {MACHINE_CLASS_PREFIX}<class>, cpu or memory"
            if "/" in key and not key.startswith("class/"):
                detail += f" (machines of class {key.split('/', 1)[1]} are {MACHINE_CLASS_PREFIX}" \
                          f"{key.split('/', 1)[1]})"
            errs.invalid(p, key, detail)


def _units(obj: Mapping[str, Any], key: str) -> int:
    total = 0
    for name, value in (obj.get(key) or {}).items():
        if class_of_key(str(name)) is not None:
            try:
                total += parse_quantity(value).value()
            except ValueError:
                continue
    return total


def _used(obj: Obj) -> Any:
    """Machines placed within the Reservation of those it holds: ``3/10``."""
    held = _units(obj.get("spec") or {}, "resources")
    if not held:
        return None
    used: int = sum((_units(e, "consumed") for e in pool_entries(obj)), 0)
    return f"{used}/{held}"


def _pools(obj: Obj) -> Any:
    entries = pool_entries(obj)
    if entries:
        return ",".join(str(e["ref"]) for e in entries)
    wanted = [str(p.get("name")) for p in dig(obj, "spec.pools") or () if isinstance(p, dict)]
    return ",".join(wanted) if wanted else "<any>"


def _expires(obj: Obj) -> Any:
    when = expires_at(obj)
    if when is None:
        return None
    left = int((when - datetime.now(UTC)).total_seconds())
    return age_of(left) if left > 0 else "expired"


def _message(obj: Obj) -> Any:
    cond = condition(obj, SCHEDULED)
    return cond.get("message") if cond is not None else None


class ReservationStrategy(Strategy[Reservation]):
    """What may be reserved (IronCore's resource names, whole machines), and that it stays as made."""

    info: ClassVar[ResourceInfo] = ResourceInfo(
        COMPUTE_GROUP, COMPUTE_VERSION, "Reservation", "reservations", "reservation", ("rsv",), True,
        Reservation, True,
    )
    name_is_dns_label = True
    columns = (
        NAME, Column("STATE", summary), Column("POOLS", _pools), Column("USED", _used),
        Column("EXPIRES", _expires), AGE,
        Column("RESOURCES", mapping("spec.resources"), wide=True),
        Column("SELECTOR", mapping("spec.poolSelector"), wide=True),
        Column("MESSAGE", _message, wide=True),
    )

    def validate(self, obj: Reservation, errs: FieldErrors) -> None:
        spec = obj.spec
        if not spec.resources:
            errs.required("spec.resources", "must hold at least one machine "
                                            f"({MACHINE_CLASS_PREFIX}<class>: N) or cpu and memory")
        validate_resources(spec.resources, "spec.resources", errs)
        seen: set[str] = set()
        for i, ref in enumerate(spec.pools or ()):
            p = f"{index('spec.pools', i)}.name"
            ref_name(ref.name, p, errs)
            if ref.name in seen:
                errs.duplicate(p, ref.name)
            seen.add(ref.name)
        validate_labels(spec.pool_selector, "spec.poolSelector", errs)
        if spec.zone_spread is not None and spec.zone_spread.max_skew < 1:
            errs.invalid("spec.zoneSpread.maxSkew", spec.zone_spread.max_skew, "must be at least 1")
        ttl = spec.ttl_seconds_after_creation
        if ttl is not None and ttl < 1:
            errs.invalid("spec.ttlSecondsAfterCreation", ttl, "must be at least 1")
        if obj.status is not None:
            refs: set[str] = set()
            for i, entry in enumerate(obj.status.pools or ()):
                p = index("status.pools", i)
                ref_name(entry.ref, f"{p}.ref", errs)
                if entry.ref in refs:
                    errs.duplicate(f"{p}.ref", entry.ref)
                refs.add(entry.ref)
                validate_resources(entry.resources or {}, f"{p}.resources", errs, allow_zero=True)
                validate_resources(entry.consumed or {}, f"{p}.consumed", errs, allow_zero=True)

    def validate_update(self, old: Obj, new: Obj, errs: FieldErrors) -> None:
        for name in _FIXED:
            immutable(old, new, ("spec", name), errs)
