"""The scheduler's view of a Reservation, read from its JSON once per event (see
:mod:`ironpool.api.reservation` for what a Reservation means to every layer).

Amounts are the scheduler's integers (:mod:`ironpool.scheduler.quantity`): ``cpu`` in millicores,
``memory`` in bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ironpool.api import reservation as rsv
from ironpool.api.meta import object_key
from ironpool.scheduler.cache import Hold
from ironpool.scheduler.quantity import parse_resource_list


@dataclass(slots=True)
class ReservationInfo:
    """One Reservation: what it asks for, where it may go, and how far it got."""

    key: str
    name: str
    namespace: str
    resource_version: str
    #: class -> whole machines asked for
    classes: dict[str, int]
    #: the cpu/memory block asked for (empty: none)
    block: dict[str, int]
    only_pools: frozenset[str] | None
    selector: dict[str, str]
    max_skew: int | None
    dry_run: bool
    #: Unix seconds when it expires, None: never
    expires_at: float | None
    #: the scheduler wrote its answer (``Scheduled`` is set)
    answered: bool
    #: what it holds now per pool (empty unless :func:`ironpool.api.reservation.holds`)
    holds: dict[str, Hold]
    #: every planned pool's state, also of a reservation that holds nothing any more
    states: dict[str, str]
    expired: bool
    accepted_condition: str | None
    accepted_reason: str | None
    obj: dict[str, Any] = field(repr=False, default_factory=dict)

    @property
    def units(self) -> int:
        return sum(self.classes.values()) + (1 if self.block else 0)


def _split(resources: Any, where: str) -> tuple[dict[str, int], dict[str, int]]:
    """(class -> count, block) of a ResourceList."""
    classes: dict[str, int] = {}
    block: dict[str, int] = {}
    for key, value in parse_resource_list(resources, where).items():
        cls = rsv.class_of_key(key)
        if cls is not None:
            classes[cls] = value
        elif key in rsv.SHARED_RESOURCES and value > 0:
            block[key] = value
    return classes, block


def reservation_from_json(obj: dict[str, Any]) -> ReservationInfo:
    """Build a ReservationInfo; ValueError names a field that is not a quantity."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    classes, block = _split(spec.get("resources"), "spec.resources")
    pools = [str(p.get("name")) for p in spec.get("pools") or () if isinstance(p, dict) and p.get("name")]
    spread = spec.get("zoneSpread") or {}
    holds: dict[str, Hold] = {}
    for pool, resources in rsv.held(obj).items():
        held_classes, held_block = _split(resources, f"status.pools[{pool}].resources")
        state = next((str(e.get("state") or rsv.PENDING) for e in rsv.pool_entries(obj) if e["ref"] == pool),
                     rsv.PENDING)
        holds[pool] = Hold(held_classes, held_block, state)
    states = {str(e["ref"]): str(e.get("state") or rsv.PENDING) for e in rsv.pool_entries(obj)}
    when = rsv.expires_at(obj)
    accepted = rsv.condition(obj, rsv.ACCEPTED_CONDITION)
    return ReservationInfo(
        key=object_key(obj), name=str(meta.get("name", "")), namespace=str(meta.get("namespace") or ""),
        resource_version=str(meta.get("resourceVersion", "")), classes=classes, block=block,
        only_pools=frozenset(pools) if pools else None,
        selector={str(k): str(v) for k, v in (spec.get("poolSelector") or {}).items()},
        max_skew=int(spread.get("maxSkew", 1)) if isinstance(spread, dict) and spread else None,
        dry_run=rsv.is_dry_run(obj), expires_at=when.timestamp() if when is not None else None,
        answered=rsv.condition(obj, rsv.SCHEDULED) is not None, holds=holds, states=states,
        expired=rsv.condition_is(obj, rsv.EXPIRED, "True"),
        accepted_condition=str(accepted.get("status")) if accepted is not None else None,
        accepted_reason=str(accepted.get("reason")) if accepted is not None else None, obj=obj)
