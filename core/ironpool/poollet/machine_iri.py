"""Translate between an API Machine and its IRI machine, both directions (as IronCore's poollet does).

Pure functions: the reconciler resolves the dependencies (class, volumes, secret) and hands them
in; this module builds the IRI request and computes the API status from what the runtime reports.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc

from ironpool.api.compute import Machine, MachineVolume
from ironpool.api.conditions import condition
from ironpool.api.meta import Condition
from ironpool.iri.gen.machine.v1alpha1 import api_pb2 as mpb
from ironpool.iri.labels import EFI_VARS_ANNOTATION
from ironpool.poollet import keys
from ironpool.poollet.machine_nics import NicRef, nic_object_name
from ironpool.poollet.waiting import Dependency, Waiting, waiting_message

STATE_FROM_IRI: dict[int, str] = {
    mpb.MACHINE_PENDING: "Pending",
    mpb.MACHINE_RUNNING: "Running",
    mpb.MACHINE_SUSPENDED: "Shutdown",
    mpb.MACHINE_TERMINATED: "Terminated",
    mpb.MACHINE_TERMINATING: "Terminating",
    # IronCore's poollet rejects STOPPED; a powered-off machine is Shutdown either way.
    mpb.MACHINE_STOPPED: "Shutdown",
}


def uid_labels(machine: Machine) -> dict[str, str]:
    """The IRI labels that tie an IRI machine to its API object (found again by the UID label)."""
    md = machine.metadata
    return {
        keys.MACHINE_UID_LABEL: md.uid or "",
        keys.MACHINE_NAMESPACE_LABEL: md.namespace or "",
        keys.MACHINE_NAME_LABEL: md.name or "",
    }


def desired_annotations(machine: Machine, iri_generation: int) -> dict[str, str]:
    return {
        keys.MACHINE_GENERATION_ANNOTATION: str(machine.metadata.generation or 0),
        keys.IRI_MACHINE_GENERATION_ANNOTATION: str(iri_generation),
    }


def device_names(volumes: Sequence[MachineVolume]) -> dict[str, str]:
    """Each volume's device: the given one, else the next free ``od[a-z]`` as IronCore's admission does."""
    used = {v.device for v in volumes if v.device}
    out: dict[str, str] = {}
    letters = "abcdefghijklmnopqrstuvwxyz"
    candidates = iter([f"od{c}" for c in letters] + [f"od{a}{b}" for a in letters for b in letters])
    for v in volumes:
        if v.device:
            out[v.name] = v.device
            continue
        for cand in candidates:
            if cand not in used:
                used.add(cand)
                out[v.name] = cand
                break
    return out


def volume_object_name(machine: Machine, volume: MachineVolume) -> str | None:
    """The API Volume a machine volume uses: its ``volumeRef``, or ``<machine>-<volume>`` if ephemeral."""
    if volume.volume_ref is not None:
        return volume.volume_ref.name
    if volume.ephemeral is not None:
        return f"{machine.metadata.name}-{volume.name}"
    return None


def local_disk_volume(
    volume: MachineVolume, device: str, pull_secret: Mapping[str, bytes] | None = None
) -> mpb.Volume:
    """An IRI ``local_disk`` for ``localDisk`` (or the deprecated ``emptyDisk``) sources; an image
    carries the image pull Secret's data."""
    disk = mpb.LocalDisk()
    if volume.local_disk is not None:
        if volume.local_disk.size_limit is not None:
            disk.size_bytes = volume.local_disk.size_limit.value()
        if volume.local_disk.image:
            disk.image.image = volume.local_disk.image
            disk.image.pull_secret_data.update(pull_secret or {})
    elif volume.empty_disk is not None and volume.empty_disk.size_limit is not None:
        disk.size_bytes = volume.empty_disk.size_limit.value()
    return mpb.Volume(name=volume.name, device=device, local_disk=disk)


@dataclass(frozen=True)
class ConnectionSource:
    """What an attached API Volume contributes: its access, effective size and, for an encrypted
    Volume, the key its ``encryption.secretRef`` holds (IRI's ``encryption_data``, as IronCore's
    machinepoollet passes it)."""

    driver: str
    handle: str
    attributes: Mapping[str, str]
    size_bytes: int
    secret_data: Mapping[str, bytes] = field(default_factory=dict)
    encryption_data: Mapping[str, bytes] = field(default_factory=dict, repr=False)  # the key's Secret


