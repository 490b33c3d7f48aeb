"""IPAM admission: the apiserver allocates addresses, MACs and prefixes as objects are written, so
an allocation is atomic and a refusal names the field (a plugin of the admission chain).

How a decision holds, also with several apiservers over one store:

1. ``validate`` (synchronous) decides on the in-memory
   :class:`~ironpool.apiserver.ipam.index.IPAMIndex` — fed by a store watch, so it knows this
   apiserver's writes at once and the others' soon after — and sets what it gave aside in the index
   (:mod:`~ironpool.apiserver.ipam.tentative`), so writes decided while this one is still being
   written choose other addresses;
2. ``guard`` (around the store write) turns what the write takes and gives back into guard keys
   (:mod:`~ironpool.apiserver.ipam.guards`: one per address and MAC of a Network, and the blocks
   and ranges of each prefix), checked against what the store holds and committed in the same
   transaction as the object. If another apiserver holds what was chosen, the index learns it and
   the registry decides again; if a guard moved meanwhile, the store refuses the write and the
   registry decides again. So no two NICs of a Network ever share an address or a MAC, and no two
   ranges of a prefix overlap, however many apiservers write at once.

A removed NIC or Prefix gives its keys back in the transaction that removes it. Across apiservers,
an address given back through one is handed out by another once its watch brought the removal
(milliseconds); until then it counts it taken (never the other way round). The checks of deletes
(a Network or Prefix in use) and of Machine templates are made on the index and are exact within
one apiserver; across apiservers they see the others' writes with the same delay.

What the plugin writes into the object it admits (the allocation is part of the write):

* a NetworkInterface gets ``spec.macAddress`` (if it had none) and ``status``: ``state:
  Available``, ``ips`` (one per ``spec.ips`` item, in order) and ``addresses`` (the same with the
  prefix length of the Prefix each belongs to). The status is the apiserver's: status writes of
  clients do not change it.
* a Prefix gets ``spec.prefix`` (a child with ``prefixLength``), ``spec.parentRef`` (a child found
  by ``parentSelector``), and ``status``: ``phase: Allocated`` and ``used`` as of this write (the
  networking controller refreshes ``used`` of parents whose children changed).

It also refuses deleting a Network that live NICs or Machines use, and a Prefix with live children,
naming them (in a terminating namespace everything goes), and checks a Machine's ephemeral NIC
templates as the NICs they will become, so a Machine that could not get its NICs is refused with
the Machine's field paths instead of being half made.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator
from typing import Any, ClassVar

import orjson

from ironpool.api.meta import now_rfc3339
from ironpool.api.resource_info import ResourceInfo
from ironpool.apiserver.admission.plugin import AdmissionPlugin, Attributes, Guarded
from ironpool.apiserver.ipam.guards import SHARED_KEYS, Taken, apply_claims, claims, learn
from ironpool.apiserver.ipam.index import INDEXED_KINDS, MACHINE, NETWORK, NIC, PREFIX, IPAMIndex, view_of
from ironpool.apiserver.ipam.planner import (
    NicPlan,
    Refusal,
    check_view,
    foreign_nic,
    plan_nic,
    plan_prefix,
    refuse_network_delete,
    refuse_prefix_delete,
)
from ironpool.apiserver.ipam.tentative import SetAside, reserve_nic, reserve_prefix
from ironpool.store.interface import Document, Guard, GuardConflict, GuardValue, Store

Obj = dict[str, Any]
_JITTER = 0.01  # seconds: the most a write waits before it is decided again after a guard moved


def _since(old_status: Obj, key: str, value: Any, stamp_key: str) -> str:
    """The transition time to keep: the old one if ``key`` keeps its value."""
    if old_status.get(key) == value and old_status.get(stamp_key):
        return str(old_status[stamp_key])
    return now_rfc3339()


def nic_status(plan: NicPlan, old_status: Obj) -> Obj:
    """The status of a NIC with ``plan``'s addresses."""
    return {
        "state": "Available",
        "lastStateTransitionTime": _since(old_status, "state", "Available", "lastStateTransitionTime"),
        "ips": [str(a.ip) for a in plan.addresses],
        "addresses": [a.cidr for a in plan.addresses],
    }


