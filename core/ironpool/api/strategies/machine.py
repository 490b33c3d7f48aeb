"""Machine: a virtual machine of a class, namespaced; IronCore's machine validation and its
``MachineVolumeDevices`` defaulting."""

from __future__ import annotations

import re
from typing import Any

from pydantic import ValidationError

from ironpool.api.columns import AGE, NAME, Column, Getter, cond_status, dig, field, mapping
from ironpool.api.compute import (
    COMPUTE_GROUP,
    COMPUTE_VERSION,
    DEFAULT_IGNITION_KEY,
    Machine,
    MachineNetworkInterface,
    MachineSpec,
    MachineVolume,
)
from ironpool.api.fieldpath import (
    FieldErrors,
    add_pydantic_errors,
    child,
    dns1123_label,
    index,
    secret_key,
    validate_labels,
)
from ironpool.api.networking import NetworkInterfaceSpec
from ironpool.api.reservation import RESERVATION_LABEL, reservation_of
from ironpool.api.resource_info import ResourceInfo
from ironpool.api.rules import get, immutable, non_negative, ref_name, set_once, tolerations
from ironpool.api.strategies.networkinterface import default_nic_spec, validate_nic_spec
from ironpool.api.strategies.prefix import validate_template_metadata
from ironpool.api.strategies.volume import validate_volume_spec
from ironpool.api.strategy import Obj, Strategy
from ironpool.api.subresources import PoolBinding, PoolEviction, PoolExec

_DEVICE_RE = re.compile(r"^[a-z]{2}[a-z][a-z]?$")
_DEVICE_PREFIX = "od"
_MAX_DEVICE_INDEX = 26 * 26 + 25


def _addresses(obj: dict[str, Any]) -> Any:
    """Every NIC's effective addresses, comma-separated, from the Machine's status."""
    ips = [str(ip) for nic in dig(obj, "status.networkInterfaces") or [] if isinstance(nic, dict)
           for ip in nic.get("ips") or []]
    return ",".join(ips) or None


ADDRESSES: Getter = _addresses


