"""Quota admission: the apiserver refuses a write that would take a namespace's Machines and
Volumes past a ResourceQuota's limit (403 Forbidden, in Kubernetes' words), also when several
apiservers write at once (IronCore's ``ResourceQuota`` admission plugin, made exact).

What a write needs is what it adds (IronCore's evaluators, :mod:`ironpool.api.quota`): a Machine
create its count and its class's cpu and memory, a Volume create its count and storage, a Volume
resize the storage it grows by. For every quota of the namespace that counts the object (its scope
selector) and limits a resource whose use grows, the new use must stay within the limit; use that
does not grow is never refused, also when a lowered limit is below it already. Deleting frees what
the object was charged once it is removed (an object being deleted still counts).

How it holds with several writers: the namespace's quota state is one guard key
(:mod:`.quota_state`: the quotas' limits, and the charge of each object), committed in the same
transaction as the object write or not at all. A write that changes a charge reads the state,
decides and carries the new state as a guard compared on the revision read: two apiservers
admitting the last unit of a quota at once cannot both commit; the loser's guard moved, its write
raises GuardConflict, and the registry decides again on the new state. A ResourceQuota's create,
change and removal write the same key, so a write is always judged by the limits as they are.

In a namespace without quotas the key does not exist, and a write only checks that it still does
not (a compare, no read, no write, no lock: such writes never wait on each other; a namespace this
apiserver has not written to yet is taken to have none, and the compare corrects that). The first write of a
Machine or Volume after a quota was made counts the namespace's objects once (a list read after
the key's revision; every write since then had to carry the key, so nothing is missed or counted
twice) and stores their charges.

Decisions:

* A Machine is charged its class's ``cpu`` and ``memory`` when it is admitted; the charge stays
  what it was if the class is later deleted or made again. A Machine whose MachineClass does not
  exist cannot be admitted while a quota that counts it limits ``requests.cpu`` or
  ``requests.memory`` (its requests are unknown); without such a quota it is charged its count.
* Writes to subresources (status, binding, eviction) change no charge.
* A dry run is judged the same way and charges nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import ClassVar

from ironpool.api import errors
from ironpool.api.quota import (
    MACHINE,
    REQUESTS_CPU,
    REQUESTS_MEMORY,
    VOLUME,
    Amounts,
    class_of,
    format_of,
    show,
    storage_of,
    usage,
)
from ironpool.api.resources import resolve
from ironpool.apiserver.admission.capacity_index import CapacityIndex
from ironpool.apiserver.admission.plugin import AdmissionPlugin, Attributes, Guarded
from ironpool.apiserver.admission.quota_state import (
    Charge,
    Quota,
    QuotaState,
    charge_key,
    limits_of,
    quota_key,
)
from ironpool.store.interface import Document, Guard, GuardConflict, GuardValue, Store

QUOTA = "ResourceQuota"
_COUNTED = {MACHINE: resolve("machine"), VOLUME: resolve("volume")}


@dataclass(frozen=True, slots=True)
class _Change:
    """What one write does to its namespace's quota state."""

    namespace: str
    #: a ResourceQuota's new entry (``quota``: it is one), or None when it goes
    entry: Quota | None = None
    quota: str | None = None
    #: a Machine's or Volume's charge key and its object as stored next (None: it goes)
    charged: str | None = None
    kind: str = ""
    doc: Document | None = None


def _change(attrs: Attributes) -> _Change | None:
    """What the write changes, or None when it changes no quota state."""
    namespace, kind = attrs.namespace, attrs.info.kind
    if namespace is None or attrs.subresource is not None:
        return None
    if kind == QUOTA:
        entry = Quota.of(attrs.new) if attrs.new is not None else None
        if attrs.operation == "UPDATE" and attrs.old is not None and entry == Quota.of(attrs.old):
            return None  # the status, or metadata: the limits stay
        return _Change(namespace, entry=entry, quota=attrs.name)
    me = charge_key(attrs.info.plural, attrs.name)
    if attrs.operation == "UPDATE":
        old, new = attrs.old, attrs.new
        same_size = kind == MACHINE or storage_of(old) == storage_of(new)
        if same_size and class_of(kind, old) == class_of(kind, new):
            return None
    return _Change(namespace, charged=me, kind=kind, doc=attrs.new)


