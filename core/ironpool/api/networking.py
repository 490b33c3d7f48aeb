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


class NetworkStatus(ApiModel):
    """The network's state (``Available`` once stored: hosts realise it when a NIC lands there)."""

    state: Literal["Pending", "Available", "Error"] | None = None


class Network(ApiModel):
    """An isolated layer-2/3 network that NetworkInterfaces connect to, namespaced."""

    api_version: str | None = None
    kind: str | None = None
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: NetworkSpec = Field(default_factory=NetworkSpec)
    status: NetworkStatus | None = None


# -- NetworkInterface ----------------------------------------------------------------------------
class EphemeralPrefixSource(ApiModel):
    """An address allocated through an ephemeral Prefix made from the template."""

    prefix_template: PrefixTemplate | None = None


class IPSource(ApiModel):
    """One address of a NIC: exactly one of a literal ``value`` or an ``ephemeral`` prefix."""

    value: str | None = None
    ephemeral: EphemeralPrefixSource | None = None


class VirtualIPSpec(ApiModel):
    """A public address routed to a NIC (IronCore's ``EphemeralVirtualIPSpec``)."""

    type: Literal["Public"]
    ip_family: IPFamily = Field(alias="ipFamily")
    target_ref: LocalUIDReference | None = None
    reclaim_policy: Literal["Retain", "Delete"] | None = None


class VirtualIPTemplate(ApiModel):
    """Labels, annotations and spec of an ephemeral VirtualIP."""

    metadata: ObjectMeta | None = None
    spec: VirtualIPSpec


class EphemeralVirtualIPSource(ApiModel):
    """A VirtualIP made from a template, living as long as the NIC."""

    virtual_ip_template: VirtualIPTemplate | None = Field(default=None, alias="virtualIPTemplate")


class VirtualIPSource(ApiModel):
    """A NIC's virtual IP: a VirtualIP by name, or an ephemeral one."""

    virtual_ip_ref: LocalObjectReference | None = Field(default=None, alias="virtualIPRef")
    ephemeral: EphemeralVirtualIPSource | None = None


class NetworkInterfaceSpec(ApiModel):
    """Desired state of a NetworkInterface (also a Machine's ephemeral NIC template spec)."""

    provider_id: str | None = Field(default=None, alias="providerID")
    network_ref: LocalObjectReference | None = None
    machine_ref: LocalUIDReference | None = None
    ip_families: list[IPFamily] | None = Field(default=None, alias="ipFamilies")
    ips: list[IPSource] | None = None
    virtual_ip: VirtualIPSource | None = Field(default=None, alias="virtualIP")
    mac_address: str | None = None
    attributes: dict[str, str] | None = None


NetworkInterfaceState = Literal["Pending", "Available", "Error"]


class NetworkInterfaceStatus(ApiModel):
    """Set by the apiserver's allocation: state, effective IPs (in the order of ``spec.ips``)."""

    state: NetworkInterfaceState | None = None
    last_state_transition_time: Timestamp | None = None
    ips: list[str] | None = None
    addresses: list[str] | None = None


class NetworkInterface(ApiModel):
    """A NIC on a Network, with its addresses; used by at most one Machine (``spec.machineRef``)."""

    api_version: str | None = None
    kind: str | None = None
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: NetworkInterfaceSpec = Field(default_factory=NetworkInterfaceSpec)
    status: NetworkInterfaceStatus | None = None


def ephemeral_prefix_name(nic_name: str, index: int) -> str:
    """The Prefix that holds a NIC's ephemeral address ``spec.ips[index]`` (IronCore's
    ``NetworkInterfaceIPIPAMPrefixName``)."""
    return f"{nic_name}-{index}"
