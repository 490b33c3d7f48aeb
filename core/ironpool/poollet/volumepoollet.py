"""Wiring of the volumepoollet: the VolumePool's status, the Volumes bound to it and the
VolumeSnapshots of those Volumes, as the machinepoollet does for Machines (what both do is
:class:`~ironpool.poollet.base.Poollet`'s).

``run_volumepoollet`` runs until ``stop`` is set; ``ironpool up`` calls it in-process and the
``ironpool volumepoollet`` command runs it as its own process.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass

from ironpool.api.meta import object_key
from ironpool.api.storage import Volume, VolumeClass, VolumePool, VolumeSnapshot
from ironpool.client.controller import Controller, ObjectKey
from ironpool.client.informer import Informer
from ironpool.client.rest import AsyncClient
from ironpool.iri.client import AsyncVolumeRuntimeClient
from ironpool.iri.gen.volume.v1alpha1 import api_pb2 as vpb
from ironpool.poollet import keys
from ironpool.poollet.base import PoolKind, Poollet, PoolletOptions
from ironpool.poollet.classes import ClassMapper
from ironpool.poollet.pool import PoolIdentity
from ironpool.poollet.secret_reader import SecretReader
from ironpool.poollet.snapshot_controller import VolumeSnapshotReconciler
from ironpool.poollet.volume_controller import VolumeReconciler
from ironpool.poollet.volumepool import VolumePoolReconciler

log = logging.getLogger(__name__)

VOLUMES = PoolKind("volume", Volume, VolumePool, keys.VOLUME_POOL_LABEL, keys.VOLUME_CLUSTER_LABEL,
                   keys.VOLUME_UID_LABEL, keys.VOLUME_NAMESPACE_LABEL, keys.VOLUME_NAME_LABEL)


@dataclass
class VolumePoolletOptions(PoolletOptions):
    """Everything ``ironpool volumepoollet`` takes besides the API and IRI connections."""

    capacity_bytes: int | None = None


class VolumePoollet(Poollet[vpb.Volume]):
    """One volume pool's controllers."""

    kind = VOLUMES
    options: VolumePoolletOptions
    runtime: AsyncVolumeRuntimeClient
    pool_reconciler: VolumePoolReconciler

    def __init__(self, client: AsyncClient, runtime: AsyncVolumeRuntimeClient,
                 options: VolumePoolletOptions) -> None:
        super().__init__(client, runtime, options,
                         PoolIdentity(options.pool, options.provider_id, options.region, options.zone))
        self.volumes: Informer[Volume] = Informer(client, Volume,
                                                  field_selector=f"spec.volumePoolRef.name={options.pool}")
        self.classes: Informer[VolumeClass] = Informer(client, VolumeClass)
        # Every namespace's snapshots: a snapshot names no pool (its reconciler picks its pool's own).
        self.snapshots: Informer[VolumeSnapshot] = Informer(client, VolumeSnapshot)
        self.informers = (self.volumes, self.classes, self.snapshots)
        self.objects = self.volumes
        self.secrets = SecretReader(client)  # by name: a pool identity may not list or watch Secrets
        self.mapper = ClassMapper()
        self.pool_reconciler = VolumePoolReconciler(
            client, runtime, self.identity, self.volumes, self.classes, self.mapper,
            capacity_bytes=options.capacity_bytes, heartbeat_interval=options.heartbeat_interval,
            status_report_interval=options.status_report_interval,
        )
        self.pool_controller = Controller("volumepool", self.pool_reconciler.reconcile, workers=1)
        self.reconciler = VolumeReconciler(client, runtime, options.pool, self.volumes, self.classes,
                                           self.secrets, self.mapper, delete_requeue=options.delete_requeue,
                                           snapshots=self.snapshots)
        self.object_controller = self.volume_controller = Controller(
            "volume", self.reconciler.reconcile, workers=options.workers)
        self.relister = self._relister(self.runtime.list_volumes)
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
            self.enqueue_all()

        self.classes.add_event_handler(on_add=class_changed, on_update=lambda o, n: class_changed(n),
                                       on_delete=class_changed)
        self.pool_reconciler.on_classes_changed.append(self.enqueue_all)
        self.snapshot_reconciler = VolumeSnapshotReconciler(
            client, runtime, options.pool, self.snapshots, self.volumes, options.delete_requeue)
        self.snapshot_controller = Controller("volumesnapshot", self.snapshot_reconciler.reconcile,
                                              workers=options.workers)
        sc = self.snapshot_controller

        def snapshot_changed(s: VolumeSnapshot) -> None:
            sc.enqueue(ObjectKey.of(s))
            # Volumes restored from it wait for it to be Ready.
            for v in self.volumes.list():
                ds = v.spec.data_source
                ref = ds.volume_snapshot_ref if ds is not None else None
                if ref is not None and f"{v.metadata.namespace}/{ref.name}" == object_key(s):
                    vc.enqueue(ObjectKey.of(v))

        def snapshot_deleted(s: VolumeSnapshot) -> None:
            self.snapshot_reconciler.deleted[object_key(s)] = s.metadata.uid or ""
            snapshot_changed(s)

        self.snapshots.add_event_handler(on_add=snapshot_changed, on_update=lambda o, n: snapshot_changed(n),
                                         on_delete=snapshot_deleted)

        def source_changed(v: Volume) -> None:  # a snapshot waits for its source to be Available
            for s in self.snapshots.list():
                src = s.spec.volume_ref
                if src is not None and f"{s.metadata.namespace}/{src.name}" == object_key(v):
                    sc.enqueue(ObjectKey.of(s))

        self.volumes.add_event_handler(on_add=source_changed, on_update=lambda o, n: source_changed(n),
                                       on_delete=source_changed)

    async def after_relist(self, items: Sequence[vpb.Volume]) -> None:
        """Remember what this pool's volumes take (the pool's allocatable); collect orphans."""
        self.pool_reconciler.iri_bytes = sum(v.spec.resources.storage_bytes for v in items
                                             if self.key_of_own(v))
        await super().after_relist(items)

    def own(self, uid: str) -> None:
        super().own(uid)
        self.snapshot_reconciler.owner_labels = self.reconciler.owner_labels

    def loops(self, stop: asyncio.Event) -> Sequence[Awaitable[None]]:
        self.snapshot_reconciler.runtime_name = self.runtime_name
        for key in list(self.snapshots.keys()):
            self.snapshot_controller.enqueue(ObjectKey.parse(key))
        return (self.snapshot_controller.run(stop),)

    async def delete_orphan(self, runtime_id: str) -> None:
        await self.runtime.delete_volume(runtime_id, missing_ok=True)

    async def prepare(self) -> None:
        try:  # the first listing sizes the pool; a runtime hiccup here must not stop the poollet
            await self.relister.relist_once()
        except Exception as exc:
            log.warning("listing the volume runtime failed: %s; the relister retries", exc)
        await self.pool_reconciler.reconcile(self.pool_key)
        self.pool_controller.queue.add_after(self.pool_key, self.options.heartbeat_interval)


async def run_volumepoollet(
    client: AsyncClient,
    iri_client: AsyncVolumeRuntimeClient,
    options: VolumePoolletOptions,
    stop_event: asyncio.Event,
    ready: asyncio.Event | None = None,
) -> None:
    """Run a volumepoollet until ``stop_event`` is set (for ``ironpool up`` and tests)."""
    await VolumePoollet(client, iri_client, options).run(stop_event, ready)
