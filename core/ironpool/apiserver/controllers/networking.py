"""The networking controller: a Machine's ephemeral NetworkInterfaces, the Prefixes that show NICs'
ephemeral addresses, and ``status.used`` of parent Prefixes (IronCore's
``machineephemeralnetworkinterface`` and ``networkinterfaceephemeralprefix`` controllers, and the
part of its prefix controller that reports usage).

- For every ``spec.networkInterfaces[]`` item of a live Machine with an ``ephemeral`` template it
  creates the NetworkInterface ``<machine>-<name>``: the template's labels, annotations and spec,
  ``spec.machineRef`` to the Machine, controlled by the Machine (owner reference, IronCore's
  ``common.ironcore.dev/ephemeral-managed-by`` annotation). A template removed from the Machine, or
  the Machine removed, deletes the NIC, whose addresses are then free. A changed template updates the
  NIC's addresses, or replaces the NIC when a field fixed at creation changed.
- For every ephemeral address of a NIC it keeps the Prefix ``<nic>-<index>`` (the /32 or /128, its
  parent as ``spec.parentRef``, controlled by the NIC), as IronCore's poollet expects to find it.
- Parents whose children changed get their ``status.used`` rewritten (batched: one write per
  parent per :data:`USED_DELAY`, however many addresses changed).

It runs in the apiserver process, beside the IPAM admission plugin whose index it reads, and learns of
every change the index applies, this process's writes at once and other apiservers' through the
index's store watch: creating the NICs needs no credentials or scheduling, it works with ``ironpool
apiserver`` alone, and the index it needs lives here. With several apiservers each runs one; they
do the same work (a create that lost the race is AlreadyExists, a delete NotFound, both ignored).
Reconciling is level-based (the index and the store are read each time); failures are retried
with backoff and reported as Events on the Machine.
:meth:`NetworkingController.resume` catches up on what an earlier process left (a Machine committed
just before a crash, garbage of gone owners).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

from ironpool.api import errors
from ironpool.api.meta import now_rfc3339
from ironpool.api.networking import EPHEMERAL_MANAGED_BY, EPHEMERAL_MANAGER, ephemeral_prefix_name
from ironpool.api.resource_info import ResourceInfo
from ironpool.api.resources import resolve
from ironpool.apiserver.controllers.reconcile_queue import ReconcileQueue
from ironpool.apiserver.ipam.index import MACHINE, NIC, PREFIX, IPAMIndex, NicEntry, owner_of, view_of
from ironpool.apiserver.registry.generic import Registry
from ironpool.store.interface import Document

log = logging.getLogger("ironpool.apiserver.networking")

MACHINES, NICS = resolve("machine"), resolve("networkinterface")
PREFIXES, EVENTS = resolve("prefix"), resolve("event")
COMPONENT = "networking-controller"
USED_DELAY = 0.2  # seconds a parent's status.used waits for more changes before it is written
_EVENT_DEDUPE = 300.0
# NetworkInterface fields that cannot change after creation (see its strategy); an allocated
# macAddress differs from a template without one, and that is no change.
_FIXED = ("networkRef", "ipFamilies", "attributes", "macAddress")

Obj = dict[str, Any]
Item = tuple[str, str, str]  # (what, namespace, name): "machine" | "views" | "used"


def _owner(info: ResourceInfo, doc: Obj) -> Obj:
    m = doc["metadata"]
    return {"apiVersion": info.api_version, "kind": info.kind, "name": m["name"], "uid": m["uid"],
            "controller": True, "blockOwnerDeletion": True}


def wants_nics(machine: Obj) -> bool:
    """Whether a Machine has ephemeral NetworkInterface templates (see :func:`ephemeral_nics`)."""
    return any((nic.get("ephemeral") or {}).get("networkInterfaceTemplate") is not None
               for nic in (machine.get("spec") or {}).get("networkInterfaces") or [])


def ephemeral_nics(machine: Obj) -> dict[str, Obj]:
    """The NetworkInterfaces a Machine's ephemeral templates stand for, by name."""
    m = machine["metadata"]
    out = {}
    for nic in (machine.get("spec") or {}).get("networkInterfaces") or []:
        template = (nic.get("ephemeral") or {}).get("networkInterfaceTemplate")
        if template is None:
            continue
        meta = template.get("metadata") or {}
        name = f"{m['name']}-{nic['name']}"
        annotations = {**(meta.get("annotations") or {}), EPHEMERAL_MANAGED_BY: EPHEMERAL_MANAGER}
        metadata: Obj = {"name": name, "namespace": m["namespace"], "annotations": annotations,
                         "ownerReferences": [_owner(MACHINES, machine)]}
        if meta.get("labels"):
            metadata["labels"] = dict(meta["labels"])
        spec = {**(template.get("spec") or {}), "machineRef": {"name": m["name"], "uid": m["uid"]}}
        out[name] = {"apiVersion": NICS.api_version, "kind": NICS.kind, "metadata": metadata, "spec": spec}
    return out


