"""Resource quotas: the names and rules every layer reads a ResourceQuota by (its validation, the
apiserver's quota admission and the controller that reports ``status.used``).

IronCore's quota resource names (``ironcore:api/core/v1alpha1/resource.go`` and its evaluators in
``internal/quota/evaluator``): a Machine counts ``count/machines.compute.ironcore.dev`` once and its
MachineClass's ``cpu`` and ``memory`` as ``requests.cpu`` and ``requests.memory``; a Volume counts
``count/volumes.storage.ironcore.dev`` once and its ``spec.resources.storage`` as
``requests.storage``. IronCore also names a Bucket's (``count/buckets.storage.ironcore.dev``,
``requests.tps``, ``requests.iops``); ironpool serves no Buckets, so those are accepted (IronCore's
manifests apply unchanged) and count nothing.

A quota's ``scopeSelector`` narrows what it counts by class, as IronCore's evaluators match it: a
requirement on ``MachineClass`` matches Machines only, one on ``VolumeClass`` Volumes only, and a
quota applies to an object only if every requirement matches it.

Amounts are exact integers in nano-units (quantities are rounded up to 1e-9 when parsed), as the
apiserver's capacity accounting keeps them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

from ironpool.api.columns import dig
from ironpool.api.quantity import Format, Quantity, parse_quantity

QUOTA_GROUP = "core.ironcore.dev"
QUOTA_VERSION = "v1alpha1"

REQUESTS_CPU, REQUESTS_MEMORY, REQUESTS_STORAGE = "requests.cpu", "requests.memory", "requests.storage"
REQUESTS_TPS, REQUESTS_IOPS = "requests.tps", "requests.iops"
COUNT_MACHINES = "count/machines.compute.ironcore.dev"
COUNT_VOLUMES = "count/volumes.storage.ironcore.dev"
COUNT_BUCKETS = "count/buckets.storage.ironcore.dev"

MACHINE, VOLUME = "Machine", "Volume"
#: What each counted kind counts, as IronCore's evaluators have it.
COUNTED: dict[str, tuple[str, ...]] = {
    MACHINE: (COUNT_MACHINES, REQUESTS_CPU, REQUESTS_MEMORY),
    VOLUME: (COUNT_VOLUMES, REQUESTS_STORAGE),
}
BUCKET_RESOURCES = (COUNT_BUCKETS, REQUESTS_TPS, REQUESTS_IOPS)
#: Every name a quota may limit (IronCore's ``ValidateResourceName``), in the order messages list them.
RESOURCE_NAMES: tuple[str, ...] = (*COUNTED[MACHINE], *COUNTED[VOLUME], *BUCKET_RESOURCES)
#: Names that count objects: their limits are whole numbers.
COUNT_NAMES = frozenset(n for n in RESOURCE_NAMES if n.startswith("count/"))
#: Byte amounts, shown with binary suffixes when nothing else says how.
_BYTES = frozenset({REQUESTS_MEMORY, REQUESTS_STORAGE})

#: The scope a kind's class is matched by (IronCore's ``ResourceScope``; ``BucketClass``: nothing here).
_SCOPE_OF = {MACHINE: "MachineClass", VOLUME: "VolumeClass"}
IN, NOT_IN, EXISTS, DOES_NOT_EXIST = "In", "NotIn", "Exists", "DoesNotExist"

_NANO = 10**9

Amounts = dict[str, int]
"""resource name -> amount in nano-units"""


def amount_of(value: Any) -> int | None:
    """A quantity (string or number) in nano-units; None when it does not parse."""
    try:
        return int(parse_quantity(value).fraction * _NANO)
    except ValueError:
        return None


def amounts_of(values: Mapping[str, Any] | None) -> Amounts:
    """A ResourceList in nano-units (what does not parse is left out: validation refuses it)."""
    out: Amounts = {}
    for name, raw in (values or {}).items():
        amount = amount_of(raw)
        if amount is not None:
            out[str(name)] = amount
    return out


def format_of(resource: str, hard: Mapping[str, Any] | None = None) -> Format:
    """How to show amounts of ``resource``: in the format its limit was written in, else binary
    suffixes for bytes and decimal ones for everything else."""
    raw = (hard or {}).get(resource)
    if raw is not None:
        try:
            return parse_quantity(raw).format
        except ValueError:
            pass
    return "BinarySI" if resource in _BYTES else "DecimalSI"


def show(amount: int, fmt: Format) -> str:
    """An amount in nano-units as a canonical quantity string."""
    return str(Quantity(Fraction(amount, _NANO), fmt))



def class_of(kind: str, doc: Mapping[str, Any] | None) -> str | None:
    """The class a Machine or Volume (JSON) names, or None (a Volume without class)."""
    field = "machineClassRef" if kind == MACHINE else "volumeClassRef"
    name = dig(doc, f"spec.{field}.name")
    return str(name) if name else None


def storage_of(doc: Mapping[str, Any] | None) -> int:
    """A Volume's ``spec.resources.storage`` in nano-units (0 when absent or malformed)."""
    raw = dig(doc, "spec.resources.storage")
    amount = amount_of(raw) if raw is not None else None
    return max(amount or 0, 0)


