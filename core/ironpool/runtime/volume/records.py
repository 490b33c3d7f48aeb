"""Volume and snapshot records, IRI requests to records and records to IRI messages, with checks.

Pure: nothing here touches libvirt or the disk. A record is what the runtime remembers about an
object besides what libvirt knows; :mod:`.sidecar` stores it next to the pool.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, TypeVar

from ironpool.iri.gen.meta.v1alpha1 import api_pb2 as meta_pb2
from ironpool.iri.gen.volume.v1alpha1 import api_pb2 as volume_pb2
from ironpool.runtime.errors import InvalidArgument, NotFound
from ironpool.runtime.metadata import check_string_map

from . import luks
from .classes import VolumeClassSpec

Phase = Literal["creating", "ready", "deleting"]
DRIVER = "ironpool-local"
T = TypeVar("T")


@dataclass
class VolumeRecord:
    """What the runtime remembers about one volume besides what libvirt knows."""

    id: str
    phase: Phase
    created_at: int  # Unix ns
    class_name: str
    storage_bytes: int  # requested (spec) size
    tps: int = 0
    iops: int = 0
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    image: str = ""
    snapshot_id: str = ""
    encrypted: bool = False  # LUKS inside the qcow2 (see .luks); the key is never kept

    @property
    def libvirt_name(self) -> str:
        return volume_name(self.id)


@dataclass
class SnapshotRecord:
    """A volume snapshot: a flattened qcow2 copy of the source volume, kept in the same pool."""

    id: str
    phase: Phase
    created_at: int
    volume_id: str
    size: int = 0  # virtual size of the source volume at snapshot time
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)

    @property
    def libvirt_name(self) -> str:
        return snapshot_name(self.id)


def volume_name(volume_id: str) -> str:
    """libvirt volume name of an IRI volume: derived from the runtime's own ID only."""
    return f"{volume_id}.qcow2"


def snapshot_name(snapshot_id: str) -> str:
    return f"snapshot-{snapshot_id}.qcow2"


@dataclass(frozen=True)
class VolumeView:
    """A volume as the runtime reports it."""

    record: VolumeRecord
    path: str
    effective_bytes: int
    error: str = ""  # non-empty: the backing libvirt volume is missing or unusable

    @property
    def available(self) -> bool:
        return not self.error

    def access_attributes(self, pool_name: str) -> dict[str, str]:
        """The ``VolumeAccess.attributes`` a machine runtime on this host attaches the disk with."""
        attrs = {"path": self.path, "format": "qcow2", "pool": pool_name, "volume": self.record.libvirt_name}
        if self.record.iops:
            attrs["iops"] = str(self.record.iops)
        if self.record.tps:
            attrs["tps"] = str(self.record.tps)
        if self.record.encrypted:
            attrs[luks.ENCRYPTION_ATTRIBUTE] = luks.LUKS
        return attrs


@dataclass(frozen=True)
class SnapshotView:
    """A snapshot as the runtime reports it."""

    record: SnapshotRecord
    path: str


# -- checks ------------------------------------------------------------------------------------
def check_size(value: int, field: str) -> int:
    """A storage size must be positive (free-space checks come later, against the pool)."""
    if value <= 0:
        raise InvalidArgument(f"{field}: must be greater than 0, got {value}")
    return value


def lookup(objects: Mapping[str, T], object_id: str, field: str, what: str) -> T:
    """The object a runtime-issued id names. An id the runtime never issued is NOT_FOUND whatever
    its shape (IronCore's poollet takes NotFound as "gone"); only an empty one is malformed."""
    if not object_id:
        raise InvalidArgument(f"{field}: required (empty ID)")
    found = objects.get(object_id)
    if found is None:
        raise NotFound(f"{field}: {what} {object_id[:80]!r} not found")
    return found


# -- requests to records -----------------------------------------------------------------------
@dataclass(frozen=True)
class CreateVolumeArgs:
    """The fields of a CreateVolume request the runtime uses, checked where no pool is needed."""

    class_name: str
    storage_bytes: int
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    image: str = ""
    snapshot_id: str = ""
    encryption: Mapping[str, bytes] = field(default_factory=dict, repr=False)  # the Secret's data
    pull_secret: Mapping[str, bytes] = field(default_factory=dict, repr=False)
    architecture: str = ""


