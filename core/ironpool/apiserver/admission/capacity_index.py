"""What capacity admission knows without asking the store: pools' totals and classes' demands (kept
current by a :class:`~ironpool.store.mirror.StoreMirror`), and the charges of objects
bound before usage keys existed; plus the arithmetic of amounts.

Amounts are exact integers in nano-units (quantities are rounded to 1e-9 when parsed). In a usage
key they are decimal strings: 64Gi in nano-units does not fit JSON's 64-bit integers.
"""

from __future__ import annotations

import asyncio
import weakref
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from ironpool.api.quantity import Format, Quantity, parse_quantity
from ironpool.api.resources import RESOURCES, ResourceInfo
from ironpool.apiserver.admission.capacity_usage import Amounts, Charges
from ironpool.store.interface import Document, Store
from ironpool.store.mirror import StoreMirror

_INDEXES: weakref.WeakKeyDictionary[Store, CapacityIndex] = weakref.WeakKeyDictionary()
_CLASS_PREFIX = "class/"
_NANO = 10**9

MACHINE, VOLUME, MACHINE_CLASS, MACHINE_POOL, VOLUME_POOL, RESERVATION = (
    "Machine", "Volume", "MachineClass", "MachinePool", "VolumePool", "Reservation")
BOUND_KINDS = frozenset({MACHINE, VOLUME})
POOL_KIND = {MACHINE: MACHINE_POOL, VOLUME: VOLUME_POOL}
POOL_PLURAL = {MACHINE_POOL: "machinepools", VOLUME_POOL: "volumepools"}
_REF_FIELD = {MACHINE: "machinePoolRef", VOLUME: "volumePoolRef"}
_INFOS = {r.kind: r for r in RESOURCES}

Pool = tuple[str, str]
"""(pool kind, pool name)"""


def parse_amount(value: Any) -> tuple[int, Format] | None:
    try:
        q = parse_quantity(value)
    except ValueError:
        return None  # validation rejects malformed quantities; stored ones count as absent
    return int(q.fraction * _NANO), q.format


def amounts(values: Any, formats: dict[str, Format]) -> Amounts:
    """The resources of a ``capacity``/``allocatable``/``capabilities`` map (class keys left out)."""
    out: Amounts = {}
    if not isinstance(values, dict):
        return out
    for name, raw in values.items():
        if str(name).startswith(_CLASS_PREFIX):
            continue
        parsed = parse_amount(raw)
        if parsed is not None:
            out[str(name)], formats[str(name)] = parsed
    return out


def show(amount: int, fmt: Format) -> str:
    return str(Quantity(Fraction(amount, _NANO), fmt))


def pool_ref(kind: str, obj: Document | None) -> str | None:
    """The name of the pool ``obj`` (a Machine or Volume) is bound to, or None."""
    if obj is None:
        return None
    ref = (obj.get("spec") or {}).get(_REF_FIELD[kind])
    name = ref.get("name") if isinstance(ref, dict) else None
    return str(name) if name else None


def class_of(doc: Document) -> str | None:
    ref = (doc.get("spec") or {}).get("machineClassRef")
    name = ref.get("name") if isinstance(ref, dict) else None
    return str(name) if name else None


def volume_demand(doc: Document | None, formats: dict[str, Format] | None = None) -> Amounts:
    if doc is None:
        return {}
    resources = (doc.get("spec") or {}).get("resources") or {}
    storage = resources.get("storage") if isinstance(resources, dict) else None
    parsed = parse_amount(storage) if storage is not None else None
    if parsed is None or parsed[0] <= 0:
        return {}
    if formats is not None:
        formats["storage"] = parsed[1]
    return {"storage": parsed[0]}


def charge_key(doc: Document) -> str:
    m = doc.get("metadata") or {}
    return f"{m.get('namespace') or ''}/{m.get('name', '')}"


