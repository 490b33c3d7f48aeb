"""The namespace controller: a terminating namespace's content is deleted, then the namespace.

Deleting a Namespace only marks it (``deletionTimestamp``, phase ``Terminating``; see the Namespace
strategy). This controller, as Kubernetes' namespace controller in kube-controller-manager, then
deletes every object in it (objects with finalizers get their deletionTimestamp and stay until their
controllers let go) and removes the namespace once nothing is left in it and it has no finalizers.

It runs inside the apiserver process and learns of changes from the registry, as one of its commit
observers: a namespace marked or changed while terminating, and any write in a terminating
namespace, queue that namespace. Reconciling is level-based (it reads the namespace and its content
from the store), so a repeated trigger costs one pass and none is lost by coalescing.
:meth:`NamespaceController.resume` picks up namespaces a previous process left terminating.

With several apiservers over one store each hears only of its own writes: a namespace marked through
another apiserver, or a finalizer removed through another one, makes no commit here. So every
apiserver also looks for terminating namespaces every :data:`RESYNC` seconds, and a namespace whose
content still waits for finalizers is looked at again after :data:`_RETRY_AFTER` seconds; any of
them may finish a namespace (deletes are idempotent, the removal a compare-and-swap).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from ironpool.api import errors
from ironpool.api.resource_info import ResourceInfo
from ironpool.api.resources import RESOURCES
from ironpool.apiserver.controllers.reconcile_queue import ReconcileQueue
from ironpool.apiserver.namespaces import NAMESPACES
from ironpool.apiserver.registry.generic import Registry
from ironpool.apiserver.registry.listing import revision_of
from ironpool.store.interface import Document, KeyNotFound, RevisionConflict, StoreError

log = logging.getLogger("ironpool.apiserver.namespaces")

_NAMESPACED = tuple(r for r in RESOURCES if r.namespaced)
_RETRY_AFTER = 1.0  # seconds before a namespace whose reconcile failed (or waits) is tried again
RESYNC = 30.0  # seconds between looks for namespaces marked through other apiservers


class NamespaceController:
    """Finishes the deletion of terminating namespaces (see the module docstring)."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self.store = registry.store
        self._terminating: set[str] = set()
        self._queue: ReconcileQueue[str] = ReconcileQueue(
            self.reconcile, name="ironpool-namespace-controller", log=log,
            describe=lambda ns: f"namespace {ns}", first=_RETRY_AFTER, most=_RETRY_AFTER)
        self._resync: asyncio.Task[None] | None = None
        registry.observers.append(self)

    # -- triggers ------------------------------------------------------------------------------

    def committed(self, info: ResourceInfo, key: str, doc: Document | None) -> None:
        if info is NAMESPACES:
            name = key.rsplit("/", 1)[-1]
            if doc is not None and doc["metadata"].get("deletionTimestamp"):
                self._terminating.add(name)
                self.enqueue(name)
            else:
                self._terminating.discard(name)
        elif self._terminating and info.namespaced:
            namespace = info.namespace_of_key(key)
            if namespace in self._terminating:
                self.enqueue(namespace)

    async def resume(self) -> None:
        """Queue the namespaces found terminating in the store (left by an earlier process, or
        marked through another apiserver), now and every :data:`RESYNC` seconds."""
        await self._look()
        if self._resync is None:
            self._resync = asyncio.get_running_loop().create_task(self._resync_loop(),
                                                                  name="ironpool-namespace-resync")

    async def _look(self) -> None:
        for ns in (await self.store.list(NAMESPACES.prefix(None))).items:
            if ns["metadata"].get("deletionTimestamp"):
                self._terminating.add(ns["metadata"]["name"])
                self.enqueue(ns["metadata"]["name"])

    async def _resync_loop(self) -> None:
        while True:
            await asyncio.sleep(RESYNC)
            try:
                await self._look()
            except StoreError:
                return  # the store is closed: the process is stopping
            except Exception:
                log.exception("looking for terminating namespaces failed")

    def enqueue(self, namespace: str) -> None:
        """Reconcile ``namespace`` soon."""
        self._queue.add(namespace)

    async def reconcile(self, namespace: str) -> None:
        """Delete what ``namespace`` holds if it is terminating; remove it once it is empty."""
        ns = await self.store.get(NAMESPACES.key(None, namespace))
        if ns is None or not ns["metadata"].get("deletionTimestamp"):
            self._terminating.discard(namespace)
            return
        self._terminating.add(namespace)
        empty = True
        waiting = False
        for info in _NAMESPACED:
            for item in (await self.store.list(info.prefix(namespace))).items:
                empty = False
                if item["metadata"].get("deletionTimestamp"):
                    waiting = True  # for its finalizers; a removal here queues the namespace again,
                    continue  # one through another apiserver is found by the retry below
                with contextlib.suppress(errors.NotFound):  # removed meanwhile
                    await self.registry.delete(info, namespace, item["metadata"]["name"])
        if waiting:
            self._queue.add_after(namespace, _RETRY_AFTER)
        if empty and not ns["metadata"].get("finalizers"):
            # A newer version (or its removal) is another commit, which queues the namespace again.
            with contextlib.suppress(KeyNotFound, RevisionConflict):
                await self.registry.remove(NAMESPACES, None, namespace, revision_of(ns))
