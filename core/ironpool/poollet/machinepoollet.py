"""Wiring of the machinepoollet: informers → work queues → the pool and machine reconcilers.

``run_machinepoollet`` runs until ``stop`` is set; ``ironpool up`` calls it in-process and the
``ironpool machinepoollet`` command runs it as its own process.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from ironpool.api.compute import Machine, MachineClass, MachinePool
from ironpool.api.errors import NotFound
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
from ironpool.poollet.capacity import HostResources
from ironpool.poollet.classes import ClassMapper
from ironpool.poollet.collector import CollectOptions, OrphanCollector
from ironpool.poollet.heartbeat import PoolHeartbeat
from ironpool.poollet.machine_controller import MachineReconciler
from ironpool.poollet.machine_iri import volume_object_name
from ironpool.poollet.machine_nics import nic_object_name
from ironpool.poollet.machinepool import MachinePoolReconciler, PoolIdentity, announce_pool
from ironpool.poollet.ownership import Owner, Ownership, cluster_uid
from ironpool.poollet.relist import Relister, retry_until_ok, sleep_or_stop
from ironpool.poollet.secret_reader import SecretReader

log = logging.getLogger(__name__)


@dataclass
class MachinePoolletOptions:
    """Everything ``ironpool machinepoollet`` takes besides the API and IRI connections."""

    pool: str
    provider_id: str
    region: str | None = None
    zone: str | None = None
    addresses: Sequence[tuple[str, str]] = field(default_factory=tuple)
    workers: int = 4
    heartbeat_interval: float = 10.0
    lease_duration: float = 40.0
    status_report_interval: float = 300.0
    relist_period: float = 5.0
    resync_period: float = 60.0
    events_period: float = 10.0
    delete_requeue: float = 1.0
    capacity: HostResources | None = None
    reserved: HostResources = field(default_factory=lambda: HostResources(0, 0))
    gc: CollectOptions = field(default_factory=CollectOptions)
    sync_timeout: float = 120.0


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


def iri_machine_key(m: mpb.Machine) -> str | None:
    """``namespace/name`` of the Machine an IRI machine was made for, from its labels."""
    ns = m.metadata.labels.get(keys.MACHINE_NAMESPACE_LABEL)
    name = m.metadata.labels.get(keys.MACHINE_NAME_LABEL)
    return f"{ns}/{name}" if ns and name else None


class MachinePoollet:
    """One pool's controllers; exposed so tests and ``ironpool up`` can look inside."""

    def __init__(self, client: AsyncClient, runtime: AsyncMachineRuntimeClient,
                 options: MachinePoolletOptions) -> None:
        self.client = client
        self.runtime = runtime
        self.options = options
        self.identity = PoolIdentity(options.pool, options.provider_id, options.region, options.zone,
                                     tuple(options.addresses))
        self.machines: Informer[Machine] = Informer(
            client, Machine, field_selector=f"spec.machinePoolRef.name={options.pool}",
            indexers=_machine_indexers(),  # type: ignore[arg-type]
        )
        self.classes: Informer[MachineClass] = Informer(client, MachineClass)
        self.volumes: Informer[Volume] = Informer(client, Volume, indexers={"claim-uid": claim_uid_index})
        self.secrets = SecretReader(client)  # by name: a pool identity may not list or watch Secrets
        self.nics: Informer[NetworkInterface] = Informer(
            client, NetworkInterface, indexers=_nic_indexers(),  # type: ignore[arg-type]
        )
        self.networks: Informer[Network] = Informer(client, Network)
        self.mapper = ClassMapper()
        self.runtime_name = "iri"
        self.pool_reconciler = MachinePoolReconciler(
            client, runtime, self.identity, self.machines, self.classes, self.mapper,
            capacity=options.capacity, reserved=options.reserved,
            heartbeat_interval=options.heartbeat_interval,
            status_report_interval=options.status_report_interval,
        )
        self.heartbeat = PoolHeartbeat(client, "MachinePool", options.pool, options.pool,
                                       options.heartbeat_interval, options.lease_duration,
                                       lambda: self.pool_reconciler.pool_uid)
        self.pool_controller = Controller("machinepool", self.pool_reconciler.reconcile, workers=1)
        self.events = EventRecorder(client, "machinepoollet")
        self.machine_reconciler = MachineReconciler(
            client, runtime, options.pool, self.machines, self.classes, self.volumes, self.secrets,
            self.mapper, self.runtime_name, delete_requeue=options.delete_requeue, events=self.events,
            nics=self.nics, networks=self.networks,
        )
        self._forwarded: dict[tuple[str, int, str, str], None] = {}
        self.machine_controller = Controller("machine", self.machine_reconciler.reconcile,
                                             workers=options.workers)
        # Known once the apiserver answered (run); until then no runtime object counts as ours.
        self.ownership: Ownership | None = None
        self.collector: OrphanCollector | None = None
        self.relister: Relister[mpb.Machine] = Relister(
            self.runtime.list_machines, self.key_of_own, self.machine_controller.enqueue,
            options.relist_period, after_list=self._after_relist,
        )
        self._wire_handlers()

    def key_of_own(self, m: mpb.Machine) -> ObjectKey | None:
        """The Machine key of an IRI machine this poollet made (or adopts); None for others'."""
        if self.ownership is None or self.ownership.classify(m.metadata.labels) is Owner.FOREIGN:
            return None
        key = iri_machine_key(m)
        return ObjectKey.parse(key) if key else None

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
        self.pool_reconciler.on_classes_changed.append(self._enqueue_all)

    def _enqueue_all(self) -> None:
        for key in list(self.machines.keys()):
            self.machine_controller.enqueue(ObjectKey.parse(key))

    # -- garbage collection ----------------------------------------------------------------------

    async def _after_relist(self, items: Sequence[mpb.Machine]) -> None:
        if self.collector is not None and self.machines.has_synced:
            await self.collector.collect(items)

    async def machine_is_live(self, key: str, uid: str) -> bool:
        """Whether a Machine with ``uid`` still exists at ``key`` and is bound to this pool."""
        cached = self.machines.get(key)
        if cached is not None and cached.metadata.uid == uid:
            return True
        ns, _, name = key.partition("/")
        try:
            live: Machine = await self.client.get(Machine, name, ns)
        except NotFound:
            return False
        ref = live.spec.machine_pool_ref
        return live.metadata.uid == uid and ref is not None and ref.name == self.options.pool

    async def _report_on_pool(self, type_: str, reason: str, message: str) -> None:
        pool = MachinePool.model_validate({"metadata": {"name": self.options.pool,
                                                        "uid": self.pool_reconciler.pool_uid}})
        await self.events.record(pool, type_, reason, message)

    def _own(self, uid: str) -> None:
        self.ownership = Ownership(keys.MACHINE_POOL_LABEL, keys.MACHINE_CLUSTER_LABEL, self.options.pool,
                                   uid)
        self.machine_reconciler.owner_labels = self.ownership.labels()
        self.collector = OrphanCollector(
            "machine", self.ownership, keys.MACHINE_UID_LABEL, iri_machine_key, self.machine_is_live,
            lambda mid: self.runtime.delete_machine(mid, missing_ok=True), self.options.gc,
            self._report_on_pool,
        )
        self.pool_reconciler.collection = self.collector

    # -- runtime events --------------------------------------------------------------------------

    async def forward_events_once(self, since: int) -> None:
        """Re-emit runtime events (image errors, shutdowns, ...) as Events on their Machines."""
        for ev in await self.runtime.list_events(since=since):
            spec = ev.spec
            labels = spec.involved_object_meta.labels
            key = iri_machine_key(mpb.Machine(metadata=spec.involved_object_meta))
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

    # -- running -------------------------------------------------------------------------------

    async def _resync(self, stop: asyncio.Event) -> None:
        while not await sleep_or_stop(stop, self.options.resync_period):
            self._enqueue_all()

    async def run(self, stop: asyncio.Event, ready: asyncio.Event | None = None) -> None:
        version = await retry_until_ok(stop, self.runtime.version, "asking the machine runtime its version")
        uid = await retry_until_ok(stop, lambda: cluster_uid(self.client), "reading the cluster uid")
        if version is None or uid is None or await retry_until_ok(
                stop, lambda: announce_pool(self.client, MachinePool, self.identity),
                f"announcing MachinePool {self.options.pool}") is None:
            return
        self._own(uid)
        self.runtime_name = version.runtime_name or "iri"
        self.machine_reconciler.runtime_name = self.runtime_name
        informers = (self.machines, self.classes, self.volumes, self.nics, self.networks)
        for inf in informers:
            inf.start()
        try:
            await asyncio.gather(*(inf.wait_for_sync(self.options.sync_timeout) for inf in informers))
            # Like IronCore waiting for its class mapper: no machine is handled before classes are known.
            await self.pool_reconciler.refresh_classes()
            self.pool_controller.enqueue(ObjectKey(None, self.options.pool))
            self._enqueue_all()
            if ready is not None:
                ready.set()
            log.info("machinepoollet for pool %s running (runtime %s %s)", self.options.pool,
                     version.runtime_name, version.runtime_version)
            await asyncio.gather(
                self.heartbeat.run(stop),
                self.pool_controller.run(stop),
                self.machine_controller.run(stop),
                self.relister.run(stop),
                self._resync(stop),
                self._forward_events(stop),
            )
        finally:
            for inf in informers:
                await inf.stop()


async def run_machinepoollet(
    client: AsyncClient,
    iri_client: AsyncMachineRuntimeClient,
    options: MachinePoolletOptions,
    stop_event: asyncio.Event,
    ready: asyncio.Event | None = None,
) -> None:
    """Run a machinepoollet until ``stop_event`` is set (for ``ironpool up`` and tests)."""
    await MachinePoollet(client, iri_client, options).run(stop_event, ready)