def connection_volume(volume: MachineVolume, device: str, src: ConnectionSource) -> mpb.Volume:
    conn = mpb.VolumeConnection(
        driver=src.driver, handle=src.handle, attributes=dict(src.attributes),
        secret_data=dict(src.secret_data), encryption_data=dict(src.encryption_data),
        effective_storage_bytes=src.size_bytes,
    )
    return mpb.Volume(name=volume.name, device=device, connection=conn)


def build_machine(
    machine: Machine,
    runtime_class: str,
    ignition: bytes,
    volumes: Sequence[mpb.Volume],
    nics: Sequence[mpb.NetworkInterface],
    annotations: Mapping[str, str] | None = None,
) -> mpb.Machine:
    """The ``CreateMachine`` payload, with the Machine's power: a Machine declared Off is defined
    and never started, so its first boot (and a cloud-init first run) waits until power is On.
    ``annotations`` go beside the generation annotations (the NIC mapping), and the Machine's
    ``efiVars`` in the annotation a UEFI runtime writes into the machine's NVRAM."""
    spec = mpb.MachineSpec(
        power=desired_power(machine), ignition_data=ignition, volumes=list(volumes),
        network_interfaces=list(nics),
    )
    setattr(spec, "class", runtime_class)  # `class` is a Python keyword
    if machine.spec.guest_config is not None and machine.spec.guest_config.hostname:
        spec.guest_config.hostname = machine.spec.guest_config.hostname
    meta = mpb.Machine().metadata
    meta.labels.update(uid_labels(machine))
    meta.annotations.update(desired_annotations(machine, 0))
    meta.annotations.update(annotations or {})
    if machine.spec.efi_vars:
        # IRI's MachineSpec has no field for them: see ironpool.iri.labels.
        meta.annotations[EFI_VARS_ANNOTATION] = json.dumps(
            [{"name": v.name, "uuid": v.uuid, "value": v.value} for v in machine.spec.efi_vars])
    return mpb.Machine(metadata=meta, spec=spec)


def desired_power(machine: Machine) -> mpb.Power.ValueType:
    return mpb.POWER_OFF if machine.spec.power == "Off" else mpb.POWER_ON


def _entry_time(previous: Sequence[Any] | None, name: str, state: str, now: str) -> str:
    for old in previous or ():
        if old.name == name and old.state == state and old.last_state_transition_time:
            return str(old.last_state_transition_time)
    return now


def _attachments(names: Sequence[str], reported: Mapping[str, Any], attached: int,
                 previous: Sequence[Any] | None, now: str) -> tuple[list[dict[str, Any]], list[str]]:
    """Status entries of the spec's volumes or NICs (``names``) from what the runtime ``reported``:
    ``Attached`` or ``Pending``, with the handle; and the names not attached yet."""
    entries: list[dict[str, Any]] = []
    pending: list[str] = []
    for name in names:
        got = reported.get(name)
        state = "Attached" if got is not None and got.state == attached else "Pending"
        if state != "Attached":
            pending.append(name)
        entry: dict[str, Any] = {"name": name, "state": state,
                                 "lastStateTransitionTime": _entry_time(previous, name, state, now)}
        if got is not None and got.handle:
            entry["handle"] = got.handle
        entries.append(entry)
    return entries, pending


def _readiness(ctype: str, what: str, pending: Sequence[str], previous: Sequence[Condition],
               now: str) -> dict[str, Any]:
    """``VolumesReady`` / ``NetworkInterfacesReady``, as IronCore's poollet words them."""
    if not pending:
        return condition(ctype, "True", ctype, f"all {what} attached", previous, now)
    reason = f"{ctype.removesuffix('sReady')}NotReady: {pending[0]}"
    return condition(ctype, "False", reason, "not attached: " + ", ".join(pending), previous, now)


