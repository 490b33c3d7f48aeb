"""What the machinepoollet and the volumepoollet share: one pool's controllers, run until stopped.

:meth:`Poollet.run` asks the runtime its version and the apiserver the cluster's uid, announces the
pool, takes ownership of this installation's runtime objects (:mod:`~ironpool.poollet.ownership`,
with their orphan collector), syncs the informers, writes the pool's first status and then runs the
pool's heartbeat Lease, the pool and object controllers, the runtime relister and the periodic resync.
A poollet says what differs: its kind's labels and pool model, its informers, and when an API object
still wants its runtime object.
"""

from __future__ import annotations

import abc
import asyncio
import logging
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, TypeVar

from ironpool.api.errors import NotFound
from ironpool.client.controller import Controller, ObjectKey
from ironpool.client.events import EventRecorder
from ironpool.client.informer import Informer
from ironpool.client.rest import AsyncClient
from ironpool.poollet.collector import CollectOptions, OrphanCollector, RuntimeObject
from ironpool.poollet.heartbeat import PoolHeartbeat
from ironpool.poollet.ownership import Owner, Ownership, cluster_uid
from ironpool.poollet.pool import PoolIdentity, PoolReconciler, PoolReport, announce_pool
from ironpool.poollet.reconciler import PoolObjectReconciler
from ironpool.poollet.relist import Relister, retry_until_ok, sleep_or_stop

log = logging.getLogger(__name__)

T = TypeVar("T", bound=RuntimeObject)  # the runtime's object: an IRI machine or volume


@dataclass
class PoolletOptions:
    """What every poollet takes besides the API and IRI connections."""

    pool: str
    provider_id: str
    region: str | None = None
    zone: str | None = None
    workers: int = 4
    heartbeat_interval: float = 10.0
    lease_duration: float = 40.0
    status_report_interval: float = 300.0
    relist_period: float = 5.0
    resync_period: float = 60.0
    delete_requeue: float = 1.0
    gc: CollectOptions = field(default_factory=CollectOptions)
    sync_timeout: float = 120.0


@dataclass(frozen=True)
class PoolKind:
    """How a kind of pool names its things: ``what`` (``machine``), its pool model, and the labels of
    its runtime objects (pool, installation, the API object's uid, namespace and name)."""

    what: str
    model: type[Any]  # the API objects: Machine or Volume
    pool_model: type[Any]
    pool_label: str
    cluster_label: str
    uid_label: str
    namespace_label: str
    name_label: str

    def api_key(self, runtime_object: Any) -> str | None:
        """``namespace/name`` of the API object a runtime object was made for, from its labels."""
        labels = runtime_object.metadata.labels
        ns, name = labels.get(self.namespace_label), labels.get(self.name_label)
        return f"{ns}/{name}" if ns and name else None


