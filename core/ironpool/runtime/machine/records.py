"""IRI machine requests to records and records to IRI messages, with every check on the way.

Pure: nothing here touches libvirt or the disk. What a conversion must know about the host (does
this image, volume file, libvirt network exist) comes in as :class:`Lookups`, so a request can be
checked field by field, with errors that name the field, before the driver makes anything.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import libvirt

from ironpool.iri import guest_data
from ironpool.iri.gen.machine.v1alpha1 import api_pb2 as machine_pb2
from ironpool.iri.gen.meta.v1alpha1 import api_pb2 as meta_pb2
from ironpool.runtime.errors import AlreadyExists, InvalidArgument, NotFound
from ironpool.runtime.images import Credentials, Image, ImageError
from ironpool.runtime.metadata import check_string_map

from . import nics, volume_secrets
from .classes import MachineClassSpec, quantity
from .model import MachineRecord, NicRecord, VolumeRecord
from .seed import SEED_TARGET

POWER_ON = machine_pb2.POWER_ON
POWER_OFF = machine_pb2.POWER_OFF
LOCAL_DRIVER = "ironpool-local"
ID_RE = re.compile(r"^[0-9a-f]{32}$")
DEVICE_RE = re.compile(r"^[a-z]d([a-z]{1,2})$")
MAX_NAME = 253
MAX_DISK_BYTES = 64 * 1024**4  # 64 TiB: anything larger is a typo, not a disk
MAX_IGNITION_BYTES = 16 * 1024**2

# libvirt lifecycle event -> (reason, type, action) of the IRI event
_LIFECYCLE: dict[int, tuple[str, str, str]] = {
    libvirt.VIR_DOMAIN_EVENT_DEFINED: ("Defined", "Normal", "Define"),
    libvirt.VIR_DOMAIN_EVENT_UNDEFINED: ("Undefined", "Normal", "Undefine"),
    libvirt.VIR_DOMAIN_EVENT_STARTED: ("Started", "Normal", "Start"),
    libvirt.VIR_DOMAIN_EVENT_SUSPENDED: ("Suspended", "Normal", "Suspend"),
    libvirt.VIR_DOMAIN_EVENT_RESUMED: ("Resumed", "Normal", "Resume"),
    libvirt.VIR_DOMAIN_EVENT_STOPPED: ("Stopped", "Normal", "Stop"),
    libvirt.VIR_DOMAIN_EVENT_SHUTDOWN: ("ShuttingDown", "Normal", "Shutdown"),
    libvirt.VIR_DOMAIN_EVENT_PMSUSPENDED: ("PMSuspended", "Normal", "Suspend"),
    libvirt.VIR_DOMAIN_EVENT_CRASHED: ("Crashed", "Warning", "Crash"),
}


# -- field checks ------------------------------------------------------------------------------
def check_id(value: str, field: str = "machine_id") -> str:
    """A machine id a client chose for a new machine: 32 lowercase hex, as the runtime makes them."""
    if not value:
        raise InvalidArgument(f"{field}: must not be empty")
    if not ID_RE.match(value):
        raise InvalidArgument(f"{field}: {value[:80]!r} is not a valid machine id (32 lowercase hex digits)")
    return value


def check_name(value: str, field: str) -> str:
    """A machine-local volume or interface name."""
    if not value:
        raise InvalidArgument(f"{field}: must not be empty")
    if len(value) > MAX_NAME:
        raise InvalidArgument(f"{field}: longer than {MAX_NAME} characters")
    if "\x00" in value:
        raise InvalidArgument(f"{field}: NUL characters are not allowed")
    return value


def device_target(device: str, field: str) -> str:
    """The virtio target dev for an IRI device name: IronCore's ``oda`` becomes ``vda``."""
    m = DEVICE_RE.match(device)
    if not m:
        raise InvalidArgument(f"{field}: {device[:40]!r} is not a device name like 'oda' or 'vdb'")
    return "vd" + m.group(1)


def check_size(value: int, field: str) -> int:
    if value < 0:
        raise InvalidArgument(f"{field}: must not be negative, got {value}")
    if value > MAX_DISK_BYTES:
        raise InvalidArgument(f"{field}: {value} bytes is more than the maximum of {MAX_DISK_BYTES} (64 TiB)")
    return value


def check_power(power: int, field: str) -> int:
    if power not in (POWER_ON, POWER_OFF):
        raise InvalidArgument(f"{field}: unknown power state {power}")
    return power


