"""The resource quota controller: ``status.hard`` and ``status.used`` of every ResourceQuota, as
IronCore's resourcequota controller keeps them.

For each quota, ``status.hard`` is its ``spec.hard`` and ``status.used`` what the namespace's
objects it counts use of each limited resource (:mod:`ironpool.api.quota`: a Machine its
MachineClass's cpu and memory as its class has them now, a Volume its requested storage; objects
being deleted count until they are gone), recomputed from the store. It is a report: admission
decides on its own exact state (:mod:`ironpool.apiserver.admission.resource_quota`), which counts
the same way, so the two agree once the report caught up with the writes.

It runs inside every apiserver. It lists the quotas at start-up, then follows the store: watches of
ResourceQuotas, Machines, Volumes and MachineClasses (so it sees the writes of every apiserver
over the store, not only its own) queue the namespaces whose usage may have changed; a namespace
is recomputed at most once per :data:`DELAY`, however many of its objects changed. Reconciling is
level-based, so several apiservers computing the same status write it once (the others find it
current, or lose the resourceVersion race and look again).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from ironpool.api import errors
from ironpool.api.quota import MACHINE, VOLUME, format_of, show
from ironpool.api.resource_info import ResourceInfo
from ironpool.api.resources import resolve
from ironpool.apiserver.admission.capacity_index import CapacityIndex
from ironpool.apiserver.admission.quota_state import Capabilities, Entry, Group, Quota, QuotaState
from ironpool.apiserver.admission.resource_quota import capabilities, count_namespace
from ironpool.apiserver.controllers.reconcile_queue import ReconcileQueue
from ironpool.apiserver.registry.generic import Registry
from ironpool.store.interface import Document, RevisionCompacted, StoreError

log = logging.getLogger("ironpool.apiserver.resourcequota")

QUOTAS, MACHINE_CLASSES = resolve("resourcequota"), resolve("machineclass")
_COUNTED = {MACHINE: resolve("machine"), VOLUME: resolve("volume")}
DELAY = 0.05  # seconds a namespace waits for more changes before its quotas are recomputed
_WATCH_RETRY = 1.0


def quota_status(quota: Document, tally: dict[Group, Entry], caps: Capabilities) -> Document:
    """The status of ``quota`` over a namespace's ``tally``."""
    hard = dict((quota.get("spec") or {}).get("hard") or {})
    used = QuotaState(tally=tally).used(Quota.of(quota), caps)
    return {"hard": hard, "used": {r: show(v, format_of(r, hard)) for r, v in used.items()}}


class ResourceQuotaController:
    """Keeps every ResourceQuota's status (see the module docstring)."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self.store = registry.store
        self.index = CapacityIndex.for_store(registry.store)  # the MachineClasses' capabilities
        self._quotas: dict[str, dict[str, int]] = {}  # namespace -> quota -> generation last seen
        self._waiting: set[str] = set()  # namespaces due within DELAY
        self._queue: ReconcileQueue[str] = ReconcileQueue(
            self.reconcile, name="ironpool-quota-controller", log=log,
            describe=lambda ns: f"quotas of namespace {ns}")
        self._followers: list[asyncio.Task[None]] = []

    # -- triggers ------------------------------------------------------------------------------

    async def resume(self) -> None:
        """List the quotas, queue their namespaces, and follow the store from there."""
        if self._followers:
            return
        await self.index.ready()
        revision = await self._relist()
        loop = asyncio.get_running_loop()
        self._followers = [
            loop.create_task(self._follow(info, revision), name=f"ironpool-quota-{info.plural}")
            for info in (QUOTAS, *_COUNTED.values(), MACHINE_CLASSES)]

    async def _relist(self) -> int:
        page = await self.store.list(QUOTAS.prefix(None))
        self._quotas = {}
        for doc in page.items:
            m = doc["metadata"]
            self._quotas.setdefault(m["namespace"], {})[m["name"]] = int(m.get("generation") or 0)
        for namespace in self._quotas:
            self.soon(namespace)
        return page.revision

    async def _follow(self, info: ResourceInfo, revision: int) -> None:
        while True:
            try:
                async for event in self.store.watch(info.prefix(None), revision):
                    revision = event.revision
                    # Only a quota's own document matters (its generation); another kind's key says
                    # enough, and a large document is decoded only when asked for.
                    doc = event.object if info is QUOTAS and event.type != "DELETED" else None
                    self._changed(info, event.key, doc)
                return  # the store closed
            except RevisionCompacted:
                # Fell behind the store's history: what changed meanwhile is unknown, so look again.
                revision = await self._relist() if info is QUOTAS else await self.store.current_revision()
                for namespace in self._quotas:
                    self.soon(namespace)
            except StoreError as exc:
                log.warning("quota controller: watch of %s failed (%s); resuming in %ss", info.plural, exc,
                            _WATCH_RETRY)
                await asyncio.sleep(_WATCH_RETRY)

    def _changed(self, info: ResourceInfo, key: str, doc: Document | None) -> None:
        if info is MACHINE_CLASSES:
            for namespace in self._quotas:  # what its Machines count changed
                self.soon(namespace)
            return
        namespace = info.namespace_of_key(key) or ""
        if info is QUOTAS:
            name = key.rsplit("/", 1)[-1]
            seen = self._quotas.setdefault(namespace, {})
            if doc is None:
                seen.pop(name, None)
                if not seen:
                    del self._quotas[namespace]
                return
            generation = int(doc["metadata"].get("generation") or 0)
            if seen.get(name) == generation:
                return  # its status was written (by this controller, most likely): nothing to count
            seen[name] = generation
        elif namespace not in self._quotas:
            return
        self.soon(namespace)

    def soon(self, namespace: str) -> None:
        """Recompute ``namespace``'s quotas after :data:`DELAY` (once, however often asked)."""
        if namespace in self._waiting:
            return
        self._waiting.add(namespace)
        asyncio.get_running_loop().call_later(DELAY, self._due, namespace)

    def _due(self, namespace: str) -> None:
        self._waiting.discard(namespace)
        self._queue.add(namespace)

    async def reconcile(self, namespace: str) -> None:
        """Write the status of every quota of ``namespace`` that is not current."""
        quotas = (await self.store.list(QUOTAS.prefix(namespace))).items
        if not quotas:
            return
        tally, _ = await count_namespace(self.store, namespace)
        classes = sorted({cls for (kind, cls) in tally if kind == MACHINE and cls})
        caps = await capabilities(self.index, classes)
        for quota in quotas:
            status = quota_status(quota, tally, caps)
            if quota.get("status") == status:
                continue
            with contextlib.suppress(errors.NotFound):  # deleted meanwhile
                # A Conflict (someone wrote it since it was listed) is retried with a fresh look.
                await self.registry.update(QUOTAS, namespace, quota["metadata"]["name"],
                                           {**quota, "status": status}, subresource="status")


__all__ = ["DELAY", "ResourceQuotaController", "quota_status"]
