"""A Machine's network interfaces between the API and IRI (IronCore's
``machine_controller_networkinterface.go``), as pure functions.

Which NetworkInterface object each machine NIC is, whether it can be used (Available, not claimed by
another Machine, its Network there with a provider ID), the IRI NIC it becomes (network id = the
Network's provider ID, the NIC's effective addresses, attributes for the host), the
``networkinterfacemapping`` annotation, and the SSH endpoint the runtime reports.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ironpool.api.compute import Machine, MachineNetworkInterface
from ironpool.api.networking import Network, NetworkInterface
from ironpool.iri.gen.machine.v1alpha1 import api_pb2 as mpb
from ironpool.poollet import keys

USER_HANDLE_SCHEME = "user://"


def nic_object_name(machine: Machine, nic: MachineNetworkInterface) -> str | None:
    """The NetworkInterface a machine NIC is: its ``networkInterfaceRef``, or ``<machine>-<nic>`` if
    ephemeral (IronCore's ``MachineNetworkInterfaceName``)."""
    if nic.network_interface_ref is not None:
        return nic.network_interface_ref.name
    if nic.ephemeral is not None:
        return f"{machine.metadata.name}-{nic.name}"
    return None


def controlled_by(obj: NetworkInterface, machine: Machine) -> bool:
    """Whether ``obj`` is the ephemeral NIC of ``machine`` (a controller owner reference to it)."""
    return any(ref.controller and ref.uid == machine.metadata.uid
               for ref in obj.metadata.owner_references or [])


def claimed_by_other(obj: NetworkInterface, machine: Machine) -> str | None:
    """The name of another Machine that holds ``obj``, if one does."""
    ref = obj.spec.machine_ref
    if ref is None:
        return None
    if ref.uid:
        return None if ref.uid == machine.metadata.uid else ref.name
    return None if ref.name == machine.metadata.name else ref.name


def nic_problem(machine: Machine, nic: MachineNetworkInterface, obj: NetworkInterface | None,
                network: Network | None) -> str:
    """Why a machine NIC cannot be used yet ("" when it can)."""
    if obj is None:
        return "not found"
    if nic.ephemeral is not None and not controlled_by(obj, machine):
        return "not controlled by this machine"
    other = claimed_by_other(obj, machine)
    if other is not None:
        return f"claimed by machine {other}"
    state = obj.status.state if obj.status else None
    if state != "Available" or not (obj.status and obj.status.ips):
        return f"not Available yet, state {state or 'Pending'}"
    ref = obj.spec.network_ref
    net_name = ref.name if ref is not None else ""
    if network is None:
        return f"Network {net_name} not found"
    if not network.spec.provider_id:
        return f"Network {net_name} has no provider ID yet"
    return ""


def _labels_json(labels: Mapping[str, str]) -> str:
    return json.dumps(dict(labels), sort_keys=True, separators=(",", ":"))


def iri_nic(name: str, obj: NetworkInterface, network: Network) -> mpb.NetworkInterface:
    """The IRI NIC of a usable NetworkInterface (see the networking contract): the Network's
    provider ID, the effective addresses, and attributes the host realises it with."""
    assert obj.status is not None
    nic_labels = {**(obj.metadata.labels or {}), keys.NIC_UID_LABEL: obj.metadata.uid or "",
                  keys.NIC_NAMESPACE_LABEL: obj.metadata.namespace or "",
                  keys.NIC_NAME_LABEL: obj.metadata.name or ""}
    network_labels = {**(network.metadata.labels or {}), keys.NETWORK_UID_LABEL: network.metadata.uid or "",
                      keys.NETWORK_NAMESPACE_LABEL: network.metadata.namespace or "",
                      keys.NETWORK_NAME_LABEL: network.metadata.name or ""}
    attributes = dict(obj.spec.attributes or {})
    attributes[keys.NIC_LABELS_ATTRIBUTE] = _labels_json(nic_labels)
    attributes[keys.NETWORK_LABELS_ATTRIBUTE] = _labels_json(network_labels)
    if obj.spec.mac_address:
        attributes[keys.MAC_ADDRESS_ATTRIBUTE] = obj.spec.mac_address
    if obj.status.addresses:
        attributes[keys.ADDRESSES_ATTRIBUTE] = json.dumps(list(obj.status.addresses))
    return mpb.NetworkInterface(name=name, network_id=network.spec.provider_id or "",
                                ips=list(obj.status.ips or []), attributes=attributes)


@dataclass(frozen=True)
class NicRef:
    """The NetworkInterface object behind a machine NIC: name, uid, effective addresses."""

    name: str
    uid: str
    ips: tuple[str, ...] = ()


def mapping_annotation(refs: Mapping[str, NicRef]) -> str:
    """IronCore's ``networkinterfacemapping``: ``{machine nic name: {name, uid}}`` as JSON."""
    return json.dumps({n: {"name": r.name, "uid": r.uid} for n, r in sorted(refs.items())},
                      sort_keys=True, separators=(",", ":"))


def ssh_endpoint(spec_names: Sequence[str], reported: Sequence[mpb.NetworkInterfaceStatus]) -> str:
    """``host:port`` of the first NIC (in spec order) the runtime forwards SSH for; "" if none."""
    handles = {n.name: n.handle for n in reported}
    for name in spec_names:
        handle = handles.get(name, "")
        if handle.startswith(USER_HANDLE_SCHEME) and handle[len(USER_HANDLE_SCHEME):]:
            return handle[len(USER_HANDLE_SCHEME):]
    return ""