def usage(kind: str, count: int, storage: int, capabilities: Mapping[str, int] | None) -> Amounts:
    """What ``count`` Machines or Volumes of one class use (IronCore's evaluators' ``Usage``,
    summed): Machines their class's ``capabilities`` each (in nano-units; None: the class does not
    exist, so only their count), Volumes the ``storage`` they request together."""
    if kind == MACHINE:
        caps = capabilities or {}
        return {COUNT_MACHINES: count * _NANO, REQUESTS_CPU: count * caps.get("cpu", 0),
                REQUESTS_MEMORY: count * caps.get("memory", 0)}
    return {COUNT_VOLUMES: count * _NANO, REQUESTS_STORAGE: storage}


Requirement = Mapping[str, Any]
"""One ``scopeSelector.matchExpressions`` item as JSON: ``scopeName``, ``operator``, ``values``."""


def requirements_of(quota: Mapping[str, Any]) -> list[Requirement]:
    """A ResourceQuota's (JSON) ``spec.scopeSelector.matchExpressions``."""
    items = dig(quota, "spec.scopeSelector.matchExpressions") or ()
    return [r for r in items if isinstance(r, Mapping)]


def _requirement_matches(kind: str, cls: str | None, req: Requirement) -> bool:
    if req.get("scopeName") != _SCOPE_OF.get(kind):
        return False  # another kind's scope: IronCore's evaluators do not match it
    values = [str(v) for v in req.get("values") or ()]
    op = req.get("operator")
    if kind == MACHINE:  # every Machine has a class
        return {EXISTS: True, DOES_NOT_EXIST: False, IN: cls in values, NOT_IN: cls not in values}.get(
            str(op), False)
    if op == EXISTS:
        return cls is not None
    if op == DOES_NOT_EXIST:
        return cls is None
    if cls is None:
        return False
    return cls in values if op == IN else (cls not in values if op == NOT_IN else False)


def in_scope(kind: str, cls: str | None, requirements: Sequence[Requirement]) -> bool:
    """Whether a quota with these scope requirements counts an object of ``kind`` with class ``cls``
    (no requirement: it counts every Machine and Volume)."""
    return all(_requirement_matches(kind, cls, req) for req in requirements)


def summary(used: Mapping[str, Any] | None, hard: Mapping[str, Any] | None) -> str:
    """``requests.cpu: 2/4, requests.memory: 1Gi/8Gi``: each limit's use, sorted by name, as
    IronCore's table shows it (``?`` where the use is not known yet)."""
    shown = used or {}
    return ", ".join(f"{r}: {shown.get(r, '?')}/{limit}" for r, limit in sorted((hard or {}).items()))