def ephemeral_prefixes(nic: Obj, entry: NicEntry) -> dict[str, Obj]:
    """The Prefixes that show a NIC's ephemeral addresses, by name."""
    out = {}
    for a in entry.addresses:
        if not a.ephemeral:
            continue
        src = entry.sources[a.index]
        template = (src.get("ephemeral") or {}).get("prefixTemplate") or {}
        meta = template.get("metadata") or {}
        annotations = {**(meta.get("annotations") or {}), EPHEMERAL_MANAGED_BY: EPHEMERAL_MANAGER}
        name = ephemeral_prefix_name(entry.name, a.index)
        metadata: Obj = {"name": name, "namespace": nic["metadata"]["namespace"], "annotations": annotations,
                         "ownerReferences": [_owner(NICS, nic)]}
        if meta.get("labels"):
            metadata["labels"] = dict(meta["labels"])
        spec: Obj = {"ipFamily": "IPv4" if a.ip.version == 4 else "IPv6",
                     "prefix": f"{a.ip}/{a.ip.max_prefixlen}"}
        if a.parent is not None:
            spec["parentRef"] = {"name": a.parent}
        out[name] = {"apiVersion": PREFIXES.api_version, "kind": PREFIXES.kind, "metadata": metadata,
                     "spec": spec}
    return out


