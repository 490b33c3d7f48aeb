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
    """Standard object metadata: name, namespace, labels, annotations and what the server sets."""
    capabilities: dict[str, Quantity] = Field(default_factory=dict)
    """Resources a Machine of this class gets (cpu, memory, ...). Cannot be changed."""


# -- MachinePool -------------------------------------------------------------------------------
class MachinePoolSpec(ApiModel):
    """Desired state of a MachinePool: its provider ID and taints."""

    provider_id: str | None = Field(default=None, alias="providerID")
    """Identifier of the pool at its provider, set by its machinepoollet."""
    taints: list[Taint] | None = None
    """Taints of the pool: only Machines tolerating them are scheduled to it (NoExecute also evicts)."""


class MachinePoolAddress(ApiModel):
    """An address of the pool's host."""

    type: Literal["Hostname", "InternalIP", "ExternalIP", "InternalDNS", "ExternalDNS"]
    """Kind of address: Hostname, InternalIP, ExternalIP, InternalDNS or ExternalDNS."""
    address: str
    """The address."""


class DaemonEndpoint(ApiModel):
    """A port the machinepoollet serves on."""

    port: int
    """Port the daemon listens on."""


class MachinePoolDaemonEndpoints(ApiModel):
    """Endpoints of the daemons on the pool's host."""

    machinepoollet_endpoint: DaemonEndpoint | None = Field(default=None, alias="machinepoolletEndpoint")
    """Endpoint of the pool's machinepoollet."""


class MachinePoolStatus(ApiModel):
    """Reported by the machinepoollet: state, conditions, classes, capacity."""

    state: Literal["Ready", "Pending", "Error", "Offline"] | None = None
    """Ready, Pending, Error or Offline, as the machinepoollet reports it."""
    conditions: list[Condition] | None = None
    """Conditions of the pool (Ready, ...), set by its machinepoollet and the pool lifecycle controller."""
    available_machine_classes: list[LocalObjectReference] | None = None
    """The machine classes this pool can run."""
    addresses: list[MachinePoolAddress] | None = None
    """Addresses of the pool's host."""
    daemon_endpoints: MachinePoolDaemonEndpoints | None = None
    """Endpoints of the daemons on the pool's host."""
    capacity: dict[str, Quantity] | None = None
    """Everything the pool has (cpu, memory, class counts as class/machine.<name>)."""
    allocatable: dict[str, Quantity] | None = None
    """What the pool has left for Machines after reservations."""


class MachinePool(ApiModel):
    """A pool of compute capacity, announced by its machinepoollet."""

    api_version: str | None = None
    kind: str | None = None
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    """Standard object metadata: name, namespace, labels, annotations and what the server sets."""
    spec: MachinePoolSpec = Field(default_factory=MachinePoolSpec)
    """Desired state of the pool."""
    status: MachinePoolStatus | None = None
    """Observed state of the pool, reported by its machinepoollet. Read-only for users."""


# -- Machine -----------------------------------------------------------------------------------
class EFIVar(ApiModel):
    """A variable passed to EFI at boot."""

    name: str
    """Name of the EFI variable."""
    uuid: str
    """Vendor GUID of the variable."""
    value: str
    """Value of the variable, base64-encoded."""


class GuestConfig(ApiModel):
    """Configuration handed to the guest; ``hostname`` is set once."""

    hostname: str | None = None
    """Host name of the guest; set once, cannot be changed."""


class NetworkInterfaceTemplate(ApiModel):
    """An ephemeral NetworkInterface's template. ``spec`` is a NetworkInterface spec, kept as a mapping
    here and checked and defaulted by the Machine strategy with the NetworkInterface rules."""

    metadata: ObjectMeta | None = None
    """Labels and annotations of the NetworkInterface made from the template."""
    spec: dict[str, Any] = Field(default_factory=dict)
    """Spec of the NetworkInterface made from the template (as a NetworkInterface's spec)."""


class EphemeralNetworkInterfaceSource(ApiModel):
    """A NetworkInterface created and deleted with the Machine."""

    network_interface_template: NetworkInterfaceTemplate | None = None
    """Template of the NetworkInterface made and deleted with the Machine."""


class MachineNetworkInterface(ApiModel):
    """A NIC of a Machine: exactly one of ``networkInterfaceRef`` or ``ephemeral``."""

    name: str
    """Name of the interface in the Machine, unique among its interfaces."""
    network_interface_ref: LocalObjectReference | None = None
    """An existing NetworkInterface of the namespace to attach."""
    ephemeral: EphemeralNetworkInterfaceSource | None = None
    """A NetworkInterface made with the Machine and deleted with it."""


class EmptyDiskVolumeSource(ApiModel):
    """A scratch disk offered by the pool (deprecated in favour of localDisk)."""

    size_limit: Quantity | None = None
    """Size of the scratch disk."""


class LocalDiskVolumeSource(ApiModel):
    """A disk on the pool's host, optionally filled from an OS image (immutable)."""

    size_limit: Quantity | None = None
    """Size of the disk on the pool's host."""
    image: str | None = None
    """OS image the disk is filled from (an OCI reference or URL); cannot be changed."""


