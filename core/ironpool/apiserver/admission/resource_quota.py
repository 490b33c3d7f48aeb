"""Quota admission: the apiserver refuses a write that would take a namespace's Machines and
Volumes past a ResourceQuota's limit (403 Forbidden, in Kubernetes' words), also when several
apiservers write at once (IronCore's ``ResourceQuota`` admission plugin, made exact).

What a write needs is what it adds (IronCore's evaluators, :mod:`ironpool.api.quota`): a Machine
create its count and its class's cpu and memory, a Volume create its count and storage, a Volume
resize the storage it grows by. For every quota of the namespace that counts the object (its scope
selector) and limits a resource whose use grows, the new use must stay within the limit; use that
does not grow is never refused, also when a lowered limit is below it already. Deleting frees what
the object used once it is removed (an object being deleted still counts).

How it holds with several writers: the namespace's quota state is one guard key
(:mod:`.quota_state`: the quotas' limits, and a tally of the namespace's objects by class),
committed in the same transaction as the object write or not at all. A write that changes the tally
decides on the state and carries the new state as a guard compared on the revision it decided on:
two apiservers admitting the last unit of a quota at once cannot both commit; the loser's guard
moved, its write raises GuardConflict, and the registry decides again on the new state (a refusal
is made on the state the store holds, never on this apiserver's older view). A ResourceQuota's
create, change and removal write the same key, so a write is always judged by the limits as they
are. Within one apiserver, writes of one namespace with quotas queue on a lock instead of racing.

In a namespace without quotas the key does not exist, and a write only checks that it still does
not (a compare, no read, no write, no lock: such writes never wait on each other; a namespace this
apiserver has not written to yet is taken to have none, and the compare corrects that). The first
write of a Machine or Volume after a quota was made counts the namespace's objects once (lists read
after the key's revision: every write since then had to carry the key, so nothing is missed or
counted twice).

Decisions:

* Machines use their class's ``cpu`` and ``memory`` as the class is (IronCore's evaluator): the
  tally counts Machines per class. A Machine whose MachineClass does not exist cannot be created
  while a quota that counts it limits ``requests.cpu`` or ``requests.memory`` (what it requests is
  unknown); Machines of a class deleted later count none until it is made again.
* Writes to subresources (status, binding, eviction) change nothing here.
* A dry run is judged the same way and changes nothing.
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
)
from ironpool.api.resources import resolve
from ironpool.apiserver.admission.capacity_index import CapacityIndex
from ironpool.apiserver.admission.plugin import AdmissionPlugin, Attributes, Guarded
from ironpool.apiserver.admission.quota_state import (
    Capabilities,
    Entry,
    Group,
    Quota,
    QuotaState,
    amounts,
    entry_of,
    quota_key,
)
from ironpool.store.interface import Document, Guard, GuardConflict, GuardValue, Store

QUOTA = "ResourceQuota"
_COUNTED = {MACHINE: resolve("machine"), VOLUME: resolve("volume")}

Tally = dict[Group, Entry]


@dataclass(frozen=True, slots=True)
class _Change:
    """What one write does to its namespace's quota state."""

    namespace: str
    #: a ResourceQuota's name and new entry (None when it goes)
    quota: str | None = None
    entry: Quota | None = None
    #: a Machine's or Volume's changes of the tally (what it adds; negative: what it frees)
    tally: tuple[tuple[Group, Entry], ...] = ()
    #: the object, on a create (its class must be known to quotas that limit its requests)
    created: Document | None = None


async def _change(attrs: Attributes, store: Store) -> _Change | None:
    """What the write changes, or None when it changes nothing here."""
    namespace, kind = attrs.namespace, attrs.info.kind
    if namespace is None or attrs.subresource is not None:
        return None
    if kind == QUOTA:
        entry = Quota.of(attrs.new) if attrs.new is not None else None
        if attrs.operation == "UPDATE" and attrs.old is not None and entry == Quota.of(attrs.old):
            return None  # the status, or metadata: the limits stay
        return _Change(namespace, quota=attrs.name, entry=entry)
    old, new = attrs.old, attrs.new
    if attrs.operation == "CREATE":
        old = None
    elif old is None:  # a removal whose caller had no copy at hand: it is still stored
        old = await store.get(attrs.info.key(namespace, attrs.name))
    before = ((kind, class_of(kind, old)), entry_of(kind, storage_of(old))) if old is not None else None
    after = ((kind, class_of(kind, new)), entry_of(kind, storage_of(new))) if new is not None else None
    if before == after:
        return None
    changes: tuple[tuple[Group, Entry], ...]
    if before is not None and after is not None and before[0] == after[0]:
        changes = ((after[0], Entry(0, after[1].storage - before[1].storage)),)  # a resize
    else:
        changes = tuple(c for c in (
            (before[0], Entry(-before[1].count, -before[1].storage)) if before is not None else None,
            after) if c is not None)
    return _Change(namespace, tally=changes, created=new if attrs.operation == "CREATE" else None)