@dataclass(slots=True)
class PoolTotals:
    """A pool's allocatable (per resource, falling back on capacity) and the formats it reports."""

    totals: Amounts
    formats: dict[str, Format]


def pool_totals(doc: Document) -> PoolTotals:
    status = doc.get("status") or {}
    formats: dict[str, Format] = {}
    totals = amounts(status.get("capacity"), formats)
    totals.update(amounts(status.get("allocatable"), formats))
    return PoolTotals(totals, formats)


class CapacityIndex:
    """Pools' totals and classes' demands from a store mirror, and the charges of objects bound
    before their pool had a usage key (computed once, from the lists made at start-up).

    Use :meth:`for_store`: every plugin of one store shares one index.
    """

    @classmethod
    def for_store(cls, store: Store) -> CapacityIndex:
        index = _INDEXES.get(store)
        if index is None:
            index = _INDEXES[store] = cls(store)
        return index

    def __init__(self, store: Store) -> None:
        self.store = store
        self.loaded = False
        self.pools: dict[Pool, PoolTotals] = {}
        self.classes: dict[str, Amounts] = {}
        self.formats: dict[str, Format] = {}  # last seen format per resource, for messages
        self.legacy: dict[Pool, Charges] = {}
        self.mirror = StoreMirror(store, [_INFOS[k] for k in (MACHINE_CLASS, MACHINE_POOL, VOLUME_POOL)],
                                  self._apply)
        self._lock = asyncio.Lock()

    async def ready(self) -> None:
        """Start the mirror and read the bound objects once (the first write after start-up)."""
        if self.loaded:
            return
        async with self._lock:
            if self.loaded:
                return
            await self.mirror.start()
            for kind in (MACHINE, VOLUME):
                page = await self.store.list(_INFOS[kind].prefix(None), revision=self.mirror.revision)
                for doc in page.items:
                    pool = pool_ref(kind, doc)
                    if pool is not None:
                        charge = self._legacy_charge(kind, doc)
                        self.legacy.setdefault((POOL_KIND[kind], pool), {})[charge_key(doc)] = charge
            self.loaded = True

    def _legacy_charge(self, kind: str, doc: Document) -> Amounts:
        if kind == VOLUME:
            return volume_demand(doc, self.formats)
        return dict(self.classes.get(class_of(doc) or "") or {})  # an unknown class counts nothing

    def committed(self, info: ResourceInfo, key: str, doc: Document | None) -> None:
        if self.loaded:
            self.mirror.committed(info, key, doc)

    def _apply(self, info: ResourceInfo, key: str, doc: Document | None) -> None:
        name = key.rsplit("/", 1)[-1]
        if info.kind == MACHINE_CLASS:
            if doc is None:
                self.classes.pop(name, None)  # bound Machines keep the charge they were bound with
            else:
                self.classes[name] = {
                    r: v for r, v in amounts(doc.get("capabilities"), self.formats).items() if v > 0}
        elif doc is None:
            self.pools.pop((info.kind, name), None)
        else:
            self.pools[(info.kind, name)] = pool_totals(doc)

    async def class_demand(self, name: str) -> Amounts | None:
        """A MachineClass's demand; one not in the mirror (yet) is read from the store."""
        demand = self.classes.get(name)
        if demand is None:
            doc = await self.store.get(_INFOS[MACHINE_CLASS].key(None, name))
            if doc is None:
                return None
            demand = {r: v for r, v in amounts(doc.get("capabilities"), self.formats).items() if v > 0}
        return demand

    async def totals(self, pool: Pool) -> PoolTotals | None:
        """A pool's totals; when the mirror has none (it may lag behind a pool that just reported)
        the store answers, so a bind is never judged against an unregistered pool by mistake."""
        entry = self.pools.get(pool)
        if entry is not None and entry.totals:
            return entry
        doc = await self.store.get(_INFOS[pool[0]].key(None, pool[1]))
        return None if doc is None else pool_totals(doc)