class IPAMAdmission(AdmissionPlugin):
    """Allocates NIC addresses and MACs and Prefix ranges; refuses deleting what is in use."""

    name: ClassVar[str] = "IPAM"
    kinds: ClassVar[frozenset[str] | None] = INDEXED_KINDS

    def __init__(self, store: Store) -> None:
        self.store = store
        self.index = IPAMIndex.for_store(store)
        self._seen: dict[str, GuardValue] = {}  # guard keys as this apiserver last read or wrote them
        self._locks: dict[str, asyncio.Lock] = {}
        # id(object) -> (object, its spec before this plugin filled anything in): a create that is
        # retried (a guard moved) is decided again from what the client sent.
        self._sent: dict[int, tuple[Document, Obj]] = {}
        # id(object) -> undo of what validate set aside in the index for it until its write ends, so
        # writes decided while earlier ones are still being written choose other addresses.
        self._tentative: dict[int, SetAside] = {}

    async def ready(self) -> None:
        await self.index.ready()

    def committed(self, info: ResourceInfo, key: str, doc: Document | None) -> None:
        self.index.committed(info, key, doc)

    def validate(self, attrs: Attributes) -> None:
        kind = attrs.info.kind
        if kind == NIC:
            self._nic(attrs)
        elif kind == PREFIX:
            self._prefix(attrs)
        elif kind == NETWORK and attrs.operation == "DELETE":
            refuse_network_delete(self.index, attrs.namespace or "", attrs.name)
        elif kind == MACHINE and attrs.new is not None and attrs.subresource is None:
            self._machine(attrs)

    # -- NetworkInterfaces -------------------------------------------------------------------

    def _nic(self, attrs: Attributes) -> None:
        new, old = attrs.new, attrs.old
        if new is None:
            return  # released when the NIC is removed
        old_status = dict((old or {}).get("status") or {})
        if attrs.subresource == "status" or (new["metadata"].get("deletionTimestamp") and old is not None):
            new["status"] = old_status  # the status is the allocation's, not the client's
            return
        namespace = attrs.namespace or ""
        refusal = Refusal()
        state = self.index.ns(namespace)
        existing = IPAMIndex.entry_of(state, attrs.name, old) if old is not None else None
        self._remember_spec(new)
        plan = plan_nic(self.index, namespace, attrs.name, new.get("spec") or {}, refusal, old=existing)
        refusal.raise_if_any(attrs.info, attrs.name)
        assert plan is not None
        new.setdefault("spec", {})["macAddress"] = plan.mac
        new["status"] = nic_status(plan, old_status)
        self._tentative[id(new)] = reserve_nic(self.index, namespace, attrs.name, new, plan, existing)

    # -- Prefixes ----------------------------------------------------------------------------

    def _prefix(self, attrs: Attributes) -> None:
        namespace = attrs.namespace or ""
        new, old = attrs.new, attrs.old
        if new is None:
            if old is not None and view_of(old) is None:
                refuse_prefix_delete(self.index, namespace, attrs.name)
            return
        view = view_of(new)
        old_status = dict((old or {}).get("status") or {})
        if view is not None:
            if old is None:
                check_view(self.index, namespace, attrs.name, new, view)
            new["status"] = {"phase": "Allocated", "lastPhaseTransitionTime": _since(
                old_status, "phase", "Allocated", "lastPhaseTransitionTime")}
            return
        spec = new.setdefault("spec", {})
        if not (old or {}).get("spec", {}).get("prefix"):
            self._remember_spec(new)
            spec = new["spec"]
            refusal = Refusal()
            planned = plan_prefix(self.index, namespace, attrs.name, spec, refusal)
            refusal.raise_if_any(attrs.info, attrs.name)
            assert planned is not None
            net, parent = planned
            spec["prefix"] = str(net)
            spec.setdefault("ipFamily", "IPv4" if net.version == 4 else "IPv6")
            if parent is not None:
                spec["parentRef"] = {"name": parent}
            self._tentative[id(new)] = reserve_prefix(self.index, namespace, attrs.name, net, parent)
        used = self.index.used(namespace, attrs.name) or []
        new["status"] = {
            "phase": "Allocated",
            "lastPhaseTransitionTime": _since(old_status, "phase", "Allocated", "lastPhaseTransitionTime"),
            "used": used,
        }

    def _remember_spec(self, new: Document) -> None:
        """Keep the spec as sent the first time this object is decided on; restore it when the same
        object comes back (the registry retries a create whose guard moved)."""
        seen = self._sent.get(id(new))
        if seen is not None and seen[0] is new:
            new["spec"] = orjson.loads(orjson.dumps(seen[1]))
            return
        if len(self._sent) > 1024:
            self._sent.clear()  # forgotten entries only cost a retry a fresh decision
        self._sent[id(new)] = (new, orjson.loads(orjson.dumps(new.get("spec") or {})))

    # -- the guard keys ----------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def guard(self, attrs: Attributes, guarded: Guarded) -> AsyncIterator[None]:
        """Carry the write's claims as guard keys (see :mod:`..ipam.guards`): released ones given
        back, new ones taken, all checked against what the store holds when the write commits."""
        try:
            async with self._claims(attrs, guarded):
                yield
        except GuardConflict:
            # Decided again on the same object (keep what the client sent), a moment later: two
            # apiservers filling one block would otherwise retry in lockstep.
            await asyncio.sleep(random.uniform(0, _JITTER))
            raise
        finally:
            aside = self._tentative.pop(id(attrs.new), None)
            if aside is not None and guarded.revision is None:
                aside.undo()  # not written: what validate set aside for it is free again
            if guarded.revision is not None or attrs.dry_run:
                self._sent.pop(id(attrs.new), None)

    @contextlib.asynccontextmanager
    async def _claims(self, attrs: Attributes, guarded: Guarded) -> AsyncIterator[None]:
        kind = attrs.info.kind
        old_claims, new_claims = claims(self.index, kind, attrs.old), claims(self.index, kind, attrs.new)
        releases, takes = old_claims - new_claims, new_claims - old_claims
        if not releases and not takes:
            yield
            return
        keys = sorted({k for c in releases | takes for k in c.guard_keys()})
        released = {k for c in releases for k in c.guard_keys()}
        taken: Taken | None = None
        async with contextlib.AsyncExitStack() as locks:
            # Writes of this apiserver queue on the keys many share (a prefix's ranges and blocks),
            # in one order, so two never wait on each other; an address or MAC is one object's.
            for key in keys:
                if key.startswith(SHARED_KEYS):
                    await locks.enter_async_context(self._locks.setdefault(key, asyncio.Lock()))
            current = await self._current(keys, released)
            values = {k: current[k].value for k in keys}
            try:
                try:
                    apply_claims(values, releases, takes)
                except Taken:
                    # Decide on what the store holds, not on what this apiserver saw last: another
                    # one may have given it back since.
                    current = await self._current(keys, released, fresh=True)
                    values = {k: current[k].value for k in keys}
                    apply_claims(values, releases, takes)
            except Taken as exc:
                taken = exc
            else:
                # Only what changes is compared: a key left as it is needs no check (an address or
                # MAC already this object's; a prefix's ranges key when the block written beside it
                # was already listed there — a change to that listing changes the block too).
                changed = [k for k in keys if values[k] != current[k].value]
                guarded.guards.extend(Guard(k, current[k].revision, values[k]) for k in changed)
                try:
                    yield
                except GuardConflict as conflict:
                    for fresh in conflict.current:
                        self._seen[fresh.key] = fresh  # another apiserver wrote it: decide on this
                    raise
                except BaseException:
                    for key in keys:
                        self._seen.pop(key, None)  # the outcome may be unknown: read it next time
                    raise
                if guarded.revision is not None:
                    for key in changed:
                        if values[key] is None:
                            self._seen.pop(key, None)  # gone from the store: absent until told otherwise
                        else:
                            self._seen[key] = GuardValue(key, values[key], guarded.revision)
                return
        # Another apiserver holds it and this index has not heard yet: give back what this decision
        # set aside, learn what the other holds, and decide again.
        assert taken is not None
        aside = self._tentative.pop(id(attrs.new), None)
        if aside is not None:
            aside.undo()
        learn(self.index, taken)
        raise GuardConflict([current[taken.key]])

    async def _current(self, keys: list[str], released: set[str],
                       fresh: bool = False) -> dict[str, GuardValue]:
        """The guard keys as this apiserver last saw them, else (or when ``fresh``) from the store.

        An address or MAC key this write only takes and this apiserver has not seen is taken to be
        absent without asking: it nearly always is, and if not, the write's guard fails and tells
        what the store holds. Keys given back are read: a release must name the revision it removes.
        """
        missing = [k for k in keys if fresh or k not in self._seen]
        if not fresh:
            assumed = [k for k in missing if k not in released and not k.startswith(SHARED_KEYS)]
            for key in assumed:
                self._seen[key] = GuardValue(key, None, 0)
            missing = [k for k in missing if k not in assumed]
        if missing:
            for value in await self.store.read_guards(missing):
                self._seen[value.key] = value
        return {k: self._seen[k] for k in keys}

    # -- Machines ----------------------------------------------------------------------------

    def _machine(self, attrs: Attributes) -> None:
        """Check each new or changed ephemeral NIC template as the NIC it will become."""
        new, old = attrs.new, attrs.old
        assert new is not None
        if new["metadata"].get("deletionTimestamp"):
            return
        namespace, machine = attrs.namespace or "", attrs.name
        uid = str(new["metadata"].get("uid"))
        before = {n.get("name"): n for n in ((old or {}).get("spec") or {}).get("networkInterfaces") or []}
        refusal = Refusal()
        state = self.index.ns(namespace)
        for i, nic in enumerate((new.get("spec") or {}).get("networkInterfaces") or []):
            template = (nic.get("ephemeral") or {}).get("networkInterfaceTemplate")
            if template is None or before.get(nic.get("name")) == nic:
                continue
            path = f"spec.networkInterfaces[{i}]"
            nic_name = f"{machine}-{nic.get('name')}"
            if foreign_nic(self.index, namespace, nic_name, machine, uid) is not None:
                refusal.conflict.invalid(f"{path}.name", nic.get("name"),
                                         f'networkinterface "{nic_name}" already exists and is not this '
                                         "machine's ephemeral network interface")
                continue
            existing = state.nics.get(nic_name)
            mine = existing if existing is not None and existing.owner == (MACHINE, machine, uid) else None
            plan_nic(self.index, namespace, nic_name, template.get("spec") or {}, refusal, old=mine,
                     path=f"{path}.ephemeral.networkInterfaceTemplate.spec")
        refusal.raise_if_any(attrs.info, machine)
