"""The VolumeSnapshot reconciler of the volumepoollet (IronCore's ``VolumeSnapshotReconciler``).

A snapshot belongs to the pool of its source Volume. The poollet of that pool adds its finalizer
and its pool label (``volumepoollet.ironpool.dev/pool``) in one write, then asks its runtime for the
IRI snapshot (found again by the ``volume-snapshot-uid`` label, so a retry never makes a second one)
and reports ``snapshotID``, ``state`` and ``size`` as IronCore does. The label keeps the snapshot
this pool's after its source Volume is deleted (the runtime's snapshot is a full copy and outlives
it, as IronCore's snapshots outlive their Volume), and tells where a Volume restored from it goes.

Every pool sees every VolumeSnapshot (a snapshot names no pool), so each decides first whether it is
its own, and never finalizes another pool's.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import grpc
import grpc.aio

from ironpool.api.meta import now_rfc3339
from ironpool.api.quantity import Quantity
from ironpool.api.storage import Volume, VolumeSnapshot
from ironpool.client.controller import DONE, ObjectKey, Result
from ironpool.client.informer import Informer
from ironpool.client.rest import AsyncClient
from ironpool.iri.client import AsyncVolumeRuntimeClient
from ironpool.iri.gen.volume.v1alpha1 import api_pb2 as vpb
from ironpool.poollet import keys
from ironpool.poollet.reconciler import PoolObjectReconciler

log = logging.getLogger(__name__)

STATE_FROM_IRI: dict[int, str] = {
    vpb.VOLUME_SNAPSHOT_PENDING: "Pending",
    vpb.VOLUME_SNAPSHOT_READY: "Ready",
    vpb.VOLUME_SNAPSHOT_FAILED: "Failed",
}
# Runtime refusals that asking again will not change: the snapshot is Failed (IronCore's runtime
# reports Failed through the snapshot's state; ours refuses the create instead). A full pool
# (RESOURCE_EXHAUSTED) may empty, so it is retried with backoff like any other error; a Failed
# snapshot is tried again at the next resync too.
_PERMANENT = frozenset({grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.FAILED_PRECONDITION})


def parse_runtime_id(value: str | None) -> str | None:
    """The runtime's own id in IronCore's ``<type>://<id>`` form (None when it is not that form)."""
    if not value:
        return None
    kind, sep, rid = value.partition("://")
    return rid if sep and kind and rid else None


def snapshot_labels(snap: VolumeSnapshot) -> dict[str, str]:
    md = snap.metadata
    return {keys.VOLUME_SNAPSHOT_UID_LABEL: md.uid or "",
            keys.VOLUME_SNAPSHOT_NAMESPACE_LABEL: md.namespace or "",
            keys.VOLUME_SNAPSHOT_NAME_LABEL: md.name or ""}


