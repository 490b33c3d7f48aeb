"""A pool's heartbeat: one ``coordination.k8s.io/v1`` Lease per pool, renewed by its poollet (kubelet's
node lease controller).

The Lease is named after the pool and lives in its kind's lease namespace
(:mod:`ironpool.api.fleet`); the poollet renews ``renewTime`` every ``interval`` (10 s) with
``leaseDurationSeconds`` ``duration`` (40 s), as a kubelet renews its node's Lease. A renewal is a few
hundred bytes instead of a whole pool status, and it says only "this poollet is alive": the pool's
``Ready`` condition keeps saying whether its runtime answers, and is written when it changes. The
pool lifecycle controller (``ironpool controller-manager``) reads the Leases and turns a pool whose
Lease stopped moving ``Ready=Unknown``.

A failed renewal is retried at once with a short backoff (200 ms doubling up to the interval), as the
kubelet does, so a brief apiserver failover costs no missed heartbeat.

A machinepoollet that fences itself (:mod:`ironpool.poollet.fencing`) publishes its ``fence_after`` in
the Lease's annotations; :attr:`PoolHeartbeat.last_renewed` is when a renewal last succeeded and
:attr:`PoolHeartbeat.taken_over` whether the Lease as last read carries the controller's mark.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable
from typing import Any

from ironpool.api.coordination import Lease, now_micro
from ironpool.api.errors import AlreadyExists, Conflict, NotFound
from ironpool.api.fleet import FENCED_ANNOTATION, lease_namespace
from ironpool.client.rest import AsyncClient
from ironpool.client.wire import resource_for_model
from ironpool.poollet.relist import sleep_or_stop

log = logging.getLogger(__name__)

LEASES = resource_for_model(Lease)


class PoolHeartbeat:
    """Renews the Lease of one pool; ``owner_uid`` gives the pool's uid once known (owner reference)."""

    def __init__(self, client: AsyncClient, pool_kind: str, pool: str, holder: str, interval: float = 10.0,
                 duration: float = 40.0, owner_uid: Callable[[], str | None] = lambda: None,
                 annotations: dict[str, str] | None = None) -> None:
        if not 0 < interval < duration:
            raise ValueError(f"the heartbeat interval ({interval}s) must be positive and shorter than the "
                             f"lease duration ({duration}s)")
        self.client = client
        self.pool_kind = pool_kind
        self.pool = pool
        self.namespace = lease_namespace(pool_kind)
        self.holder = holder
        self.interval = interval
        self.duration = duration
        self.owner_uid = owner_uid
        self.renewals = 0
        self.annotations = dict(annotations or {})  # published in the Lease (the fence-after)
        self.last_renewed: float | None = None  # monotonic time of the last successful renewal
        self.taken_over = False  # the Lease as last read or written carries the controller's mark
        self._lease: dict[str, Any] | None = None  # the Lease as last written (its resourceVersion)

    def _spec(self) -> dict[str, Any]:
        return {"holderIdentity": self.holder, "leaseDurationSeconds": math.ceil(self.duration),
                "renewTime": now_micro()}

    def _metadata(self) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": self.pool, "namespace": self.namespace}
        if self.annotations:
            meta["annotations"] = dict(self.annotations)
        uid = self.owner_uid()
        if uid:
            group = "compute.ironcore.dev" if self.pool_kind == "MachinePool" else "storage.ironcore.dev"
            meta["ownerReferences"] = [{"apiVersion": f"{group}/v1alpha1", "kind": self.pool_kind,
                                        "name": self.pool, "uid": uid}]
        return meta

    async def renew_once(self) -> None:
        """Create or renew the Lease; raises what the apiserver answered if it could not."""
        lease = self._lease
        if lease is None:
            try:
                lease = await self.client.get_raw(LEASES, self.pool, self.namespace)
            except NotFound:
                body = {"apiVersion": LEASES.api_version, "kind": "Lease", "metadata": self._metadata(),
                        "spec": {**self._spec(), "acquireTime": now_micro(), "leaseTransitions": 0}}
                try:
                    self._lease = await self.client.create_raw(LEASES, body, self.namespace)
                except AlreadyExists:
                    return  # another start of this poollet made it: renew it next time
                self._renewed()
                return
        spec = {**(lease.get("spec") or {}), **self._spec()}
        metadata = dict(lease.get("metadata") or {})
        if not metadata.get("ownerReferences"):
            metadata.update({k: v for k, v in self._metadata().items() if k == "ownerReferences"})
        # The controller's mark stays: only the controller removes it (see ironpool.poollet.fencing).
        metadata["annotations"] = {**(metadata.get("annotations") or {}), **self.annotations} or None
        self.taken_over = FENCED_ANNOTATION in (metadata.get("annotations") or {})
        try:
            self._lease = await self.client.update_raw(LEASES, {**lease, "metadata": metadata, "spec": spec},
                                                       self.namespace)
        except (Conflict, NotFound):
            self._lease = None  # someone else wrote or removed it: read it again and retry at once
            raise
        self._renewed()

    def _renewed(self) -> None:
        self.renewals += 1
        self.last_renewed = time.monotonic()
        annotations = ((self._lease or {}).get("metadata") or {}).get("annotations") or {}
        self.taken_over = FENCED_ANNOTATION in annotations

    async def run(self, stop: asyncio.Event) -> None:
        """Renew every ``interval`` until ``stop``; failures are retried with a short backoff."""
        delay = 0.2
        while not stop.is_set():
            try:
                await self.renew_once()
            except Exception as exc:
                log.warning("renewing the Lease %s/%s failed: %s; retrying in %.1fs", self.namespace,
                            self.pool, exc or type(exc).__name__, delay)
                if await sleep_or_stop(stop, delay):
                    return
                delay = min(delay * 2, self.interval)
                continue
            delay = 0.2
            if await sleep_or_stop(stop, self.interval):
                return
