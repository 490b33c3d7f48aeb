"""The MachinePool reconciler: announce the pool, its Ready condition, classes, capacity and allocatable.

The runtime is probed every ``heartbeat_interval``; the status is written when it changes (IronCore's
``Ready=True/HeartbeatReceived`` or ``Ready=False/RuntimeUnreachable``) and at least every
``status_report_interval`` (kubelet's node status report frequency). Liveness is the pool's Lease
(:mod:`ironpool.poollet.heartbeat`), not these writes; the pool lifecycle controller
(:mod:`ironpool.fleet`) turns a pool whose Lease stopped ``Ready=Unknown``, and the next reconcile
here sets ``Ready`` back once the poollet runs again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ironpool.api.compute import Machine, MachineClass, MachinePool
from ironpool.api.errors import AlreadyExists, NotFound
from ironpool.client.controller import ObjectKey, Result
from ironpool.client.informer import Informer
from ironpool.client.rest import AsyncClient
from ironpool.iri.client import AsyncMachineRuntimeClient
from ironpool.poollet import keys
from ironpool.poollet.capacity import HostResources, local_host_resources, machine_pool_resources
from ironpool.poollet.classes import ClassMapper, RuntimeClass, capabilities_to_iri, machine_runtime_classes
from ironpool.poollet.collector import OrphanCollector
from ironpool.poollet.conditions import ProbeHealth, condition, now_rfc3339
from ironpool.poollet.machine_iri import status_differs

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PoolIdentity:
    """How a pool announces itself: name, provider ID, topology labels and addresses."""

    name: str
    provider_id: str
    region: str | None = None
    zone: str | None = None
    addresses: Sequence[tuple[str, str]] = field(default_factory=tuple)

    def labels(self) -> dict[str, str]:
        out: dict[str, str] = {}
        if self.region:
            out[keys.TOPOLOGY_REGION_LABEL] = self.region
        if self.zone:
            out[keys.TOPOLOGY_ZONE_LABEL] = self.zone
        return out


async def announce_pool(client: AsyncClient, model: type[Any], identity: PoolIdentity) -> Any:
    """Create the pool, or re-apply its provider ID and topology labels (manual edits are overwritten)."""
    labels = identity.labels()
    try:
        pool = await client.get(model, identity.name)
    except NotFound:
        obj = model.model_validate({"metadata": {"name": identity.name, "labels": labels},
                                    "spec": {"providerID": identity.provider_id}})
        try:
            return await client.create(obj)
        except AlreadyExists:
            pool = await client.get(model, identity.name)
    patch: dict[str, Any] = {}
    current = pool.metadata.labels or {}
    if any(current.get(k) != v for k, v in labels.items()):
        patch["metadata"] = {"labels": labels}
    if not pool.spec.provider_id:
        patch["spec"] = {"providerID": identity.provider_id}
    elif pool.spec.provider_id != identity.provider_id:
        log.warning("pool %s has providerID %r, not %r (immutable once set; keeping it)",
                    identity.name, pool.spec.provider_id, identity.provider_id)
    if patch:
        pool = await client.patch(model, identity.name, patch)
    return pool


class MachinePoolReconciler:
    """Keeps the MachinePool's status current; reconcile returns the heartbeat delay to requeue."""

    def __init__(
        self,
        client: AsyncClient,
        runtime: AsyncMachineRuntimeClient,
        identity: PoolIdentity,
        machines: Informer[Machine],
        classes: Informer[MachineClass],
        mapper: ClassMapper,
        capacity: HostResources | None = None,
        reserved: HostResources | None = None,
        heartbeat_interval: float = 10.0,
        probe_timeout: float = 5.0,
        status_report_interval: float = 300.0,
    ) -> None:
        self.client = client
        self.runtime = runtime
        self.identity = identity
        self.machines = machines
        self.classes = classes
        self.mapper = mapper
        self.capacity = capacity
        self.reserved = reserved or HostResources(0, 0)
        self.heartbeat_interval = heartbeat_interval
        self.status_report_interval = status_report_interval
        self.probe_timeout = probe_timeout
        self.health = ProbeHealth()
        self._last_write = 0.0
        self.on_classes_changed: list[Any] = []
        self.pool_uid: str | None = None
        self.collection: OrphanCollector | None = None  # its findings go on the pool's conditions

    async def refresh_classes(self) -> tuple[bool, str]:
        """Probe the runtime's ``Status``; updates the class mapper. Returns (ok, message)."""
        try:
            classes = machine_runtime_classes(await asyncio.wait_for(self.runtime.status(),
                                                                      self.probe_timeout))
        except Exception as exc:
            return self.health.record(False, f"machine runtime status probe failed: {exc}")
        # Quantities change with every machine; only a change of the classes themselves re-maps machines.
        def shape(cs: Sequence[RuntimeClass]) -> list[tuple[str, dict[str, int]]]:
            return [(c.name, dict(c.capabilities)) for c in cs]

        changed = shape(classes) != shape(self.mapper.classes)
        self.mapper.classes = classes
        if changed:
            for cb in self.on_classes_changed:
                cb()
        return self.health.record(True, "machine runtime status probe succeeded")

    def host(self) -> HostResources:
        return self.capacity or local_host_resources()

    def desired_status(self, pool: MachinePool, ok: bool, message: str, now: str) -> dict[str, Any]:
        offered: dict[str, dict[str, int]] = {}
        caps_by_class: dict[str, dict[str, int]] = {}
        for mc in self.classes.list():
            name = mc.metadata.name or ""
            caps = capabilities_to_iri(mc.capabilities)
            caps_by_class[name] = caps
            if self.mapper.lookup(name, caps).runtime_class is not None:
                offered[name] = caps
        bound = [caps_by_class[m.spec.machine_class_ref.name] for m in self.machines.list()
                 if m.spec.machine_class_ref.name in caps_by_class
                 and m.spec.machine_pool_ref is not None
                 and m.spec.machine_pool_ref.name == self.identity.name]
        capacity = self.host()
        allocatable = capacity.minus(self.reserved)
        cap, alloc = machine_pool_resources(capacity, allocatable, offered, bound)
        previous = pool.status.conditions if pool.status else None
        ready = condition("Ready", "True" if ok else "False",
                          "HeartbeatReceived" if ok else "RuntimeUnreachable", message, previous, now,
                          lastUpdateTime=now, observedGeneration=pool.metadata.generation)
        conditions = [ready]
        if self.collection is not None:
            c = self.collection
            conditions.append(c.status.condition(c.what, c.options.grace, previous, now))
        return {
            "state": "Ready",
            "conditions": conditions,
            "availableMachineClasses": [{"name": n} for n in sorted(offered)],
            "addresses": [{"type": t, "address": a} for t, a in self.identity.addresses],
            "capacity": cap,
            "allocatable": alloc,
        }

    async def reconcile(self, key: ObjectKey) -> Result:
        ok, message = await self.refresh_classes()
        try:
            pool = await self.client.get(MachinePool, self.identity.name)
        except NotFound:
            pool = await announce_pool(self.client, MachinePool, self.identity)
        self.pool_uid = pool.metadata.uid
        labels = pool.metadata.labels or {}
        if any(labels.get(k) != v for k, v in self.identity.labels().items()):
            pool = await announce_pool(self.client, MachinePool, self.identity)
        now = now_rfc3339()
        status = self.desired_status(pool, ok, message, now)
        current = pool.status.to_dict() if pool.status else {}
        report_due = time.monotonic() - self._last_write >= self.status_report_interval
        # Compare without the update stamp: only real changes (or the periodic report) are written.
        cur_cmp = {**current, "conditions": [{k: v for k, v in c.items() if k != "lastUpdateTime"}
                                             for c in current.get("conditions") or []]}
        want_cmp = {**status, "conditions": [{k: v for k, v in c.items() if k != "lastUpdateTime"}
                                             for c in status["conditions"]]}
        if report_due or status_differs(cur_cmp, want_cmp):
            await self.client.patch(MachinePool, self.identity.name, {"status": status}, subresource="status")
            self._last_write = time.monotonic()
        return Result(requeue_after=self.heartbeat_interval)
