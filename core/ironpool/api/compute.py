"""``compute.ironcore.dev/v1alpha1``: MachineClass, MachinePool, Machine and Reservation."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from ironpool.api.meta import (
    ApiModel,
    Condition,
    LocalObjectReference,
    ObjectMeta,
    SecretKeySelector,
    Taint,
    Timestamp,
    Toleration,
)
from ironpool.api.quantity import Quantity
from ironpool.api.storage import VolumeSpec

COMPUTE_GROUP = "compute.ironcore.dev"
COMPUTE_VERSION = "v1alpha1"
DEFAULT_IGNITION_KEY = "ignition.yaml"


# -- MachineClass ------------------------------------------------------------------------------
class MachineClass(ApiModel):
    """A machine flavour; it has no spec, only top-level ``capabilities`` (cpu, memory, ...)."""

    api_version: str | None = None
    kind: str | None = None
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    capabilities: dict[str, Quantity] = Field(default_factory=dict)


# -- MachinePool -------------------------------------------------------------------------------
class MachinePoolSpec(ApiModel):
    """Desired state of a MachinePool: its provider ID and taints."""

    provider_id: str | None = Field(default=None, alias="providerID")
    taints: list[Taint] | None = None


class MachinePoolAddress(ApiModel):
    """An address of the pool's host."""

    type: Literal["Hostname", "InternalIP", "ExternalIP", "InternalDNS", "ExternalDNS"]
    address: str


class DaemonEndpoint(ApiModel):
    """A port the machinepoollet serves on."""

    port: int


class MachinePoolDaemonEndpoints(ApiModel):
    """Endpoints of the daemons on the pool's host."""

    machinepoollet_endpoint: DaemonEndpoint | None = Field(default=None, alias="machinepoolletEndpoint")


class MachinePoolStatus(ApiModel):
    """Reported by the machinepoollet: state, conditions, classes, capacity."""

    state: Literal["Ready", "Pending", "Error", "Offline"] | None = None
    conditions: list[Condition] | None = None
    available_machine_classes: list[LocalObjectReference] | None = None
    addresses: list[MachinePoolAddress] | None = None
    daemon_endpoints: MachinePoolDaemonEndpoints | None = None
    capacity: dict[str, Quantity] | None = None
    allocatable: dict[str, Quantity] | None = None


class MachinePool(ApiModel):
    """A pool of compute capacity, announced by its machinepoollet."""

    api_version: str | None = None
    kind: str | None = None
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: MachinePoolSpec = Field(default_factory=MachinePoolSpec)
    status: MachinePoolStatus | None = None


# -- Machine -----------------------------------------------------------------------------------
class EFIVar(ApiModel):
    """A variable passed to EFI at boot."""

    name: str
    uuid: str
    value: str


class GuestConfig(ApiModel):
    """Configuration handed to the guest; ``hostname`` is set once."""

    hostname: str | None = None


class NetworkInterfaceTemplate(ApiModel):
    """An ephemeral NetworkInterface's template. ``spec`` is a NetworkInterface spec, kept as a mapping
    here and checked and defaulted by the Machine strategy with the NetworkInterface rules."""

    metadata: ObjectMeta | None = None
    spec: dict[str, Any] = Field(default_factory=dict)


class EphemeralNetworkInterfaceSource(ApiModel):
    """A NetworkInterface created and deleted with the Machine."""

    network_interface_template: NetworkInterfaceTemplate | None = None


class MachineNetworkInterface(ApiModel):
    """A NIC of a Machine: exactly one of ``networkInterfaceRef`` or ``ephemeral``."""

    name: str
    network_interface_ref: LocalObjectReference | None = None
    ephemeral: EphemeralNetworkInterfaceSource | None = None


class EmptyDiskVolumeSource(ApiModel):
    """A scratch disk offered by the pool (deprecated in favour of localDisk)."""

    size_limit: Quantity | None = None


class LocalDiskVolumeSource(ApiModel):
    """A disk on the pool's host, optionally filled from an OS image (immutable)."""

    size_limit: Quantity | None = None
    image: str | None = None


class VolumeTemplate(ApiModel):
    """Metadata and spec of an ephemeral Volume."""

    metadata: ObjectMeta | None = None
    spec: VolumeSpec = Field(default_factory=VolumeSpec)


class EphemeralVolumeSource(ApiModel):
    """A Volume created and deleted with the Machine."""

    volume_template: VolumeTemplate | None = None


class MachineVolume(ApiModel):
    """A disk of a Machine: exactly one of volumeRef, emptyDisk, localDisk or ephemeral."""

    name: str
    device: str | None = None
    volume_ref: LocalObjectReference | None = None
    empty_disk: EmptyDiskVolumeSource | None = None
    local_disk: LocalDiskVolumeSource | None = None
    ephemeral: EphemeralVolumeSource | None = None


