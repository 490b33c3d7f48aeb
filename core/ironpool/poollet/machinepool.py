"""The MachinePool reconciler: the pool's Ready condition, classes, capacity and allocatable.

``capacity`` is the host's; ``allocatable`` what ironpool machines may be given in total: the host's
cores times the CPU allocation ratio less the reserved cores, its memory less the reserved memory
(Nova's ``cpu_allocation_ratio`` and reserved host memory). The class counts in ``allocatable`` say
how many more fit now, beside the bound Machines and what Reservations hold here unused.

The runtime is probed every ``heartbeat_interval``; :class:`~ironpool.poollet.pool.PoolReport` finds
the pool and writes its status. The pool lifecycle controller (:mod:`ironpool.fleet`) turns a pool
whose Lease stopped ``Ready=Unknown``, and the next reconcile here sets ``Ready`` back once the
poollet runs again.
"""

from __future__ import annotations

import math
from typing import Any

from ironpool.api import reservation as rsv
from ironpool.api.compute import Machine, MachineClass, MachinePool, Reservation
from ironpool.api.quantity import parse_quantity
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
        cpu_allocation_ratio: float = 1.0,
        reservations: Informer[Reservation] | None = None,
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
        self.cpu_allocation_ratio = cpu_allocation_ratio
        self.reservations = reservations
        #: the console endpoint's port, published as ``status.daemonEndpoints`` (None: no endpoint)
        self.exec_port: int | None = None

    def runtime_classes(self, status: Any) -> list[RuntimeClass]:
        return machine_runtime_classes(status)

    def host(self) -> HostResources:
        return self.capacity or local_host_resources()

    def held_unused(self, bound: list[Machine],
                    caps_by_class: dict[str, dict[str, int]]) -> list[dict[str, int]]:
        """What Reservations hold on this pool that no Machine bound here within them uses, as
        cpu/memory amounts (one entry per Reservation)."""
        out: list[dict[str, int]] = []
        for r in self.reservations.list() if self.reservations is not None else ():
            part = rsv.held(r.to_dict()).get(self.identity.name)
            if not part:
                continue
            held = {"cpu": 0, "memory": 0}
            for key, value in part.items():
                cls = rsv.class_of_key(str(key))
                amount = parse_quantity(value)
                if cls is None:
                    held[str(key)] = held.get(str(key), 0) + amount.value()
                else:
                    for res, v in caps_by_class.get(cls, {}).items():
                        held[res] = held.get(res, 0) + v * amount.value()
            for m in bound:
                if rsv.reservation_of(m.to_dict()) == r.metadata.name and \
                        m.metadata.namespace == r.metadata.namespace:
                    for res, v in caps_by_class[m.spec.machine_class_ref.name].items():
                        held[res] = held.get(res, 0) - v
            out.append({res: max(0, v) for res, v in held.items()})
        return out

    def desired_status(self, pool: MachinePool, ok: bool, message: str, now: str) -> dict[str, Any]:
        offered: dict[str, dict[str, int]] = {}
        caps_by_class: dict[str, dict[str, int]] = {}
        for mc in self.classes.list():
            name = mc.metadata.name or ""
            caps = capabilities_to_iri(mc.capabilities)
            caps_by_class[name] = caps
            if self.mapper.lookup(name, caps).runtime_class is not None:
                offered[name] = caps
        mine = [m for m in self.machines.list() if m.spec.machine_class_ref.name in caps_by_class
                and m.spec.machine_pool_ref is not None
                and m.spec.machine_pool_ref.name == self.identity.name]
        bound = [caps_by_class[m.spec.machine_class_ref.name] for m in mine]
        bound += self.held_unused(mine, caps_by_class)
        capacity = self.host()
        allocatable = HostResources(math.floor(capacity.cpu * self.cpu_allocation_ratio + 1e-9),
                                    capacity.memory).minus(self.reserved)
        cap, alloc = machine_pool_resources(capacity, allocatable, offered, bound)
        conditions = self.report.conditions(pool, ok, message, now)
        return {
            "state": "Ready",
            "conditions": conditions,
            "availableMachineClasses": [{"name": n} for n in sorted(offered)],
            "addresses": [{"type": t, "address": a} for t, a in self.identity.addresses],
            "daemonEndpoints": ({"machinepoolletEndpoint": {"port": self.exec_port}}
                                if self.exec_port is not None else None),
            "capacity": cap,
            "allocatable": alloc,
        }
