"""``storage.ironcore.dev/v1alpha1``: VolumeClass, VolumePool and Volume."""

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


# -- VolumeClass -------------------------------------------------------------------------------
class VolumeClass(ApiModel):
    """A volume flavour: ``capabilities`` (tps, iops) and a ``resizePolicy``."""

    api_version: str | None = None
    kind: str | None = None
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    capabilities: dict[str, Quantity] = Field(default_factory=dict)
    resize_policy: Literal["Static", "ExpandOnly"] = "Static"


# -- VolumePool --------------------------------------------------------------------------------
class VolumePoolSpec(ApiModel):
    """Desired state of a VolumePool: its provider ID and taints."""

    provider_id: str | None = Field(default=None, alias="providerID")
    taints: list[Taint] | None = None


class VolumePoolStatus(ApiModel):
    """Reported by the volumepoollet; capacity keys are ``class/volume.<name>`` in bytes."""

    state: Literal["Available", "Pending", "Unavailable"] | None = None
    conditions: list[Condition] | None = None
    available_volume_classes: list[LocalObjectReference] | None = None
    capacity: dict[str, Quantity] | None = None
    allocatable: dict[str, Quantity] | None = None


class VolumePool(ApiModel):
    """A pool of storage capacity, announced by its volumepoollet."""

    api_version: str | None = None
    kind: str | None = None
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: VolumePoolSpec = Field(default_factory=VolumePoolSpec)
    status: VolumePoolStatus | None = None


# -- Volume ------------------------------------------------------------------------------------
class VolumeEncryption(ApiModel):
    """The Secret holding ``encryptionKey``; immutable once set."""

    secret_ref: LocalObjectReference


class OSImageDataSource(ApiModel):
    """Fill the volume from an OS image."""

    image: str
    architecture: str | None = None


class VolumeDataSource(ApiModel):
    """Where the volume's initial content comes from: at most one source."""

    volume_snapshot_ref: LocalObjectReference | None = None
    os_image: OSImageDataSource | None = Field(default=None, alias="osImage")


class VolumeSpec(ApiModel):
    """Desired state of a Volume (also the spec of a Machine's ephemeral volume template)."""

    volume_class_ref: LocalObjectReference | None = None
    volume_pool_selector: dict[str, str] | None = None
    volume_pool_ref: LocalObjectReference | None = None
    claim_ref: LocalUIDReference | None = None
    resources: dict[str, Quantity] | None = None
    unclaimable: bool | None = None
    tolerations: list[Toleration] | None = None
    encryption: VolumeEncryption | None = None
    data_source: VolumeDataSource | None = None
    # IronCore's former Volume.spec.imagePullSecret: credentials for pulling dataSource.osImage.
    image_pull_secret: LocalObjectReference | None = None


class VolumeAccess(ApiModel):
    """How a machine host reaches the volume (driver, handle, attributes, secret)."""

    secret_ref: LocalObjectReference | None = None
    driver: str
    handle: str
    volume_attributes: dict[str, str] | None = None


class VolumeStatus(ApiModel):
    """Reported by the volumepoollet."""

    volume_id: str | None = Field(default=None, alias="volumeID")
    state: Literal["Pending", "Available", "Error"] | None = None
    last_state_transition_time: Timestamp | None = None
    access: VolumeAccess | None = None
    conditions: list[Condition] | None = None
    resources: dict[str, Quantity] | None = None


class Volume(ApiModel):
    """A block volume; the scheduler binds it to a VolumePool via ``spec.volumePoolRef``."""

    api_version: str | None = None
    kind: str | None = None
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: VolumeSpec = Field(default_factory=VolumeSpec)
    status: VolumeStatus | None = None
