"""The Volume reconciler of the volumepoollet (IronCore's ``VolumeReconciler``).

Creates the IRI volume (found again by the ``volume-uid`` label, so retries never make a second
one; from an OS image or, once it is Ready in this pool, a VolumeSnapshot), expands it when
``spec.resources.storage`` grows, publishes ``status.access`` for machines, releases a ``claimRef``
whose Machine is gone, and deletes through the finalizer.
"""

from __future__ import annotations

import base64
import hashlib
import logging
from collections.abc import Mapping, Sequence
from typing import Any

import grpc
import grpc.aio

from ironpool.api.compute import Machine
from ironpool.api.conditions import condition
from ironpool.api.core import Secret
from ironpool.api.errors import AlreadyExists, NotFound
from ironpool.api.meta import now_rfc3339
from ironpool.api.quantity import Quantity
from ironpool.api.storage import Volume, VolumeClass, VolumeSnapshot
from ironpool.client.controller import DONE, Result
from ironpool.client.informer import Informer
from ironpool.client.rest import AsyncClient
from ironpool.iri.client import AsyncVolumeRuntimeClient
from ironpool.iri.encryption import KEY_NAME as ENCRYPTION_KEY
from ironpool.iri.gen.volume.v1alpha1 import api_pb2 as vpb
from ironpool.poollet import keys
from ironpool.poollet.classes import ClassMapper
from ironpool.poollet.machine_iri import error_reason
from ironpool.poollet.reconciler import PoolObjectReconciler
from ironpool.poollet.secret_reader import SECRET_RETRY, SecretReader, secret_value
from ironpool.poollet.snapshot_controller import parse_runtime_id
from ironpool.poollet.waiting import Dependency, Waiting, waiting_message

log = logging.getLogger(__name__)

STATE_FROM_IRI: dict[int, str] = {
    vpb.VOLUME_PENDING: "Pending",
    vpb.VOLUME_AVAILABLE: "Available",
    vpb.VOLUME_ERROR: "Error",
}


def volume_class_caps(vc: VolumeClass) -> dict[str, int]:
    caps = vc.capabilities or {}
    return {"tps": caps["tps"].value() if "tps" in caps else 0,
            "iops": caps["iops"].value() if "iops" in caps else 0}


def storage_bytes(resources: Mapping[str, Any] | None) -> int:
    q = (resources or {}).get("storage")
    return int(q.value()) if q is not None else 0


def ns_of(vol: Volume) -> str:
    return vol.metadata.namespace or "default"


def access_secret_name(volume_name: str, handle: str) -> str:
    """IronCore's name for the Secret holding a volume's access secret data."""
    return hashlib.sha256(f"{volume_name}/{handle}".encode()).hexdigest()[:63]


def uid_labels(vol: Volume) -> dict[str, str]:
    md = vol.metadata
    return {keys.VOLUME_UID_LABEL: md.uid or "", keys.VOLUME_NAMESPACE_LABEL: md.namespace or "",
            keys.VOLUME_NAME_LABEL: md.name or ""}


