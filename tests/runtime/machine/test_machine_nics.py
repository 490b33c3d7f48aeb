"""How the machine runtime realises a NIC, without a guest: mode, MAC, address checks, the QEMU user
network's arguments, libvirt network XML (checked by libvirt's ``test:///default`` driver)."""

from __future__ import annotations

import ipaddress
import json
import xml.etree.ElementTree as ET

import libvirt
import pytest
from ironpool.iri.gen.machine.v1alpha1 import api_pb2 as mpb
from ironpool.runtime.errors import InvalidArgument, NotFound
from ironpool.runtime.machine import nics
from ironpool.runtime.machine.domain_xml import interface_element
from ironpool.runtime.machine.model import NicRecord

LOOKUPS = nics.NicLookups(network_exists=lambda n: n == "theirs", bridge_exists=lambda b: b == "br0")
DEFAULT = nics.NetworkSettings()


def labels(**values: str) -> dict[str, str]:
    keys = {"mode": nics.MODE_LABEL, "bridge": nics.BRIDGE_LABEL}
    return {nics.NETWORK_LABELS_ATTRIBUTE: json.dumps({keys[k]: v for k, v in values.items()})}


def record(settings: nics.NetworkSettings = DEFAULT, network_id: str = "ironpool://networks/u1",
           ips: tuple[str, ...] = ("10.1.0.5",), **attributes: str) -> NicRecord:
    nic = mpb.NetworkInterface(name="eth0", network_id=network_id, ips=list(ips), attributes=attributes)
    return nics.nic_record(nic, "nic", "m" * 32, settings, LOOKUPS)


def test_mode_from_the_network_label_else_the_host() -> None:
    assert record().mode == "user"
    assert record(nics.NetworkSettings(mode="isolated")).mode == "isolated"
    nat = record(**labels(mode="nat"))
    assert nat.mode == "nat" and nat.network == nics.libvirt_network_name("ironpool://networks/u1", "nat")
    assert nat.network.startswith(nics.LIBVIRT_NETWORK_PREFIX) and len(nics.bridge_of(nat.network)) <= 15
    # the same Network in another mode is another libvirt network; another Network too
    assert nat.network != record(**labels(mode="isolated")).network
    assert nat.network != record(network_id="ironpool://networks/u2", **labels(mode="nat")).network
    bridged = record(**labels(mode="bridge", bridge="br0"))
    assert (bridged.mode, bridged.network) == ("bridge", "br0")
    assert record(nics.NetworkSettings(mode="bridge", bridge="br0")).network == "br0"
    # a network id naming a libvirt network someone made: used as it is (IronCore's providernet)
    assert (record(network_id="theirs").mode, record(network_id="theirs").network) == ("provider", "theirs")


@pytest.mark.parametrize(("attrs", "error", "words"), [
    (labels(mode="vxlan"), InvalidArgument, "rawNetworkLabels[networking.ironpool.dev/mode]: 'vxlan'"),
    (labels(mode="bridge"), InvalidArgument, "mode bridge needs the host bridge"),
    (labels(mode="bridge", bridge="br1"), NotFound, "no bridge 'br1' on this host"),
    (labels(mode="bridge", bridge="br0; rm"), InvalidArgument, "not a Linux interface name"),
    ({nics.NETWORK_LABELS_ATTRIBUTE: "[1]"}, InvalidArgument, "rawNetworkLabels: not a JSON object"),
    ({"macAddress": "01:00:5e:00:00:01"}, InvalidArgument, "macAddress: '01:00:5e:00:00:01' is not"),
    ({"macAddress": "52:54:00:zz:00:01"}, InvalidArgument, "macAddress"),
    ({"addresses": '["10.1.0.6/24"]'}, InvalidArgument, "attributes.addresses: '[\"10.1.0.6/24\"]' does not"),
    ({"addresses": "10.1.0.5/24"}, InvalidArgument, "attributes.addresses: '10.1.0.5/24' is not a JSON list"),
])
def test_bad_input_names_the_field(attrs: dict[str, str], error: type[Exception], words: str) -> None:
    with pytest.raises(error) as exc:
        record(**attrs)
    assert words in str(exc.value) and str(exc.value).startswith("nic.")


@pytest.mark.parametrize(("ips", "addresses", "words"), [
    (("fd00::5",), "", "nic.ips[0]: IPv6 addresses are not realised"),
    (("10.1.0.5", "10.2.0.5"), "", "nic.ips: one IPv4 address per network interface, got 2"),
    (("10.1.0.5",), "10.1.0.5/31", "leaves no room for a gateway"),
    (("10.1.0.1",), "10.1.0.1/24", "nic.ips[0]: 10.1.0.1 is the gateway address of 10.1.0.0/24"),
    (("10.1.0.0",), "10.1.0.0/24", "is the network address"),
    (("10.1.0.255",), "10.1.0.255/24", "is the broadcast address"),
    (("nonsense",), "", "nic.ips[0]: 'nonsense' is not an IP address"),
])
def test_addresses_the_guest_cannot_have(ips: tuple[str, ...], addresses: str, words: str) -> None:
    attrs = {"addresses": json.dumps([addresses])} if addresses else {}
    with pytest.raises(InvalidArgument, match=words.replace("[", r"\[").replace("]", r"\]")):
        record(ips=ips, **attrs)


