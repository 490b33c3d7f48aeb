"""The MachinePool reconciler: the pool's Ready condition, classes, capacity and allocatable.

The runtime is probed every ``heartbeat_interval``; :class:`~ironpool.poollet.pool.PoolReport` finds
the pool and writes its status. The pool lifecycle controller (:mod:`ironpool.fleet`) turns a pool
whose Lease stopped ``Ready=Unknown``, and the next reconcile here sets ``Ready`` back once the
poollet runs again.
"""

from __future__ import annotations

from typing import Any

from ironpool.api.compute import Machine, MachineClass, MachinePool
from ironpool.client.informer import Informer
from ironpool.client.rest import AsyncClient
from ironpool.iri.client import AsyncMachineRuntimeClient
from ironpool.poollet.capacity import HostResources, local_host_resources, machine_pool_resources
from ironpool.poollet.classes import ClassMapper, RuntimeClass, capabilities_to_iri, machine_runtime_classes
from ironpool.poollet.pool import PoolIdentity, PoolReconciler


class MachinePoolReconciler(PoolReconciler):
    """Keeps the MachinePool's status current; reconcile returns the heartbeat delay to requeue."""

    what = "machine"

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
        super().__init__(client, runtime, MachinePool, identity, mapper, heartbeat_interval, probe_timeout,
                         status_report_interval)
        self.machines = machines
        self.classes = classes
        self.capacity = capacity
        self.reserved = reserved or HostResources(0, 0)

    def runtime_classes(self, status: Any) -> list[RuntimeClass]:
        return machine_runtime_classes(status)

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
        conditions = self.report.conditions(pool, ok, message, now)
        return {
            "state": "Ready",
            "conditions": conditions,
            "availableMachineClasses": [{"name": n} for n in sorted(offered)],
            "addresses": [{"type": t, "address": a} for t, a in self.identity.addresses],
            "capacity": cap,
            "allocatable": alloc,
        }