class VolumeSnapshotReconciler(PoolObjectReconciler[VolumeSnapshot]):
    """Drives the IRI snapshots of the VolumeSnapshots of one volume pool's Volumes."""

    finalizer = keys.VOLUME_SNAPSHOT_FINALIZER
    uid_label = keys.VOLUME_SNAPSHOT_UID_LABEL

    def __init__(self, client: AsyncClient, runtime: AsyncVolumeRuntimeClient, pool: str,
                 snapshots: Informer[VolumeSnapshot], volumes: Informer[Volume],
                 delete_requeue: float = 1.0) -> None:
        super().__init__(client, pool, snapshots, keys.VOLUME_POOL_LABEL, delete_requeue)
        self.runtime = runtime
        self.volumes = volumes  # this pool's Volumes only (the poollet's field selector)

    def source_of(self, snap: VolumeSnapshot) -> Volume | None:
        """The source Volume, if it is bound to this pool."""
        ref = snap.spec.volume_ref
        return self.volumes.get(f"{snap.metadata.namespace}/{ref.name}") if ref is not None else None

    def pool_of(self, snap: VolumeSnapshot) -> str | None:
        labelled = (snap.metadata.labels or {}).get(keys.VOLUME_POOL_LABEL)
        if labelled:
            return labelled
        return self.pool if self.source_of(snap) is not None else None

    async def list_runtime(self, labels: Mapping[str, str]) -> Sequence[vpb.VolumeSnapshot]:
        return await self.runtime.list_volume_snapshots(labels=labels)

    async def delete_runtime(self, runtime_id: str) -> None:
        await self.runtime.delete_volume_snapshot(runtime_id, missing_ok=True)

    async def reconcile(self, key: ObjectKey) -> Result:
        snap = self.objects.get(str(key))
        if snap is None:
            return await self.delete_gone(str(key))
        if self.pool_of(snap) != self.pool:
            return DONE  # another pool's, or its source is not bound anywhere yet
        if snap.metadata.deletion_timestamp:
            return await self.finalize(snap)
        labels, finalizers = snap.metadata.labels or {}, snap.metadata.finalizers or []
        if self.finalizer not in finalizers or labels.get(keys.VOLUME_POOL_LABEL) != self.pool:
            # One write for both: a snapshot never carries the finalizer without naming its pool.
            updated = snap.model_copy(deep=True)
            updated.metadata.labels = {**labels, keys.VOLUME_POOL_LABEL: self.pool}
            if self.finalizer not in finalizers:
                updated.metadata.finalizers = [*finalizers, self.finalizer]
            snap = await self.client.update(updated, namespace=snap.metadata.namespace)
        return await self.apply(snap)

    async def apply(self, snap: VolumeSnapshot) -> Result:
        key = f"{snap.metadata.namespace}/{snap.metadata.name}"
        found = await self.runtime.list_volume_snapshots(labels={self.uid_label: snap.metadata.uid or ""})
        found.sort(key=lambda s: (s.metadata.created_at, s.metadata.id))
        for extra in found[1:]:
            log.warning("deleting duplicate IRI snapshot %s of %s", extra.metadata.id, key)
            await self.runtime.delete_volume_snapshot(extra.metadata.id, missing_ok=True)
        if found:
            await self.patch_status(snap, self._status(snap, found[0]))
            return DONE
        source = self.source_of(snap)
        if source is None:
            # Held here (labelled) but never taken, and its source is gone: it never will be.
            log.warning("volume snapshot %s: its volume is gone before it was taken", key)
            await self.patch_status(snap, self._state(snap, "Failed"))
            return DONE
        volume_id = parse_runtime_id(source.status.volume_id) if source.status else None
        if volume_id is None or source.status is None or source.status.state != "Available":
            # IronCore's SourceVolumeNotAvailable: Pending; the source's next change requeues it.
            await self.patch_status(snap, self._state(snap, "Pending"))
            return DONE
        desired = vpb.VolumeSnapshot(spec=vpb.VolumeSnapshotSpec(volume_id=volume_id))
        desired.metadata.labels.update(snapshot_labels(snap))
        desired.metadata.labels.update(self.owner_labels)
        try:
            made = await self.runtime.create_volume_snapshot(desired)
        except grpc.aio.AioRpcError as exc:
            if exc.code() not in _PERMANENT:
                raise
            log.warning("volume snapshot %s: runtime refused it: %s", key, exc.details())
            await self.patch_status(snap, self._state(snap, "Failed"))
            return DONE
        log.info("volume snapshot %s: created IRI snapshot %s of volume %s", key, made.metadata.id, volume_id)
        await self.patch_status(snap, self._status(snap, made))
        return DONE

    def _state(self, snap: VolumeSnapshot, state: str) -> dict[str, Any]:
        old = snap.status
        transition = now_rfc3339()
        if old is not None and old.state == state and old.last_state_transition_time:
            transition = old.last_state_transition_time
        return {"state": state, "lastStateTransitionTime": transition}

    def _status(self, snap: VolumeSnapshot, iri: vpb.VolumeSnapshot) -> dict[str, Any]:
        status = self._state(snap, STATE_FROM_IRI.get(iri.status.state, "Pending"))
        status["snapshotID"] = f"{self.runtime_name}://{iri.metadata.id}"
        if iri.status.size > 0:  # IronCore: a DecimalSI quantity of the bytes
            status["size"] = str(Quantity(iri.status.size))
        return status
