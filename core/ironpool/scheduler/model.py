"""The scheduler's own view of pools, classes and schedulable objects, read from API JSON.

Everything is plain slotted dataclasses built once per object event, so a scheduling decision
never touches pydantic models or parses quantities. JSON field names follow IronCore.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from ironpool.api.meta import object_key
from ironpool.api.reservation import RESERVATION_LABEL
from ironpool.scheduler.quantity import parse_int_quantity, parse_resource_list

Kind = Literal["machine", "volume"]

ZONE_LABEL = "topology.ironcore.dev/zone"
#: Pools on the same libvirt host share this label's value (a MachinePool and the VolumePool beside
#: it); without it a pool's host is its own name, so same-named machine and volume pools pair up.
HOST_LABEL = "topology.ironpool.dev/host"
#: Machines/Volumes carry no priority field in IronCore; this annotation gives one (higher first).
PRIORITY_ANNOTATION = "scheduler.ironpool.dev/priority"
#: Which scheduler handles the object (absent: the scheduler named ``default``).
SCHEDULER_NAME_ANNOTATION = "scheduler.ironpool.dev/scheduler-name"
#: Names the label key whose value groups Machines that TopologySpread spreads across zones.
SPREAD_ANNOTATION = "scheduler.ironpool.dev/spread-by"

# Resource names that capacity accounting knows; class-count keys are informational only.
CLASS_PREFIX = "class/"


@dataclass(frozen=True, slots=True)
class Taint:
    """A pool taint (``spec.taints[]``)."""

    key: str
    value: str = ""
    effect: str = "NoSchedule"


@dataclass(frozen=True, slots=True)
class Toleration:
    """An object's toleration; matched by :func:`ironpool.api.meta.tolerates_taints`."""

    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""


@dataclass(slots=True)
class ClassInfo:
    """A MachineClass/VolumeClass: the resources one object of the class takes from a pool."""

    kind: Kind
    name: str
    demand: dict[str, int]


@dataclass(slots=True)
class PoolInfo:
    """A MachinePool/VolumePool as the scheduler sees it; ``used`` is maintained by the cache."""

    kind: Kind
    name: str
    ready: bool
    labels: dict[str, str]
    taints: tuple[Taint, ...]
    #: total resources for ironpool objects (allocatable, else capacity), never reduced by binding
    allocatable: dict[str, int]
    #: class names the pool offers, or None = no list published: every class that fits offers
    offered: frozenset[str] | None
    zone: str
    host: str
    used: dict[str, int] = field(default_factory=dict)

    def free(self, resource: str) -> int:
        return self.allocatable.get(resource, 0) - self.used.get(resource, 0)

    def offers(self, class_name: str) -> bool:
        return self.offered is None or class_name in self.offered

    def fits(self, demand: dict[str, int]) -> bool:
        alloc, used = self.allocatable, self.used
        return all(alloc.get(r, 0) - used.get(r, 0) >= d for r, d in demand.items())


@dataclass(slots=True)
class SchedulingRequest:
    """One Machine or Volume waiting for a pool."""

    kind: Kind
    key: str  # "namespace/name"
    uid: str
    resource_version: str
    class_name: str | None
    selector: dict[str, str]
    tolerations: tuple[Toleration, ...]
    labels: dict[str, str]
    priority: int = 0
    #: for Volumes: requested bytes (``spec.resources.storage``); Machines take their class's demand
    storage: int = 0
    #: names of Volumes (same namespace) a Machine references
    volume_names: tuple[str, ...] = ()
    spread_key: str | None = None
    obj: dict[str, Any] | None = None
    #: the Reservation (``namespace/name``) a Machine is placed within (its label), if any
    reservation: str | None = None
    #: only these pools may take it (a Reservation's ``spec.pools``); None: any
    only_pools: frozenset[str] | None = None

    @property
    def volume_keys(self) -> tuple[str, ...]:
        """``namespace/name`` of every Volume a Machine references."""
        ns = self.key.split("/", 1)[0]
        return tuple(f"{ns}/{v}" for v in self.volume_names)


def _conditions_ready(status: dict[str, Any], ready_states: tuple[str, ...]) -> bool:
    for cond in status.get("conditions") or ():
        if cond.get("type") == "Ready":
            return bool(cond.get("status") == "True")
    # Without a Ready condition fall back on the (deprecated) state field.
    return status.get("state") in ready_states


def _taints(spec: dict[str, Any]) -> tuple[Taint, ...]:
    return tuple(
        Taint(str(t.get("key", "")), str(t.get("value", "") or ""), str(t.get("effect") or "NoSchedule"))
        for t in spec.get("taints") or ()
    )


def _tolerations(spec: dict[str, Any]) -> tuple[Toleration, ...]:
    return tuple(
        Toleration(str(t.get("key", "") or ""), str(t.get("operator") or "Equal"),
                   str(t.get("value", "") or ""), str(t.get("effect", "") or ""))
        for t in spec.get("tolerations") or ()
    )


