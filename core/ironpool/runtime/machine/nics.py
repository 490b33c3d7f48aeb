"""How this host realises an IRI network interface: its mode, MAC, address and libvirt network.

Pure: nothing here touches libvirt. The mode comes from the Network's labels, which the poollet
passes as the NIC attribute ``rawNetworkLabels`` (``networking.ironpool.dev/mode`` and
``/bridge``), else from the runtime's :class:`NetworkSettings`; a ``network_id`` that names a
libvirt network someone else made is used as it is (IronCore's ``providernet``). The guest gets
exactly the address the control plane allocated: in ``user`` mode because each NIC has its own QEMU
user network whose DHCP starts at that address, in ``nat`` / ``isolated`` / ``bridge`` mode through a
DHCP reservation for the NIC's MAC.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ironpool.iri.gen.machine.v1alpha1 import api_pb2 as machine_pb2
from ironpool.runtime.errors import InvalidArgument, NotFound

from .model import NicRecord

MODES = ("user", "nat", "isolated", "bridge")
MODE_LABEL = "networking.ironpool.dev/mode"
BRIDGE_LABEL = "networking.ironpool.dev/bridge"
# IRI NIC attributes the machinepoollet sets beside IronCore's rawNICLabels / rawNetworkLabels.
NETWORK_LABELS_ATTRIBUTE = "rawNetworkLabels"
MAC_ATTRIBUTE = "macAddress"
ADDRESSES_ATTRIBUTE = "addresses"
# An address without a prefix length (an IronCore poollet sends bare IPs) is taken as a /24.
DEFAULT_PREFIX_LENGTH = 24
LIBVIRT_NETWORK_PREFIX = "ironpool-net-"
_MAC_RE = re.compile(r"^[0-9a-f]{2}(:[0-9a-f]{2}){5}$")
_BRIDGE_RE = re.compile(r"^[A-Za-z0-9_.:-]{1,15}$")


@dataclass(frozen=True)
class NetworkSettings:
    """The host's choices for Networks that do not name their mode: the mode, the bridge of mode
    ``bridge``, the address SSH forwards of mode ``user`` listen on, and the guest's SSH port."""

    mode: str = "user"
    bridge: str = ""
    forward_address: str = "127.0.0.1"
    guest_ssh_port: int = 22

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"network mode: must be one of {', '.join(MODES)}, not {self.mode!r}")
        if self.mode == "bridge" and not self.bridge:
            raise ValueError("network mode bridge: name the host bridge (--network-bridge)")
        if self.bridge and not _BRIDGE_RE.match(self.bridge):
            raise ValueError(f"network bridge: {self.bridge!r} is not a Linux interface name")
        try:
            ipaddress.ip_address(self.forward_address)
        except ValueError:
            raise ValueError(f"forward address: {self.forward_address!r} is not an IP address") from None


@dataclass(frozen=True)
class NicLookups:
    """What realising a NIC needs to know about the host."""

    network_exists: Callable[[str], bool]
    bridge_exists: Callable[[str], bool]


def network_labels(attributes: Mapping[str, str], field: str) -> dict[str, str]:
    """The Network's labels from the ``rawNetworkLabels`` attribute (empty when absent)."""
    raw = attributes.get(NETWORK_LABELS_ATTRIBUTE, "")
    if not raw:
        return {}
    try:
        labels: Any = json.loads(raw)
    except ValueError:
        labels = None
    if not isinstance(labels, dict) or not all(isinstance(v, str) for v in labels.values()):
        raise InvalidArgument(f"{field}.attributes.{NETWORK_LABELS_ATTRIBUTE}: not a JSON object of strings")
    return labels


def libvirt_network_name(network_id: str, mode: str) -> str:
    """The libvirt network realising ``network_id`` in ``mode`` (nothing user-supplied in it)."""
    return LIBVIRT_NETWORK_PREFIX + hashlib.sha256(f"{mode}\0{network_id}".encode()).hexdigest()[:12]


def bridge_of(network_name: str) -> str:
    """The Linux bridge of one of our libvirt networks: at most 15 characters."""
    return "ipbr" + network_name.removeprefix(LIBVIRT_NETWORK_PREFIX)[:11]