def test_mac_and_address() -> None:
    given = record(macAddress="52-54-00-AB-CD-EF", addresses='["10.1.0.5/16"]')
    assert (given.mac, given.address) == ("52:54:00:ab:cd:ef", "10.1.0.5/16")
    derived = record()
    assert derived.mac.startswith("52:54:00:") and derived.mac == record().mac  # stable
    assert derived.address == "10.1.0.5/24"  # a bare IP (an IronCore poollet) is taken as a /24
    assert record(ips=()).address == ""  # user mode without an address: QEMU's defaults
    with pytest.raises(InvalidArgument, match=r"nic\.ips: mode nat needs the IPv4 address"):
        record(ips=(), **labels(mode="nat"))


def test_user_netdev_hands_out_exactly_the_address() -> None:
    nic = record(addresses='["10.1.0.5/24"]')
    args = nics.user_netdev(nic, "ipnet-x", "127.0.0.1:40022", 22)
    assert args == {"type": "user", "id": "ipnet-x", "net": "10.1.0.0/24", "host": "10.1.0.1",
                    "dhcpstart": "10.1.0.5", "dns": "10.1.0.254",
                    "hostfwd": [{"str": "tcp:127.0.0.1:40022-10.1.0.5:22"}]}
    # the DNS address is moved off the guest's, and stays apart from the gateway in a /30
    assert nics.user_netdev(record(ips=("10.1.0.254",)), "i", "127.0.0.1:1", 22)["dns"] == "10.1.0.253"
    small = nics.user_netdev(record(ips=("10.1.0.2",), addresses='["10.1.0.2/30"]'), "i", "127.0.0.1:1", 22)
    assert (small["host"], small["dhcpstart"]) == ("10.1.0.1", "10.1.0.2") and small["dns"] == "10.1.0.3"
    plain = nics.user_netdev(record(ips=()), "i", "127.0.0.1:2", 2222)
    assert plain == {"type": "user", "id": "i", "hostfwd": [{"str": "tcp:127.0.0.1:2-:2222"}]}
    netdev_id, device_id = nics.qemu_ids("<a name>")
    assert netdev_id != device_id and all(c.isalnum() or c == "-" for c in netdev_id + device_id)


def test_handles() -> None:
    user = record()
    assert nics.handle(user) == ""  # not plugged yet
    user.forward = "127.0.0.1:40022"
    assert nics.handle(user) == "user://127.0.0.1:40022"
    nat = record(**labels(mode="nat"))
    assert nics.handle(nat) == f"nat://{nat.network}/{nat.mac}"
    assert nics.handle(NicRecord(name="eth0", network_id="")) == "user/eth0"  # a record from before


def test_interfaces_in_the_domain() -> None:
    assert interface_element(record()) is None  # plugged through the QEMU monitor
    nat = interface_element(record(**labels(mode="nat")))
    assert nat is not None and nat.get("type") == "network"
    assert nat.find("mac").get("address") == record().mac  # type: ignore[union-attr]
    bridged = interface_element(record(**labels(mode="bridge", bridge="br0")))
    assert bridged is not None and bridged.find("source").get("bridge") == "br0"  # type: ignore[union-attr]


def test_libvirt_accepts_the_network_and_it_reads_back() -> None:
    nat = record(addresses='["10.1.0.5/24"]', **labels(mode="nat"))
    xml = nics.libvirt_network_xml(nat.network, "nat", nat.address, nat.mac)
    root = ET.fromstring(xml)
    assert root.find("forward").get("mode") == "nat"  # type: ignore[union-attr]
    assert root.find("ip").get("address") == "10.1.0.1"  # type: ignore[union-attr]
    isolated = ET.fromstring(nics.libvirt_network_xml("n", "isolated", nat.address, nat.mac))
    assert isolated.find("forward") is None
    conn = libvirt.open("test:///default")
    try:
        net = conn.networkDefineXML(xml)
        back = net.XMLDesc(0)
        assert nics.network_subnet(back) == ipaddress.IPv4Network("10.1.0.0/24")
        assert nics.dhcp_hosts(back) == [(nat.mac, "10.1.0.5")]
        net.undefine()
    finally:
        conn.close()


def test_host_settings_are_checked() -> None:
    for kwargs, words in (({"mode": "vde"}, "network mode"), ({"mode": "bridge"}, "--network-bridge"),
                          ({"bridge": "a b"}, "not a Linux interface"),
                          ({"forward_address": "x"}, "forward")):
        with pytest.raises(ValueError, match=words):
            nics.NetworkSettings(**kwargs)  # type: ignore[arg-type]
