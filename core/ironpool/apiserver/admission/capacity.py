"""Capacity admission: the apiserver refuses a bind that would overcommit a pool, also when several
apiservers bind at once (a plugin of the admission chain, :class:`CapacityAdmission`).

The invariant (docs/architecture.md, "Capacity accounting"): for every pool and every resource,
the sum of the demands bound to the pool never exceeds the pool's ``status.allocatable`` (falling
back per resource on ``status.capacity``; ``class/...`` keys are informational and ignored). A
Machine demands its MachineClass's ``capabilities``; a Volume demands ``spec.resources.storage``.

How it holds with several writers: every pool has a usage key, a guard key
(:class:`~ironpool.store.interface.Guard`) holding the charge of every object bound to it
(``namespace/name -> amounts``). A write that binds an object, grows a bound Volume or removes a
bound object reads the pool's usage, decides, and carries the new usage as a guard compared on the
revision it read: the object and the usage commit in one transaction (an etcd Txn, one SQLite
transaction) or not at all. Two apiservers binding to one pool at once cannot both commit: the
loser's guard moved, its write raises GuardConflict, and the registry reads and decides again.
Within one apiserver, writes to one pool queue on a lock instead of racing, and the usage it
wrote last is kept, so a bind normally costs no extra read.

A pool without a usage key yet (objects bound before usage keys existed, or never bound to) starts
from the objects the index found bound to it at start-up (:class:`.capacity_index.CapacityIndex`):
with no usage key, nothing was bound to it since but through such older writes.

Decisions:

* A write is checked when it newly binds an object (pool ref absent -> set, or a create that is
  already bound) and when a bound Volume grows; refusals are 409 Conflict (what a scheduler already
  retries with backoff after a resourceVersion race), naming pool, resource, need and free.
* A pool that does not exist yet, or exists but has not reported any capacity yet (no resource in
  ``status.allocatable``/``status.capacity`` apart from class keys), accepts any bind: IronCore lets
  objects name a pool before its poollet registers and reports it. The charge is still recorded, so
  binds are judged as soon as the pool reports.
* A pool that reports capacity but lists neither allocatable nor capacity for a demanded resource
  offers none of it (0 free), as the scheduler's ResourcesFit sees it.
* A Machine whose MachineClass does not exist cannot be bound (its demand is unknown). Its charge
  is fixed when it is bound, so deleting or recreating the class changes nothing for it.
* Objects being deleted (deletionTimestamp set) count until they are removed: the domain still runs.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import ClassVar

from ironpool.api import errors
from ironpool.api.quantity import Format
from ironpool.api.resource_info import ResourceInfo
from ironpool.apiserver.admission.capacity_index import (
    BOUND_KINDS,
    MACHINE,
    MACHINE_CLASS,
    MACHINE_POOL,
    POOL_KIND,
    POOL_PLURAL,
    VOLUME_POOL,
    Amounts,
    CapacityIndex,
    Charges,
    Pool,
    charge_key,
    class_of,
    decode_charges,
    encode_charges,
    pool_ref,
    show,
    total_of,
    volume_demand,
)
from ironpool.apiserver.admission.plugin import AdmissionPlugin, Attributes, Guarded
from ironpool.store.interface import Document, Guard, GuardConflict, GuardValue, Store

__all__ = ["CapacityAdmission", "CapacityIndex", "usage_key"]

#: usage keys read in one round trip when a write needs one this apiserver has not read yet
_READ_AHEAD = 64


def usage_key(pool: Pool) -> str:
    """The guard key holding a pool's usage: ``capacity/machinepools/NAME``."""
    return f"capacity/{POOL_PLURAL[pool[0]]}/{pool[1]}"


@dataclass(slots=True)
class _Change:
    """What one write does to one pool's usage: the object's charge there becomes ``charge``
    (None: it leaves the pool); ``need`` is what must be free for it (empty: nothing to check)."""

    pool: Pool
    charge: Amounts | None
    need: Amounts


