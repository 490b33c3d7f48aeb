"""The host side of NICs: the libvirt networks behind ``nat`` and ``isolated`` NICs with their DHCP
reservations, and the DHCP of ``bridge`` NICs (:mod:`.bridge_dhcp`).

One persistent, autostarted libvirt network per Network and mode (named from the Network's id), made
when the first NIC on this host needs it, with the gateway on its bridge and a DHCP reservation per
NIC (libvirt's dnsmasq answers reserved MACs only). A reservation goes with its NIC; the network goes
when no domain on the host uses it any more. Several runtimes may share one libvirtd: a network is
only removed when no domain at all refers to it.
"""

from __future__ import annotations

import ipaddress
import logging
import threading
import xml.etree.ElementTree as ET
from pathlib import Path

import libvirt

from ironpool.runtime import libvirt_util
from ironpool.runtime.errors import FailedPrecondition, Internal, InvalidArgument

from .bridge_dhcp import BridgeDhcp
from .model import NicRecord
from .nics import ADDRESSES_ATTRIBUTE, dhcp_host_element, dhcp_hosts, libvirt_network_xml, network_subnet

log = logging.getLogger(__name__)

_UPDATE_FLAGS = libvirt.VIR_NETWORK_UPDATE_AFFECT_CONFIG


class HostNetworks:
    """Makes and removes the libvirt networks and reservations of this host's NICs."""

    def __init__(self, connection: libvirt_util.Connection, state_dir: Path) -> None:
        self.connection = connection
        self.bridges = BridgeDhcp(state_dir)
        self._lock = threading.Lock()

    @staticmethod
    def managed(nic: NicRecord) -> bool:
        return nic.mode in ("nat", "isolated")

    # -- reserve -----------------------------------------------------------------------------
    def reserve(self, nic: NicRecord, field: str) -> bool:
        """Make sure the NIC's network runs and holds its reservation; True if the network was made
        for it (so an undo removes the network too). Raises naming ``field``."""
        if nic.mode == "bridge":
            self.bridges.reserve(nic, field)
            return False
        if not self.managed(nic):
            return False
        with self._lock:
            conn = self.connection.get()
            net = self._lookup(conn, nic.network)
            if net is None:
                return self._create(conn, nic, field)
            xml = net.XMLDesc(libvirt.VIR_NETWORK_XML_INACTIVE)
            subnet = network_subnet(xml)
            iface = ipaddress.IPv4Interface(nic.address)
            if subnet is None or iface.network != subnet:
                raise FailedPrecondition(
                    f"{field}.attributes.{ADDRESSES_ATTRIBUTE}: this host serves the network in "
                    f"{subnet} (libvirt network {nic.network}); {nic.address} is not in it")
            try:
                for mac, ip in dhcp_hosts(xml):
                    if mac == nic.mac or ip == str(iface.ip):
                        # Addresses and MACs are unique per Network: an entry holding ours is stale.
                        self._update(net, libvirt.VIR_NETWORK_UPDATE_COMMAND_DELETE, mac, ip)
                self._update(net, libvirt.VIR_NETWORK_UPDATE_COMMAND_ADD_LAST, nic.mac, str(iface.ip))
                if not net.isActive():
                    net.create()
            except libvirt.libvirtError as exc:
                raise Internal(f"libvirt network {nic.network}: reserving {nic.address} for {nic.mac} "
                               f"failed: {exc.get_error_message()}") from exc
            return False

    def _create(self, conn: libvirt.virConnect, nic: NicRecord, field: str) -> bool:
        xml = libvirt_network_xml(nic.network, nic.mode, nic.address, nic.mac)
        try:
            net = conn.networkDefineXML(xml)
        except libvirt.libvirtError as exc:
            message = exc.get_error_message()
            raise InvalidArgument(f"{field}: libvirt refused network {nic.network}: {message}") from exc
        try:
            net.create()
            net.setAutostart(1)
        except libvirt.libvirtError as exc:
            remove_network(net)
            raise FailedPrecondition(
                f"{field}.attributes.{ADDRESSES_ATTRIBUTE}: libvirt network {nic.network} for "
                f"{ipaddress.IPv4Interface(nic.address).network} cannot start: {exc.get_error_message()}"
            ) from exc
        log.info("libvirt network %s (%s, %s) defined and started", nic.network, nic.mode,
                 ipaddress.IPv4Interface(nic.address).network)
        return True

    # -- release -----------------------------------------------------------------------------
    def release(self, nic: NicRecord, drop_unused: bool = True) -> None:
        """Remove the NIC's reservation, and the network once no domain on the host uses it."""
        if nic.mode == "bridge":
            self.bridges.release(nic)
            return
        if not self.managed(nic):
            return
        with self._lock:
            conn = self.connection.get()
            net = self._lookup(conn, nic.network)
            if net is None:
                return
            ip = str(ipaddress.IPv4Interface(nic.address).ip)
            try:
                if (nic.mac, ip) in dhcp_hosts(net.XMLDesc(libvirt.VIR_NETWORK_XML_INACTIVE)):
                    self._update(net, libvirt.VIR_NETWORK_UPDATE_COMMAND_DELETE, nic.mac, ip)
            except libvirt.libvirtError as exc:
                log.warning("libvirt network %s: removing the reservation of %s failed: %s", nic.network,
                            nic.mac, exc.get_error_message())
            if drop_unused and not network_in_use(conn, nic.network):
                remove_network(net)
                log.info("libvirt network %s removed: no domain uses it", nic.network)

    def restore(self, nic: NicRecord) -> None:
        """After a restart: what libvirt does not bring back by itself (a bridge's DHCP server)."""
        if nic.mode == "bridge":
            self.bridges.restore(nic)

    # -- libvirt -----------------------------------------------------------------------------
    @staticmethod
    def _lookup(conn: libvirt.virConnect, name: str) -> libvirt.virNetwork | None:
        try:
            return conn.networkLookupByName(name)
        except libvirt.libvirtError as exc:
            if libvirt_util.error_code(exc) == libvirt.VIR_ERR_NO_NETWORK:
                return None
            raise

    @staticmethod
    def _update(net: libvirt.virNetwork, command: int, mac: str, ip: str) -> None:
        flags = _UPDATE_FLAGS | (libvirt.VIR_NETWORK_UPDATE_AFFECT_LIVE if net.isActive() else 0)
        xml = ET.tostring(dhcp_host_element(mac, ip), encoding="unicode")
        net.update(command, libvirt.VIR_NETWORK_SECTION_IP_DHCP_HOST, -1, xml, flags)



def network_in_use(conn: libvirt.virConnect, name: str) -> bool:
    """Whether any domain (running or defined) has an interface on libvirt network ``name``."""
    for dom in conn.listAllDomains(0):
        try:
            for flags in (0, libvirt.VIR_DOMAIN_XML_INACTIVE):
                for src in ET.fromstring(dom.XMLDesc(flags)).iterfind("devices/interface/source"):
                    if src.get("network") == name:
                        return True
        except libvirt.libvirtError:
            continue  # undefined meanwhile
    return False


def remove_network(net: libvirt.virNetwork) -> None:
    """Stop and undefine a libvirt network (one already gone is fine)."""
    try:
        if net.isActive():
            net.destroy()
        net.undefine()
    except libvirt.libvirtError as exc:
        if libvirt_util.error_code(exc) != libvirt.VIR_ERR_NO_NETWORK:
            log.warning("removing libvirt network failed: %s", exc.get_error_message())