# -- requests to records -----------------------------------------------------------------------
ResolveImage = Callable[[str, "Credentials | None", MachineRecord], Image]


@dataclass(frozen=True)
class Lookups:
    """What converting a request needs from the host: images (a reference and its pull credentials
    for a machine to local files, raising :class:`~ironpool.runtime.images.ImageError`), whether a
    volume file, a libvirt network or a host bridge exists, and how the host realises networks that
    do not say."""

    resolve_image: ResolveImage
    file_exists: Callable[[str], bool]
    network_exists: Callable[[str], bool]
    bridge_exists: Callable[[str], bool] = lambda _name: False
    networks: nics.NetworkSettings = field(default_factory=nics.NetworkSettings)


@dataclass
class MachinePlan:
    """A checked CreateMachine: the record to define, and what its disks and boot are made from."""

    rec: MachineRecord
    boot: Image | None = None  # a kernel bundle booted directly
    images: dict[str, Image] = field(default_factory=dict)  # volume name -> disk image to overlay
    keys: dict[str, bytes] = field(default_factory=dict, repr=False)  # encrypted volume name -> key


def check_machine(machine: machine_pb2.Machine, classes: Mapping[str, MachineClassSpec]) -> MachineClassSpec:
    """The checks that need no host: class, power, metadata, Ignition size, a client-chosen id."""
    spec = machine.spec
    class_name = getattr(spec, "class")
    if not class_name:
        raise InvalidArgument("machine.spec.class: must not be empty")
    cls = classes.get(class_name)
    if cls is None:
        raise NotFound(
            f"machine.spec.class: machine class {class_name!r} not supported "
            f"(known: {', '.join(sorted(classes)) or 'none'})"
        )
    check_power(spec.power, "machine.spec.power")
    check_string_map(machine.metadata.labels, "machine.metadata.labels")
    check_string_map(machine.metadata.annotations, "machine.metadata.annotations")
    if len(spec.ignition_data) > MAX_IGNITION_BYTES:
        raise InvalidArgument(f"machine.spec.ignition_data: larger than {MAX_IGNITION_BYTES} bytes")
    if machine.metadata.id:
        check_id(machine.metadata.id, "machine.metadata.id")
    return cls


def new_machine_id(machine: machine_pb2.Machine) -> str:
    """The id a new machine gets: the client's (checked by :func:`check_machine`) or a fresh one."""
    return machine.metadata.id or uuid.uuid4().hex


def plan_machine(
    machine: machine_pb2.Machine,
    machine_id: str,
    cls: MachineClassSpec,
    disk_dir: Path,
    lookups: Lookups,
    owner: str,
    now: int,
) -> MachinePlan:
    """The record of a new machine with its volumes and interfaces; raises naming the field."""
    spec = machine.spec
    rec = MachineRecord(
        id=machine_id,
        class_name=cls.name,
        labels=dict(machine.metadata.labels),
        annotations=dict(machine.metadata.annotations),
        power=int(spec.power),
        hostname=spec.guest_config.hostname,
        ignition=bool(spec.ignition_data) and not guest_data.is_cloud_init(spec.ignition_data),
        cpu=cls.cpu,
        memory_bytes=cls.memory,
        created_at=now,
        generation=1,
        owner=owner,
    )
    plan = MachinePlan(rec)
    for i, vol in enumerate(spec.volumes):
        field_ = f"machine.spec.volumes[{i}]"
        vrec, image = volume_record(vol, field_, rec, disk_dir, lookups)
        if image is not None and image.boots_kernel:
            if plan.boot is not None:
                raise InvalidArgument(
                    f"{field_}.local_disk.image: only one kernel image can boot a machine "
                    f"({plan.boot.name!r} already does)"
                )
            plan.boot = image
            rec.boot_image = image.name
        if image is not None and image.has_disk:
            plan.images[vrec.name] = image
        rec.volumes.append(vrec)
    for i, nic in enumerate(spec.network_interfaces):
        rec.nics.append(nic_record(nic, f"machine.spec.network_interfaces[{i}]", rec, lookups))
    plan.keys = volume_secrets.volume_keys(spec.volumes, rec, "machine.spec.volumes")
    return plan


