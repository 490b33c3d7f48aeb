"""The VolumePool reconciler: the pool's Ready condition, classes, capacity and allocatable.

Pool figures: the runtime's ``Status`` quantity is the storage still free on its pool; what
ironpool volumes may use in total (``allocatable.storage``, not reduced by bound volumes) is that
plus what the runtime's ironpool volumes already take (``iri_bytes``, counted at each relist).
``class/volume.<name>`` keys are bytes. :class:`~ironpool.poollet.pool.PoolReport` finds the pool and
writes its status.
"""

from __future__ import annotations

from typing import Any

from ironpool.api.storage import Volume, VolumeClass, VolumePool
from ironpool.client.informer import Informer
from ironpool.client.rest import AsyncClient
from ironpool.iri.client import AsyncVolumeRuntimeClient
from ironpool.poollet.capacity import volume_pool_resources
from ironpool.poollet.classes import ClassMapper, RuntimeClass, volume_runtime_classes
from ironpool.poollet.pool import PoolIdentity, PoolReconciler
from ironpool.poollet.volume_controller import storage_bytes, volume_class_caps


class VolumePoolReconciler(PoolReconciler):
    """Keeps the VolumePool's status current; reconcile returns the heartbeat delay to requeue."""

    what = "volume"

    def __init__(self, client: AsyncClient, runtime: AsyncVolumeRuntimeClient, identity: PoolIdentity,
                 volumes: Informer[Volume], classes: Informer[VolumeClass], mapper: ClassMapper,
                 capacity_bytes: int | None = None, heartbeat_interval: float = 10.0,
                 probe_timeout: float = 5.0, status_report_interval: float = 300.0) -> None:
        super().__init__(client, runtime, VolumePool, identity, mapper, heartbeat_interval, probe_timeout,
                         status_report_interval)
        self.volumes = volumes
        self.classes = classes
        self.capacity_bytes = capacity_bytes
        self.iri_bytes = 0  # what this pool's runtime volumes take, as the last relist saw

    def runtime_classes(self, status: Any) -> list[RuntimeClass]:
        return volume_runtime_classes(status)

    def desired_status(self, pool: VolumePool, ok: bool, message: str, now: str) -> dict[str, Any]:
        free = max((c.quantity for c in self.mapper.classes), default=0)
        allocatable = free + self.iri_bytes
        capacity = self.capacity_bytes or allocatable
        offered = [vc.metadata.name or "" for vc in self.classes.list()
                   if self.mapper.lookup(vc.metadata.name or "", volume_class_caps(vc)).runtime_class]
        bound = sum(storage_bytes(v.spec.resources) for v in self.volumes.list())
        cap, alloc = volume_pool_resources(capacity, allocatable, offered, bound)
        return {
            "state": "Available" if ok else "Unavailable",
            "conditions": self.report.conditions(pool, ok, message, now),
            "availableVolumeClasses": [{"name": n} for n in sorted(offered)],
            "capacity": cap,
            "allocatable": alloc,
        }