def _mode(nic: machine_pb2.NetworkInterface, labels: Mapping[str, str], settings: NetworkSettings,
          lookups: NicLookups, field: str) -> tuple[str, str]:
    """``(mode, libvirt network or bridge)`` of a NIC."""
    label_path = f"{field}.attributes.{NETWORK_LABELS_ATTRIBUTE}"
    mode = labels.get(MODE_LABEL, "")
    if mode and mode not in MODES:
        raise InvalidArgument(f"{label_path}[{MODE_LABEL}]: {mode!r} is not one of {', '.join(MODES)}")
    if not mode and nic.network_id and lookups.network_exists(nic.network_id):
        return "provider", nic.network_id
    mode = mode or settings.mode
    if mode == "user":
        return mode, ""
    if mode == "bridge":
        bridge = labels.get(BRIDGE_LABEL) or settings.bridge
        if not bridge:
            raise InvalidArgument(f"{label_path}[{BRIDGE_LABEL}]: mode bridge needs the host bridge")
        if not _BRIDGE_RE.match(bridge):
            raise InvalidArgument(
                f"{label_path}[{BRIDGE_LABEL}]: {bridge[:40]!r} is not a Linux interface name")
        if not lookups.bridge_exists(bridge):
            raise NotFound(f"{label_path}[{BRIDGE_LABEL}]: no bridge {bridge!r} on this host")
        return mode, bridge
    return mode, libvirt_network_name(nic.network_id, mode)


def _mac(nic: machine_pb2.NetworkInterface, field: str, machine_id: str) -> str:
    given = nic.attributes.get(MAC_ATTRIBUTE, "")
    if not given:
        # Stable for the machine and NIC name, in QEMU's locally administered range.
        digest = hashlib.sha256(f"{machine_id}/{nic.name}".encode()).digest()
        return "52:54:00:" + ":".join(f"{b:02x}" for b in digest[:3])
    mac = given.strip().lower().replace("-", ":")
    if not _MAC_RE.match(mac) or int(mac[:2], 16) & 1 or mac == "00:00:00:00:00:00":
        raise InvalidArgument(
            f"{field}.attributes.{MAC_ATTRIBUTE}: {given[:40]!r} is not a unicast MAC address")
    return mac


def _address(nic: machine_pb2.NetworkInterface, field: str) -> str:
    """The one IPv4 address with its prefix length, or "" when the NIC has none."""
    ips: list[ipaddress.IPv4Address | ipaddress.IPv6Address] = []
    for i, value in enumerate(nic.ips):
        try:
            ips.append(ipaddress.ip_address(value))
        except ValueError:
            raise InvalidArgument(f"{field}.ips[{i}]: {value[:60]!r} is not an IP address") from None
    raw = nic.attributes.get(ADDRESSES_ATTRIBUTE, "")
    path = f"{field}.attributes.{ADDRESSES_ATTRIBUTE}"
    if raw:
        try:
            listed = json.loads(raw)
            if not isinstance(listed, list):
                raise ValueError(raw)
            ifaces = [ipaddress.ip_interface(str(a)) for a in listed]
        except ValueError:
            raise InvalidArgument(
                f"{path}: {raw[:80]!r} is not a JSON list of addresses like [\"10.0.0.5/24\"]") from None
        if [i.ip for i in ifaces] != ips:
            raise InvalidArgument(f"{path}: {raw[:80]!r} does not list the addresses of ips")
    else:
        ifaces = [ipaddress.ip_interface(f"{ip}/{DEFAULT_PREFIX_LENGTH if ip.version == 4 else 64}")
                  for ip in ips]
    for i, iface in enumerate(ifaces):
        if iface.version != 4:
            raise InvalidArgument(f"{field}.ips[{i}]: IPv6 addresses are not realised by this runtime")
    if len(ifaces) > 1:
        raise InvalidArgument(f"{field}.ips: one IPv4 address per network interface, got {len(ifaces)}")
    if not ifaces:
        return ""
    iface = ifaces[0]
    net = iface.network
    if net.prefixlen > 30:
        raise InvalidArgument(f"{path}: {iface} leaves no room for a gateway; a /30 or larger is needed")
    if iface.ip in (net.network_address, net.broadcast_address, net.network_address + 1):
        what = {net.network_address: "the network address", net.broadcast_address: "the broadcast address"}
        raise InvalidArgument(
            f"{field}.ips[0]: {iface.ip} is {what.get(iface.ip, 'the gateway address')} of {net}")
    return str(iface)


