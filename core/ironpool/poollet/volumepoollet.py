"""The volumepoollet: the VolumePool's status and the Volumes bound to it, like the machinepoollet.

Pool figures: the runtime's ``Status`` quantity is the storage still free on its pool; what
ironpool volumes may use in total (``allocatable.storage``, not reduced by bound volumes) is that
plus what the runtime's ironpool volumes already take. ``class/volume.<name>`` keys are bytes.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ironpool.api.errors import NotFound
from ironpool.api.meta import object_key
from ironpool.api.storage import Volume, VolumeClass, VolumePool
from ironpool.client.controller import Controller, ObjectKey, Result
from ironpool.client.events import EventRecorder
from ironpool.client.informer import Informer
from ironpool.client.rest import AsyncClient
from ironpool.iri.client import AsyncVolumeRuntimeClient
from ironpool.iri.gen.volume.v1alpha1 import api_pb2 as vpb
from ironpool.poollet import keys
from ironpool.poollet.capacity import volume_pool_resources
from ironpool.poollet.classes import ClassMapper, volume_runtime_classes
from ironpool.poollet.collector import CollectOptions, OrphanCollector
from ironpool.poollet.conditions import ProbeHealth, condition, now_rfc3339
from ironpool.poollet.heartbeat import PoolHeartbeat
from ironpool.poollet.machine_iri import status_differs
from ironpool.poollet.machinepool import PoolIdentity, announce_pool
from ironpool.poollet.ownership import Owner, Ownership, cluster_uid
from ironpool.poollet.relist import Relister, retry_until_ok, sleep_or_stop
from ironpool.poollet.secret_reader import SecretReader
from ironpool.poollet.volume_controller import VolumeReconciler, storage_bytes, volume_class_caps

log = logging.getLogger(__name__)


@dataclass
class VolumePoolletOptions:
    """Everything ``ironpool volumepoollet`` takes besides the API and IRI connections."""

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
    capacity_bytes: int | None = None
    gc: CollectOptions = field(default_factory=CollectOptions)
    sync_timeout: float = 120.0


def iri_volume_key(v: vpb.Volume) -> str | None:
    """``namespace/name`` of the Volume an IRI volume was made for, from its labels."""
    ns = v.metadata.labels.get(keys.VOLUME_NAMESPACE_LABEL)
    name = v.metadata.labels.get(keys.VOLUME_NAME_LABEL)
    return f"{ns}/{name}" if ns and name else None


class VolumePoollet:
    """One volume pool's controllers."""

    def __init__(self, client: AsyncClient, runtime: AsyncVolumeRuntimeClient,
                 options: VolumePoolletOptions) -> None:
        self.client = client
        self.runtime = runtime
        self.options = options
        self.identity = PoolIdentity(options.pool, options.provider_id, options.region, options.zone)
        self.volumes: Informer[Volume] = Informer(client, Volume,
                                                  field_selector=f"spec.volumePoolRef.name={options.pool}")
        self.classes: Informer[VolumeClass] = Informer(client, VolumeClass)
        self.secrets = SecretReader(client)  # by name: a pool identity may not list or watch Secrets
        self.mapper = ClassMapper()
        self._health = ProbeHealth()
        self.reconciler = VolumeReconciler(client, runtime, options.pool, self.volumes, self.classes,
                                           self.secrets, self.mapper, delete_requeue=options.delete_requeue)
        self.volume_controller = Controller("volume", self.reconciler.reconcile, workers=options.workers)
        self.pool_controller = Controller("volumepool", self.reconcile_pool, workers=1)
        # Known once the apiserver answered (run); until then no runtime object counts as ours.
        self.ownership: Ownership | None = None
        self.collector: OrphanCollector | None = None
        self.events = EventRecorder(client, "volumepoollet")
        self.pool_uid: str | None = None
        self.relister: Relister[vpb.Volume] = Relister(
            self.runtime.list_volumes, self.key_of_own, self.volume_controller.enqueue,
            options.relist_period, after_list=self._after_relist,
        )
        self._last_write = 0.0
        self._iri_bytes = 0
        self.heartbeat = PoolHeartbeat(client, "VolumePool", options.pool, options.pool,
                                       options.heartbeat_interval, options.lease_duration,
                                       lambda: self.pool_uid)
        self.pool_key = ObjectKey(None, options.pool)
        vc, pool = self.volume_controller, self.pool_key

        def changed(v: Volume) -> None:
            vc.enqueue(ObjectKey.of(v))
            self.pool_controller.enqueue(pool)

        def deleted(v: Volume) -> None:
            self.reconciler.deleted[object_key(v)] = v.metadata.uid or ""
            changed(v)

        self.volumes.add_event_handler(on_add=changed, on_update=lambda o, n: changed(n), on_delete=deleted)

        def class_changed(c: VolumeClass) -> None:
            self.pool_controller.enqueue(pool)
            self._enqueue_all()

        self.classes.add_event_handler(on_add=class_changed, on_update=lambda o, n: class_changed(n),
                                       on_delete=class_changed)

    def _enqueue_all(self) -> None:
        for key in list(self.volumes.keys()):
            self.volume_controller.enqueue(ObjectKey.parse(key))

    def key_of_own(self, v: vpb.Volume) -> ObjectKey | None:
        """The Volume key of an IRI volume this poollet made (or adopts); None for others'."""
        if self.ownership is None or self.ownership.classify(v.metadata.labels) is Owner.FOREIGN:
            return None
        key = iri_volume_key(v)
        return ObjectKey.parse(key) if key else None

    async def _after_relist(self, items: Sequence[vpb.Volume]) -> None:
        """Remember what this pool's volumes take; collect orphans."""
        self._iri_bytes = sum(v.spec.resources.storage_bytes for v in items if self.key_of_own(v))
        if self.collector is not None and self.volumes.has_synced:
            await self.collector.collect(items)

    async def volume_is_live(self, key: str, uid: str) -> bool:
        """Whether a Volume with ``uid`` still exists at ``key``."""
        cached = self.volumes.get(key)
        if cached is not None and cached.metadata.uid == uid:
            return True
        ns, _, name = key.partition("/")
        try:
            live: Volume = await self.client.get(Volume, name, ns)
        except NotFound:
            return False
        return live.metadata.uid == uid

    async def _report_on_pool(self, type_: str, reason: str, message: str) -> None:
        pool = VolumePool.model_validate({"metadata": {"name": self.options.pool, "uid": self.pool_uid}})
        await self.events.record(pool, type_, reason, message)

    def _own(self, uid: str) -> None:
        self.ownership = Ownership(keys.VOLUME_POOL_LABEL, keys.VOLUME_CLUSTER_LABEL, self.options.pool, uid)
        self.reconciler.owner_labels = self.ownership.labels()
        self.collector = OrphanCollector(
            "volume", self.ownership, keys.VOLUME_UID_LABEL, iri_volume_key, self.volume_is_live,
            lambda vid: self.runtime.delete_volume(vid, missing_ok=True), self.options.gc,
            self._report_on_pool,
        )

    async def reconcile_pool(self, key: ObjectKey) -> Result:
        try:
            classes = volume_runtime_classes(await asyncio.wait_for(self.runtime.status(), 5.0))
            ok, message = True, "volume runtime status probe succeeded"
            changed = [(c.name, dict(c.capabilities)) for c in classes] != [
                (c.name, dict(c.capabilities)) for c in self.mapper.classes]
            self.mapper.classes = classes  # quantities (free bytes) change all the time
            if changed:
                self._enqueue_all()
        except Exception as exc:
            ok, message = False, f"volume runtime status probe failed: {exc}"
        ok, message = self._health.record(ok, message)
        try:
            pool = await self.client.get(VolumePool, self.options.pool)
        except NotFound:
            pool = await announce_pool(self.client, VolumePool, self.identity)
        self.pool_uid = pool.metadata.uid
        free = max((c.quantity for c in self.mapper.classes), default=0)
        allocatable = free + self._iri_bytes
        capacity = self.options.capacity_bytes or allocatable
        offered = [vc.metadata.name or "" for vc in self.classes.list()
                   if self.mapper.lookup(vc.metadata.name or "", volume_class_caps(vc)).runtime_class]
        bound = sum(storage_bytes(v.spec.resources) for v in self.volumes.list())
        cap, alloc = volume_pool_resources(capacity, allocatable, offered, bound)
        now = now_rfc3339()
        previous = pool.status.conditions if pool.status else None
        gc = self.collector
        status: dict[str, Any] = {
            "state": "Available" if ok else "Unavailable",
            "conditions": [condition("Ready", "True" if ok else "False",
                                     "HeartbeatReceived" if ok else "RuntimeUnreachable", message, previous,
                                     now, lastUpdateTime=now)],
            "availableVolumeClasses": [{"name": n} for n in sorted(offered)],
            "capacity": cap,
            "allocatable": alloc,
        }
        if gc is not None:
            status["conditions"].append(gc.status.condition(gc.what, gc.options.grace, previous, now))
        current = pool.status.to_dict() if pool.status else {}
        strip = [{k: v for k, v in c.items() if k != "lastUpdateTime"}
                 for c in current.get("conditions") or []]
        want = [{k: v for k, v in c.items() if k != "lastUpdateTime"} for c in status["conditions"]]
        due = time.monotonic() - self._last_write >= self.options.status_report_interval
        if due or status_differs({**current, "conditions": strip}, {**status, "conditions": want}):
            await self.client.patch(VolumePool, self.options.pool, {"status": status}, subresource="status")
            self._last_write = time.monotonic()
        return Result(requeue_after=self.options.heartbeat_interval)

    async def _resync(self, stop: asyncio.Event) -> None:
        while not await sleep_or_stop(stop, self.options.resync_period):
            self._enqueue_all()

    async def run(self, stop: asyncio.Event, ready: asyncio.Event | None = None) -> None:
        version = await retry_until_ok(stop, self.runtime.version, "asking the volume runtime its version")
        uid = await retry_until_ok(stop, lambda: cluster_uid(self.client), "reading the cluster uid")
        if version is None or uid is None or await retry_until_ok(
                stop, lambda: announce_pool(self.client, VolumePool, self.identity),
                f"announcing VolumePool {self.options.pool}") is None:
            return
        self._own(uid)
        self.reconciler.runtime_name = version.runtime_name or "iri"
        informers: tuple[Informer[Any], ...] = (self.volumes, self.classes)
        for inf in informers:
            inf.start()
        try:
            await asyncio.gather(*(inf.wait_for_sync(self.options.sync_timeout) for inf in informers))
            try:  # the first listing sizes the pool; a runtime hiccup here must not stop the poollet
                await self.relister.relist_once()
            except Exception as exc:
                log.warning("listing the volume runtime failed: %s; the relister retries", exc)
            await self.reconcile_pool(self.pool_key)
            self.pool_controller.queue.add_after(self.pool_key, self.options.heartbeat_interval)
            self._enqueue_all()
            if ready is not None:
                ready.set()
            await asyncio.gather(
                self.heartbeat.run(stop),
                self.pool_controller.run(stop),
                self.volume_controller.run(stop),
                self.relister.run(stop),
                self._resync(stop),
            )
        finally:
            for inf in informers:
                await inf.stop()


async def run_volumepoollet(
    client: AsyncClient,
    iri_client: AsyncVolumeRuntimeClient,
    options: VolumePoolletOptions,
    stop_event: asyncio.Event,
    ready: asyncio.Event | None = None,
) -> None:
    """Run a volumepoollet until ``stop_event`` is set (for ``ironpool up`` and tests)."""
    await VolumePoollet(client, iri_client, options).run(stop_event, ready)