def _device(vol: machine_pb2.Volume, field: str, rec: MachineRecord) -> tuple[str, str]:
    used = {v.target for v in rec.volumes}
    if vol.device:
        target = device_target(vol.device, f"{field}.device")
        if target in used:
            raise InvalidArgument(f"{field}.device: device {vol.device!r} is already used")
        if target == SEED_TARGET:
            raise InvalidArgument(
                f"{field}.device: device {vol.device!r} is reserved for the cloud-init seed")
        return vol.device, target
    target = next((f"vd{c}" for c in "abcdefghijklmnopqrstuvwxyz" if f"vd{c}" not in used), "")
    if not target:
        raise InvalidArgument(f"{field}.device: no free device name left")
    return "od" + target[2:], target


def volume_record(
    vol: machine_pb2.Volume, field: str, rec: MachineRecord, disk_dir: Path, lookups: Lookups
) -> tuple[VolumeRecord, Image | None]:
    """A volume for ``rec``: a local disk (and the image it starts from) or a connection."""
    name = check_name(vol.name, f"{field}.name")
    if rec.volume(name) is not None:
        raise AlreadyExists(f"{field}.name: volume {name!r} already exists on the machine")
    device, target = _device(vol, field, rec)
    has_local, has_conn = vol.HasField("local_disk"), vol.HasField("connection")
    if has_local == has_conn:
        raise InvalidArgument(f"{field}: exactly one of local_disk and connection must be set")
    if has_local:
        size = check_size(vol.local_disk.size_bytes, f"{field}.local_disk.size_bytes")
        image = local_image(vol.local_disk, f"{field}.local_disk", rec, lookups)
        digest = hashlib.sha256(name.encode()).hexdigest()[:16]
        # A kernel image boots without a disk unless it has one or a size asks for a scratch disk.
        kernel_only = image is not None and not image.has_disk and size == 0
        path = "" if kernel_only else str(disk_dir / f"{digest}.qcow2")
        return VolumeRecord(
            name=name, device=device, target=target, kind="local", size_bytes=size,
            image=image.name if image else "", image_ref=image.booted_ref if image else "",
            handle=f"local:{rec.id}:{digest}", path=path, format="qcow2", owned=bool(path),
        ), image  # fmt: skip
    conn = vol.connection
    if conn.driver != LOCAL_DRIVER:
        raise InvalidArgument(
            f"{field}.connection.driver: unsupported driver {conn.driver!r} "
            f"(this runtime attaches {LOCAL_DRIVER!r} volumes)"
        )
    attrs = dict(conn.attributes)
    path = attrs.get("path", "")
    if not path or not Path(path).is_absolute():
        raise InvalidArgument(f"{field}.connection.attributes.path: an absolute file path is required")
    fmt = attrs.get("format", "qcow2")
    if fmt not in ("qcow2", "raw"):
        raise InvalidArgument(f"{field}.connection.attributes.format: {fmt!r} is not qcow2 or raw")
    size = check_size(conn.effective_storage_bytes, f"{field}.connection.effective_storage_bytes")
    io_tune(attrs, f"{field}.connection.attributes")
    if not lookups.file_exists(path):
        raise NotFound(f"{field}.connection.attributes.path: volume file {path!r} does not exist")
    return VolumeRecord(
        name=name, device=device, target=target, kind="connection", driver=conn.driver,
        handle=conn.handle, attributes=attrs, effective_storage_bytes=size, path=path, format=fmt,
    ), None  # fmt: skip


def local_image(
    disk: machine_pb2.LocalDisk, field: str, rec: MachineRecord, lookups: Lookups
) -> Image | None:
    """The image a local disk starts from (None for an empty disk), with its pull credentials."""
    ref = disk.image.image if disk.HasField("image") else ""
    if not ref:
        return None
    try:
        creds = Credentials.from_secret(dict(disk.image.pull_secret_data), "the pull secret")
    except ImageError as exc:
        raise exc.as_iri(f"{field}.image.pull_secret_data") from exc
    try:
        return lookups.resolve_image(ref, creds, rec)
    except ImageError as exc:
        raise exc.as_iri(f"{field}.image.image") from exc


def attachable(vrec: VolumeRecord, image: Image | None) -> VolumeRecord:
    """A volume for a machine that exists: a kernel image only boots a machine at creation."""
    if image is not None and image.boots_kernel and not image.has_disk:
        raise InvalidArgument(
            f"volume.local_disk.image.image: kernel image {image.name!r} can only "
            f"boot a machine at creation, not be attached"
        )
    return vrec