class Poollet(abc.ABC, Generic[T]):
    """One pool's controllers; subclasses make the informers, reconcilers and controllers."""

    kind: ClassVar[PoolKind]
    informers: tuple[Informer[Any], ...]  # every informer the controllers read
    objects: Informer[Any]  # the API objects bound to the pool
    reconciler: PoolObjectReconciler[Any]
    object_controller: Controller
    relister: Relister[T]
    pool_reconciler: PoolReconciler
    pool_controller: Controller

    def __init__(self, client: AsyncClient, runtime: Any, options: PoolletOptions,
                 identity: PoolIdentity) -> None:
        self.client = client
        self.runtime = runtime
        self.options = options
        self.identity = identity
        self.pool_key = ObjectKey(None, options.pool)
        self.events = EventRecorder(client, f"{self.kind.what}poollet")
        self.heartbeat = PoolHeartbeat(client, self.kind.pool_model.__name__, options.pool, options.pool,
                                       options.heartbeat_interval, options.lease_duration,
                                       lambda: self.pool_report.uid)
        # Known once the apiserver answered (run); until then no runtime object counts as ours.
        self.ownership: Ownership | None = None
        self.collector: OrphanCollector | None = None
        self.runtime_name = "iri"

    @property
    def pool_report(self) -> PoolReport:
        return self.pool_reconciler.report

    def _relister(self, list_runtime: Any) -> Relister[T]:
        """The relister over ``list_runtime`` (for subclasses, once their controller exists)."""
        return Relister(list_runtime, self.key_of_own, self.object_controller.enqueue,
                        self.options.relist_period, after_list=self.after_relist)

    # -- what each poollet says ----------------------------------------------------------------------

    def wants_here(self, obj: Any) -> bool:
        """Whether the API object ``obj`` wants its runtime object on this pool (it exists)."""
        return True

    @abc.abstractmethod
    async def delete_orphan(self, runtime_id: str) -> None:
        """Delete a runtime object the collector found orphaned."""

    @abc.abstractmethod
    async def prepare(self) -> None:
        """What the pool needs before its first object is handled (the informers are synced)."""

    def loops(self, stop: asyncio.Event) -> Sequence[Awaitable[None]]:
        """What else runs beside the controllers until ``stop``."""
        return ()

    # -- ownership and garbage collection --------------------------------------------------------------

    def key_of_own(self, obj: T) -> ObjectKey | None:
        """The API key of a runtime object this poollet made (or adopts); None for others'."""
        if self.ownership is None or self.ownership.classify(obj.metadata.labels) is Owner.FOREIGN:
            return None
        key = self.kind.api_key(obj)
        return ObjectKey.parse(key) if key else None

    async def is_live(self, key: str, uid: str) -> bool:
        """Whether the API object ``uid`` still exists at ``key`` and wants its runtime object here."""
        cached = self.objects.get(key)
        if cached is not None and cached.metadata.uid == uid:
            return True
        ns, _, name = key.partition("/")
        try:
            live = await self.client.get(self.kind.model, name, ns)
        except NotFound:
            return False
        return bool(live.metadata.uid == uid and self.wants_here(live))

    async def after_relist(self, items: Sequence[T]) -> None:
        if self.collector is not None and self.objects.has_synced:
            await self.collector.collect(items)

    async def _report_on_pool(self, type_: str, reason: str, message: str) -> None:
        pool = self.kind.pool_model.model_validate(
            {"metadata": {"name": self.options.pool, "uid": self.pool_report.uid}})
        await self.events.record(pool, type_, reason, message)

    def own(self, uid: str) -> None:
        """Take ownership as the poollet of this pool in the installation ``uid``."""
        k = self.kind
        self.ownership = Ownership(k.pool_label, k.cluster_label, self.options.pool, uid)
        self.reconciler.owner_labels = self.ownership.labels()
        self.collector = OrphanCollector(k.what, self.ownership, k.uid_label, k.api_key, self.is_live,
                                         self.delete_orphan, self.options.gc, self._report_on_pool)
        self.pool_report.collection = self.collector

    # -- running ---------------------------------------------------------------------------------------

    def enqueue_all(self) -> None:
        for key in list(self.objects.keys()):
            self.object_controller.enqueue(ObjectKey.parse(key))

    async def _resync(self, stop: asyncio.Event) -> None:
        while not await sleep_or_stop(stop, self.options.resync_period):
            self.enqueue_all()

    async def run(self, stop: asyncio.Event, ready: asyncio.Event | None = None) -> None:
        """Run until ``stop`` is set; ``ready`` is set once the pool's objects are being handled."""
        what, pool_kind = self.kind.what, self.kind.pool_model.__name__
        version = await retry_until_ok(stop, self.runtime.version, f"asking the {what} runtime its version")
        uid = await retry_until_ok(stop, lambda: cluster_uid(self.client), "reading the cluster uid")
        if version is None or uid is None or await retry_until_ok(
                stop, lambda: announce_pool(self.client, self.kind.pool_model, self.identity),
                f"announcing {pool_kind} {self.options.pool}") is None:
            return
        self.own(uid)
        self.runtime_name = self.reconciler.runtime_name = version.runtime_name or "iri"
        for inf in self.informers:
            inf.start()
        try:
            await asyncio.gather(*(inf.wait_for_sync(self.options.sync_timeout) for inf in self.informers))
            await self.prepare()
            self.enqueue_all()
            if ready is not None:
                ready.set()
            log.info("%spoollet for pool %s running (runtime %s %s)", what, self.options.pool,
                     version.runtime_name, version.runtime_version)
            await asyncio.gather(
                self.heartbeat.run(stop),
                self.pool_controller.run(stop),
                self.object_controller.run(stop),
                self.relister.run(stop),
                self._resync(stop),
                *self.loops(stop),
            )
        finally:
            for inf in self.informers:
                await inf.stop()
