"""Exclusive attachment of Volumes, the machinepoollet's part: a Volume's ``status.attachment`` names
the one domain that uses it read-write (admission: :mod:`ironpool.apiserver.admission.volume_attachment`).

Before a domain uses a Volume, the poollet records the attachment on the revision its informer showed
free; a Volume attached elsewhere makes the Machine wait (``Ready=False``, naming the Volume and its
holder). Once the domain no longer has the Volume (detached, deleted, or its Machine moved away and
the old domain is gone), the poollet clears what its pool recorded; the pool lifecycle controller
clears it for a pool that fenced itself.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable, Sequence
from collections.abc import Set as AbstractSet

from ironpool.api.compute import Machine
from ironpool.api.errors import Conflict, NotFound
from ironpool.api.meta import now_rfc3339
from ironpool.api.storage import Volume
from ironpool.client.informer import Informer
from ironpool.client.rest import AsyncClient
from ironpool.iri.gen.machine.v1alpha1 import api_pb2 as mpb

log = logging.getLogger(__name__)


def attached_uid_index(v: Volume) -> list[str]:
    """The uid of the Machine a Volume is attached to (the Volume informer's ``attached-uid`` index)."""
    held = v.status.attachment if v.status is not None else None
    return [held.machine_ref.uid] if held is not None and held.machine_ref.uid else []


class Attachments:
    """Records and clears the attachments of the Volumes one machine pool's domains use."""

    def __init__(self, client: AsyncClient, volumes: Informer[Volume], pool: str) -> None:
        self.client = client
        self.volumes = volumes
        self.pool = pool

    def problem(self, machine: Machine, vol: Volume | None) -> str:
        """Why ``vol`` cannot be used yet: it is attached to another Machine's domain, or to this
        Machine's on another pool (it moved, and the old domain is not gone yet)."""
        held = vol.status.attachment if vol is not None and vol.status is not None else None
        if held is None or (held.machine_ref.uid == machine.metadata.uid and held.pool == self.pool):
            return ""
        since = f" since {held.since}" if held.since else ""
        return (f"attached to machine {held.machine_ref.name} on pool {held.pool}{since}; waiting until "
                "it is released or its host is fenced")

    async def attach(self, machine: Machine, volumes: Sequence[Volume]) -> None:
        """Record each Volume as attached to this machine's domain before the domain uses it, on the
        revision the informer showed free: of two pools that saw it free, one succeeds and the other
        gets a 409 (retried: it then waits, naming the holder)."""
        ref = {"name": machine.metadata.name, "uid": machine.metadata.uid}
        for vol in volumes:
            patch = {"metadata": {"resourceVersion": vol.metadata.resource_version},
                     "status": {"attachment": {"machineRef": ref, "pool": self.pool, "since": now_rfc3339()}}}
            await self.client.patch(Volume, vol.metadata.name or "", patch, namespace=vol.metadata.namespace,
                                    subresource="status")
            log.info("volume %s/%s: attached to machine %s on pool %s", vol.metadata.namespace,
                     vol.metadata.name, machine.metadata.name, self.pool)

    async def release(self, uid: str, keep: AbstractSet[str] = frozenset()) -> None:
        """Clear the attachments this pool recorded for the Machine ``uid`` (its domain no longer uses
        those Volumes), but for the Volumes named ``namespace/name`` in ``keep``."""
        for vol in self.volumes.by_index("attached-uid", uid):
            held = vol.status.attachment if vol.status is not None else None
            key = f"{vol.metadata.namespace}/{vol.metadata.name}"
            if held is None or held.pool != self.pool or key in keep:
                continue
            patch = {"metadata": {"resourceVersion": vol.metadata.resource_version},
                     "status": {"attachment": None}}
            with contextlib.suppress(NotFound, Conflict):  # gone, or changed: the next sweep looks again
                await self.client.patch(Volume, vol.metadata.name or "", patch,
                                        namespace=vol.metadata.namespace, subresource="status")
                log.info("volume %s: released by machine %s on pool %s", key, held.machine_ref.name,
                         self.pool)

    async def release_unused(self, machine: Machine, iri: mpb.Machine) -> None:
        """Release the attachments of Volumes the machine's domain no longer has."""
        ns = machine.metadata.namespace or "default"
        handles = {v.connection.handle for v in iri.spec.volumes if v.HasField("connection")}
        keep = set()
        for vol in self.volumes.by_index("attached-uid", machine.metadata.uid or ""):
            access = vol.status.access if vol.status is not None else None
            if access is not None and access.handle in handles:
                keep.add(f"{ns}/{vol.metadata.name}")
        await self.release(machine.metadata.uid or "", keep)

    async def sweep(self, live_uids: AbstractSet[str], bound: Iterable[Machine]) -> None:
        """Clear what this pool recorded for Machines that are neither bound here (per the informer)
        nor have a domain here (``live_uids``, from the runtime's last list): moved away or deleted
        while the poollet was busy or away."""
        here = {m.metadata.uid for m in bound}
        for vol in self.volumes.list():
            held = vol.status.attachment if vol.status is not None else None
            if held is None or held.pool != self.pool:
                continue
            uid = held.machine_ref.uid or ""
            if uid not in here and uid not in live_uids:
                await self.release(uid)
