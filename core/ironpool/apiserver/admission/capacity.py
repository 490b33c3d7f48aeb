"""Capacity admission: the apiserver refuses a bind that would overcommit a pool (a plugin of the
admission chain, :class:`CapacityAdmission`).

The invariant (docs/architecture.md, "Capacity accounting"): for every pool and every resource, the sum of the
demands bound to the pool never exceeds the pool's ``status.allocatable`` (falling back per resource
on ``status.capacity``; ``class/...`` keys are informational and ignored). A Machine demands its
MachineClass's ``capabilities``; a Volume demands ``spec.resources.storage``.

:class:`CapacityIndex` keeps, in memory, pool -> total and pool -> sum of bound demand, and
object -> (pool, demand), so a check and an update cost O(1) per write. It is built from the store
on first use (a list of pools, classes, machines and volumes) and then kept exact by
:meth:`CapacityIndex.committed`, which the plugin is told of after every committed write or removal.

Decisions:

* A write is checked when it newly binds an object (pool ref absent -> set, or a create that is
  already bound) and when a bound Volume grows; refusals are 409 Conflict (what a scheduler already
  retries with backoff after a resourceVersion race), naming pool, resource, need and free.
* A pool that does not exist yet, or exists but has not reported any capacity yet (no resource in
  ``status.allocatable``/``status.capacity`` apart from class keys), accepts any bind: IronCore lets
  objects name a pool before its poollet registers and reports it. The demand is still counted, so
  binds are judged as soon as the pool reports. (The scheduler never places on such a pool; only a
  client binding by hand can get ahead of the poollet this way.)
* A pool that reports capacity but lists neither allocatable nor capacity for a demanded resource
  offers none of it (0 free), as the scheduler's ResourcesFit sees it.
* A Machine whose MachineClass does not exist cannot be bound (its demand is unknown). Classes are
  immutable, so a Machine's demand is fixed once counted; one already bound to an unknown class
  (old data) counts nothing until the class appears.
* Objects being deleted (deletionTimestamp set) count until they are removed: the domain still runs.

Atomicity: the check (:meth:`CapacityIndex.check`, run in the chain's synchronous ``validate``
phase) is synchronous and the registry writes right after it without another await; the SQLite
store's writes never suspend (no await inside), so no other request can commit between check and
write. With several apiservers over etcd this would not
hold: the check would have to become an etcd transaction comparing a per-pool usage key (or the
pool's mod revision) together with the object's write. That is not built here.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, ClassVar

from ironpool.api import errors
from ironpool.api.quantity import Format, Quantity, parse_quantity
from ironpool.api.resources import RESOURCES, ResourceInfo
from ironpool.apiserver.admission.plugin import AdmissionPlugin, Attributes
from ironpool.store.interface import Document, Store

_INDEXES: weakref.WeakKeyDictionary[Store, CapacityIndex] = weakref.WeakKeyDictionary()
_CLASS_PREFIX = "class/"
_NANO = 10**9

MACHINE, VOLUME, MACHINE_CLASS, MACHINE_POOL, VOLUME_POOL = (
    "Machine",
    "Volume",
    "MachineClass",
    "MachinePool",
    "VolumePool",
)
#: the kinds whose writes change what the index knows
INDEXED_KINDS = frozenset({MACHINE, VOLUME, MACHINE_CLASS, MACHINE_POOL, VOLUME_POOL})
_POOL_KIND = {MACHINE: MACHINE_POOL, VOLUME: VOLUME_POOL}
_REF_FIELD = {MACHINE: "machinePoolRef", VOLUME: "volumePoolRef"}

Amounts = dict[str, int]
"""resource -> amount in nano-units (exact: quantities are rounded to 1e-9 when parsed)"""


def _nano(value: Any) -> tuple[int, Format] | None:
    try:
        q = parse_quantity(value)
    except ValueError:
        return None  # validation rejects malformed quantities; stored ones count as absent
    return int(q.fraction * _NANO), q.format


def _amounts(values: Any, formats: dict[str, Format]) -> Amounts:
    out: Amounts = {}
    if not isinstance(values, dict):
        return out
    for name, raw in values.items():
        if str(name).startswith(_CLASS_PREFIX):
            continue
        parsed = _nano(raw)
        if parsed is not None:
            out[str(name)], formats[str(name)] = parsed
    return out


def _show(amount: int, fmt: Format) -> str:
    return str(Quantity(Fraction(amount, _NANO), fmt))


def pool_ref(kind: str, obj: Document | None) -> str | None:
    """The name of the pool ``obj`` (a Machine or Volume) is bound to, or None."""
    if obj is None:
        return None
    ref = (obj.get("spec") or {}).get(_REF_FIELD[kind])
    name = ref.get("name") if isinstance(ref, dict) else None
    return str(name) if name else None


@dataclass(slots=True)
class _Bound:
    pool: str
    demand: Amounts
    class_name: str | None  # Machines only


@dataclass(slots=True)
class _Pool:
    totals: Amounts
    formats: dict[str, Format]


class CapacityIndex:
    """Per-pool totals and bound demand, checked before and updated after every relevant write.

    Use :meth:`for_store`: every writer of one store must share one index, or they drift apart.
    """

    @classmethod
    def for_store(cls, store: Store) -> CapacityIndex:
        """The one index of ``store`` (created on first call)."""
        index = _INDEXES.get(store)
        if index is None:
            index = _INDEXES[store] = cls(store)
        return index

    def __init__(self, store: Store) -> None:
        self.store = store
        self.loaded = False
        self._pools: dict[tuple[str, str], _Pool] = {}  # (pool kind, name)
        self._used: dict[tuple[str, str], Amounts] = {}
        self._bound: dict[str, _Bound] = {}  # store key of a Machine/Volume
        self._classes: dict[str, Amounts] = {}  # MachineClass name -> demand
        self._formats: dict[str, Format] = {}  # last seen format per resource, for messages
        # bound Machines whose class is missing: class name -> store keys (counted once it appears)
        self._waiting: dict[str, set[str]] = {}

    # -- building ----------------------------------------------------------------------------

    async def ready(self) -> None:
        """Build the index from the store once (the first relevant write after start-up)."""
        if self.loaded:
            return
        infos = {r.kind: r for r in RESOURCES if r.kind in INDEXED_KINDS}
        # SQLite lists never suspend, so nothing commits between these reads and ``loaded = True``;
        # reading every list at the first one's revision keeps them consistent for any backend.
        revision: int | None = None
        docs: list[tuple[ResourceInfo, Document]] = []
        for kind in (MACHINE_CLASS, MACHINE_POOL, VOLUME_POOL, MACHINE, VOLUME):
            page = await self.store.list(infos[kind].prefix(None), revision=revision)
            revision = page.revision
            docs.extend((infos[kind], d) for d in page.items)
        if self.loaded:  # another request finished loading while this one listed
            return
        for info, doc in docs:
            self._apply(info, _key(info, doc), doc)
        self.loaded = True

    # -- checking ----------------------------------------------------------------------------

    def check(self, info: ResourceInfo, old: Document | None, new: Document) -> None:
        """Raise Conflict if writing ``new`` over ``old`` would overcommit the pool it binds to.

        Must be followed by the write without an await in between (see the module docstring).
        """
        kind = info.kind
        if kind not in _REF_FIELD:
            return
        pool = pool_ref(kind, new)
        if pool is None:
            return
        name = str(new["metadata"].get("name", ""))
        old_pool = pool_ref(kind, old)
        if kind == MACHINE:
            if old_pool == pool:
                return  # already bound; the class, hence the demand, cannot change
            class_name = _class_of(new)
            demand = self._classes.get(class_name or "")
            if demand is None:
                raise errors.Conflict(
                    f'machine "{name}" cannot be bound to machinepool "{pool}": its machineclass '
                    f'"{class_name}" does not exist (its demand is unknown)',
                    kind=info.plural,
                    name=name,
                    group=info.group,
                )
            need = demand
        else:
            need = _volume_demand(new, self._formats)
            if old_pool == pool:
                before = _volume_demand(old)
                need = {r: d - before.get(r, 0) for r, d in need.items() if d > before.get(r, 0)}
        if not need:
            return
        entry = self._pools.get((_POOL_KIND[kind], pool))
        if entry is None or not entry.totals:
            return  # the pool has not registered or reported yet: allowed, and counted (docstring)
        used = self._used.get((_POOL_KIND[kind], pool), {})
        for resource, amount in need.items():
            total = entry.totals.get(resource)
            fmt = entry.formats.get(resource) or self._formats.get(resource, "DecimalSI")
            if total is None:
                raise self._refuse(info, name, pool, f"does not offer {resource}", resource, amount, fmt)
            free = total - used.get(resource, 0)
            if amount > free:
                detail = f"{_show(max(free, 0), fmt)} free of {_show(total, fmt)}"
                raise self._refuse(info, name, pool, f"has too little {resource}", resource, amount, fmt,
                                   detail)

    def _refuse(
        self,
        info: ResourceInfo,
        name: str,
        pool: str,
        what: str,
        resource: str,
        amount: int,
        fmt: Format,
        detail: str = "",
    ) -> errors.Conflict:
        need = _show(amount, self._formats.get(resource, fmt))
        message = f'{_POOL_KIND[info.kind].lower()} "{pool}" {what} for {info.kind.lower()} "{name}": '
        message += f"needs {need}" + (f", {detail}" if detail else "")
        return errors.Conflict(message, kind=info.plural, name=name, group=info.group)

    # -- keeping up --------------------------------------------------------------------------

    def committed(self, info: ResourceInfo, key: str, doc: Document | None) -> None:
        """Record a committed write (``doc`` as stored) or removal (``doc`` None) of ``key``."""
        if self.loaded and info.kind in INDEXED_KINDS:
            self._apply(info, key, doc)

    def _apply(self, info: ResourceInfo, key: str, doc: Document | None) -> None:
        kind = info.kind
        if kind in _REF_FIELD:
            self._apply_bound(kind, key, doc)
        elif kind == MACHINE_CLASS:
            name = key.rsplit("/", 1)[-1]
            if doc is None:
                self._classes.pop(name, None)  # bound Machines keep the demand they were counted with
                return
            self._classes[name] = {
                r: v for r, v in _amounts(doc.get("capabilities"), self._formats).items() if v > 0
            }
            for waiting in self._waiting.pop(name, set()):
                entry = self._bound.get(waiting)
                if entry is not None and entry.class_name == name and not entry.demand:
                    entry.demand = dict(self._classes[name])
                    _add(self._used, (MACHINE_POOL, entry.pool), entry.demand)
        else:
            name = key.rsplit("/", 1)[-1]
            if doc is None:
                self._pools.pop((kind, name), None)
                return
            status = doc.get("status") or {}
            formats: dict[str, Format] = {}
            totals = _amounts(status.get("capacity"), formats)
            totals.update(_amounts(status.get("allocatable"), formats))
            self._pools[(kind, name)] = _Pool(totals, formats)

    def _apply_bound(self, kind: str, key: str, doc: Document | None) -> None:
        old = self._bound.pop(key, None)
        pool_kind = _POOL_KIND[kind]
        if old is not None:
            _subtract(self._used, (pool_kind, old.pool), old.demand)
            if old.class_name is not None and not old.demand:
                waiting = self._waiting.get(old.class_name)
                if waiting is not None:
                    waiting.discard(key)
                    if not waiting:
                        del self._waiting[old.class_name]
        if doc is None:
            return
        pool = pool_ref(kind, doc)
        if pool is None:
            return
        class_name = _class_of(doc) if kind == MACHINE else None
        if kind == MACHINE:
            if old is not None and old.pool == pool and old.class_name == class_name and old.demand:
                demand = old.demand  # counted once; a recreated class must not change it
            else:
                known = self._classes.get(class_name or "")
                if known is None:
                    self._waiting.setdefault(class_name or "", set()).add(key)
                demand = dict(known or {})
        else:
            demand = _volume_demand(doc, self._formats)
        self._bound[key] = _Bound(pool, demand, class_name)
        _add(self._used, (pool_kind, pool), demand)

    # -- introspection (tests, debugging) ----------------------------------------------------

    def used(self, pool_kind: str, pool: str) -> Amounts:
        """The bound demand of one pool, in nano-units."""
        return dict(self._used.get((pool_kind, pool), {}))


def _key(info: ResourceInfo, doc: Document) -> str:
    m = doc.get("metadata") or {}
    return info.key(m.get("namespace"), str(m.get("name", "")))


def _class_of(doc: Document) -> str | None:
    ref = (doc.get("spec") or {}).get("machineClassRef")
    name = ref.get("name") if isinstance(ref, dict) else None
    return str(name) if name else None


def _volume_demand(doc: Document | None, formats: dict[str, Format] | None = None) -> Amounts:
    if doc is None:
        return {}
    resources = (doc.get("spec") or {}).get("resources") or {}
    storage = resources.get("storage") if isinstance(resources, dict) else None
    parsed = _nano(storage) if storage is not None else None
    if parsed is None or parsed[0] <= 0:
        return {}
    if formats is not None:
        formats["storage"] = parsed[1]
    return {"storage": parsed[0]}


def _add(used: dict[tuple[str, str], Amounts], pool: tuple[str, str], demand: Amounts) -> None:
    if not demand:
        return
    sums = used.setdefault(pool, {})
    for r, v in demand.items():
        sums[r] = sums.get(r, 0) + v


def _subtract(used: dict[tuple[str, str], Amounts], pool: tuple[str, str], demand: Amounts) -> None:
    sums = used.get(pool)
    if sums is None:
        return
    for r, v in demand.items():
        left = sums.get(r, 0) - v
        if left:
            sums[r] = left
        else:
            sums.pop(r, None)
    if not sums:
        del used[pool]


class CapacityAdmission(AdmissionPlugin):
    """Refuses a write that binds a Machine or Volume past its pool's free capacity, or grows a
    bound Volume past it; keeps the store's :class:`CapacityIndex` exact from committed writes."""

    name: ClassVar[str] = "CapacityAdmission"
    kinds: ClassVar[frozenset[str] | None] = INDEXED_KINDS

    def __init__(self, store: Store) -> None:
        self.index = CapacityIndex.for_store(store)

    async def ready(self) -> None:
        await self.index.ready()

    def validate(self, attrs: Attributes) -> None:
        if attrs.new is not None:
            self.index.check(attrs.info, attrs.old, attrs.new)

    def committed(self, info: ResourceInfo, key: str, doc: Document | None) -> None:
        self.index.committed(info, key, doc)