def compute_status(
    machine: Machine,
    iri: mpb.Machine,
    runtime_name: str,
    now: str,
    nic_refs: Mapping[str, NicRef] | None = None,
) -> dict[str, Any]:
    """The API ``status`` the IRI machine implies (IronCore's updateStatus + ComputeMachineConditions).
    ``nic_refs``: the NetworkInterface objects of the machine's NICs, for their addresses."""
    old = machine.status
    state = STATE_FROM_IRI.get(iri.status.state, "Pending")
    if iri.metadata.deleted_at:
        state = "Terminating"
    spec_volumes = machine.spec.volumes or []
    volumes, not_ready_volumes = _attachments(
        [v.name for v in spec_volumes], {v.name: v for v in iri.status.volumes}, mpb.VOLUME_ATTACHED,
        old.volumes if old else None, now)
    for entry, v in zip(volumes, spec_volumes, strict=True):
        ref = volume_object_name(machine, v)
        if ref:
            entry["volumeRef"] = {"name": ref}
    spec_nics = machine.spec.network_interfaces or []
    nics, not_ready_nics = _attachments(
        [n.name for n in spec_nics], {n.name: n for n in iri.status.network_interfaces},
        mpb.NETWORK_INTERFACE_ATTACHED, old.network_interfaces if old else None, now)
    for entry, n in zip(nics, spec_nics, strict=True):
        object_name = nic_object_name(machine, n)
        if object_name:
            entry["networkInterfaceRef"] = {"name": object_name}
        nic_ref = (nic_refs or {}).get(n.name)
        if nic_ref is not None and nic_ref.ips:
            entry["ips"] = list(nic_ref.ips)

    previous: list[Condition] = list(old.conditions or []) if old else []
    ready_reason = {"Running": "Running", "Pending": "Pending", "Terminating": "Terminating",
                    "Terminated": "Terminating"}.get(state, "NotReady")
    conds = [
        condition("Ready", "True" if state == "Running" else "False", ready_reason,
                  f"machine is {state}", previous, now),
        _readiness("VolumesReady", "volumes", not_ready_volumes, previous, now),
        _readiness("NetworkInterfacesReady", "network interfaces", not_ready_nics, previous, now),
    ]
    try:
        observed = int(iri.metadata.annotations.get(keys.MACHINE_GENERATION_ANNOTATION, "0"))
    except ValueError:
        observed = 0
    status = {
        "machineID": f"{runtime_name}://{iri.metadata.id}",
        "observedGeneration": observed,
        "state": state,
        "conditions": conds,
        "volumes": volumes,
        "networkInterfaces": nics,
    }
    if iri.status.image_ref:
        status["imageRef"] = iri.status.image_ref
    return status


def waiting_status(machine: Machine, reasons: Sequence[Waiting], now: str) -> dict[str, Any]:
    """Status of a machine that cannot be created yet: ``Ready=False/WaitingForDependencies`` naming them."""
    previous = list(machine.status.conditions or []) if machine.status else []

    def ready(ctype: str, kind: Dependency, what: str) -> dict[str, Any]:
        waiting = [str(r) for r in reasons if r.kind is kind]
        if waiting:
            return condition(ctype, "False", f"{kind}NotReady", "; ".join(waiting), previous, now)
        return condition(ctype, "True", ctype, f"all {what} ready", previous, now)

    return {
        "state": "Pending",
        "conditions": [
            condition("Ready", "False", "WaitingForDependencies", waiting_message(reasons), previous, now),
            ready("VolumesReady", Dependency.VOLUME, "volumes"),
            ready("NetworkInterfacesReady", Dependency.NETWORK_INTERFACE, "network interfaces"),
        ],
    }


def failed_status(machine: Machine, message: str, now: str, reason: str = "CreateFailed") -> dict[str, Any]:
    """Status of a machine the runtime refused to create (or is still pulling the image of):
    ``Ready=False`` with the runtime's reason (``ImageNotFound``, ``ImagePulling``, ...) and message."""
    previous = list(machine.status.conditions or []) if machine.status else []
    return {"state": "Pending",
            "conditions": [condition("Ready", "False", reason, message, previous, now)]}


REASON_METADATA = "ironpool-reason"  # as ironpool's runtimes send it beside an error


def error_reason(exc: grpc.aio.AioRpcError, default: str = "CreateFailed") -> str:
    """The reason word a runtime sent beside an error (``ImagePulling``), else ``default``."""
    for key, value in exc.trailing_metadata() or ():
        if key == REASON_METADATA and isinstance(value, str) and value.isalnum():
            return value
    return default

