"""Wiring of the machinepoollet: informers → work queues → the pool and machine reconcilers.

``run_machinepoollet`` runs until ``stop`` is set; ``ironpool up`` calls it in-process and the
``ironpool machinepoollet`` command runs it as its own process. What every poollet does is
:class:`~ironpool.poollet.base.Poollet`'s; here are the machine pool's informers, which changes wake
which Machines, and the runtime's events forwarded as Events on their Machines.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field

from ironpool.api.compute import Machine, MachineClass, MachinePool, Reservation
from ironpool.api.errors import NotFound
from ironpool.api.fleet import FENCE_AFTER_ANNOTATION
from ironpool.api.meta import object_key
from ironpool.api.networking import Network, NetworkInterface
from ironpool.api.storage import Volume
from ironpool.client.controller import Controller, ObjectKey
from ironpool.client.events import EventRecorder
from ironpool.client.informer import Informer
from ironpool.client.rest import AsyncClient
from ironpool.iri.client import AsyncMachineRuntimeClient
from ironpool.iri.gen.machine.v1alpha1 import api_pb2 as mpb
from ironpool.poollet import keys
from ironpool.poollet.base import PoolKind, Poollet, PoolletOptions
from ironpool.poollet.capacity import HostResources
from ironpool.poollet.classes import ClassMapper
from ironpool.poollet.exec_server import ConsoleEndpoint
from ironpool.poollet.fencing import Fencer, check_fence_after
from ironpool.poollet.machine_controller import MachineReconciler
from ironpool.poollet.machine_iri import volume_object_name
from ironpool.poollet.machine_nics import nic_object_name
from ironpool.poollet.machinepool import MachinePoolReconciler
from ironpool.poollet.pool import PoolIdentity
from ironpool.poollet.relist import sleep_or_stop
from ironpool.poollet.reservation_controller import ReservationReconciler
from ironpool.poollet.secret_reader import SecretReader
from ironpool.poollet.volume_attachments import attached_uid_index

log = logging.getLogger(__name__)

MACHINES = PoolKind("machine", Machine, MachinePool, keys.MACHINE_POOL_LABEL, keys.MACHINE_CLUSTER_LABEL,
                    keys.MACHINE_UID_LABEL, keys.MACHINE_NAMESPACE_LABEL, keys.MACHINE_NAME_LABEL)


@dataclass
class MachinePoolletOptions(PoolletOptions):
    """Everything ``ironpool machinepoollet`` takes besides the API and IRI connections."""

    addresses: Sequence[tuple[str, str]] = field(default_factory=tuple)
    events_period: float = 10.0
    capacity: HostResources | None = None
    reserved: HostResources = field(default_factory=lambda: HostResources(0, 0))
    #: virtual cores per host core machines may be given (Nova's cpu_allocation_ratio)
    cpu_allocation_ratio: float = 1.0
    #: where the console endpoint listens (:mod:`ironpool.poollet.exec_server`; port 0: a free one);
    #: None, or no ``exec_token``: no endpoint, and the pool publishes no ``daemonEndpoints``
    exec_address: tuple[str, int] | None = None
    #: the bearer token the apiserver presents to the console endpoint
    exec_token: str | None = None
    exec_ping_interval: float = 20.0
    #: seconds without a Lease renewal after which the poollet shuts off its Machines' domains
    #: (:mod:`ironpool.poollet.fencing`); 0: never
    fence_after: float = 0.0


def _machine_indexers() -> dict[str, object]:
    def by_volume(m: Machine) -> list[str]:
        ns = m.metadata.namespace or "default"
        return [f"{ns}/{n}" for n in (volume_object_name(m, v) for v in m.spec.volumes or []) if n]

    def by_class(m: Machine) -> list[str]:
        return [m.spec.machine_class_ref.name]

    def by_nic(m: Machine) -> list[str]:
        ns = m.metadata.namespace or "default"
        names = (nic_object_name(m, nic) for nic in m.spec.network_interfaces or [])
        return [f"{ns}/{n}" for n in names if n]

    return {"volume": by_volume, "class": by_class, "nic": by_nic}


def claim_uid_index(v: Volume) -> list[str]:
    ref = v.spec.claim_ref
    return [ref.uid] if ref is not None and ref.uid else []


def _nic_indexers() -> dict[str, object]:
    def by_machine(n: NetworkInterface) -> list[str]:
        ref = n.spec.machine_ref
        return [ref.uid] if ref is not None and ref.uid else []

    def by_network(n: NetworkInterface) -> list[str]:
        ref = n.spec.network_ref
        return [f"{n.metadata.namespace or 'default'}/{ref.name}"] if ref is not None else []

    return {"machine-uid": by_machine, "network": by_network}


class MachinePoollet(Poollet[mpb.Machine]):
    """One machine pool's controllers; exposed so tests and ``ironpool up`` can look inside."""

    kind = MACHINES
    options: MachinePoolletOptions
    runtime: AsyncMachineRuntimeClient
    pool_reconciler: MachinePoolReconciler

    def __init__(self, client: AsyncClient, runtime: AsyncMachineRuntimeClient,
                 options: MachinePoolletOptions) -> None:
        super().__init__(client, runtime, options, PoolIdentity(
            options.pool, options.provider_id, options.region, options.zone, tuple(options.addresses)))
        self.machines: Informer[Machine] = Informer(
            client, Machine, field_selector=f"spec.machinePoolRef.name={options.pool}",
            indexers=_machine_indexers(),  # type: ignore[arg-type]
        )
        self.classes: Informer[MachineClass] = Informer(client, MachineClass)
        self.volumes: Informer[Volume] = Informer(client, Volume, indexers={
            "claim-uid": claim_uid_index, "attached-uid": attached_uid_index})
        self.secrets = SecretReader(client)  # by name: a pool identity may not list or watch Secrets
        self.nics: Informer[NetworkInterface] = Informer(
            client, NetworkInterface, indexers=_nic_indexers(),  # type: ignore[arg-type]
        )
        self.networks: Informer[Network] = Informer(client, Network)
        self.reservations: Informer[Reservation] = Informer(client, Reservation)
        self.informers = (self.machines, self.classes, self.volumes, self.nics, self.networks,
                          self.reservations)
        self.objects = self.machines
        self.mapper = ClassMapper()
        self.pool_reconciler = MachinePoolReconciler(
            client, runtime, self.identity, self.machines, self.classes, self.mapper,
            capacity=options.capacity, reserved=options.reserved,
            cpu_allocation_ratio=options.cpu_allocation_ratio, reservations=self.reservations,
            heartbeat_interval=options.heartbeat_interval,
            status_report_interval=options.status_report_interval,
        )
        self.pool_controller = Controller("machinepool", self.pool_reconciler.reconcile, workers=1)
        self.reconciler = self.machine_reconciler = MachineReconciler(
            client, runtime, options.pool, self.machines, self.classes, self.volumes, self.secrets,
            self.mapper, self.runtime_name, delete_requeue=options.delete_requeue, events=self.events,
            nics=self.nics, networks=self.networks,
        )
        self.fencer: Fencer | None = None
        if options.fence_after:
            check_fence_after(options.fence_after, options.heartbeat_interval)
            self.heartbeat.annotations[FENCE_AFTER_ANNOTATION] = f"{options.fence_after:g}"
            self.fencer = Fencer(options.fence_after, self.heartbeat, self.machines, runtime,
                                 lambda: dict(self.reconciler.owner_labels), self._fence_changed,
                                 self._bound_here)
            # Its own recorder: an Event that could not be written (still cut off) is written again.
            self._fence_events = EventRecorder(client, "machinepoollet", dedupe_seconds=0)
            self.machine_reconciler.holds_off = self.fencer.holds_off
            self.pool_reconciler.report.extra_conditions.append(self.fencer.condition)
        self._forwarded: dict[tuple[str, int, str, str], None] = {}
        self.object_controller = self.machine_controller = Controller(
            "machine", self.machine_reconciler.reconcile, workers=options.workers)
        self.relister = self._relister(self.runtime.list_machines)
        self.reservation_reconciler = ReservationReconciler(
            client, runtime, options.pool, self.reservations, self.classes, self.mapper, self.events,
            options.delete_requeue)
        self.reservation_controller = Controller("reservation", self.reservation_reconciler.reconcile,
                                                 workers=2)
        self.console: ConsoleEndpoint | None = None
        if options.exec_address is not None and options.exec_token:
            host, port = options.exec_address
            self.console = ConsoleEndpoint(self.find_runtime_machine, runtime.exec, options.exec_token, host,
                                           port, options.exec_ping_interval)
        self._wire_handlers()

    # -- event handlers ------------------------------------------------------------------------

    def _wire_handlers(self) -> None:
        mc, pool_key = self.machine_controller, ObjectKey(None, self.options.pool)

        def machine_changed(m: Machine) -> None:
            mc.enqueue(ObjectKey.of(m))
            self.pool_controller.enqueue(pool_key)

        def machine_deleted(m: Machine) -> None:
            self.machine_reconciler.deleted[object_key(m)] = m.metadata.uid or ""
            machine_changed(m)

        self.machines.add_event_handler(
            on_add=machine_changed,
            on_update=lambda old, new: mc.enqueue(ObjectKey.of(new)),
            on_delete=machine_deleted,
        )

        def dependents(index: str, obj: Volume | NetworkInterface) -> None:
            ref = f"{obj.metadata.namespace or 'default'}/{obj.metadata.name}"
            for m in self.machines.by_index(index, ref):
                mc.enqueue(ObjectKey.of(m))

        self.volumes.add_event_handler(
            on_add=lambda v: dependents("volume", v),
            on_update=lambda old, new: dependents("volume", new),
            on_delete=lambda v: dependents("volume", v),
        )
        self.nics.add_event_handler(
            on_add=lambda n: dependents("nic", n),
            on_update=lambda old, new: dependents("nic", new),
            on_delete=lambda n: dependents("nic", n),
        )

        def network_changed(net: Network) -> None:
            key = f"{net.metadata.namespace or 'default'}/{net.metadata.name}"
            for nic in self.nics.by_index("network", key):
                dependents("nic", nic)

        self.networks.add_event_handler(on_add=network_changed, on_update=lambda o, n: network_changed(n),
                                        on_delete=network_changed)

        def class_changed(c: MachineClass) -> None:
            self.pool_controller.enqueue(pool_key)
            for m in self.machines.by_index("class", c.metadata.name or ""):
                mc.enqueue(ObjectKey.of(m))

        self.classes.add_event_handler(on_add=class_changed, on_update=lambda o, n: class_changed(n),
                                       on_delete=class_changed)

        rc = self.reservation_controller

        def reservation_changed(r: Reservation) -> None:
            rc.enqueue(ObjectKey.of(r))
            self.pool_controller.enqueue(pool_key)  # what it holds here is not allocatable

        def reservation_deleted(r: Reservation) -> None:
            self.reservation_reconciler.deleted[object_key(r)] = r.metadata.uid or ""
            reservation_changed(r)

        self.reservations.add_event_handler(on_add=reservation_changed,
                                            on_update=lambda old, new: reservation_changed(new),
                                            on_delete=reservation_deleted)
        self.pool_reconciler.on_classes_changed.append(self.enqueue_all)

    # -- the console endpoint ----------------------------------------------------------------------

    async def run(self, stop: asyncio.Event, ready: asyncio.Event | None = None) -> None:
        """The base's run, with the console endpoint listening first: the pool's status, written as
        the poollet starts, publishes its port."""
        if self.console is None:
            await super().run(stop, ready)
            return
        await self.console.start()
        self.pool_reconciler.exec_port = self.console.port
        try:
            await super().run(stop, ready)
        finally:
            await self.console.stop()

    async def find_runtime_machine(self, namespace: str, name: str) -> str:
        """The IRI machine id of this pool's Machine ``namespace/name`` (found by its uid, so a Machine
        made again under the same name never reaches the old one's console); LookupError if none."""
        machine = self.machines.get(f"{namespace}/{name}")
        if machine is None or not self.wants_here(machine):
            raise LookupError(f"Machine {namespace}/{name} is not bound to MachinePool {self.options.pool}")
        found = await self.runtime.list_machines(labels={keys.MACHINE_UID_LABEL: machine.metadata.uid or ""})
        if not found:
            raise LookupError(f"Machine {namespace}/{name} has no machine in the runtime of MachinePool "
                              f"{self.options.pool} yet")
        return found[0].metadata.id

    # -- what the base asks ------------------------------------------------------------------------

    def wants_here(self, machine: Machine) -> bool:
        """A Machine evicted and bound elsewhere wants its IRI machine there, not here."""
        return self.machine_reconciler.pool_of(machine) == self.options.pool

    async def after_relist(self, items: Sequence[mpb.Machine]) -> None:
        await super().after_relist(items)
        if self.machines.has_synced and self.volumes.has_synced:
            live = {m.metadata.labels.get(keys.MACHINE_UID_LABEL, "") for m in items}
            if self.fencer is not None:
                self.fencer.forget_gone(live)
            try:
                await self.machine_reconciler.attachments.sweep(live, self.machines.list())
            except Exception as exc:  # the next relist sweeps again
                log.debug("releasing stale volume attachments failed: %s", exc)

    async def delete_orphan(self, runtime_id: str) -> None:
        await self.runtime.delete_machine(runtime_id, missing_ok=True)

    def own(self, uid: str) -> None:
        super().own(uid)
        assert self.ownership is not None
        self.reservation_reconciler.owner_labels = self.ownership.labels()

    async def prepare(self) -> None:
        # Like IronCore waiting for its class mapper: no machine is handled before classes are known.
        # The pool's status (classes, allocatable, Ready) is written before the poollet is ready, so
        # whoever is told "ironpool is up" finds a pool the scheduler can place on.
        try:
            await self.pool_reconciler.reconcile(self.pool_key)
        except Exception as exc:  # the pool controller retries; a hiccup here must not stop the poollet
            log.warning("reporting MachinePool %s failed: %s; retrying", self.options.pool, exc)
            self.pool_controller.enqueue(self.pool_key)
        else:
            self.pool_controller.queue.add_after(self.pool_key, self.options.heartbeat_interval)
        await self._release_orphaned_reservations()
        for key in list(self.reservations.keys()):
            self.reservation_controller.enqueue(ObjectKey.parse(key))

    async def _release_orphaned_reservations(self) -> None:
        """Runtime reservations this installation's poollet made for Reservations that are gone (deleted
        while this poollet was away, their finalizer removed by someone)."""
        rr = self.reservation_reconciler
        live = {r.metadata.uid for r in self.reservations.list()}
        for found in await rr.list_runtime(rr.owner_labels):
            if found.metadata.labels.get(keys.RESERVATION_UID_LABEL) not in live:
                log.info("deleting runtime reservation %s: its Reservation is gone", found.metadata.id)
                await rr.delete_runtime(found.metadata.id)

    async def _bound_here(self, key: str, uid: str) -> bool:
        """Whether the Machine ``key`` with ``uid`` is bound to this pool, read from the apiserver."""
        ns, _, name = key.partition("/")
        try:
            live = await self.client.get(Machine, name, ns)
        except NotFound:
            return False
        return bool(live.metadata.uid == uid and self.wants_here(live))

    async def _report_fence(self, type_: str, reason: str, message: str) -> bool:
        meta = {"name": self.options.pool, "uid": self.pool_report.uid}
        pool = MachinePool.model_validate({"metadata": meta})
        return await self._fence_events.record(pool, type_, reason, message)

    def _fence_changed(self) -> None:
        """Fenced or restored: every Machine is reconciled (power as declared, or held off) and the
        pool's ``Fenced`` condition written."""
        self.enqueue_all()
        self.pool_controller.enqueue(self.pool_key)

    def loops(self, stop: asyncio.Event) -> Sequence[Awaitable[None]]:
        fencing = () if self.fencer is None else (self.fencer.run(stop, self._report_fence),)
        return (self._forward_events(stop), self.reservation_controller.run(stop),
                self._resync_reservations(stop), *fencing)

    async def _resync_reservations(self, stop: asyncio.Event) -> None:
        while not await sleep_or_stop(stop, self.options.resync_period):
            for key in list(self.reservations.keys()):
                self.reservation_controller.enqueue(ObjectKey.parse(key))

    # -- runtime events --------------------------------------------------------------------------

    async def forward_events_once(self, since: int) -> None:
        """Re-emit runtime events (image errors, shutdowns, ...) as Events on their Machines."""
        for ev in await self.runtime.list_events(since=since):
            spec = ev.spec
            labels = spec.involved_object_meta.labels
            key = MACHINES.api_key(mpb.Machine(metadata=spec.involved_object_meta))
            ident = (spec.involved_object_meta.id, spec.event_time, spec.reason, spec.message)
            if key is None or ident in self._forwarded:
                continue
            self._forwarded[ident] = None
            machine = self.machines.get(key)
            if machine is None or machine.metadata.uid != labels.get(keys.MACHINE_UID_LABEL):
                continue
            await self.events.record(machine, spec.type or "Normal", spec.reason or "RuntimeEvent",
                                     spec.message, spec.action)
        while len(self._forwarded) > 2048:  # dicts keep insertion order: drop the oldest
            del self._forwarded[next(iter(self._forwarded))]

    async def _forward_events(self, stop: asyncio.Event) -> None:
        since = int(time.time())
        while not await sleep_or_stop(stop, self.options.events_period):
            now = int(time.time())
            try:
                await self.forward_events_once(max(0, since - 1))  # seconds resolution: overlap by one
                since = now
            except Exception as exc:
                log.debug("listing runtime events failed: %s", exc)

async def run_machinepoollet(
    client: AsyncClient,
    iri_client: AsyncMachineRuntimeClient,
    options: MachinePoolletOptions,
    stop_event: asyncio.Event,
    ready: asyncio.Event | None = None,
) -> None:
    """Run a machinepoollet until ``stop_event`` is set (for ``ironpool up`` and tests)."""
    await MachinePoollet(client, iri_client, options).run(stop_event, ready)