class VolumeTemplate(ApiModel):
    """Metadata and spec of an ephemeral Volume."""

    metadata: ObjectMeta | None = None
    """Labels and annotations of the Volume made from the template."""
    spec: VolumeSpec = Field(default_factory=VolumeSpec)
    """Spec of the Volume made from the template."""


class EphemeralVolumeSource(ApiModel):
    """A Volume created and deleted with the Machine."""

    volume_template: VolumeTemplate | None = None
    """Template of the Volume made and deleted with the Machine."""


class MachineVolume(ApiModel):
    """A disk of a Machine: exactly one of volumeRef, emptyDisk, localDisk or ephemeral."""

    name: str
    """Name of the volume in the Machine, unique among its volumes."""
    device: str | None = None
    """Device name in the guest (oda, odb, ...); defaulted in order when empty."""
    volume_ref: LocalObjectReference | None = None
    """An existing Volume of the namespace to attach."""
    empty_disk: EmptyDiskVolumeSource | None = None
    """A scratch disk offered by the pool (deprecated: use localDisk)."""
    local_disk: LocalDiskVolumeSource | None = None
    """A disk on the pool's host, optionally filled from an OS image."""
    ephemeral: EphemeralVolumeSource | None = None
    """A Volume made with the Machine and deleted with it."""


class MachineSpec(ApiModel):
    """Desired state of a Machine."""

    machine_class_ref: LocalObjectReference
    """The machine class (flavour) of the Machine. Cannot be changed."""
    machine_pool_selector: dict[str, str] | None = None
    """Labels a pool must carry to be considered for the Machine."""
    machine_pool_ref: LocalObjectReference | None = None
    """The pool the Machine runs in; set by the scheduler when empty. Cannot be changed once set."""
    power: Literal["On", "Off"] = "On"
    """Desired power state: On (the default) or Off."""
    network_interfaces: list[MachineNetworkInterface] | None = None
    """Network interfaces of the Machine."""
    volumes: list[MachineVolume] | None = None
    """Volumes attached to the Machine."""
    ignition_ref: SecretKeySelector | None = None
    """Secret (and key, by default ignition.yaml) holding the Ignition the Machine boots with."""
    # IronCore's former Machine.spec.imagePullSecret: a kubernetes.io/dockerconfigjson Secret of the
    # Machine's namespace, the credentials for pulling its local disks' images.
    image_pull_secret: LocalObjectReference | None = None
    """A kubernetes.io/dockerconfigjson Secret of the namespace: credentials for pulling the images of the
    Machine's local disks."""
    efi_vars: list[EFIVar] | None = Field(default=None, alias="efiVars")
    """Variables passed to EFI at boot."""
    tolerations: list[Toleration] | None = None
    """Taints the Machine tolerates: only pools whose taints are all tolerated are considered."""
    guest_config: GuestConfig | None = None
    """Configuration handed to the guest."""


class MachineNetworkInterfaceStatus(ApiModel):
    """Attachment state of one NIC, reported by the machinepoollet; ``ips`` (an ironpool addition)
    are the NIC's effective addresses, so front ends find them in the Machine."""

    name: str
    """Name of the interface in the Machine."""
    handle: str | None = None
    """Handle of the interface at the machine runtime."""
    state: Literal["Pending", "Attached"] | None = None
    """Pending or Attached."""
    network_interface_ref: LocalObjectReference | None = None
    """The NetworkInterface attached."""
    ips: list[str] | None = None
    """Effective addresses of the interface."""
    last_state_transition_time: Timestamp | None = None
    """When the state last changed."""


class MachineVolumeStatus(ApiModel):
    """Attachment state of one volume, reported by the machinepoollet."""

    name: str
    """Name of the volume in the Machine."""
    handle: str | None = None
    """Handle of the volume at the machine runtime."""
    state: Literal["Pending", "Attached"] | None = None
    """Pending or Attached."""
    volume_ref: LocalObjectReference | None = None
    """The Volume attached."""
    last_state_transition_time: Timestamp | None = None
    """When the state last changed."""


MachineState = Literal["Pending", "Running", "Shutdown", "Terminating", "Terminated"]


class MachineStatus(ApiModel):
    """Reported by the machinepoollet."""

    machine_id: str | None = Field(default=None, alias="machineID")
    """Identifier of the machine at its runtime (runtime://id)."""
    observed_generation: int | None = None
    """The generation of the spec this status describes."""
    state: MachineState | None = None
    """Pending, Running, Shutdown, Terminating or Terminated."""
    conditions: list[Condition] | None = None
    """Conditions of the Machine (Scheduled, Ready, ...)."""
    network_interfaces: list[MachineNetworkInterfaceStatus] | None = None
    """State of each network interface."""
    volumes: list[MachineVolumeStatus] | None = None
    """State of each volume."""
    # An ironpool addition (IRI's MachineStatus.image_ref): the image booted, pinned to its digest.
    image_ref: str | None = None
    """The image booted, pinned to its digest."""


class Machine(ApiModel):
    """A virtual machine; the scheduler binds it to a MachinePool via ``spec.machinePoolRef``."""

    api_version: str | None = None
    kind: str | None = None
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    """Standard object metadata: name, namespace, labels, annotations and what the server sets."""
    spec: MachineSpec
    """Desired state of the Machine."""
    status: MachineStatus | None = None
    """Observed state of the Machine, reported by its pool's machinepoollet. Read-only for users."""

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