async def count_namespace(store: Store, namespace: str) -> tuple[Tally, int]:
    """The tally of the Machines and Volumes of ``namespace`` as the store holds them now, and the
    oldest revision listed at."""
    tally: Tally = {}
    oldest: int | None = None
    for kind, info in _COUNTED.items():
        page = await store.list(info.prefix(namespace))
        oldest = page.revision if oldest is None else min(oldest, page.revision)
        for doc in page.items:
            group = (kind, class_of(kind, doc))
            tally[group] = tally.get(group, Entry()) + entry_of(kind, storage_of(doc))
    return tally, oldest or 0


async def capabilities(index: CapacityIndex, classes: list[str]) -> Capabilities:
    """The capabilities of these MachineClasses (None for one that does not exist)."""
    return {cls: await index.class_demand(cls) for cls in classes}


def _pretty(values: Amounts, hard: dict[str, str]) -> str:
    """``requests.cpu=2,requests.memory=1Gi``: Kubernetes' ``prettyPrint``, sorted by name."""
    return ",".join(f"{r}={show(v, format_of(r, hard))}" for r, v in sorted(values.items()))


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
        """The guard the write carries (the new state, or a check that there still is none); None
        when it changes nothing."""
        key = value.key
        state = QuotaState.decode(value.value)
        if change.quota is not None:
            quotas = dict(state.quotas)
            if change.entry is None:
                if quotas.pop(change.quota, None) is None:
                    return None
            else:
                quotas[change.quota] = change.entry
            return Guard(key, value.revision, state.with_quotas(quotas).encode() if quotas else None)
        if value.revision == 0:
            return Guard(key, 0, check_only=True)  # no quota here: none may appear meanwhile
        if state.tally is None:
            tally, at = await count_namespace(self.store, change.namespace)
            if at < value.revision:  # pragma: no cover - a store's reads are linearizable
                raise GuardConflict(await self.store.read_guards([key]))
            state = QuotaState(state.quotas, tally)
        self._check(attrs, state, change, await capabilities(self.index, self._classes(state, change)))
        after = state
        for group, entry in change.tally:
            after = after.with_change(group, entry)
        return Guard(key, value.revision, after.encode())

    @staticmethod
    def _classes(state: QuotaState, change: _Change) -> list[str]:
        """The MachineClasses whose capabilities the decision needs."""
        mine = [cls for (kind, cls), _ in change.tally if kind == MACHINE and cls]
        return sorted({*state.machine_classes(), *mine})

    def _check(self, attrs: Attributes, state: QuotaState, change: _Change, caps: Capabilities) -> None:
        """Refuse if, for a quota counting the object, a limited resource's use grows past its limit."""
        created = change.created if attrs.info.kind == MACHINE else None
        cls = class_of(MACHINE, created) if created is not None else None
        for name, quota in sorted(state.quotas.items()):
            if created is not None and quota.counts(MACHINE, cls) and caps.get(cls or "") is None:
                wanted = [r for r in (REQUESTS_CPU, REQUESTS_MEMORY) if r in quota.hard]
                if wanted:
                    raise self._forbidden(
                        attrs, f'machineclass "{cls}" does not exist, so its {" and ".join(wanted)} are '
                        f"unknown to quota: {name}")
            delta: Amounts = {}
            for group, entry in change.tally:
                if quota.counts(*group):
                    for r, v in amounts(group, entry, caps).items():
                        delta[r] = delta.get(r, 0) + v
            grown = {r: delta[r] for r in quota.hard if delta.get(r, 0) > 0}
            if not grown:
                continue
            hard, used = quota.limits(), state.used(quota, caps)
            exceeded = sorted(r for r, d in grown.items() if used.get(r, 0) + d > hard[r])
            if exceeded:
                shown = dict(quota.hard)
                raise self._forbidden(
                    attrs, f"exceeded quota: {name}, "
                    f"requested: {_pretty({r: grown[r] for r in exceeded}, shown)}, "
                    f"used: {_pretty({r: used.get(r, 0) for r in exceeded}, shown)}, "
                    f"limited: {_pretty({r: hard[r] for r in exceeded}, shown)}")

    def _forbidden(self, attrs: Attributes, why: str) -> errors.Forbidden:
        info = attrs.info
        return errors.Forbidden(f'{info.group_resource} "{attrs.name}" is forbidden: {why}',
                                kind=info.plural, name=attrs.name, group=info.group)

    # -- the guard -----------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def guard(self, attrs: Attributes, guarded: Guarded) -> AsyncIterator[None]:
        change = await _change(attrs, self.store)
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
                revision = 0 if guard.value is None else guarded.revision
                self._values[key] = GuardValue(key, guard.value, revision)


__all__ = ["ResourceQuotaAdmission", "capabilities", "count_namespace"]
