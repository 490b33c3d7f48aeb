"""The Machine reconciler of the machinepoollet (IronCore's ``MachineReconciler``).

``reconcile("ns/name")`` is idempotent and crash-safe: the IRI machine is always found again by the
``machine-uid`` label before anything is created, so a poollet killed between ``CreateMachine`` and
the status write finds its machine on restart instead of making a second domain.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc
import grpc.aio

from ironpool.api.compute import Machine, MachineClass
from ironpool.api.core import Secret
from ironpool.api.errors import Conflict, NotFound
from ironpool.api.meta import now_rfc3339
from ironpool.api.networking import Network, NetworkInterface
from ironpool.api.reservation import RESERVATION_LABEL
from ironpool.api.storage import Volume
from ironpool.client.controller import DONE, Result, TerminalError
from ironpool.client.events import EventRecorder
from ironpool.client.informer import Informer
from ironpool.client.rest import AsyncClient
from ironpool.iri import guest_data
from ironpool.iri.client import AsyncMachineRuntimeClient
from ironpool.iri.encryption import KEY_NAME as ENCRYPTION_KEY
from ironpool.iri.gen.machine.v1alpha1 import api_pb2 as mpb
from ironpool.iri.reservations import RESERVATION_KEY_ANNOTATION
from ironpool.poollet import keys
from ironpool.poollet.classes import ClassMapper, capabilities_to_iri
from ironpool.poollet.machine_iri import (
    ConnectionSource,
    build_machine,
    compute_status,
    connection_volume,
    desired_power,
    device_names,
    error_reason,
    failed_status,
    local_disk_volume,
    volume_object_name,
    waiting_status,
)
from ironpool.poollet.machine_nics import (
    NicRef,
    controlled_by,
    iri_nic,
    mapping_annotation,
    nic_object_name,
    nic_problem,
    ssh_endpoint,
)
from ironpool.poollet.machine_plan import apply, plan
from ironpool.poollet.reconciler import PoolObjectReconciler
from ironpool.poollet.secret_reader import SECRET_RETRY, SecretReader, secret_value
from ironpool.poollet.volume_attachments import Attachments
from ironpool.poollet.waiting import Dependency, Waiting, waiting_message

PULL_RETRY = 2.0  # seconds between asking a runtime that is still pulling a machine's image

log = logging.getLogger(__name__)


@dataclass
class Dependencies:
    """What a machine needs from the API, resolved; ``waiting`` names what is still missing."""

    runtime_class: str = ""
    ignition: bytes = b""
    pull_secret: dict[str, bytes] = field(default_factory=dict)
    volumes: dict[str, mpb.Volume] = field(default_factory=dict)
    nics: dict[str, mpb.NetworkInterface] = field(default_factory=dict)
    nic_refs: dict[str, NicRef] = field(default_factory=dict)  # machine NIC name -> its object
    claims: list[Volume] = field(default_factory=list)
    #: Volumes free of any attachment: recorded as attached to this machine before its domain uses them
    attach: list[Volume] = field(default_factory=list)
    nic_claims: list[NetworkInterface] = field(default_factory=list)
    waiting: list[Waiting] = field(default_factory=list)
    #: ``namespace/name`` of the Reservation the Machine is placed within ("" for none)
    reservation: str = ""

    def annotations(self) -> dict[str, str]:
        """The IRI machine annotations besides the generations: IronCore's NIC mapping, and the key of
        the Reservation the machine is placed within (the runtime counts it in that hold)."""
        out = {keys.NETWORK_INTERFACE_MAPPING_ANNOTATION: mapping_annotation(self.nic_refs)}
        if self.reservation:
            out[RESERVATION_KEY_ANNOTATION] = self.reservation
        return out


def _quantity_bytes(resources: Mapping[str, Any] | None) -> int:
    q = (resources or {}).get("storage")
    return int(q.value()) if q is not None else 0


class MachineReconciler(PoolObjectReconciler[Machine]):
    """Drives the IRI machines of the Machines bound to one pool."""

    finalizer = keys.MACHINE_FINALIZER
    uid_label = keys.MACHINE_UID_LABEL

    def __init__(
        self,
        client: AsyncClient,
        runtime: AsyncMachineRuntimeClient,
        pool: str,
        machines: Informer[Machine],
        classes: Informer[MachineClass],
        volumes: Informer[Volume],
        secrets: SecretReader,
        mapper: ClassMapper,
        runtime_name: str,
        delete_requeue: float = 1.0,
        events: EventRecorder | None = None,
        nics: Informer[NetworkInterface] | None = None,
        networks: Informer[Network] | None = None,
    ) -> None:
        super().__init__(client, pool, machines, keys.MACHINE_POOL_LABEL, delete_requeue)
        self.runtime = runtime
        self.machines = machines
        self.classes = classes
        self.volumes = volumes
        self.secrets = secrets
        self.mapper = mapper
        self.runtime_name = runtime_name
        self.events = events
        self.nics = nics
        self.networks = networks
        #: whether a Machine's domain must stay off (the pool fenced itself: ironpool.poollet.fencing)
        self.holds_off: Callable[[Machine], bool] = lambda _m: False
        self.attachments = Attachments(client, volumes, pool)

    def pool_of(self, machine: Machine) -> str | None:
        ref = machine.spec.machine_pool_ref
        return ref.name if ref is not None else None

    async def list_runtime(self, labels: Mapping[str, str]) -> Sequence[mpb.Machine]:
        return await self.runtime.list_machines(labels=labels)

    async def delete_runtime(self, runtime_id: str) -> None:
        await self.runtime.delete_machine(runtime_id, missing_ok=True)

    # -- create / update -------------------------------------------------------------------------

    async def apply(self, machine: Machine) -> Result:
        uid = machine.metadata.uid or ""
        found = await self.runtime.list_machines(labels={keys.MACHINE_UID_LABEL: uid})
        found = await self._dedupe(found)
        ign = machine.spec.ignition_ref
        if ign is not None:  # read by name: a pool may not watch Secrets
            await self.secrets.refresh(machine.metadata.namespace or "default", ign.name)
        pull = machine.spec.image_pull_secret
        if pull is not None and not found:
            await self.secrets.refresh(machine.metadata.namespace or "default", pull.name)
        for name in self._encryption_secrets(machine):
            await self.secrets.refresh(machine.metadata.namespace or "default", name)
        deps = self.resolve(machine, creating=not found)
        now = now_rfc3339()
        await self._release_unused_claims(machine)
        if not found:
            if self.holds_off(machine):
                return DONE  # fenced: nothing starts here until the fence ends (which enqueues it)
            if deps.waiting:
                await self.patch_status(machine, waiting_status(machine, deps.waiting, now))
                await self._report_waiting(machine, deps.waiting)
                if any(w.polled for w in deps.waiting):
                    return Result(requeue_after=SECRET_RETRY)
                return DONE
            await self._claim(machine, deps.claims)
            await self._claim_nics(machine, deps.nic_claims)
            await self.attachments.attach(machine, deps.attach)
            desired = build_machine(machine, deps.runtime_class, deps.ignition,
                                    list(deps.volumes.values()), list(deps.nics.values()), deps.annotations())
            desired.metadata.labels.update(self.owner_labels)
            try:
                iri = await self.runtime.create_machine(desired)
            except grpc.aio.AioRpcError as exc:
                # Tell the user why (an unknown image, no room left), then retry with backoff; a request
                # the runtime calls invalid stays invalid until the Machine changes. An image still
                # being pulled is no failure: the runtime reports its progress as events.
                reason = error_reason(exc)
                if reason == "ImagePulling":
                    pulling = failed_status(machine, exc.details() or "", now, reason)
                    await self.patch_status(machine, pulling)
                    return Result(requeue_after=PULL_RETRY)
                if exc.code() != grpc.StatusCode.CANCELLED:
                    message = f"runtime refused CreateMachine: {exc.code().name}: {exc.details()}"
                    await self.patch_status(machine, failed_status(machine, message, now, reason))
                    event_reason = "FailedCreate" if reason == "CreateFailed" else reason
                    await self._event(machine, "Warning", event_reason, message)
                if exc.code() == grpc.StatusCode.INVALID_ARGUMENT:
                    raise TerminalError(message) from exc
                raise
            log.info("machine %s/%s: created IRI machine %s", machine.metadata.namespace,
                     machine.metadata.name, iri.metadata.id)
            await self._event(machine, "Normal", "Created",
                              f"created machine {iri.metadata.id} in runtime {self.runtime_name}")
        else:
            await self._claim(machine, deps.claims)
            await self._claim_nics(machine, deps.nic_claims)
            await self.attachments.attach(machine, deps.attach)
            iri = await self._update(machine, found[0], deps)
            await self.attachments.release_unused(machine, iri)
        status = compute_status(machine, iri, self.runtime_name, now, deps.nic_refs)
        iri_gen_raw = iri.metadata.annotations.get(keys.IRI_MACHINE_GENERATION_ANNOTATION, "0")
        if iri.status.observed_generation < int(iri_gen_raw or 0):
            return Result(requeue_after=1.0)  # the runtime has not caught up with our last change yet
        if deps.waiting:
            # A running machine stays Ready; what an added volume or NIC waits for goes into
            # VolumesReady / NetworkInterfacesReady.
            for c in status["conditions"]:
                if c["type"] in ("VolumesReady", "NetworkInterfacesReady") and c["status"] == "False":
                    c["message"] = waiting_message(deps.waiting)
            await self._report_waiting(machine, deps.waiting)
        # The endpoint first: whoever sees the NICs ready in the status finds it already there.
        await self._report_nics(machine, iri, deps)
        await self.patch_status(machine, status)
        return DONE

    async def _dedupe(self, found: Sequence[mpb.Machine]) -> list[mpb.Machine]:
        """Keep the oldest IRI machine for a UID and delete the rest (IronCore panics instead)."""
        live = [m for m in found if not m.metadata.deleted_at]
        if len(live) <= 1:
            return live
        live.sort(key=lambda m: (m.metadata.created_at, m.metadata.id))
        for extra in live[1:]:
            log.warning("deleting duplicate IRI machine %s for uid %s", extra.metadata.id,
                        extra.metadata.labels.get(keys.MACHINE_UID_LABEL))
            await self.runtime.delete_machine(extra.metadata.id, missing_ok=True)
        return live[:1]

    async def _update(self, machine: Machine, iri: mpb.Machine, deps: Dependencies) -> mpb.Machine:
        power = mpb.POWER_OFF if self.holds_off(machine) else desired_power(machine)
        actions = plan(iri, deps.volumes, deps.nics, power, machine.metadata.generation or 0,
                       {v.name for v in machine.spec.volumes or []},
                       {n.name for n in machine.spec.network_interfaces or []}, deps.annotations())
        return await apply(self.runtime, iri, actions)

    # -- dependencies ----------------------------------------------------------------------------

    @staticmethod
    def _boot_data(secret: Secret, key: str | None, deps: Dependencies) -> str:
        """Put the Secret's boot configuration into ``deps``: the key ``ignitionRef.key`` names; when
        that is Ignition's default key (what the API fills in when none is named) and the Secret lacks
        it, cloud-init's ``user-data``. What is wrong with it otherwise."""
        key = key or keys.DEFAULT_IGNITION_KEY
        data = secret_value(secret, key)
        if data is None and key == keys.DEFAULT_IGNITION_KEY:
            data, key = secret_value(secret, guest_data.USER_DATA_KEY), guest_data.USER_DATA_KEY
            if data is None:
                return f"has neither key {keys.DEFAULT_IGNITION_KEY!r} nor {guest_data.USER_DATA_KEY!r}"
        if data is None:
            return f"has no key {key!r}"
        if key == guest_data.USER_DATA_KEY and not guest_data.is_cloud_init(data):
            return (f"key {key!r} is not cloud-init user data: it must start with #cloud-config, "
                    "another cloud-init header or #!, or be a MIME multipart message")
        deps.ignition = data
        return ""

    def resolve(self, machine: Machine, creating: bool = True) -> Dependencies:
        """The class, ignition and volumes of ``machine``, or what it still waits for (the image pull
        secret only while ``creating``: a machine that exists has its disks)."""
        deps = Dependencies()
        ns = machine.metadata.namespace or "default"
        within = (machine.metadata.labels or {}).get(RESERVATION_LABEL)
        deps.reservation = f"{ns}/{within}" if within else ""
        class_name = machine.spec.machine_class_ref.name
        mclass = self.classes.get(class_name)
        if mclass is None:
            deps.waiting.append(Waiting(Dependency.MACHINE_CLASS, class_name, "not found"))
        else:
            match = self.mapper.lookup(class_name, capabilities_to_iri(mclass.capabilities))
            if match.runtime_class is None:
                deps.waiting.append(Waiting(Dependency.MACHINE_CLASS, class_name, match.reason))
            else:
                deps.runtime_class = match.runtime_class.name
        ign = machine.spec.ignition_ref
        if ign is not None:
            secret = self.secrets.get(f"{ns}/{ign.name}")
            if secret is None:
                deps.waiting.append(Waiting(Dependency.SECRET, f"{ns}/{ign.name}", "not found"))
            else:
                problem = self._boot_data(secret, ign.key, deps)
                if problem:
                    deps.waiting.append(Waiting(Dependency.SECRET, f"{ns}/{ign.name}", problem))
        pull = machine.spec.image_pull_secret
        if pull is not None and creating:
            deps.pull_secret = self.secrets.image_pull_secret(ns, pull.name, deps.waiting)
        spec_volumes = machine.spec.volumes or []
        devices = device_names(spec_volumes)
        for v in spec_volumes:
            obj_name = volume_object_name(machine, v)
            if obj_name is None:
                deps.volumes[v.name] = local_disk_volume(v, devices[v.name], deps.pull_secret)
                continue
            vol = self.volumes.get(f"{ns}/{obj_name}")
            reason = self._volume_problem(machine, vol) or self.attachments.problem(machine, vol)
            if reason:
                deps.waiting.append(Waiting(Dependency.VOLUME, f"{ns}/{obj_name}", reason))
                continue
            assert vol is not None and vol.status is not None and vol.status.access is not None
            access = vol.status.access
            size = _quantity_bytes(vol.status.resources) or _quantity_bytes(vol.spec.resources)
            key = self._encryption_key(vol, deps.waiting)
            if key is None:
                continue
            src = ConnectionSource(access.driver, access.handle, dict(access.volume_attributes or {}), size,
                                   encryption_data={ENCRYPTION_KEY: key} if key else {})
            deps.volumes[v.name] = connection_volume(v, devices[v.name], src)
            deps.claims.append(vol)
            if vol.status.attachment is None:
                deps.attach.append(vol)
        self._resolve_nics(machine, deps)
        return deps

    def _encryption_secrets(self, machine: Machine) -> list[str]:
        """The Secrets holding the keys of the machine's encrypted Volumes (read by name: a pool may
        not watch Secrets)."""
        ns = machine.metadata.namespace or "default"
        names = []
        for v in machine.spec.volumes or []:
            obj_name = volume_object_name(machine, v)
            vol = self.volumes.get(f"{ns}/{obj_name}") if obj_name else None
            if vol is not None and vol.spec.encryption is not None:
                names.append(vol.spec.encryption.secret_ref.name)
        return names

    def _encryption_key(self, vol: Volume, waiting: list[Waiting]) -> bytes | None:
        """An encrypted Volume's key (b"" for a Volume that is not encrypted); None, with what is
        missing added to ``waiting``, when its Secret or key is not there."""
        if vol.spec.encryption is None:
            return b""
        name = f"{vol.metadata.namespace or 'default'}/{vol.spec.encryption.secret_ref.name}"
        secret = self.secrets.get(name)
        key = secret_value(secret, ENCRYPTION_KEY) if secret is not None else None
        if not key:
            waiting.append(Waiting(Dependency.SECRET, name, f"no {ENCRYPTION_KEY!r} for the Volume's key"))
            return None
        return key

    def _resolve_nics(self, machine: Machine, deps: Dependencies) -> None:
        """The IRI NICs of the machine's usable NetworkInterfaces; the others go to ``waiting``."""
        ns = machine.metadata.namespace or "default"
        for n in machine.spec.network_interfaces or []:
            obj_name = nic_object_name(machine, n) or ""
            obj = self.nics.get(f"{ns}/{obj_name}") if self.nics is not None else None
            net_ref = obj.spec.network_ref if obj is not None else None
            network = (self.networks.get(f"{ns}/{net_ref.name}")
                       if self.networks is not None and net_ref is not None else None)
            problem = nic_problem(machine, n, obj, network)
            if problem:
                deps.waiting.append(Waiting(Dependency.NETWORK_INTERFACE, f"{ns}/{obj_name}", problem))
                continue
            assert obj is not None and network is not None
            deps.nics[n.name] = iri_nic(n.name, obj, network)
            deps.nic_refs[n.name] = NicRef(obj_name, obj.metadata.uid or "",
                                           tuple(obj.status.ips or []) if obj.status else ())
            if obj.spec.machine_ref is None or not obj.spec.machine_ref.uid:
                deps.nic_claims.append(obj)

    @staticmethod
    def _volume_problem(machine: Machine, vol: Volume | None) -> str:
        if vol is None:
            return "not found"
        claim = vol.spec.claim_ref
        if claim is not None and claim.uid and claim.uid != machine.metadata.uid:
            return f"claimed by machine {claim.name}"
        if vol.spec.unclaimable:
            return "unclaimable"
        state = vol.status.state if vol.status else None
        if state != "Available":
            return f"not Available yet, state {state or 'Pending'}"
        if vol.status is None or vol.status.access is None:
            return "no access information yet"
        return ""

    async def _claim(self, machine: Machine, volumes: Sequence[Volume]) -> None:
        ref = {"name": machine.metadata.name, "uid": machine.metadata.uid}
        for vol in volumes:
            claim = vol.spec.claim_ref
            if claim is not None and claim.uid == machine.metadata.uid:
                continue
            await self.client.patch(Volume, vol.metadata.name or "", {"spec": {"claimRef": ref}},
                                    namespace=vol.metadata.namespace)

    async def _claim_nics(self, machine: Machine, nics: Sequence[NetworkInterface]) -> None:
        """Claim NetworkInterfaces as IronCore's claim manager does: ``spec.machineRef`` to this
        machine, ``spec.providerID`` cleared (the runtime's handle is written once attached)."""
        ref = {"name": machine.metadata.name, "uid": machine.metadata.uid}
        for nic in nics:
            await self.client.patch(NetworkInterface, nic.metadata.name or "",
                                    {"spec": {"machineRef": ref, "providerID": None}},
                                    namespace=nic.metadata.namespace)

    async def _release_unused_claims(self, machine: Machine, all_: bool = False) -> None:
        """Clear ``claimRef`` on volumes, and ``machineRef`` and ``providerID`` on network interfaces,
        this machine claimed but no longer (or, deleting, never) uses. Its ephemeral NICs go with it."""
        ns = machine.metadata.namespace or "default"
        uid = machine.metadata.uid or ""
        used = set() if all_ else {volume_object_name(machine, v) for v in machine.spec.volumes or []}
        for vol in self.volumes.by_index("claim-uid", uid):
            if vol.metadata.namespace == ns and vol.metadata.name not in used:
                with contextlib.suppress(NotFound):
                    await self.client.patch(Volume, vol.metadata.name or "", {"spec": {"claimRef": None}},
                                            namespace=ns)
        if self.nics is None:
            return
        spec_nics = [] if all_ else machine.spec.network_interfaces or []
        used_nics = {nic_object_name(machine, n) for n in spec_nics}
        for nic in self.nics.by_index("machine-uid", uid):
            if nic.metadata.namespace != ns or nic.metadata.name in used_nics:
                continue
            if all_ and controlled_by(nic, machine):
                continue  # deleted with the Machine by the networking controller
            with contextlib.suppress(NotFound, Conflict):
                await self.client.patch(NetworkInterface, nic.metadata.name or "",
                                        {"spec": {"machineRef": None, "providerID": None}}, namespace=ns)

    async def _report_nics(self, machine: Machine, iri: mpb.Machine, deps: Dependencies) -> None:
        """Write back what the runtime reports of the NICs: each NetworkInterface's ``providerID``
        (the IRI handle) and the Machine's SSH endpoint annotation."""
        ns = machine.metadata.namespace or "default"
        handles = {n.name: n.handle for n in iri.status.network_interfaces}
        for name, ref in deps.nic_refs.items():
            nic = self.nics.get(f"{ns}/{ref.name}") if self.nics is not None else None
            handle = handles.get(name, "")
            if nic is None or not handle or (nic.spec.provider_id or "") == handle:
                continue
            with contextlib.suppress(NotFound, Conflict):
                await self.client.patch(NetworkInterface, ref.name, {"spec": {"providerID": handle}},
                                        namespace=ns)
        endpoint = ssh_endpoint([n.name for n in machine.spec.network_interfaces or []],
                                iri.status.network_interfaces)
        current = (machine.metadata.annotations or {}).get(keys.SSH_ENDPOINT_ANNOTATION, "")
        if endpoint != current:
            patch = {"metadata": {"annotations": {keys.SSH_ENDPOINT_ANNOTATION: endpoint or None}}}
            await self.client.patch(Machine, machine.metadata.name or "", patch, namespace=ns)

    # -- deletion --------------------------------------------------------------------------------

    async def terminating(self, machine: Machine) -> None:
        if (machine.status.state if machine.status else None) != "Terminating":
            await self.patch_status(machine, {"state": "Terminating"})

    async def released(self, machine: Machine) -> None:
        await self.attachments.release(machine.metadata.uid or "")
        await self._release_unused_claims(machine, all_=True)

    # -- API writes ------------------------------------------------------------------------------

    async def _report_waiting(self, machine: Machine, waiting: Sequence[Waiting]) -> None:
        """An Event saying what the machine waits for; IronCore's ``NetworkInterfaceNotReady`` when
        that is only network interfaces."""
        only_nics = all(w.kind is Dependency.NETWORK_INTERFACE for w in waiting)
        reason = "NetworkInterfaceNotReady" if only_nics else "WaitingForDependencies"
        await self._event(machine, "Normal", reason, waiting_message(waiting))

    async def _event(self, machine: Machine, type_: str, reason: str, message: str) -> None:
        if self.events is not None:
            await self.events.record(machine, type_, reason, message)