def pool_from_json(kind: Kind, obj: dict[str, Any]) -> PoolInfo:
    """Build a PoolInfo from a MachinePool/VolumePool document.

    Offered classes: ``status.available{Machine,Volume}Classes`` when present; else the
    ``class/<kind>.<name>`` keys of allocatable/capacity when there are any; else None (every class
    that fits by resources). Allocatable falls back on capacity per resource.
    """
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    name = str(meta.get("name", ""))
    capacity = parse_resource_list(status.get("capacity"), "status.capacity")
    allocatable = parse_resource_list(status.get("allocatable"), "status.allocatable")
    totals = {r: v for r, v in capacity.items() if not r.startswith(CLASS_PREFIX)}
    totals.update({r: v for r, v in allocatable.items() if not r.startswith(CLASS_PREFIX)})
    list_field = "availableMachineClasses" if kind == "machine" else "availableVolumeClasses"
    offered: frozenset[str] | None
    if status.get(list_field) is not None:
        offered = frozenset(str(ref.get("name", "")) for ref in status.get(list_field) or ())
    else:
        prefix = f"{CLASS_PREFIX}{kind}."
        keys = {k[len(prefix):] for k in (*capacity, *allocatable) if k.startswith(prefix)}
        offered = frozenset(keys) if keys else None
    labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
    ready = _conditions_ready(status, ("Ready",) if kind == "machine" else ("Available", "Ready"))
    return PoolInfo(kind=kind, name=name, ready=ready, labels=labels, taints=_taints(spec),
                    allocatable=totals, offered=offered, zone=labels.get(ZONE_LABEL, ""),
                    host=labels.get(HOST_LABEL, name))


def class_from_json(kind: Kind, obj: dict[str, Any]) -> ClassInfo:
    """A MachineClass's capabilities are its demand; a VolumeClass demands nothing itself."""
    name = str((obj.get("metadata") or {}).get("name", ""))
    if kind == "machine":
        caps = parse_resource_list(obj.get("capabilities"), "capabilities")
        return ClassInfo(kind, name, {r: v for r, v in caps.items() if v > 0})
    return ClassInfo(kind, name, {})


def reservation_of(kind: Kind, obj: dict[str, Any]) -> str | None:
    """``namespace/name`` of the Reservation a Machine is placed within, or None."""
    if kind != "machine":
        return None
    meta = obj.get("metadata") or {}
    name = (meta.get("labels") or {}).get(RESERVATION_LABEL)
    return f"{meta.get('namespace') or ''}/{name}" if name else None


def pool_ref_of(kind: Kind, obj: dict[str, Any]) -> str | None:
    ref = (obj.get("spec") or {}).get("machinePoolRef" if kind == "machine" else "volumePoolRef")
    if isinstance(ref, dict) and ref.get("name"):
        return str(ref["name"])
    return None


def class_ref_of(kind: Kind, obj: dict[str, Any]) -> str | None:
    ref = (obj.get("spec") or {}).get("machineClassRef" if kind == "machine" else "volumeClassRef")
    if isinstance(ref, dict) and ref.get("name"):
        return str(ref["name"])
    return None


def volume_storage_of(obj: dict[str, Any]) -> int:
    res = (obj.get("spec") or {}).get("resources") or {}
    raw = res.get("storage")
    return parse_int_quantity(raw, "storage", "spec.resources.storage") if raw is not None else 0


def request_from_json(kind: Kind, obj: dict[str, Any]) -> SchedulingRequest:
    """Build the SchedulingRequest for an unscheduled Machine/Volume document."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    annotations = meta.get("annotations") or {}
    labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
    try:
        priority = int(annotations.get(PRIORITY_ANNOTATION, 0))
    except (TypeError, ValueError):
        priority = 0
    selector_field = "machinePoolSelector" if kind == "machine" else "volumePoolSelector"
    volume_names: tuple[str, ...] = ()
    if kind == "machine":
        volume_names = tuple(
            str(v["volumeRef"]["name"]) for v in spec.get("volumes") or ()
            if isinstance(v.get("volumeRef"), dict) and v["volumeRef"].get("name")
        )
    spread = annotations.get(SPREAD_ANNOTATION)
    within = labels.get(RESERVATION_LABEL) if kind == "machine" else None
    return SchedulingRequest(
        kind=kind, key=object_key(obj), uid=str(meta.get("uid", "")),
        resource_version=str(meta.get("resourceVersion", "")),
        class_name=class_ref_of(kind, obj),
        selector={str(k): str(v) for k, v in (spec.get(selector_field) or {}).items()},
        tolerations=_tolerations(spec), labels=labels, priority=priority,
        storage=volume_storage_of(obj) if kind == "volume" else 0,
        volume_names=volume_names,
        spread_key=str(spread) if spread and str(spread) in labels else None,
        obj=obj,
        reservation=f"{meta.get('namespace') or ''}/{within}" if within else None,
    )