def nic_record(
    nic: machine_pb2.NetworkInterface, field: str, rec: MachineRecord, lookups: Lookups
) -> NicRecord:
    """A network interface for ``rec`` and how the host realises it (see :mod:`.nics`)."""
    name = check_name(nic.name, f"{field}.name")
    if rec.nic(name) is not None:
        raise AlreadyExists(f"{field}.name: network interface {name!r} already exists on the machine")
    nrec = nics.nic_record(
        nic, field, rec.id, lookups.networks, nics.NicLookups(lookups.network_exists, lookups.bridge_exists)
    )
    other = next((n for n in rec.nics if n.mac == nrec.mac), None)
    if other is not None:
        raise AlreadyExists(
            f"{field}.attributes.{nics.MAC_ATTRIBUTE}: MAC {nrec.mac} is already used by "
            f"network interface {other.name!r} of the machine"
        )
    return nrec


@dataclass(frozen=True)
class VolumeUpdate:
    """A checked UpdateVolume: the size to grow to (0: keep) and, for a connection, its attributes."""

    size: int
    attributes: dict[str, str] | None = None
    retune: bool = False  # the I/O limits changed

    def apply(self, vrec: VolumeRecord) -> None:
        if vrec.kind == "local":
            vrec.size_bytes = max(self.size, vrec.size_bytes)
        else:
            vrec.effective_storage_bytes = max(self.size, vrec.effective_storage_bytes)
        if self.attributes is not None:
            vrec.attributes = self.attributes


def volume_update(vrec: VolumeRecord, volume: machine_pb2.Volume) -> VolumeUpdate:
    """Check an update of an attached volume: same kind and file, grow only."""
    if vrec.kind == "local":
        if not volume.HasField("local_disk"):
            raise InvalidArgument("volume.local_disk: volume was a local disk; kind cannot change")
        field_ = "volume.local_disk.size_bytes"
        size, current = check_size(volume.local_disk.size_bytes, field_), vrec.size_bytes
        attrs = None
    else:
        if not volume.HasField("connection"):
            raise InvalidArgument("volume.connection: volume was a connection; kind cannot change")
        conn = volume.connection
        if conn.attributes.get("path", vrec.path) != vrec.path:
            raise InvalidArgument("volume.connection.attributes.path: cannot change the volume file")
        field_ = "volume.connection.effective_storage_bytes"
        size, current = check_size(conn.effective_storage_bytes, field_), vrec.effective_storage_bytes
        attrs = dict(conn.attributes)
    if size and size < current:
        raise InvalidArgument(f"{field_}: cannot shrink from {current} to {size} bytes")
    retune = attrs is not None and any(attrs.get(k) != vrec.attributes.get(k) for k in ("iops", "tps"))
    if retune:
        io_tune(attrs or {}, "volume.connection.attributes")
    return VolumeUpdate(size=size, attributes=attrs, retune=retune)


def io_tune(attrs: Mapping[str, str], field: str) -> dict[str, int]:
    """libvirt block I/O limits from a connection's ``iops`` and ``tps`` attributes (0: none)."""
    params: dict[str, int] = {}
    for key, param in (("iops", "total_iops_sec"), ("tps", "total_bytes_sec")):
        value = attrs.get(key, "0")
        if not value.isdigit():
            raise InvalidArgument(f"{field}.{key}: {value!r} is not a number")
        params[param] = int(value)
    return params


# -- records to IRI ----------------------------------------------------------------------------
@dataclass(frozen=True)
class MachineView:
    """A machine as reported: its record, IRI state, why it is not running, what is applied."""

    rec: MachineRecord
    state: int  # IRI MachineState
    error: str = ""
    observed_generation: int = 0


@dataclass(frozen=True)
class ClassStatus:
    cls: MachineClassSpec
    quantity: int


def class_statuses(
    classes: Mapping[str, MachineClassSpec], free_cpu: int, free_memory: int
) -> list[ClassStatus]:
    """Every class with how many more machines of it fit, by name."""
    return [
        ClassStatus(c, quantity(c, free_cpu, free_memory))
        for c in sorted(classes.values(), key=lambda c: c.name)
    ]