def nic_record(nic: machine_pb2.NetworkInterface, field: str, machine_id: str, settings: NetworkSettings,
               lookups: NicLookups) -> NicRecord:
    """The record of a NIC with how this host realises it; raises naming the field."""
    labels = network_labels(nic.attributes, field)
    mode, network = _mode(nic, labels, settings, lookups, field)
    address = _address(nic, field)
    if not address and mode in ("nat", "isolated", "bridge"):
        raise InvalidArgument(f"{field}.ips: mode {mode} needs the IPv4 address the guest gets")
    return NicRecord(
        name=nic.name, network_id=nic.network_id, ips=list(nic.ips), attributes=dict(nic.attributes),
        labels=dict(nic.labels), mode=mode, mac=_mac(nic, field, machine_id), address=address,
        network=network,
    )


def handle(nic: NicRecord) -> str:
    """The IRI NIC handle: where the NIC is realised (in user mode, the SSH forward's host:port)."""
    if not nic.mode:
        return f"{nic.network_id or 'user'}/{nic.name}"
    if nic.mode == "user":
        return f"user://{nic.forward}" if nic.forward else ""
    return f"{nic.mode}://{nic.network}/{nic.mac}"


# -- QEMU user networking --------------------------------------------------------------------------
def user_netdev(nic: NicRecord, netdev_id: str, forward: str, guest_ssh_port: int) -> dict[str, Any]:
    """``netdev_add`` arguments of a user-mode NIC: its own network whose DHCP hands out exactly the
    NIC's address, the gateway at the first host address, and SSH forwarded from ``forward``."""
    args: dict[str, Any] = {"type": "user", "id": netdev_id}
    guest = ""
    if nic.address:
        iface = ipaddress.IPv4Interface(nic.address)
        net = iface.network
        gateway = net.network_address + 1
        # slirp wants its DNS address inside the network and apart from the gateway; keep it off
        # the guest's address too.
        last = net.broadcast_address - 1
        dns = last if iface.ip != last else last - 1
        if dns == gateway:
            dns = net.broadcast_address
        guest = str(iface.ip)
        args.update(net=str(net), host=str(gateway), dhcpstart=guest, dns=str(dns))
    host, _, port = forward.rpartition(":")
    args["hostfwd"] = [{"str": f"tcp:{host}:{port}-{guest}:{guest_ssh_port}"}]
    return args


def qemu_ids(nic_name: str) -> tuple[str, str]:
    """``(netdev id, device id)`` of a user-mode NIC in QEMU (derived from the NIC name, so found
    again after a restart; QEMU ids allow no arbitrary characters)."""
    digest = hashlib.sha256(nic_name.encode()).hexdigest()[:16]
    return f"ipnet-{digest}", f"ipnic-{digest}"


# -- libvirt networks ---------------------------------------------------------------------------
def libvirt_network_xml(name: str, mode: str, address: str, mac: str) -> str:
    """A persistent libvirt network for ``mode`` nat or isolated serving ``address``'s subnet: the
    host holds the gateway (first host address); DHCP only answers reserved MACs."""
    iface = ipaddress.IPv4Interface(address)
    root = ET.Element("network")
    ET.SubElement(root, "name").text = name
    if mode == "nat":
        ET.SubElement(root, "forward", mode="nat")
    ET.SubElement(root, "bridge", name=bridge_of(name), stp="off")
    ip = ET.SubElement(root, "ip", address=str(iface.network.network_address + 1),
                       prefix=str(iface.network.prefixlen))
    dhcp = ET.SubElement(ip, "dhcp")
    dhcp.append(dhcp_host_element(mac, str(iface.ip)))
    return ET.tostring(root, encoding="unicode")


def dhcp_host_element(mac: str, ip: str) -> ET.Element:
    return ET.Element("host", mac=mac, ip=ip)


def network_subnet(network_xml: str) -> ipaddress.IPv4Network | None:
    """The IPv4 subnet a libvirt network serves, from its XML."""
    for ip in ET.fromstring(network_xml).findall("ip"):
        if ip.get("family", "ipv4") != "ipv4" or not ip.get("address"):
            continue
        prefix = ip.get("prefix") or ip.get("netmask") or "24"
        return ipaddress.IPv4Interface(f"{ip.get('address')}/{prefix}").network
    return None


def dhcp_hosts(network_xml: str) -> list[tuple[str, str]]:
    """``(mac, ip)`` of a libvirt network's DHCP reservations."""
    return [(h.get("mac", ""), h.get("ip", "")) for h in ET.fromstring(network_xml).iter("host")
            if h.get("mac") or h.get("ip")]