class MachineStrategy(Strategy[Machine]):
    """Defaults (ignition key, device names), IronCore's rules, and what may change afterwards."""

    info = ResourceInfo(COMPUTE_GROUP, COMPUTE_VERSION, "Machine", "machines", "machine", ("ma",), True,
                        Machine, True)
    name_is_dns_label = True
    subresources = (PoolBinding(pool_kind="MachinePool", pool_ref="machinePoolRef"),
                    PoolEviction(pool_ref="machinePoolRef"),
                    PoolExec(pool_kind="MachinePool", pool_ref="machinePoolRef"))
    columns = (
        NAME, Column("MACHINECLASS", field("spec.machineClassRef.name")),
        Column("POOL", field("spec.machinePoolRef.name")), Column("STATE", field("status.state")),
        Column("POWER", field("spec.power")), AGE,
        Column("READY", cond_status("Ready"), wide=True),
        Column("MACHINEID", field("status.machineID"), wide=True),
        Column("POOLSELECTOR", mapping("spec.machinePoolSelector"), wide=True),
        Column("IMAGE", field("status.imageRef"), wide=True),
        Column("IPS", ADDRESSES, wide=True),
    )

    def default(self, obj: Machine, errs: FieldErrors) -> None:
        spec = obj.spec
        if spec.ignition_ref is not None and not spec.ignition_ref.key:
            spec.ignition_ref.key = DEFAULT_IGNITION_KEY
        _default_devices(spec.volumes or [], errs)
        for nic in spec.network_interfaces or ():
            template = _nic_template_spec(nic)
            if template is not None:
                nic.ephemeral.network_interface_template.spec = template.to_dict()  # type: ignore[union-attr]

    def validate(self, obj: Machine, errs: FieldErrors) -> None:
        spec = obj.spec
        ref_name(spec.machine_class_ref.name, "spec.machineClassRef.name", errs)
        if spec.machine_pool_ref is not None:
            ref_name(spec.machine_pool_ref.name, "spec.machinePoolRef.name", errs)
        if spec.machine_pool_selector:
            validate_labels(spec.machine_pool_selector, "spec.machinePoolSelector", errs)
        if spec.image_pull_secret is not None:
            ref_name(spec.image_pull_secret.name, "spec.imagePullSecret.name", errs)
        if spec.ignition_ref is not None:
            ref_name(spec.ignition_ref.name, "spec.ignitionRef.name", errs)
            for msg in secret_key(spec.ignition_ref.key or ""):
                errs.invalid("spec.ignitionRef.key", spec.ignition_ref.key, msg)
        _volumes(spec.volumes or [], errs)
        _network_interfaces(spec, obj.metadata.name, errs)
        efi_names: set[str] = set()
        for i, var in enumerate(spec.efi_vars or ()):
            if var.name in efi_names:
                errs.duplicate(f"{index('spec.efiVars', i)}.name", var.name)
            efi_names.add(var.name)
        tolerations(spec.tolerations, "spec.tolerations", errs)
        reservation = (obj.metadata.labels or {}).get(RESERVATION_LABEL)
        if reservation is not None:
            for msg in dns1123_label(reservation):
                errs.invalid(f"metadata.labels[{RESERVATION_LABEL}]", reservation,
                             f"the Reservation's name {msg}")
        if spec.guest_config is not None and spec.guest_config.hostname:
            for msg in dns1123_label(spec.guest_config.hostname):
                errs.invalid("spec.guestConfig.hostname", spec.guest_config.hostname, msg)

    def validate_update(self, old: Obj, new: Obj, errs: FieldErrors) -> None:
        immutable(old, new, ("spec", "machineClassRef"), errs)
        set_once(old, new, ("spec", "machinePoolRef"), errs)
        if get(old, "spec", "machinePoolRef") and reservation_of(old) != reservation_of(new):
            # Capacity admission counted the bound Machine within (or outside) the Reservation.
            errs.invalid(f"metadata.labels[{RESERVATION_LABEL}]", reservation_of(new),
                         "cannot change while the machine is bound to a pool")
        new_vols = {v.get("name"): v for v in get(new, "spec", "volumes") or ()}
        for ov in get(old, "spec", "volumes") or ():
            image = get(ov, "localDisk", "image")
            if not image:
                continue
            p = f"spec.volumes[{ov.get('name')}].localDisk.image"
            nv = new_vols.get(ov.get("name"))
            if nv is None:
                errs.invalid(p, None, "volume with an image set must not be removed")
            elif not get(nv, "localDisk", "image"):
                errs.invalid(p, None, "volume with an image set must not be cleared")
            elif get(nv, "localDisk", "image") != image:
                errs.immutable(p, get(nv, "localDisk", "image"))
        old_host = get(old, "spec", "guestConfig", "hostname")
        new_host = get(new, "spec", "guestConfig", "hostname")
        if not old_host and new_host:
            errs.invalid("spec.guestConfig.hostname", new_host,
                         "hostname must not be set if it was not set before")
        elif old_host and not new_host:
            errs.invalid("spec.guestConfig.hostname", None, "hostname must not be cleared")
        elif old_host and new_host != old_host:
            errs.immutable("spec.guestConfig.hostname", new_host)