class NetworkingController:
    """Keeps ephemeral NICs, the Prefixes of ephemeral addresses and parents' usage (see the module)."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self.store = registry.store
        self.index = IPAMIndex.for_store(registry.store)
        self.index.listeners.append(self._children_changed)
        self._queue: ReconcileQueue[Item] = ReconcileQueue(
            self.reconcile, name="ironpool-networking", log=log,
            describe="{0[0]} {0[1]}/{0[2]}".format, first=1.0)
        self._used_pending: set[tuple[str, str]] = set()
        # Prefixes showing NIC addresses that exist: (namespace, NIC name) -> {prefix name: NIC uid}
        self._views: dict[tuple[str, str], dict[str, str]] = {}
        self._view_nic: dict[tuple[str, str], str] = {}  # (namespace, prefix name) -> NIC name
        self._nic_machine: dict[tuple[str, str], str] = {}  # (namespace, NIC name) -> owning Machine
        self._machine_nics: dict[tuple[str, str], set[str]] = {}  # (namespace, Machine) -> its NICs
        self._events: dict[tuple[str, str, str], float] = {}
        self.index.watchers.append(self.committed)

    # -- triggers ------------------------------------------------------------------------------

    def committed(self, info: ResourceInfo, key: str, doc: Document | None) -> None:
        """A change the index applied (``doc`` as stored, None when removed)."""
        kind = info.kind
        if kind not in (MACHINE, NIC, PREFIX):
            return
        namespace, name = info.namespace_of_key(key) or "", key.rsplit("/", 1)[-1]
        if kind == MACHINE:
            # Only a Machine that wants NICs or owns some has work here: every other change (a
            # bind, a status update) would cost a read of the Machine from the store for nothing.
            if (namespace, name) in self._machine_nics or (doc is not None and wants_nics(doc)):
                self.enqueue(("machine", namespace, name))
        elif kind == NIC:
            self.enqueue(("views", namespace, name))
            # The Machine's NICs are its business: one that goes (or changes) queues the Machine.
            owner = owner_of(doc) if doc is not None else None
            machine = self._own_nic(namespace, name, None)
            if owner is not None and owner[0] == MACHINE:
                self._own_nic(namespace, name, owner[1])
                machine = owner[1]
            if machine is not None:
                self.enqueue(("machine", namespace, machine))
        else:
            self._track_view(namespace, name, doc)

    def _own_nic(self, namespace: str, nic: str, machine: str | None) -> str | None:
        """Record ``nic``'s owning Machine (None: no Machine owns it); the owner it had."""
        before = self._nic_machine.pop((namespace, nic), None)
        if before is not None:
            owned = self._machine_nics.get((namespace, before))
            if owned is not None:
                owned.discard(nic)
                if not owned:
                    del self._machine_nics[(namespace, before)]
        if machine is not None:
            self._nic_machine[(namespace, nic)] = machine
            self._machine_nics.setdefault((namespace, machine), set()).add(nic)
        return before

    def _track_view(self, namespace: str, name: str, doc: Document | None) -> None:
        """Remember which Prefixes show which NIC's addresses (their NIC reconciles them)."""
        nic = self._view_nic.pop((namespace, name), None)
        if nic is not None:
            self._views.get((namespace, nic), {}).pop(name, None)
            self.enqueue(("views", namespace, nic))
        view = view_of(doc) if doc is not None else None
        if view is not None:
            self._view_nic[(namespace, name)] = view[0]
            self._views.setdefault((namespace, view[0]), {})[name] = view[1]
            self.enqueue(("views", namespace, view[0]))

    def _children_changed(self, namespace: str, prefix: str) -> None:
        key = (namespace, prefix)
        if key in self._used_pending:
            return
        self._used_pending.add(key)
        with contextlib.suppress(RuntimeError):  # no loop: building the index in a test
            asyncio.get_running_loop().call_later(USED_DELAY, self._used_due, key)

    def _used_due(self, key: tuple[str, str]) -> None:
        self._used_pending.discard(key)
        self.enqueue(("used", *key))

    def enqueue(self, item: Item) -> None:
        """Reconcile ``item`` soon."""
        self._queue.add(item)

    async def resume(self) -> None:
        """Queue what an earlier process may have left undone."""
        await self.index.ready()
        for prefix in (await self.store.list(PREFIXES.prefix(None))).items:
            m = prefix["metadata"]
            self._track_view(m["namespace"], m["name"], prefix)
        for doc in (await self.store.list(NICS.prefix(None))).items:
            m, owner = doc["metadata"], owner_of(doc)
            if owner is not None and owner[0] == MACHINE:
                self._own_nic(m["namespace"], m["name"], owner[1])
        for namespace, state in list(self.index.namespaces()):
            for name, machine in state.machines.items():
                if machine.networks:
                    self.enqueue(("machine", namespace, name))
            for name, nic in state.nics.items():
                if nic.owner is not None and nic.owner[0] == MACHINE:
                    self.enqueue(("machine", namespace, nic.owner[1]))
                if any(a.ephemeral for a in nic.addresses):
                    self.enqueue(("views", namespace, name))
            for name in state.prefixes:
                self.enqueue(("used", namespace, name))

    async def reconcile(self, item: Item) -> None:
        what, namespace, name = item
        if what == "machine":
            await self._machine(namespace, name)
        elif what == "views":
            await self._prefix_views(namespace, name)
        else:
            await self._used(namespace, name)

    async def _machine(self, namespace: str, name: str) -> None:
        machine = await self.store.get(MACHINES.key(namespace, name))
        live = machine is not None and not machine["metadata"].get("deletionTimestamp")
        uid = machine["metadata"]["uid"] if machine is not None else None
        desired = ephemeral_nics(machine) if live and machine is not None else {}
        state = self.index.ns(namespace)
        for nic_name, entry in list(state.nics.items()):
            owner = entry.owner
            if owner is None or owner[0] != MACHINE or owner[1] != name:
                continue
            # Garbage: the Machine is gone (or replaced), or no longer has this NIC.
            if machine is None or owner[2] != uid or (live and nic_name not in desired):
                await self._delete(NICS, namespace, nic_name)
        if not live or machine is None:
            return
        problems = []
        for nic_name, want in desired.items():
            try:
                await self._ensure_nic(namespace, nic_name, want, state.nics.get(nic_name), str(uid))
            except errors.ApiError as exc:
                problems.append(f"{nic_name}: {exc.message}")
        if problems:
            message = "; ".join(problems)
            await self._event(machine, "FailedCreateNetworkInterface", message)
            raise RuntimeError(message)

    async def _ensure_nic(self, namespace: str, name: str, want: Obj, entry: NicEntry | None,
                          uid: str) -> None:
        if entry is None:
            with contextlib.suppress(errors.AlreadyExists):  # another apiserver's controller was first
                await self.registry.create(NICS, namespace, want)
            return
        if entry.owner != (MACHINE, want["metadata"]["ownerReferences"][0]["name"], uid):
            raise errors.Conflict(f'networkinterface "{name}" exists and is not this machine\'s; not adopted')
        current = await self.store.get(NICS.key(namespace, name))
        if current is None or current["metadata"].get("deletionTimestamp"):
            return  # being deleted; its removal queues the Machine again
        have, spec = current.get("spec") or {}, want["spec"]
        changed = [k for k in _FIXED if spec.get(k) != have.get(k)]
        if [k for k in changed if k != "macAddress" or spec.get("macAddress")]:
            await self._delete(NICS, namespace, name)  # replaced: recreated once it is gone
        elif spec.get("ips") != have.get("ips"):
            await self.registry.patch(NICS, namespace, name, {"spec": {"ips": spec.get("ips")}})

    async def _prefix_views(self, namespace: str, nic_name: str) -> None:
        entry = self.index.ns(namespace).nics.get(nic_name)
        nic = await self.store.get(NICS.key(namespace, nic_name)) if entry is not None else None
        desired = ephemeral_prefixes(nic, entry) if nic is not None and entry is not None else {}
        existing = self._views.get((namespace, nic_name), {})
        for name, owner_uid in list(existing.items()):
            if name not in desired or entry is None or owner_uid != entry.uid:
                await self._delete(PREFIXES, namespace, name)
                existing.pop(name, None)
        for name, want in desired.items():
            if name in existing:
                continue
            with contextlib.suppress(errors.AlreadyExists):  # a stale one not deleted yet: next round
                await self.registry.create(PREFIXES, namespace, want)

    async def _used(self, namespace: str, name: str) -> None:
        used = self.index.used(namespace, name)
        if used is None:
            return
        doc = await self.store.get(PREFIXES.key(namespace, name))
        if doc is None or view_of(doc) is not None or (doc.get("status") or {}).get("used") == used:
            return
        with contextlib.suppress(errors.NotFound):
            await self.registry.patch(PREFIXES, namespace, name, {"status": {"used": used}},
                                      subresource="status")

    async def _delete(self, info: ResourceInfo, namespace: str, name: str) -> None:
        with contextlib.suppress(errors.NotFound):
            await self.registry.delete(info, namespace, name)

    async def _event(self, obj: Obj, reason: str, message: str) -> None:
        """A Warning Event about ``obj`` (the same one at most every few minutes); best effort."""
        m = obj["metadata"]
        key = (m["uid"], reason, message)
        now = time.monotonic()
        if now - self._events.get(key, -_EVENT_DEDUPE) < _EVENT_DEDUPE:
            return
        self._events = {k: t for k, t in self._events.items() if now - t < _EVENT_DEDUPE}
        self._events[key] = now
        stamp = now_rfc3339()
        event = {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"generateName": f"{m['name']}.", "namespace": m["namespace"]},
            "involvedObject": {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"),
                               "name": m["name"], "namespace": m["namespace"], "uid": m["uid"]},
            "reason": reason, "message": message[:1024], "type": "Warning", "count": 1,
            "firstTimestamp": stamp, "lastTimestamp": stamp, "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT, "action": reason,
        }
        try:
            await self.registry.create(EVENTS, m["namespace"], event)
        except errors.ApiError as exc:
            log.debug("could not record event %s on %s/%s: %s", reason, m["namespace"], m["name"], exc)
