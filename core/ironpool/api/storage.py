"""``storage.ironcore.dev/v1alpha1``: VolumeClass, VolumePool, Volume and VolumeSnapshot."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ironpool.api.meta import (
    ApiModel,
    Condition,
    LocalObjectReference,
    LocalUIDReference,
    ObjectMeta,
    Taint,
    Timestamp,
    Toleration,
)
from ironpool.api.quantity import Quantity

STORAGE_GROUP = "storage.ironcore.dev"
STORAGE_VERSION = "v1alpha1"
# ironpool's volumepoollets label their IRI volumes with their pool, and a VolumeSnapshot with the pool
# that holds it: it outlives its source Volume, and a Volume restored from it is made in that pool.
# The apiserver lets only that pool's identity write the snapshot.
VOLUME_POOL_LABEL = "volumepoollet.ironpool.dev/pool"


# -- VolumeClass -------------------------------------------------------------------------------
class VolumeClass(ApiModel):
    """A volume flavour: ``capabilities`` (tps, iops) and a ``resizePolicy``."""

    api_version: str | None = None
    kind: str | None = None
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    """Standard object metadata: name, namespace, labels, annotations and what the server sets."""
    capabilities: dict[str, Quantity] = Field(default_factory=dict)
    """Performance of a Volume of this class (tps: throughput per second, iops). Cannot be changed."""
    resize_policy: Literal["Static", "ExpandOnly"] = "Static"
    """Whether Volumes of this class may grow: Static (the default) or ExpandOnly."""


# -- VolumePool --------------------------------------------------------------------------------
class VolumePoolSpec(ApiModel):
    """Desired state of a VolumePool: its provider ID and taints."""

    provider_id: str | None = Field(default=None, alias="providerID")
    """Identifier of the pool at its provider, set by its volumepoollet."""
    taints: list[Taint] | None = None
    """Taints of the pool: only Volumes tolerating them are scheduled to it."""


class VolumePoolStatus(ApiModel):
    """Reported by the volumepoollet; capacity keys are ``class/volume.<name>`` in bytes."""

    state: Literal["Available", "Pending", "Unavailable"] | None = None
    """Available, Pending or Unavailable, as the volumepoollet reports it."""
    conditions: list[Condition] | None = None
    """Conditions of the pool."""
    available_volume_classes: list[LocalObjectReference] | None = None
    """The volume classes this pool can provide."""
    capacity: dict[str, Quantity] | None = None
    """Everything the pool has (storage, class counts)."""
    allocatable: dict[str, Quantity] | None = None
    """What the pool has left for Volumes."""


class VolumePool(ApiModel):
    """A pool of storage capacity, announced by its volumepoollet."""

    api_version: str | None = None
    kind: str | None = None
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    """Standard object metadata: name, namespace, labels, annotations and what the server sets."""
    spec: VolumePoolSpec = Field(default_factory=VolumePoolSpec)
    """Desired state of the pool."""
    status: VolumePoolStatus | None = None
    """Observed state of the pool, reported by its volumepoollet. Read-only for users."""


# -- Volume ------------------------------------------------------------------------------------
class VolumeEncryption(ApiModel):
    """The Secret holding ``encryptionKey``; immutable once set."""

    secret_ref: LocalObjectReference
    """Secret holding the encryption key of the Volume."""


class OSImageDataSource(ApiModel):
    """Fill the volume from an OS image."""

    image: str
    """OS image the Volume is filled from (an OCI reference or URL)."""
    architecture: str | None = None
    """CPU architecture of the image to pick from a multi-architecture index."""


class VolumeDataSource(ApiModel):
    """Where the volume's initial content comes from: at most one source."""

    volume_snapshot_ref: LocalObjectReference | None = None
    """A VolumeSnapshot the Volume is restored from."""
    os_image: OSImageDataSource | None = Field(default=None, alias="osImage")
    """An OS image the Volume is filled from."""


class VolumeSpec(ApiModel):
    """Desired state of a Volume (also the spec of a Machine's ephemeral volume template)."""

    volume_class_ref: LocalObjectReference | None = None
    """The volume class of the Volume; empty for a Volume without class (capacity only). Cannot be changed."""
    volume_pool_selector: dict[str, str] | None = None
    """Labels a pool must carry to be considered for the Volume."""
    volume_pool_ref: LocalObjectReference | None = None
    """The pool the Volume lives in; set by the scheduler when empty. Cannot be changed once set."""
    claim_ref: LocalUIDReference | None = None
    """The Machine that claimed the Volume (set by the machinepoollet that attaches it)."""
    resources: dict[str, Quantity] | None = None
    """Resources of the Volume (storage: its size; it may grow with an ExpandOnly class)."""
    unclaimable: bool | None = None
    """When true, no Machine may claim the Volume."""
    tolerations: list[Toleration] | None = None
    """Taints the Volume tolerates: only pools whose taints are all tolerated are considered."""
    encryption: VolumeEncryption | None = None
    """Encryption of the Volume at rest."""
    data_source: VolumeDataSource | None = None
    """What the Volume is filled from when it is made."""
    # IronCore's former Volume.spec.imagePullSecret: credentials for pulling dataSource.osImage.
    image_pull_secret: LocalObjectReference | None = None
    """A kubernetes.io/dockerconfigjson Secret of the namespace: credentials for pulling the Volume's
    image."""