def _device_name(i: int) -> str:
    if i < 26:
        return _DEVICE_PREFIX + chr(97 + i)
    return _DEVICE_PREFIX + chr(97 + i // 26 - 1) + chr(97 + i % 26)


def _default_devices(volumes: list[MachineVolume], errs: FieldErrors) -> None:
    """IronCore's MachineVolumeDevices admission: fill empty devices with the next free ``od*``."""
    taken = {v.device for v in volumes if v.device}
    nxt = 0
    for i, v in enumerate(volumes):
        if v.device:
            continue
        while nxt <= _MAX_DEVICE_INDEX and _device_name(nxt) in taken:
            nxt += 1
        if nxt > _MAX_DEVICE_INDEX:
            errs.invalid(child(index("spec.volumes", i), "device"), None, "no free device name left")
            continue
        v.device = _device_name(nxt)
        taken.add(v.device)


def _volumes(volumes: list[MachineVolume], errs: FieldErrors) -> None:
    names: set[str] = set()
    devices: set[str] = set()
    for i, vol in enumerate(volumes):
        p = index("spec.volumes", i)
        ref_name(vol.name, f"{p}.name", errs)
        if vol.name in names:
            errs.duplicate(f"{p}.name", vol.name)
        names.add(vol.name)
        if vol.device:
            if not _DEVICE_RE.match(vol.device):
                errs.invalid(f"{p}.device", vol.device,
                             "invalid device name: must match regex ^[a-z]{2}[a-z][a-z]?$")
            elif vol.device in devices:
                errs.duplicate(f"{p}.device", vol.device)
            devices.add(vol.device)
        _volume_source(vol, p, errs)


def _volume_source(vol: MachineVolume, p: str, errs: FieldErrors) -> None:
    sources = 0
    if vol.volume_ref is not None:
        sources += 1
        ref_name(vol.volume_ref.name, f"{p}.volumeRef.name", errs)
    for field_name, src in (("emptyDisk", vol.empty_disk), ("localDisk", vol.local_disk),
                            ("ephemeral", vol.ephemeral)):
        if src is None:
            continue
        if sources:
            errs.forbidden(child(p, field_name), "must only specify one volume source")
        sources += 1
    if vol.empty_disk is not None:
        non_negative(vol.empty_disk.size_limit, f"{p}.emptyDisk.sizeLimit", errs)
    if vol.local_disk is not None:
        non_negative(vol.local_disk.size_limit, f"{p}.localDisk.sizeLimit", errs)
    if vol.ephemeral is not None:
        tp = f"{p}.ephemeral.volumeTemplate"
        tmpl = vol.ephemeral.volume_template
        if tmpl is None:
            errs.required(tp, "must specify volume template")
        else:
            validate_volume_spec(tmpl.spec, f"{tp}.spec", errs)
            if tmpl.spec.claim_ref is not None:
                errs.forbidden(f"{tp}.spec.claimRef", "may not specify claimRef")
            if tmpl.spec.unclaimable:
                errs.forbidden(f"{tp}.spec.unclaimable", "may not specify unclaimable")
    if not sources:
        errs.required(p, "must specify exactly one volume source "
                         "(volumeRef, emptyDisk, localDisk or ephemeral)")


def _nic_template_spec(nic: MachineNetworkInterface, errs: FieldErrors | None = None,
                      path: str = "") -> NetworkInterfaceSpec | None:
    """The typed, defaulted spec of an ephemeral NIC template (None if absent or ill-typed; the
    type errors go to ``errs`` under ``path``)."""
    if nic.ephemeral is None or nic.ephemeral.network_interface_template is None:
        return None
    try:
        spec = NetworkInterfaceSpec.model_validate(nic.ephemeral.network_interface_template.spec)
    except ValidationError as exc:
        if errs is not None:
            add_pydantic_errors(exc, errs, path)
        return None
    default_nic_spec(spec)
    return spec


def _network_interfaces(spec: MachineSpec, machine_name: str | None, errs: FieldErrors) -> None:
    nic_names: set[str] = set()
    for i, nic in enumerate(spec.network_interfaces or ()):
        p = index("spec.networkInterfaces", i)
        ref_name(nic.name, f"{p}.name", errs)
        if nic.name in nic_names:
            errs.duplicate(f"{p}.name", nic.name)
        nic_names.add(nic.name)
        sources = 0
        if nic.network_interface_ref is not None:
            sources += 1
            ref_name(nic.network_interface_ref.name, f"{p}.networkInterfaceRef.name", errs)
        if nic.ephemeral is not None:
            if sources:
                errs.forbidden(f"{p}.ephemeral", "must only specify one networkInterface source")
            sources += 1
            tp = f"{p}.ephemeral.networkInterfaceTemplate"
            template = nic.ephemeral.network_interface_template
            if template is None:
                errs.required(tp, "must specify networkInterface template")
            else:
                validate_template_metadata(template.metadata, f"{tp}.metadata", errs, "network interface")
                nic_spec = _nic_template_spec(nic, errs, f"{tp}.spec")
                if nic_spec is not None:
                    nic_name = f"{machine_name}-{nic.name}" if machine_name else None
                    validate_nic_spec(nic_spec, f"{tp}.spec", errs, nic_name)
                    if nic_spec.machine_ref is not None:
                        errs.forbidden(f"{tp}.spec.machineRef", "is set to this machine when the "
                                       "network interface is created")
        if not sources:
            errs.required(p, "must specify exactly one networkInterface source "
                             "(networkInterfaceRef or ephemeral)")
