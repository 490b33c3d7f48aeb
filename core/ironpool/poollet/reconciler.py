"""What the Machine and Volume reconcilers share (IronCore's poollets share it the same way).

``reconcile(key)`` of an object bound to the pool: the pool's finalizer first (nothing is made for an
object whose deletion would not wait for its clean-up), then :meth:`PoolObjectReconciler.apply`, the
part each kind says. A deleted object gets its runtime objects deleted, found by the object's uid
label, before the finalizer goes; one deleted without the finalizer running (stripped by someone)
gets the runtime objects this installation made for its uid deleted (IronCore's ``deleteGone``).
Statuses are written only when they say something new.
"""

from __future__ import annotations

import abc
import logging
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Generic, TypeVar

from ironpool.api.conditions import status_differs
from ironpool.client.controller import DONE, ObjectKey, Result
from ironpool.client.informer import Informer
from ironpool.client.rest import AsyncClient
from ironpool.poollet.finalizers import add_finalizer, has_finalizer, remove_finalizer

log = logging.getLogger(__name__)

M = TypeVar("M", bound=Any)  # the API object: Machine or Volume


class PoolObjectReconciler(abc.ABC, Generic[M]):
    """Drives the runtime objects of the API objects bound to one pool."""

    finalizer: ClassVar[str]  # the pool's finalizer on its objects
    uid_label: ClassVar[str]  # the runtime object's label naming the API object's uid

    def __init__(self, client: AsyncClient, pool: str, objects: Informer[M], pool_label: str,
                 delete_requeue: float = 1.0) -> None:
        self.client = client
        self.pool = pool
        self.objects = objects
        self.delete_requeue = delete_requeue
        self.runtime_name = "iri"  # the runtime's name, once asked (its objects' IDs start with it)
        # Pool and installation labels stamped on every runtime object created (see poollet.ownership).
        self.owner_labels: dict[str, str] = {pool_label: pool}
        # Objects the informer saw deleted, by key: their uid, until the runtime has none left.
        self.deleted: dict[str, str] = {}

    # -- what each kind says --------------------------------------------------------------------------

    @abc.abstractmethod
    def pool_of(self, obj: M) -> str | None:
        """The pool ``obj`` is bound to (None: not bound yet)."""

    @abc.abstractmethod
    async def apply(self, obj: M) -> Result:
        """Make or change the runtime object of ``obj`` (which carries the finalizer) and report it."""

    @abc.abstractmethod
    async def list_runtime(self, labels: Mapping[str, str]) -> Sequence[Any]:
        """The runtime's objects carrying ``labels``."""

    @abc.abstractmethod
    async def delete_runtime(self, runtime_id: str) -> None:
        """Delete one runtime object (one already gone is fine)."""

    async def terminating(self, obj: M) -> None:
        """Say that ``obj``'s runtime objects are being deleted (called while any is left)."""

    async def released(self, obj: M) -> None:
        """What goes once ``obj``'s runtime objects are gone, before its finalizer does."""

    # -- the flow ---------------------------------------------------------------------------------------

    async def reconcile(self, key: ObjectKey) -> Result:
        obj = self.objects.get(str(key))
        if obj is None:
            return await self.delete_gone(str(key))
        if obj.metadata.deletion_timestamp:
            return await self.finalize(obj)
        if self.pool_of(obj) != self.pool:
            return DONE
        return await self.apply(await add_finalizer(self.client, obj, self.finalizer))

    async def finalize(self, obj: M) -> Result:
        """A deleted object: its runtime objects first, then the finalizer."""
        if not has_finalizer(obj, self.finalizer):
            return DONE
        if await self.delete_runtime_objects({self.uid_label: obj.metadata.uid or ""}):
            await self.terminating(obj)
            return Result(requeue_after=self.delete_requeue)
        await self.released(obj)
        await remove_finalizer(self.client, obj, self.finalizer)
        log.info("%s %s/%s: runtime objects gone, finalizer removed", type(obj).__name__,
                 obj.metadata.namespace, obj.metadata.name)
        return DONE

    async def delete_gone(self, key: str) -> Result:
        """An object seen deleted without the finalizer running: delete what the runtime still has for
        its uid, made by this installation's poollet.

        Only an observed deletion counts: a key that is merely missing from the cache (a fresh or
        restored database) is the orphan collector's business, which is deliberate about it.
        """
        uid = self.deleted.get(key)
        if uid is None:
            return DONE
        if await self.delete_runtime_objects({self.uid_label: uid, **self.owner_labels}):
            return Result(requeue_after=self.delete_requeue)
        if self.deleted.get(key) == uid:
            del self.deleted[key]
        return DONE

    async def delete_runtime_objects(self, labels: Mapping[str, str]) -> bool:
        """Delete every runtime object with these labels; True while any is still listed."""
        found = await self.list_runtime(labels)
        for o in found:
            await self.delete_runtime(o.metadata.id)
        if not found:
            return False
        return bool(await self.list_runtime(labels))

    async def patch_status(self, obj: M, status: dict[str, Any]) -> None:
        """Write the fields of ``status`` if any says something new."""
        current = obj.status.to_dict() if obj.status else {}
        if status_differs(current, status):
            await self.client.patch(type(obj), obj.metadata.name or "", {"status": status},
                                    namespace=obj.metadata.namespace, subresource="status")