class CapacityAdmission(AdmissionPlugin):
    """Refuses a write that binds a Machine or Volume past its pool's free capacity, or grows a
    bound Volume past it, and keeps every pool's usage key exact (see the module docstring)."""

    name: ClassVar[str] = "CapacityAdmission"
    kinds: ClassVar[frozenset[str] | None] = BOUND_KINDS | {MACHINE_CLASS, MACHINE_POOL, VOLUME_POOL}

    def __init__(self, store: Store) -> None:
        self.store = store
        self.index = CapacityIndex.for_store(store)
        self._usage: dict[str, GuardValue] = {}  # the usage this apiserver read or wrote last
        #: where :meth:`_unread` goes on in its pass over the known pools (None: start a new pass)
        self._pass: Iterator[Pool] | None = None
        self._locks: dict[str, asyncio.Lock] = {}

    async def ready(self) -> None:
        await self.index.ready()

    def committed(self, info: ResourceInfo, key: str, doc: Document | None) -> None:
        self.index.committed(info, key, doc)

    # -- the decision --------------------------------------------------------------------------

    async def _changes(self, attrs: Attributes) -> list[_Change]:
        """How the write changes pools' usage (see :class:`_Change`)."""
        kind = attrs.info.kind
        if kind not in BOUND_KINDS:
            return []
        old, new = attrs.old, attrs.new
        old_pool, new_pool = pool_ref(kind, old), pool_ref(kind, new)
        pool_kind = POOL_KIND[kind]
        if kind == MACHINE:
            if old_pool == new_pool:
                return []  # still unbound, or bound to the same pool: the class cannot change
            changes = [] if old_pool is None else [_Change((pool_kind, old_pool), None, {})]
            if new_pool is not None:
                assert new is not None
                demand = await self.index.class_demand(class_of(new) or "")
                if demand is None:
                    raise errors.Conflict(
                        f'machine "{attrs.name}" cannot be bound to machinepool "{new_pool}": its '
                        f'machineclass "{class_of(new)}" does not exist (its demand is unknown)',
                        kind=attrs.info.plural, name=attrs.name, group=attrs.info.group)
                changes.append(_Change((pool_kind, new_pool), demand, demand))
            return changes
        before = volume_demand(old) if old_pool is not None else {}
        after = volume_demand(new, self.index.formats) if new_pool is not None else {}
        if old_pool == new_pool:
            if new_pool is None or before == after:
                return []
            grown = {r: v - before.get(r, 0) for r, v in after.items() if v > before.get(r, 0)}
            return [_Change((pool_kind, new_pool), after, grown)]
        changes = [] if old_pool is None else [_Change((pool_kind, old_pool), None, {})]
        if new_pool is not None:
            changes.append(_Change((pool_kind, new_pool), after, after))
        return changes

    async def _current(self, pools: list[Pool], fresh: bool) -> dict[Pool, GuardValue]:
        """Each pool's usage: as this apiserver last saw it, else (or when ``fresh``) from the store."""
        needed = [usage_key(p) for p in pools if fresh or usage_key(p) not in self._usage]
        if needed:
            ahead = [] if fresh else self._unread(_READ_AHEAD - len(needed), needed)
            values = await self.store.read_guards(needed + ahead)
            for key, value in zip(needed, values, strict=False):
                self._usage[key] = value
            for key, value in zip(ahead, values[len(needed):], strict=True):
                # Not under its pool's lock: a write to that pool may have stored a newer one meanwhile.
                self._usage.setdefault(key, value)
        return {p: self._usage[usage_key(p)] for p in pools}

    def _unread(self, room: int, needed: list[str]) -> list[str]:
        """Usage keys of known pools this apiserver has not read yet, at most ``room``: read in the
        same round trip as a key a write needs, they save a burst of binds spread over many pools one
        read per pool (on etcd, a round trip each)."""
        ahead: list[str] = []
        if room <= 0:
            return ahead
        # One pass over a snapshot of the pools, resumed where the last call stopped: a burst of
        # binds over 5,000 pools costs one pass, not one from the start per read (quadratic).
        if self._pass is None:
            self._pass = iter(list(self.index.pools))
        for pool in self._pass:
            key = usage_key(pool)
            if key not in self._usage and key not in needed:
                ahead.append(key)
                if len(ahead) == room:
                    return ahead
        self._pass = None  # this pass is over: the next call starts a new one over the pools then
        return ahead

    async def _decide(self, attrs: Attributes, changes: list[_Change], me: str,
                      fresh: bool) -> dict[str, tuple[GuardValue, Document]]:
        """Check every change against the pools' usage; the new usage per key, with what it was."""
        current = await self._current([c.pool for c in changes], fresh)
        decided: dict[str, tuple[GuardValue, Document]] = {}
        for change in changes:
            usage = current[change.pool]
            charges = self._charges(change.pool, usage)
            await self._check(attrs, change, charges)
            if change.charge is None:
                charges.pop(me, None)
            else:
                charges[me] = change.charge
            decided[usage.key] = (usage, encode_charges(charges))
        return decided

    def _charges(self, pool: Pool, usage: GuardValue) -> Charges:
        if usage.revision == 0:
            return dict(self.index.legacy.get(pool, {}))  # no usage key yet (module docstring)
        return decode_charges(usage.value)

    async def _check(self, attrs: Attributes, change: _Change, charges: Charges) -> None:
        """Refuse if ``change.need`` is not free in the pool (usage ``charges`` before the write)."""
        if not change.need:
            return
        entry = await self.index.totals(change.pool)
        if entry is None or not entry.totals:
            return  # the pool has not registered or reported yet: allowed, and charged (docstring)
        used = total_of(charges)
        for resource, amount in change.need.items():
            total = entry.totals.get(resource)
            fmt = entry.formats.get(resource) or self.index.formats.get(resource, "DecimalSI")
            if total is None:
                raise self._refuse(attrs, change.pool, f"does not offer {resource}", resource, amount, fmt)
            free = total - used.get(resource, 0)
            if amount > free:
                raise self._refuse(attrs, change.pool, f"has too little {resource}", resource, amount, fmt,
                                   f"{show(max(free, 0), fmt)} free of {show(total, fmt)}")

    def _refuse(self, attrs: Attributes, pool: Pool, what: str, resource: str, amount: int, fmt: Format,
                detail: str = "") -> errors.Conflict:
        need = show(amount, self.index.formats.get(resource, fmt))
        message = f'{pool[0].lower()} "{pool[1]}" {what} for {attrs.info.kind.lower()} "{attrs.name}": '
        message += f"needs {need}" + (f", {detail}" if detail else "")
        return errors.Conflict(message, kind=attrs.info.plural, name=attrs.name, group=attrs.info.group)

    # -- the guard -----------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def guard(self, attrs: Attributes, guarded: Guarded) -> AsyncIterator[None]:
        changes = await self._changes(attrs)
        if not changes:
            yield
            return
        doc = attrs.new if attrs.new is not None else attrs.old
        assert doc is not None
        me = charge_key(doc)
        keys = sorted(usage_key(c.pool) for c in changes)
        async with contextlib.AsyncExitStack() as locks:
            for key in keys:  # in one order, so two writes never wait on each other's locks
                await locks.enter_async_context(self._locks.setdefault(key, asyncio.Lock()))
            try:
                decided = await self._decide(attrs, changes, me, fresh=False)
            except errors.Conflict:
                # Refuse on what the store holds, not on what this apiserver saw last: another one
                # may have freed room since.
                decided = await self._decide(attrs, changes, me, fresh=True)
            written = {key: value for key, (_, value) in decided.items()}
            guarded.guards.extend(Guard(key, usage.revision, value)
                                  for key, (usage, value) in decided.items())
            try:
                yield
            except GuardConflict as conflict:
                for fresh in conflict.current:
                    if fresh.key in written:
                        self._usage[fresh.key] = fresh  # another apiserver wrote it: decide on this
                raise
            except BaseException:
                for key in written:
                    self._usage.pop(key, None)  # the outcome may be unknown: read it next time
                raise
            if guarded.revision is not None:
                for key, value in written.items():
                    self._usage[key] = GuardValue(key, value, guarded.revision)

    def used(self, pool_kind: str, pool: str) -> Amounts:
        """The charged demand of one pool as this apiserver last saw it, in nano-units (tests)."""
        usage = self._usage.get(usage_key((pool_kind, pool)))
        return {} if usage is None else total_of(decode_charges(usage.value))