class MachineSpec(ApiModel):
    """Desired state of a Machine."""

    machine_class_ref: LocalObjectReference
    machine_pool_selector: dict[str, str] | None = None
    machine_pool_ref: LocalObjectReference | None = None
    power: Literal["On", "Off"] = "On"
    network_interfaces: list[MachineNetworkInterface] | None = None
    volumes: list[MachineVolume] | None = None
    ignition_ref: SecretKeySelector | None = None
    # IronCore's former Machine.spec.imagePullSecret: a kubernetes.io/dockerconfigjson Secret of the
    # Machine's namespace, the credentials for pulling its local disks' images.
    image_pull_secret: LocalObjectReference | None = None
    efi_vars: list[EFIVar] | None = Field(default=None, alias="efiVars")
    tolerations: list[Toleration] | None = None
    guest_config: GuestConfig | None = None


class MachineNetworkInterfaceStatus(ApiModel):
    """Attachment state of one NIC, reported by the machinepoollet; ``ips`` (an ironpool addition)
    are the NIC's effective addresses, so front ends find them in the Machine."""

    name: str
    handle: str | None = None
    state: Literal["Pending", "Attached"] | None = None
    network_interface_ref: LocalObjectReference | None = None
    ips: list[str] | None = None
    last_state_transition_time: Timestamp | None = None


class MachineVolumeStatus(ApiModel):
    """Attachment state of one volume, reported by the machinepoollet."""

    name: str
    handle: str | None = None
    state: Literal["Pending", "Attached"] | None = None
    volume_ref: LocalObjectReference | None = None
    last_state_transition_time: Timestamp | None = None


MachineState = Literal["Pending", "Running", "Shutdown", "Terminating", "Terminated"]


class MachineStatus(ApiModel):
    """Reported by the machinepoollet."""

    machine_id: str | None = Field(default=None, alias="machineID")
    observed_generation: int | None = None
    state: MachineState | None = None
    conditions: list[Condition] | None = None
    network_interfaces: list[MachineNetworkInterfaceStatus] | None = None
    volumes: list[MachineVolumeStatus] | None = None
    # An ironpool addition (IRI's MachineStatus.image_ref): the image booted, pinned to its digest.
    image_ref: str | None = None


class Machine(ApiModel):
    """A virtual machine; the scheduler binds it to a MachinePool via ``spec.machinePoolRef``."""

    api_version: str | None = None
    kind: str | None = None
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: MachineSpec
    status: MachineStatus | None = None

    @model_validator(mode="before")
    @classmethod
    def _empty_spec(cls, data: Any) -> Any:
        # A missing spec should report "spec.machineClassRef: Required value", as Kubernetes does.
        if isinstance(data, dict) and data.get("spec") is None:
            return {**data, "spec": {}}
        return data


# -- Reservation -------------------------------------------------------------------------------
class ZoneSpread(ApiModel):
    """Spread a Reservation's machines across ``topology.ironcore.dev/zone``: no zone holds more than
    ``maxSkew`` of them beyond the zone that holds the fewest (among zones with a usable pool)."""

    max_skew: int = 1


class ReservationSpec(ApiModel):
    """What a Reservation holds, and where.

    ``resources`` is IronCore's ResourceList: ``class/machine.<class>: N`` holds N whole machines of
    that class (each on one pool), ``cpu`` and ``memory`` one more block of that size on one pool.
    ``pools`` empty means any pool. The rest are ironpool additions: ``poolSelector`` narrows the
    pools by label, ``zoneSpread`` spreads the machines over zones, ``ttlSecondsAfterCreation``
    releases what is still unused after that long, and ``dryRun`` asks only whether it would fit.
    """

    pools: list[LocalObjectReference] | None = None
    pool_selector: dict[str, str] | None = None
    resources: dict[str, Quantity] = Field(default_factory=dict)
    zone_spread: ZoneSpread | None = None
    ttl_seconds_after_creation: int | None = None
    dry_run: bool | None = None


ReservationState = Literal["Pending", "Accepted", "Rejected"]


class ReservationPoolStatus(ApiModel):
    """One pool's part of a Reservation: IronCore's ``ref`` (the pool's name) and ``state`` (as the
    pool's runtime answered), and what the scheduler set aside there (``resources``) and what bound
    Machines naming the Reservation use of it now (``consumed``), both ironpool additions."""

    ref: str
    state: ReservationState | None = None
    resources: dict[str, Quantity] | None = None
    consumed: dict[str, Quantity] | None = None


class ReservationStatus(ApiModel):
    """Where the Reservation is held and how far it got (conditions ``Scheduled``, ``Accepted``,
    ``Expired``)."""

    pools: list[ReservationPoolStatus] | None = None
    conditions: list[Condition] | None = None


class Reservation(ApiModel):
    """Capacity held for Machines that are yet to come (IronCore's IEP-11), all of it or none."""

    api_version: str | None = None
    kind: str | None = None
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: ReservationSpec = Field(default_factory=ReservationSpec)
    status: ReservationStatus | None = None