async def count_namespace(store: Store, index: CapacityIndex,
                          namespace: str) -> tuple[list[tuple[str, str, Charge]], int]:
    """(kind, name, charge) of every Machine and Volume of ``namespace`` as the store holds them now
    (Machines with their class's capabilities as they are now), and the oldest revision listed at."""
    counted: list[tuple[str, str, Charge]] = []
    classes: dict[str, Amounts | None] = {}
    oldest: int | None = None
    for kind, info in _COUNTED.items():
        page = await store.list(info.prefix(namespace))
        oldest = page.revision if oldest is None else min(oldest, page.revision)
        for doc in page.items:
            cls = class_of(kind, doc)
            caps = None
            if kind == MACHINE and cls is not None:
                if cls not in classes:
                    classes[cls] = await index.class_demand(cls)
                caps = classes[cls]
            counted.append((kind, doc["metadata"]["name"], Charge(cls, usage(kind, doc, caps))))
    return counted, oldest or 0


def _pretty(amounts: Amounts, hard: dict[str, str]) -> str:
    """``requests.cpu=2,requests.memory=1Gi``: Kubernetes' ``prettyPrint``, sorted by name."""
    return ",".join(f"{r}={show(v, format_of(r, hard))}" for r, v in sorted(amounts.items()))


class ResourceQuotaAdmission(AdmissionPlugin):
    """Refuses Machine and Volume writes past a ResourceQuota and keeps every namespace's quota
    state exact (see the module docstring)."""

    name: ClassVar[str] = "ResourceQuota"
    kinds: ClassVar[frozenset[str] | None] = frozenset({MACHINE, VOLUME, QUOTA})

    def __init__(self, store: Store) -> None:
        self.store = store
        self.index = CapacityIndex.for_store(store)  # the MachineClasses' capabilities
        self._values: dict[str, GuardValue] = {}  # quota keys as this apiserver read or wrote them last
        self._locks: dict[str, asyncio.Lock] = {}

    async def ready(self) -> None:
        await self.index.ready()

    async def _current(self, key: str, fresh: bool = False) -> GuardValue:
        """The state as this apiserver last saw it, else (or when ``fresh``) as the store holds it."""
        value = None if fresh else self._values.get(key)
        if value is None:
            (value,) = await self.store.read_guards([key])
            self._values[key] = value
        return value

    # -- the decision --------------------------------------------------------------------------

    async def _decide(self, attrs: Attributes, change: _Change, value: GuardValue) -> Guard | None:
        """The guard the write carries: the new state, or a check that there still is none."""
        key = value.key
        if change.quota is not None:
            state = QuotaState.decode(value.value)
            if change.entry is None:
                if change.quota not in state.quotas:
                    return None
                del state.quotas[change.quota]
            else:
                state.quotas[change.quota] = change.entry
            return Guard(key, value.revision, state.encode() if state.quotas else None)
        if value.revision == 0:
            return Guard(key, 0, check_only=True)  # no quota here: none may appear meanwhile
        state = QuotaState.decode(value.value)
        if state.charges is None:
            state.charges = await self._count(change.namespace, value.revision)
        assert change.charged is not None
        # A create replaces whatever the key may still name so (its object does not exist).
        before = None if attrs.operation == "CREATE" else state.charges.get(change.charged)
        if change.doc is None:
            state.charges.pop(change.charged, None)  # removal: only frees
            return Guard(key, value.revision, state.encode())
        after = await self._charge(attrs, state, change.kind, change.doc)
        self._check(attrs, state, change.kind, before, after)
        state.charges[change.charged] = after
        return Guard(key, value.revision, state.encode())

    async def _charge(self, attrs: Attributes, state: QuotaState, kind: str, doc: Document) -> Charge:
        """What ``doc`` is charged (refused when a quota needs its class's requests and the class is
        not there)."""
        cls = class_of(kind, doc)
        if kind == VOLUME:
            return Charge(cls, usage(VOLUME, doc, None))
        caps = await self.index.class_demand(cls or "")
        if caps is None:
            for name, quota in sorted(state.quotas.items()):
                wanted = [r for r in (REQUESTS_CPU, REQUESTS_MEMORY) if r in quota.hard]
                if wanted and quota.counts(kind, cls):
                    raise self._forbidden(
                        attrs, f'machineclass "{cls}" does not exist, so its {" and ".join(wanted)} are '
                        f'unknown to quota: {name}')
        return Charge(cls, usage(MACHINE, doc, caps))

    def _check(self, attrs: Attributes, state: QuotaState, kind: str, before: Charge | None,
               after: Charge) -> None:
        """Refuse if, for a quota counting the object, a limited resource's use grows past its limit."""
        for name, quota in sorted(state.quotas.items()):
            counted_after = quota.counts(kind, after.cls)
            counted_before = before is not None and quota.counts(kind, before.cls)
            if not counted_after:
                continue  # its use there can only shrink
            hard = limits_of(quota)
            used = state.used(quota)
            had = before.amounts if before is not None and counted_before else {}
            grown: Amounts = {}
            for r in hard:
                delta = after.amounts.get(r, 0) - had.get(r, 0)
                if delta > 0:
                    grown[r] = delta
            exceeded = sorted(r for r, d in grown.items() if used.get(r, 0) + d > hard[r])
            if exceeded:
                raise self._forbidden(
                    attrs, f"exceeded quota: {name}, "
                    f"requested: {_pretty({r: grown[r] for r in exceeded}, dict(quota.hard))}, "
                    f"used: {_pretty({r: used.get(r, 0) for r in exceeded}, dict(quota.hard))}, "
                    f"limited: {_pretty({r: hard[r] for r in exceeded}, dict(quota.hard))}")

    def _forbidden(self, attrs: Attributes, why: str) -> errors.Forbidden:
        info = attrs.info
        return errors.Forbidden(f'{info.group_resource} "{attrs.name}" is forbidden: {why}',
                                kind=info.plural, name=attrs.name, group=info.group)

    async def _count(self, namespace: str, revision: int) -> dict[str, Charge]:
        """The charges of the namespace's objects, listed after ``revision`` (the state's: nothing
        charged since then was missed, see the module docstring)."""
        listed, at = await count_namespace(self.store, self.index, namespace)
        if at < revision:  # pragma: no cover - a store's reads are linearizable
            raise GuardConflict(await self.store.read_guards([quota_key(namespace)]))
        return {charge_key(_COUNTED[kind].plural, name): charge for kind, name, charge in listed}

    # -- the guard -----------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def guard(self, attrs: Attributes, guarded: Guarded) -> AsyncIterator[None]:
        change = _change(attrs)
        if change is None:
            yield
            return
        key = quota_key(change.namespace)
        async with contextlib.AsyncExitStack() as locks:
            # A namespace this apiserver has not seen yet is taken to have no quota: the write then
            # only checks that (a compare, not a read first), and learns the state if it is wrong.
            value = self._values.get(key) or GuardValue(key, None, 0)
            if value.revision != 0 or change.quota is not None:
                # The state is written: writes to it queue here rather than race through the store.
                await locks.enter_async_context(self._locks.setdefault(key, asyncio.Lock()))
                value = await self._current(key)
            try:
                guard = await self._decide(attrs, change, value)
            except errors.Forbidden:
                # Refuse on what the store holds, not on what this apiserver saw last: another one
                # may have freed room or raised a limit since.
                guard = await self._decide(attrs, change, await self._current(key, fresh=True))
            if guard is None:
                yield
                return
            guarded.guards.append(guard)
            try:
                yield
            except GuardConflict as conflict:
                for fresh in conflict.current:
                    if fresh.key == key:
                        self._values[key] = fresh  # another apiserver wrote it: decide on this
                raise
            except BaseException:
                if not guard.check_only:
                    self._values.pop(key, None)  # the outcome may be unknown: read it next time
                raise
            if guarded.revision is not None:
                # Committed: the state is what the write left (absent, revision 0, if the write only
                # checked that or removed it).
                absent = guard.value is None
                self._values[key] = GuardValue(key, guard.value, 0 if absent else guarded.revision)


__all__ = ["ResourceQuotaAdmission", "count_namespace"]