def create_args(volume: volume_pb2.Volume) -> CreateVolumeArgs:
    """The CreateVolume request's fields; a client-chosen id is ignored (the runtime issues ids)."""
    source = volume.spec.volume_data_source
    return CreateVolumeArgs(
        class_name=getattr(volume.spec, "class"),
        storage_bytes=volume.spec.resources.storage_bytes,
        labels=dict(volume.metadata.labels),
        annotations=dict(volume.metadata.annotations),
        image=source.image_data_source.image,
        snapshot_id=source.snapshot_data_source.snapshot_id,
        pull_secret=dict(source.image_data_source.pull_secret_data),
        architecture=source.image_data_source.architecture,
        encryption=dict(volume.spec.encryption.secret_data),
    )


def volume_class(args: CreateVolumeArgs, classes: Mapping[str, VolumeClassSpec]) -> VolumeClassSpec:
    """Check what needs neither the pool nor the catalog; the class the volume gets."""
    if not args.class_name:
        raise InvalidArgument("volume.spec.class: required")
    vclass = classes.get(args.class_name)
    if vclass is None:
        known = ", ".join(sorted(classes)) or "none"
        raise InvalidArgument(
            f"volume.spec.class: unknown volume class {args.class_name[:80]!r} (known: {known})"
        )
    check_size(args.storage_bytes, "volume.spec.resources.storage_bytes")
    check_string_map(args.labels, "volume.metadata.labels")
    check_string_map(args.annotations, "volume.metadata.annotations")
    luks.encryption_key(args.encryption, "volume.spec.encryption")
    if args.image and args.snapshot_id:
        raise InvalidArgument("volume.spec.volume_data_source: set either an image or a snapshot, not both")
    return vclass


# -- records to IRI ----------------------------------------------------------------------------
def volume_message(view: VolumeView, pool_name: str) -> volume_pb2.Volume:
    rec = view.record
    status = volume_pb2.VolumeStatus(
        state=volume_pb2.VOLUME_ERROR if view.error else volume_pb2.VOLUME_AVAILABLE,
        resources=volume_pb2.VolumeResources(storage_bytes=view.effective_bytes),
    )
    if view.error:
        status.volume_conditions.append(
            volume_pb2.Conditions(
                type="Ready", status="False", reason="BackingVolumeMissing", message=view.error
            )
        )
    else:
        # Access only when available, as the volumepoollet expects.
        status.access.CopyFrom(
            volume_pb2.VolumeAccess(
                driver=DRIVER, handle=rec.id, attributes=view.access_attributes(pool_name)
            )
        )
    spec = volume_pb2.VolumeSpec(resources=volume_pb2.VolumeResources(storage_bytes=rec.storage_bytes))
    setattr(spec, "class", rec.class_name)
    if rec.image:
        spec.volume_data_source.image_data_source.image = rec.image
    elif rec.snapshot_id:
        spec.volume_data_source.snapshot_data_source.snapshot_id = rec.snapshot_id
    return volume_pb2.Volume(
        metadata=meta_pb2.ObjectMetadata(
            id=rec.id, labels=rec.labels, annotations=rec.annotations, created_at=rec.created_at
        ),
        spec=spec,
        status=status,
    )


def snapshot_message(view: SnapshotView) -> volume_pb2.VolumeSnapshot:
    rec = view.record
    return volume_pb2.VolumeSnapshot(
        metadata=meta_pb2.ObjectMetadata(
            id=rec.id, labels=rec.labels, annotations=rec.annotations, created_at=rec.created_at
        ),
        spec=volume_pb2.VolumeSnapshotSpec(volume_id=rec.volume_id),
        status=volume_pb2.VolumeSnapshotStatus(state=volume_pb2.VOLUME_SNAPSHOT_READY, size=rec.size),
    )


def class_status_message(vclass: VolumeClassSpec, quantity: int) -> volume_pb2.VolumeClassStatus:
    return volume_pb2.VolumeClassStatus(
        volume_class=volume_pb2.VolumeClass(
            name=vclass.name,
            capabilities=volume_pb2.VolumeClassCapabilities(tps=vclass.tps, iops=vclass.iops),
        ),
        quantity=quantity,
    )