class VolumeAccess(ApiModel):
    """How a machine host reaches the volume (driver, handle, attributes, secret)."""

    secret_ref: LocalObjectReference | None = None
    """Secret holding what a Machine needs to reach the Volume."""
    driver: str
    """Driver to attach the Volume with (local-file, ceph, ...)."""
    handle: str
    """Handle of the Volume at its driver."""
    volume_attributes: dict[str, str] | None = None
    """Driver-specific attributes of the Volume (its path, ...)."""


class VolumeAttachmentStatus(ApiModel):
    """Which running domain a Volume is attached to read-write (an ironpool addition; at most one at a
    time, across hosts). The machinepoollet of ``pool`` records it before it starts a domain with the
    Volume and clears it once that domain is gone; the pool lifecycle controller clears it when it moves
    the Machine off a pool that fenced itself. Changing it from one holder to another is refused:
    it must be cleared first."""

    machine_ref: LocalUIDReference
    """The Machine (name and uid) whose domain holds the Volume."""
    pool: str
    """The MachinePool whose host runs that domain."""
    since: Timestamp | None = None
    """When the attachment was recorded."""


class VolumeStatus(ApiModel):
    """Reported by the volumepoollet (``attachment``: by the machinepoollet of the Machine using it)."""

    volume_id: str | None = Field(default=None, alias="volumeID")
    """Identifier of the volume at its runtime."""
    state: Literal["Pending", "Available", "Error"] | None = None
    """Pending, Available or Error."""
    last_state_transition_time: Timestamp | None = None
    """When the state last changed."""
    access: VolumeAccess | None = None
    """How a Machine reaches the Volume, once Available."""
    conditions: list[Condition] | None = None
    """Conditions of the Volume."""
    resources: dict[str, Quantity] | None = None
    """Resources the Volume has (its size as provided)."""
    attachment: VolumeAttachmentStatus | None = None
    """The one domain the Volume is attached to read-write, if any."""


class Volume(ApiModel):
    """A block volume; the scheduler binds it to a VolumePool via ``spec.volumePoolRef``."""

    api_version: str | None = None
    kind: str | None = None
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    """Standard object metadata: name, namespace, labels, annotations and what the server sets."""
    spec: VolumeSpec = Field(default_factory=VolumeSpec)
    """Desired state of the Volume."""
    status: VolumeStatus | None = None
    """Observed state of the Volume, reported by its pool's volumepoollet. Read-only for users."""


# -- VolumeSnapshot ----------------------------------------------------------------------------
class VolumeSnapshotSpec(ApiModel):
    """Desired state of a VolumeSnapshot: the Volume it is taken of."""

    volume_ref: LocalObjectReference | None = None
    """The Volume of the namespace the snapshot is taken of. Required; cannot be changed."""


class VolumeSnapshotStatus(ApiModel):
    """Reported by the volumepoollet of the source Volume's pool."""

    snapshot_id: str | None = Field(default=None, alias="snapshotID")
    """Identifier of the snapshot at its runtime, ``<runtime>://<id>``."""
    state: Literal["Pending", "Ready", "Failed"] | None = None
    """Pending, Ready (usable as a Volume's dataSource) or Failed."""
    last_state_transition_time: Timestamp | None = None
    """When the state last changed."""
    size: Quantity | None = None
    """Size of the snapshot (the virtual size of the Volume when it was taken)."""


class VolumeSnapshot(ApiModel):
    """A point-in-time copy of a Volume's content; a new Volume is made from it through
    ``spec.dataSource.volumeSnapshotRef``. It lives on, in its source's pool, after its source is
    deleted."""

    api_version: str | None = None
    kind: str | None = None
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    """Standard object metadata: name, namespace, labels, annotations and what the server sets."""
    spec: VolumeSnapshotSpec = Field(default_factory=VolumeSnapshotSpec)
    """Desired state of the VolumeSnapshot."""
    status: VolumeSnapshotStatus | None = None
    """Observed state of the VolumeSnapshot, reported by a volumepoollet. Read-only for users."""
