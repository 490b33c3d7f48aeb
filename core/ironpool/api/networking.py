"""``networking.ironcore.dev/v1alpha1``: Network and NetworkInterface.

Field names are IronCore's. ironpool adds two fields, both documented in the networking contract:
``NetworkInterface.spec.macAddress`` (given, or allocated by the apiserver; unique per Network) and
``NetworkInterface.status.addresses`` (each effective IP with the length of the Prefix it belongs
to, what a host needs to configure the interface). IronCore's peerings and NIC prefixes are not
served; a NIC's ``spec.virtualIP`` is accepted and checked, so IronCore's manifests apply, but no
public address is allocated for it (a libvirt host has no public address pool to take one from).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ironpool.api.ipaddr import IPFamily
from ironpool.api.ipam import PrefixTemplate
from ironpool.api.meta import ApiModel, LocalObjectReference, LocalUIDReference, ObjectMeta, Timestamp

NETWORKING_GROUP = "networking.ironcore.dev"
NETWORKING_VERSION = "v1alpha1"

#: Labels on a Network that choose how hosts realise it (see the networking contract).
MODE_LABEL = "networking.ironpool.dev/mode"
BRIDGE_LABEL = "networking.ironpool.dev/bridge"
#: IronCore's mark on objects a controller creates for another object's ephemeral source.
EPHEMERAL_MANAGED_BY = "common.ironcore.dev/ephemeral-managed-by"
EPHEMERAL_MANAGER = "ephemeral-manager"


# -- Network -------------------------------------------------------------------------------------
class NetworkSpec(ApiModel):
    """Desired state of a Network: its provider ID (set by the apiserver when empty)."""

    provider_id: str | None = Field(default=None, alias="providerID")
    """Identifier of the network at its provider."""


class NetworkStatus(ApiModel):
    """The network's state (``Available`` once stored: hosts realise it when a NIC lands there)."""

    state: Literal["Pending", "Available", "Error"] | None = None
    """Pending, Available or Error."""


class Network(ApiModel):
    """An isolated layer-2/3 network that NetworkInterfaces connect to, namespaced."""

    api_version: str | None = None
    kind: str | None = None
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    """Standard object metadata: name, namespace, labels, annotations and what the server sets."""
    spec: NetworkSpec = Field(default_factory=NetworkSpec)
    """Desired state of the Network."""
    status: NetworkStatus | None = None
    """Observed state of the Network."""


# -- NetworkInterface ----------------------------------------------------------------------------
class EphemeralPrefixSource(ApiModel):
    """An address allocated through an ephemeral Prefix made from the template."""

    prefix_template: PrefixTemplate | None = None
    """Template of the Prefix an address is allocated from (or made with)."""


class IPSource(ApiModel):
    """One address of a NIC: exactly one of a literal ``value`` or an ``ephemeral`` prefix."""

    value: str | None = None
    """A fixed address."""
    ephemeral: EphemeralPrefixSource | None = None
    """An address allocated from a Prefix as the interface is written."""


class VirtualIPSpec(ApiModel):
    """A public address routed to a NIC (IronCore's ``EphemeralVirtualIPSpec``)."""

    type: Literal["Public"]
    """Type of the virtual IP (Public)."""
    ip_family: IPFamily = Field(alias="ipFamily")
    """IPv4 or IPv6."""
    target_ref: LocalUIDReference | None = None
    """The NetworkInterface the virtual IP points at."""
    reclaim_policy: Literal["Retain", "Delete"] | None = None
    """What happens to an ephemeral virtual IP when its owner goes: Delete or Retain."""


class VirtualIPTemplate(ApiModel):
    """Labels, annotations and spec of an ephemeral VirtualIP."""

    metadata: ObjectMeta | None = None
    """Labels and annotations of the VirtualIP made from the template."""
    spec: VirtualIPSpec
    """Spec of the VirtualIP made from the template."""


class EphemeralVirtualIPSource(ApiModel):
    """A VirtualIP made from a template, living as long as the NIC."""

    virtual_ip_template: VirtualIPTemplate | None = Field(default=None, alias="virtualIPTemplate")
    """Template of the VirtualIP made and deleted with the interface."""


class VirtualIPSource(ApiModel):
    """A NIC's virtual IP: a VirtualIP by name, or an ephemeral one."""

    virtual_ip_ref: LocalObjectReference | None = Field(default=None, alias="virtualIPRef")
    """An existing VirtualIP of the namespace."""
    ephemeral: EphemeralVirtualIPSource | None = None
    """A VirtualIP made and deleted with the interface."""


class NetworkInterfaceSpec(ApiModel):
    """Desired state of a NetworkInterface (also a Machine's ephemeral NIC template spec)."""

    provider_id: str | None = Field(default=None, alias="providerID")
    """Identifier of the interface at its machine runtime, set by the machinepoollet."""
    network_ref: LocalObjectReference | None = None
    """The Network the interface is in. Cannot be changed."""
    machine_ref: LocalUIDReference | None = None
    """The Machine that claimed the interface (set by its machinepoollet)."""
    ip_families: list[IPFamily] | None = Field(default=None, alias="ipFamilies")
    """Address families of the interface (IPv4, IPv6), one per address of ips."""
    ips: list[IPSource] | None = None
    """Addresses of the interface: fixed, or allocated from a Prefix."""
    virtual_ip: VirtualIPSource | None = Field(default=None, alias="virtualIP")
    """A virtual IP that points at the interface."""
    mac_address: str | None = None
    """MAC address of the interface; allocated by the apiserver when empty."""
    attributes: dict[str, str] | None = None
    """Runtime-specific attributes of the interface."""


NetworkInterfaceState = Literal["Pending", "Available", "Error"]


class NetworkInterfaceStatus(ApiModel):
    """Set by the apiserver's allocation: state, effective IPs (in the order of ``spec.ips``)."""

    state: NetworkInterfaceState | None = None
    """Pending, Available or Error."""
    last_state_transition_time: Timestamp | None = None
    """When the state last changed."""
    ips: list[str] | None = None
    """Addresses the interface has, as allocated."""
    addresses: list[str] | None = None
    """Addresses the interface has, as the runtime reports them."""


class NetworkInterface(ApiModel):
    """A NIC on a Network, with its addresses; used by at most one Machine (``spec.machineRef``)."""

    api_version: str | None = None
    kind: str | None = None
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    """Standard object metadata: name, namespace, labels, annotations and what the server sets."""
    spec: NetworkInterfaceSpec = Field(default_factory=NetworkInterfaceSpec)
    """Desired state of the NetworkInterface."""
    status: NetworkInterfaceStatus | None = None
    """Observed state of the NetworkInterface (its addresses as allocated). Read-only for users."""


def ephemeral_prefix_name(nic_name: str, index: int) -> str:
    """The Prefix that holds a NIC's ephemeral address ``spec.ips[index]`` (IronCore's
    ``NetworkInterfaceIPIPAMPrefixName``)."""
    return f"{nic_name}-{index}"
