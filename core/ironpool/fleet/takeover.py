"""The pool lifecycle controller's writes when it takes over a silent pool whose poollet fences itself
(decisions in :mod:`ironpool.fleet.fence_timing`, the poollet's side in :mod:`ironpool.poollet.fencing`).

1. **Mark** the pool's Lease (:data:`~ironpool.api.fleet.FENCED_ANNOTATION`) with an update on the
   resourceVersion the controller saw go stale. The poollet renews on its own last revision, so exactly
   one of the two writes succeeds: a poollet that came back first was never taken over, and one that
   finds the mark keeps its domains off.
2. Per Machine to move: **release** the Volumes the fenced host held for it (``status.attachment``, on
   the revision read), then evict it. A Machine is evicted only once its Volumes are free, so the host
   it lands on never waits on a fenced one, and never writes a Volume the old domain still could.
3. **Unmark** the Lease once no Machine to move is bound to the pool: the poollet starts what stayed
   (nothing, or Machines that opted out and never stopped) and the unreachable taint may go.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from ironpool.api.compute import Machine
from ironpool.api.coordination import Lease
from ironpool.api.errors import ApiError, Conflict, NotFound
from ironpool.api.fleet import FENCED_ANNOTATION
from ironpool.api.storage import Volume
from ironpool.client.informer import Informer
from ironpool.client.rest import AsyncClient
from ironpool.client.wire import ServerUnreachable, resource_for_model

log = logging.getLogger(__name__)

LEASES = resource_for_model(Lease)


def attached_uid(v: Volume) -> list[str]:
    held = v.status.attachment if v.status is not None else None
    return [held.machine_ref.uid] if held is not None and held.machine_ref.uid else []


def marked(lease: Lease | None) -> bool:
    return lease is not None and FENCED_ANNOTATION in (lease.metadata.annotations or {})


class Takeover:
    """The writes of a takeover (module docstring), each on the revision it was decided on."""

    def __init__(self, client: AsyncClient, volumes: Informer[Volume]) -> None:
        self.client = client
        self.volumes = volumes
        #: per pool, the Lease revision this controller wrote last (its own write is no renewal)
        self.written: dict[str, str] = {}

    async def _write_lease(self, lease: Lease, resource_version: str, mark: bool) -> bool:
        body = lease.to_dict()
        meta = body.setdefault("metadata", {})
        meta["resourceVersion"] = resource_version
        annotations = dict(meta.get("annotations") or {})
        if mark:
            annotations[FENCED_ANNOTATION] = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        else:
            annotations.pop(FENCED_ANNOTATION, None)
        meta["annotations"] = annotations or None
        try:
            stored = await self.client.update_raw(LEASES, body, lease.metadata.namespace)
        except (Conflict, NotFound):
            return False  # the poollet renewed first (or the Lease went): nothing taken over
        except (ApiError, ServerUnreachable) as exc:
            log.warning("writing the Lease %s/%s failed: %s", lease.metadata.namespace, lease.metadata.name,
                        exc)
            return False
        self.written[lease.metadata.name or ""] = str((stored.get("metadata") or {}).get("resourceVersion"))
        return True

    async def mark(self, lease: Lease, stale_version: str) -> bool:
        """Mark ``lease`` taken over, only if it is still at ``stale_version``."""
        return await self._write_lease(lease, stale_version, mark=True)

    async def unmark(self, lease: Lease) -> bool:
        return await self._write_lease(lease, lease.metadata.resource_version or "", mark=False)

    async def release_volumes(self, machine: Machine, pool: str) -> bool:
        """Clear the attachments ``pool`` holds for ``machine``; False if one could not be cleared."""
        for vol in self.volumes.by_index("attached-uid", machine.metadata.uid or ""):
            held = vol.status.attachment if vol.status is not None else None
            if held is None or held.pool != pool:
                continue
            patch: dict[str, Any] = {"metadata": {"resourceVersion": vol.metadata.resource_version},
                                     "status": {"attachment": None}}
            try:
                await self.client.patch(Volume, vol.metadata.name or "", patch,
                                        namespace=vol.metadata.namespace, subresource="status")
            except NotFound:
                continue
            except (ApiError, ServerUnreachable) as exc:
                log.warning("releasing volume %s/%s of fenced pool %s failed: %s", vol.metadata.namespace,
                            vol.metadata.name, pool, exc)
                return False
            log.warning("volume %s/%s: released from machine %s on fenced pool %s", vol.metadata.namespace,
                        vol.metadata.name, machine.metadata.name, pool)
        return True
