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
* A Reservation's plan (``status.pools[].resources``, written by the scheduler) is charged to every
  pool it names in one write, all or none; what it holds leaves the pools when it stops holding
  (expired, rejected, being deleted: :func:`ironpool.api.reservation.held`). A Machine bound within
  a Reservation (its label) uses the Reservation's share first and needs free room only beyond it
  (:mod:`.capacity_usage`). A Reservation that names a class that does not exist cannot be held.

What a write needs is what it adds to a pool's usage: every resource whose usage grows must stay
within the pool's total.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from ironpool.api import errors
from ironpool.api.quantity import Format
from ironpool.api.reservation import SHARED_RESOURCES, class_of_key, held, reservation_of
from ironpool.api.resource_info import ResourceInfo
from ironpool.apiserver.admission.capacity_index import (
    BOUND_KINDS,
    MACHINE,
    MACHINE_CLASS,
    MACHINE_POOL,
    POOL_KIND,
    POOL_PLURAL,
    RESERVATION,
    VOLUME_POOL,
    CapacityIndex,
    Pool,
    charge_key,
    class_of,
    parse_amount,
    pool_ref,
    show,
    volume_demand,
)
from ironpool.apiserver.admission.capacity_usage import Amounts, Usage, add_into
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
    """What one write does to one pool's usage (``apply`` changes it in place)."""

    pool: Pool
    apply: Callable[[Usage], None]