def machine_state(
    rec: MachineRecord, domain_state: tuple[int, int] | None, error: str = "", terminating: bool = False
) -> int:
    """The IRI state of a machine from its record and its domain's libvirt ``(state, reason)``."""
    if rec.deleted_at or terminating:
        return machine_pb2.MACHINE_TERMINATING
    if domain_state is None:
        return machine_pb2.MACHINE_PENDING
    st, reason = domain_state
    if st in (libvirt.VIR_DOMAIN_RUNNING, libvirt.VIR_DOMAIN_BLOCKED, libvirt.VIR_DOMAIN_SHUTDOWN):
        return machine_pb2.MACHINE_RUNNING
    if st in (libvirt.VIR_DOMAIN_PAUSED, libvirt.VIR_DOMAIN_PMSUSPENDED):
        return machine_pb2.MACHINE_SUSPENDED
    if st == libvirt.VIR_DOMAIN_CRASHED:
        return machine_pb2.MACHINE_TERMINATED
    # shut off: IronCore's poollet maps Suspended to Shutdown, which a powered-off machine is.
    if rec.power == POWER_ON and error:
        return machine_pb2.MACHINE_PENDING
    if rec.power == POWER_ON and reason == libvirt.VIR_DOMAIN_SHUTOFF_CRASHED:
        return machine_pb2.MACHINE_TERMINATED
    if rec.power == POWER_ON and reason == libvirt.VIR_DOMAIN_SHUTOFF_UNKNOWN:
        return machine_pb2.MACHINE_PENDING  # defined, never started yet
    return machine_pb2.MACHINE_SUSPENDED


def lifecycle_event(event: int, detail: int) -> tuple[str, str, str]:
    """``(reason, type, action)`` of the IRI event for a libvirt lifecycle event."""
    reason, type_, action = _LIFECYCLE.get(event, ("DomainEvent", "Normal", "Event"))
    if event == libvirt.VIR_DOMAIN_EVENT_STOPPED and detail == libvirt.VIR_DOMAIN_EVENT_STOPPED_FAILED:
        return "StartFailed", "Warning", action
    if event == libvirt.VIR_DOMAIN_EVENT_STOPPED and detail == libvirt.VIR_DOMAIN_EVENT_STOPPED_CRASHED:
        return "Crashed", "Warning", action
    return reason, type_, action


def machine_message(view: MachineView) -> machine_pb2.Machine:
    rec = view.rec
    meta = meta_pb2.ObjectMetadata(
        id=rec.id,
        labels=rec.labels,
        annotations=rec.annotations,
        generation=rec.generation,
        created_at=rec.created_at,
        deleted_at=rec.deleted_at,
    )
    spec = machine_pb2.MachineSpec(**{"class": rec.class_name}, power=rec.power)  # type: ignore[arg-type]
    spec.guest_config.hostname = rec.hostname
    status = machine_pb2.MachineStatus(
        observed_generation=view.observed_generation,
        state=view.state,  # type: ignore[arg-type]
        image_ref=next((v.image_ref or v.image for v in rec.volumes if v.image), rec.boot_image),
    )
    attached = view.state != machine_pb2.MACHINE_PENDING
    for v in rec.volumes:
        vol = spec.volumes.add(name=v.name, device=v.device)
        if v.kind == "local":
            vol.local_disk.size_bytes = v.size_bytes
            if v.image:
                vol.local_disk.image.image = v.image
        else:
            vol.connection.driver = v.driver
            vol.connection.handle = v.handle
            vol.connection.attributes.update(v.attributes)
            vol.connection.effective_storage_bytes = v.effective_storage_bytes
        status.volumes.add(
            name=v.name,
            handle=v.handle,
            state=machine_pb2.VOLUME_ATTACHED if attached else machine_pb2.VOLUME_PENDING,
        )
    for n in rec.nics:
        spec.network_interfaces.add(
            name=n.name, network_id=n.network_id, ips=n.ips, attributes=n.attributes, labels=n.labels
        )
        status.network_interfaces.add(
            name=n.name,
            handle=nics.handle(n),
            state=machine_pb2.NETWORK_INTERFACE_ATTACHED
            if attached
            else machine_pb2.NETWORK_INTERFACE_PENDING,
        )
    return machine_pb2.Machine(metadata=meta, spec=spec, status=status)


def class_status_message(cs: ClassStatus) -> machine_pb2.MachineClassStatus:
    return machine_pb2.MachineClassStatus(
        machine_class=machine_pb2.MachineClass(
            name=cs.cls.name, capabilities=machine_pb2.MachineClassCapabilities(resources=cs.cls.resources)
        ),
        quantity=cs.quantity,
    )