class VolumeReconciler(PoolObjectReconciler[Volume]):
    """Drives the IRI volumes of the Volumes bound to one volume pool."""

    finalizer = keys.VOLUME_FINALIZER
    uid_label = keys.VOLUME_UID_LABEL

    def __init__(
        self,
        client: AsyncClient,
        runtime: AsyncVolumeRuntimeClient,
        pool: str,
        volumes: Informer[Volume],
        classes: Informer[VolumeClass],
        secrets: SecretReader,
        mapper: ClassMapper,
        runtime_name: str = "iri",
        delete_requeue: float = 1.0,
        snapshots: Informer[VolumeSnapshot] | None = None,
    ) -> None:
        super().__init__(client, pool, volumes, keys.VOLUME_POOL_LABEL, delete_requeue)
        self.runtime = runtime
        self.volumes = volumes
        self.classes = classes
        self.secrets = secrets
        self.mapper = mapper
        self.runtime_name = runtime_name
        self.snapshots = snapshots

    def pool_of(self, vol: Volume) -> str | None:
        ref = vol.spec.volume_pool_ref
        return ref.name if ref is not None else None

    async def list_runtime(self, labels: Mapping[str, str]) -> Sequence[vpb.Volume]:
        return await self.runtime.list_volumes(labels=labels)

    async def delete_runtime(self, runtime_id: str) -> None:
        await self.runtime.delete_volume(runtime_id, missing_ok=True)

    async def apply(self, vol: Volume) -> Result:
        key = f"{ns_of(vol)}/{vol.metadata.name}"
        await self._release_stale_claim(vol)
        listed = await self.runtime.list_volumes(labels={keys.VOLUME_UID_LABEL: vol.metadata.uid or ""})
        found = [v for v in listed if not v.metadata.deleted_at]
        found.sort(key=lambda v: (v.metadata.created_at, v.metadata.id))
        for extra in found[1:]:
            log.warning("deleting duplicate IRI volume %s of %s", extra.metadata.id, key)
            await self.runtime.delete_volume(extra.metadata.id, missing_ok=True)
        now = now_rfc3339()
        if not found:
            if vol.spec.encryption is not None:  # read by name: a pool may not watch Secrets
                await self.secrets.refresh(ns_of(vol), vol.spec.encryption.secret_ref.name)
            if vol.spec.image_pull_secret is not None:
                await self.secrets.refresh(ns_of(vol), vol.spec.image_pull_secret.name)
            desired, waiting = self._build(vol)
            if desired is None:
                await self.patch_status(vol, self._waiting_status(vol, waiting, now))
                return Result(requeue_after=SECRET_RETRY) if any(w.polled for w in waiting) else DONE
            try:
                iri = await self.runtime.create_volume(desired)
            except grpc.aio.AioRpcError as exc:
                reason = error_reason(exc, "")
                if not reason:
                    raise
                # An image being pulled, or one that cannot be: say so in the status, retry.
                previous = vol.status.conditions if vol.status else None
                await self.patch_status(vol, {"state": "Pending", "conditions": [
                    condition("Ready", "False", reason, exc.details() or "", previous, now)]})
                if reason == "ImagePulling":
                    return Result(requeue_after=SECRET_RETRY)
                raise
            log.info("volume %s: created IRI volume %s", key, iri.metadata.id)
        else:
            iri = found[0]
            want = storage_bytes(vol.spec.resources)
            if want > iri.spec.resources.storage_bytes:
                await self.runtime.expand_volume(iri.metadata.id, want)
                again = await self.runtime.list_volumes(volume_id=iri.metadata.id)
                iri = again[0] if again else iri
        status = await self._status(vol, iri, now)
        await self.patch_status(vol, status)
        return DONE if status.get("state") == "Available" else Result(requeue_after=1.0)

    def _build(self, vol: Volume) -> tuple[vpb.Volume | None, list[Waiting]]:
        waiting: list[Waiting] = []
        ns = vol.metadata.namespace or "default"
        class_ref = vol.spec.volume_class_ref
        runtime_class = ""
        if class_ref is None:
            waiting.append(Waiting(Dependency.FIELD, "a volumeClassRef",
                                   "externally provisioned volumes are not handled by a pool"))
        else:
            vc = self.classes.get(class_ref.name)
            if vc is None:
                waiting.append(Waiting(Dependency.VOLUME_CLASS, class_ref.name, "not found"))
            else:
                match = self.mapper.lookup(class_ref.name, volume_class_caps(vc))
                if match.runtime_class is None:
                    waiting.append(Waiting(Dependency.VOLUME_CLASS, class_ref.name, match.reason))
                else:
                    runtime_class = match.runtime_class.name
        size = storage_bytes(vol.spec.resources)
        if size <= 0:
            waiting.append(Waiting(Dependency.FIELD, "spec.resources.storage", "missing or zero"))
        spec = vpb.VolumeSpec(resources=vpb.VolumeResources(storage_bytes=size))
        setattr(spec, "class", runtime_class)  # `class` is a Python keyword
        if vol.spec.encryption is not None:
            sname = vol.spec.encryption.secret_ref.name
            secret = self.secrets.get(f"{ns}/{sname}")
            data = secret_value(secret, ENCRYPTION_KEY) if secret is not None else None
            if data is None:
                waiting.append(Waiting(Dependency.SECRET, f"{ns}/{sname}", "encryption key not found"))
            else:
                spec.encryption.secret_data[ENCRYPTION_KEY] = data
        ds = vol.spec.data_source
        if ds is not None and ds.os_image is not None:
            source = spec.volume_data_source.image_data_source
            source.image = ds.os_image.image
            source.architecture = ds.os_image.architecture or ""
            pull = vol.spec.image_pull_secret
            if pull is not None:
                source.pull_secret_data.update(self.secrets.image_pull_secret(ns, pull.name, waiting))
        if ds is not None and ds.volume_snapshot_ref is not None:
            snapshot_id = self._snapshot_id(ns, ds.volume_snapshot_ref.name, waiting)
            if snapshot_id is not None:
                spec.volume_data_source.snapshot_data_source.snapshot_id = snapshot_id
        if waiting:
            return None, waiting
        iri = vpb.Volume(spec=spec)
        iri.metadata.labels.update(uid_labels(vol))
        iri.metadata.labels.update(self.owner_labels)
        return iri, []

    def _snapshot_id(self, ns: str, name: str, waiting: list[Waiting]) -> str | None:
        """The runtime id of the VolumeSnapshot ``ns/name`` to restore from, once it is Ready in
        this pool (IronCore's VolumeSnapshotNotReady); else what is waited for."""
        snap = self.snapshots.get(f"{ns}/{name}") if self.snapshots is not None else None
        what = f"{ns}/{name}"
        if snap is None:
            waiting.append(Waiting(Dependency.VOLUME_SNAPSHOT, what, "not found"))
            return None
        holder = (snap.metadata.labels or {}).get(keys.VOLUME_POOL_LABEL)
        if holder is not None and holder != self.pool:
            waiting.append(Waiting(Dependency.VOLUME_SNAPSHOT, what, f"held by volume pool {holder!r}, "
                                   f"not {self.pool!r}: a Volume is restored in its snapshot's pool"))
            return None
        state = snap.status.state if snap.status else None
        rid = parse_runtime_id(snap.status.snapshot_id) if snap.status else None
        if state != "Ready" or rid is None:
            waiting.append(Waiting(Dependency.VOLUME_SNAPSHOT, what, f"not Ready (state {state or 'unset'})"))
            return None
        return rid

    async def _status(self, vol: Volume, iri: vpb.Volume, now: str) -> dict[str, Any]:
        state = STATE_FROM_IRI.get(iri.status.state, "Pending")
        old = vol.status
        previous = old.conditions if old else None
        transition = now
        if old is not None and old.state == state and old.last_state_transition_time:
            transition = old.last_state_transition_time
        status: dict[str, Any] = {
            "volumeID": f"{self.runtime_name}://{iri.metadata.id}",
            "state": state,
            "lastStateTransitionTime": transition,
            "resources": {"storage": str(Quantity(iri.status.resources.storage_bytes
                                                  or iri.spec.resources.storage_bytes, "BinarySI"))},
            "conditions": [condition("Ready", "True" if state == "Available" else "False", state,
                                     f"volume is {state}", previous, now)],
        }
        if state == "Available" and iri.status.HasField("access"):
            acc = iri.status.access
            access: dict[str, Any] = {"driver": acc.driver, "handle": acc.handle,
                                      "volumeAttributes": dict(acc.attributes)}
            if acc.secret_data:
                access["secretRef"] = {"name": await self._access_secret(vol, acc)}
            status["access"] = access
        return status

    async def _access_secret(self, vol: Volume, acc: vpb.VolumeAccess) -> str:
        name = access_secret_name(vol.metadata.name or "", acc.handle)
        data = {k: base64.b64encode(v).decode() for k, v in acc.secret_data.items()}
        secret = Secret.model_validate({
            "metadata": {"name": name, "namespace": vol.metadata.namespace,
                         "labels": {keys.VOLUME_UID_LABEL: vol.metadata.uid or ""},
                         "ownerReferences": [{"apiVersion": "storage.ironcore.dev/v1alpha1", "kind": "Volume",
                                              "name": vol.metadata.name, "uid": vol.metadata.uid,
                                              "controller": True}]},
            "data": data,
        })
        try:
            await self.client.create(secret, namespace=vol.metadata.namespace)
        except AlreadyExists:
            await self.client.patch(Secret, name, {"data": data}, namespace=vol.metadata.namespace)
        return name

    @staticmethod
    def _waiting_status(vol: Volume, waiting: list[Waiting], now: str) -> dict[str, Any]:
        previous = vol.status.conditions if vol.status else None
        return {"state": "Pending",
                "conditions": [condition("Ready", "False", "WaitingForDependencies",
                                         waiting_message(waiting), previous, now)]}

    async def _release_stale_claim(self, vol: Volume) -> None:
        """Clear a ``claimRef`` whose Machine no longer exists (IronCore's volumerelease controller)."""
        claim = vol.spec.claim_ref
        if claim is None:
            return
        try:
            machine: Machine | None = await self.client.get(Machine, claim.name, vol.metadata.namespace)
        except NotFound:
            machine = None
        if machine is not None and (not claim.uid or machine.metadata.uid == claim.uid):
            return
        log.info("volume %s/%s: releasing claim of gone machine %s", vol.metadata.namespace,
                 vol.metadata.name, claim.name)
        await self.client.patch(Volume, vol.metadata.name or "", {"spec": {"claimRef": None}},
                                namespace=vol.metadata.namespace)