class CapacityAdmission(AdmissionPlugin):
    """Refuses a write that binds a Machine or Volume past its pool's free capacity, or grows a
    bound Volume past it, and keeps every pool's usage key exact (see the module docstring)."""

    name: ClassVar[str] = "CapacityAdmission"
    kinds: ClassVar[frozenset[str] | None] = BOUND_KINDS | {MACHINE_CLASS, MACHINE_POOL, VOLUME_POOL,
                                                            RESERVATION}

    def __init__(self, store: Store) -> None:
        self.store = store
        self.index = CapacityIndex.for_store(store)
        self._values: dict[str, GuardValue] = {}  # the usage this apiserver read or wrote last
        #: where :meth:`_unread` goes on in its pass over the known pools (None: start a new pass)
        self._pass: Iterator[Pool] | None = None
        self._locks: dict[str, asyncio.Lock] = {}

    async def ready(self) -> None:
        await self.index.ready()

    def committed(self, info: ResourceInfo, key: str, doc: Document | None) -> None:
        self.index.committed(info, key, doc)

    # -- the decision --------------------------------------------------------------------------

    async def _changes(self, attrs: Attributes, me: str) -> list[_Change]:
        """How the write changes pools' usage (see :class:`_Change`)."""
        kind = attrs.info.kind
        if kind == RESERVATION:
            return await self._hold_changes(attrs, me)
        if kind not in BOUND_KINDS:
            return []
        old, new = attrs.old, attrs.new
        old_pool, new_pool = pool_ref(kind, old), pool_ref(kind, new)
        pool_kind = POOL_KIND[kind]
        if kind == MACHINE:
            if old_pool == new_pool:
                return []  # still unbound, or bound to the same pool: the class cannot change
            changes = [] if old_pool is None else [_Change((pool_kind, old_pool), lambda u: u.unbind(me))]
            if new_pool is not None:
                assert new is not None
                demand = await self.index.class_demand(class_of(new) or "")
                if demand is None:
                    raise errors.Conflict(
                        f'machine "{attrs.name}" cannot be bound to machinepool "{new_pool}": its '
                        f'machineclass "{class_of(new)}" does not exist (its demand is unknown)',
                        kind=attrs.info.plural, name=attrs.name, group=attrs.info.group)
                within = reservation_of(new)
                rkey = f"{attrs.namespace or ''}/{within}" if within else None
                changes.append(_Change((pool_kind, new_pool), lambda u: u.bind(me, demand, rkey)))
            return changes
        before = volume_demand(old) if old_pool is not None else {}
        after = volume_demand(new, self.index.formats) if new_pool is not None else {}
        if old_pool == new_pool and (new_pool is None or before == after):
            return []
        changes = [] if old_pool is None or old_pool == new_pool else [
            _Change((pool_kind, old_pool), lambda u: u.unbind(me))]
        if new_pool is not None:
            changes.append(_Change((pool_kind, new_pool), lambda u: u.bind(me, after, None)))
        return changes

    async def _hold_changes(self, attrs: Attributes, me: str) -> list[_Change]:
        """A Reservation's plan charged to its pools, or released from them."""
        before, after = held(attrs.old), held(attrs.new)
        changes: list[_Change] = []
        for pool in sorted(set(before) | set(after)):
            if pool in after and before.get(pool) == after[pool]:
                continue
            amounts = await self._hold_amounts(attrs, pool, after[pool]) if pool in after else None
            changes.append(_Change((MACHINE_POOL, pool), functools.partial(Usage.hold, reservation=me,
                                                                            amounts=amounts)))
        return changes

    async def _hold_amounts(self, attrs: Attributes, pool: str, resources: Mapping[str, Any]) -> Amounts:
        """What a Reservation's part on ``pool`` takes: each whole machine its class's demand, plus
        the cpu and memory block."""
        total: Amounts = {}
        for key, raw in resources.items():
            parsed = parse_amount(raw)
            if parsed is None or parsed[0] <= 0:
                continue
            cls = class_of_key(str(key))
            if cls is None:
                if key in SHARED_RESOURCES:
                    add_into(total, {str(key): parsed[0]})
                continue
            demand = await self.index.class_demand(cls)
            if demand is None:
                raise errors.Conflict(
                    f'reservation "{attrs.name}" cannot be held on machinepool "{pool}": its machineclass '
                    f'"{cls}" does not exist (its demand is unknown)',
                    kind=attrs.info.plural, name=attrs.name, group=attrs.info.group)
            count = parsed[0] // 10**9
            add_into(total, {r: v * count for r, v in demand.items()})
        return total

    async def _current(self, pools: list[Pool], fresh: bool) -> dict[Pool, GuardValue]:
        """Each pool's usage: as this apiserver last saw it, else (or when ``fresh``) from the store."""
        needed = [usage_key(p) for p in pools if fresh or usage_key(p) not in self._values]
        if needed:
            ahead = [] if fresh else self._unread(_READ_AHEAD - len(needed), needed)
            values = await self.store.read_guards(needed + ahead)
            for key, value in zip(needed, values, strict=False):
                self._values[key] = value
            for key, value in zip(ahead, values[len(needed):], strict=True):
                # Not under its pool's lock: a write to that pool may have stored a newer one meanwhile.
                self._values.setdefault(key, value)
        return {p: self._values[usage_key(p)] for p in pools}

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
            if key not in self._values and key not in needed:
                ahead.append(key)
                if len(ahead) == room:
                    return ahead
        self._pass = None  # this pass is over: the next call starts a new one over the pools then
        return ahead

    async def _decide(self, attrs: Attributes, changes: list[_Change],
                      fresh: bool) -> dict[str, tuple[GuardValue, Document]]:
        """Apply every change to its pool's usage and check what grows; the new usage per key, with
        what it was."""
        current = await self._current([c.pool for c in changes], fresh)
        decided: dict[str, tuple[GuardValue, Document]] = {}
        for change in changes:
            value = current[change.pool]
            usage = self._usage_of(change.pool, value)
            before = usage.used()
            change.apply(usage)
            await self._check(attrs, change.pool, before, usage.used())
            decided[value.key] = (value, usage.encode())
        return decided

    def _usage_of(self, pool: Pool, value: GuardValue) -> Usage:
        if value.revision == 0:
            # No usage key yet (module docstring).
            return Usage(charges={k: dict(a) for k, a in self.index.legacy.get(pool, {}).items()})
        return Usage.decode(value.value)

    async def _check(self, attrs: Attributes, pool: Pool, before: Amounts, after: Amounts) -> None:
        """Refuse if a resource whose usage grows would exceed the pool's total."""
        grown = {r: v - before.get(r, 0) for r, v in after.items() if v > before.get(r, 0)}
        if not grown:
            return
        entry = await self.index.totals(pool)
        if entry is None or not entry.totals:
            return  # the pool has not registered or reported yet: allowed, and charged (docstring)
        for resource, amount in grown.items():
            total = entry.totals.get(resource)
            fmt = entry.formats.get(resource) or self.index.formats.get(resource, "DecimalSI")
            if total is None:
                raise self._refuse(attrs, pool, f"does not offer {resource}", resource, amount, fmt)
            if after[resource] > total:
                free = total - before.get(resource, 0)
                raise self._refuse(attrs, pool, f"has too little {resource}", resource, amount, fmt,
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
        doc = attrs.new if attrs.new is not None else attrs.old
        if doc is None:
            yield
            return
        me = charge_key(doc)
        changes = await self._changes(attrs, me)
        if not changes:
            yield
            return
        keys = sorted(usage_key(c.pool) for c in changes)
        async with contextlib.AsyncExitStack() as locks:
            for key in keys:  # in one order, so two writes never wait on each other's locks
                await locks.enter_async_context(self._locks.setdefault(key, asyncio.Lock()))
            try:
                decided = await self._decide(attrs, changes, fresh=False)
            except errors.Conflict:
                # Refuse on what the store holds, not on what this apiserver saw last: another one
                # may have freed room since.
                decided = await self._decide(attrs, changes, fresh=True)
            written = {key: value for key, (_, value) in decided.items()}
            guarded.guards.extend(Guard(key, usage.revision, value)
                                  for key, (usage, value) in decided.items())
            try:
                yield
            except GuardConflict as conflict:
                for fresh in conflict.current:
                    if fresh.key in written:
                        self._values[fresh.key] = fresh  # another apiserver wrote it: decide on this
                raise
            except BaseException:
                for key in written:
                    self._values.pop(key, None)  # the outcome may be unknown: read it next time
                raise
            if guarded.revision is not None:
                for key, value in written.items():
                    self._values[key] = GuardValue(key, value, guarded.revision)

    def used(self, pool_kind: str, pool: str) -> Amounts:
        """What one pool has in use as this apiserver last saw it, in nano-units (tests)."""
        value = self._values.get(usage_key((pool_kind, pool)))
        return {} if value is None else Usage.decode(value.value).used()
