"""Domain, disk and interface XML, built with ElementTree so user input is escaped by construction.

Nothing user-supplied appears in names the runtime relies on: the domain is ``ironpool-<id>``,
devices carry aliases derived from base64url of the IRI names, and labels, annotations and
other spec pieces live as JSON text inside the ``<metadata>`` element.
"""

from __future__ import annotations

import base64
import re
import uuid
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from ironpool.runtime.images import Image

from .firmware import OvmfPaths
from .model import METADATA_NS, MachineRecord, NicRecord, VolumeRecord
from .seed import SEED_TARGET

ET.register_namespace("ironpool", METADATA_NS)

IGNITION_FW_CFG = "opt/com.coreos/config"
SEED_ALIAS = "ua-cloudinit-seed"
GUEST_AGENT_CHANNEL = "org.qemu.guest_agent.0"
_SERIAL_CHARS = re.compile(r"[^A-Za-z0-9_.+-]")


@dataclass(frozen=True)
class DomainOptions:
    """Host-level choices: emulation type, machine type, the UEFI firmware files, and the scheduler
    slice asked for emulated vCPUs (0: the kernel's)."""

    domain_type: str = "qemu"
    machine_type: str = "pc"
    arch: str = "x86_64"
    ovmf: OvmfPaths = field(default_factory=OvmfPaths)
    vcpu_slice_ns: int = 0


def _alias(prefix: str, name: str) -> str:
    # libvirt user aliases must start with "ua-" and hold only [A-Za-z0-9_-].
    encoded = base64.urlsafe_b64encode(name.encode()).decode().rstrip("=")
    return f"ua-{prefix}-{encoded}"


def volume_alias(name: str) -> str:
    return _alias("volume", name)


def nic_alias(name: str) -> str:
    return _alias("networkinterface", name)


def _sub(parent: ET.Element, tag: str, text: str | None = None, **attrs: str) -> ET.Element:
    el = ET.SubElement(parent, tag, attrs)
    if text is not None:
        el.text = text
    return el


def metadata_element(rec: MachineRecord) -> ET.Element:
    """``<ironpool:machine>`` holding the record as JSON text (escaped by ElementTree)."""
    el = ET.Element(f"{{{METADATA_NS}}}machine")
    el.text = rec.to_json()
    return el


def metadata_xml(rec: MachineRecord) -> str:
    """The metadata element without a namespace, as ``virDomainSetMetadata`` wants it (it adds one)."""
    el = ET.Element("machine")
    el.text = rec.to_json()
    return ET.tostring(el, encoding="unicode")


def parse_metadata(xml: str) -> MachineRecord:
    """The record from the metadata element libvirt returns; ValueError when it is not ours."""
    el = ET.fromstring(xml)
    # virDomainGetMetadata looks the element up by namespace and returns it without one.
    if el.tag not in ("machine", f"{{{METADATA_NS}}}machine") or not el.text:
        raise ValueError(f"not an ironpool machine metadata element: {el.tag}")
    return MachineRecord.from_json(el.text)


def disk_element(vol: VolumeRecord) -> ET.Element:
    """A virtio ``<disk>`` for a volume with a file behind it."""
    disk = ET.Element("disk", {"type": "file", "device": "disk"})
    _sub(disk, "driver", name="qemu", type=vol.format or "qcow2", discard="unmap")
    _sub(disk, "source", file=vol.path)
    _sub(disk, "target", dev=vol.target, bus="virtio")
    if vol.secret:
        # qcow2 with LUKS inside: QEMU gets the key from the libvirt secret (see .volume_secrets).
        encryption = _sub(disk, "encryption", format="luks")
        _sub(encryption, "secret", type="passphrase", uuid=vol.secret)
    serial = _SERIAL_CHARS.sub("", vol.handle or vol.name)[:20]
    if serial:
        _sub(disk, "serial", serial)
    iops, tps = vol.attributes.get("iops", ""), vol.attributes.get("tps", "")
    if (iops.isdigit() and int(iops) > 0) or (tps.isdigit() and int(tps) > 0):
        iotune = _sub(disk, "iotune")
        if iops.isdigit() and int(iops) > 0:
            _sub(iotune, "total_iops_sec", iops)
        if tps.isdigit() and int(tps) > 0:
            _sub(iotune, "total_bytes_sec", tps)
    _sub(disk, "alias", name=volume_alias(vol.name))
    return disk


def seed_disk_element(seed_file: str) -> ET.Element:
    """The read-only virtio disk of a cloud-init NoCloud seed (see :mod:`.seed`)."""
    disk = ET.Element("disk", {"type": "file", "device": "disk"})
    _sub(disk, "driver", name="qemu", type="raw")
    _sub(disk, "source", file=seed_file)
    _sub(disk, "target", dev=SEED_TARGET, bus="virtio")
    _sub(disk, "readonly")
    _sub(disk, "alias", name=SEED_ALIAS)
    return disk


def interface_element(nic: NicRecord) -> ET.Element | None:
    """The libvirt ``<interface>`` of a NIC; None for a user-mode NIC, which the runtime plugs
    through the QEMU monitor (see :mod:`.usernet`)."""
    if nic.mode == "user":
        return None
    if nic.mode == "bridge":
        iface = ET.Element("interface", {"type": "bridge"})
        _sub(iface, "source", bridge=nic.network)
    elif nic.mode:
        iface = ET.Element("interface", {"type": "network"})
        _sub(iface, "source", network=nic.network)
    elif _legacy_user_network(nic.network_id):
        iface = ET.Element("interface", {"type": "user"})
    else:
        iface = ET.Element("interface", {"type": "network"})
        _sub(iface, "source", network=nic.network_id)
    if nic.mac:
        _sub(iface, "mac", address=nic.mac)
    _sub(iface, "model", type="virtio")
    _sub(iface, "alias", name=nic_alias(nic.name))
    return iface


def _legacy_user_network(network_id: str) -> bool:
    """A record made before networks were realised: these ids meant libvirt's user networking."""
    return network_id in ("", "isolated", "user")


def domain_element(
    rec: MachineRecord,
    opts: DomainOptions,
    console_log: Path,
    boot: Image | None,
    ignition_file: Path | None,
) -> ET.Element:
    """The persistent domain definition for ``rec``."""
    dom = ET.Element("domain", {"type": opts.domain_type})
    _sub(dom, "name", rec.domain_name)
    _sub(dom, "uuid", str(uuid.UUID(hex=rec.id)))
    meta = _sub(dom, "metadata")
    meta.append(metadata_element(rec))
    _sub(dom, "memory", str(rec.memory_bytes), unit="b")
    _sub(dom, "vcpu", str(rec.cpu))
    if ignition_file is not None:
        sysinfo = _sub(dom, "sysinfo", type="fwcfg")
        _sub(sysinfo, "entry", name=IGNITION_FW_CFG, file=str(ignition_file))
    os_el = _sub(dom, "os")
    _sub(os_el, "type", "hvm", arch=opts.arch, machine=opts.machine_type)
    if rec.nvram:
        # Firmware named outright rather than libvirt's firmware="efi" autoselection: the NVRAM
        # is written from this VARS template before the domain exists, so both must match.
        _sub(os_el, "loader", opts.ovmf.code, readonly="yes", type="pflash")
        _sub(os_el, "nvram", rec.nvram, template=opts.ovmf.vars_template)
    if boot is not None and boot.kernel is not None:
        _sub(os_el, "kernel", str(boot.kernel))
        if boot.initrd is not None:
            _sub(os_el, "initrd", str(boot.initrd))
        if boot.cmdline:
            _sub(os_el, "cmdline", boot.cmdline)
    else:
        _sub(os_el, "boot", dev="hd")
    features = _sub(dom, "features")
    _sub(features, "acpi")
    _sub(features, "apic")
    if opts.domain_type == "kvm":
        _sub(dom, "cpu", mode="host-passthrough")
    _sub(dom, "clock", offset="utc")
    _sub(dom, "on_poweroff", "destroy")
    _sub(dom, "on_reboot", "restart")
    _sub(dom, "on_crash", "destroy")
    devices = _sub(dom, "devices")
    for vol in rec.volumes:
        if vol.path:
            devices.append(disk_element(vol))
    if rec.seed:
        devices.append(seed_disk_element(rec.seed))
    for nic in rec.nics:
        iface = interface_element(nic)
        if iface is not None:
            devices.append(iface)
    # A pty serial port is streamable (virDomainOpenConsole) and QEMU also appends it to a file.
    serial = _sub(devices, "serial", type="pty")
    _sub(serial, "log", file=str(console_log), append="on")
    _sub(serial, "target", port="0")
    console = _sub(devices, "console", type="pty")
    _sub(console, "target", type="serial", port="0")
    # The QEMU guest agent's port (libvirt picks the socket): images with qemu-guest-agent answer
    # `virsh qemu-agent-command` and report their addresses; others never open it.
    agent = _sub(devices, "channel", type="unix")
    _sub(agent, "target", type="virtio", name=GUEST_AGENT_CHANNEL)
    # No USB controller or balloon: nothing uses them, and fewer devices start faster.
    _sub(devices, "controller", type="usb", model="none")
    _sub(devices, "memballoon", model="none")
    return dom


def to_string(el: ET.Element) -> str:
    return ET.tostring(el, encoding="unicode")


def find_device(domain_xml: str, tag: str, alias: str) -> ET.Element | None:
    """The device of ``tag`` whose alias is ``alias`` in a domain's XML description."""
    root = ET.fromstring(domain_xml)
    devices = root.find("devices")
    if devices is None:
        return None
    for dev in devices.findall(tag):
        a = dev.find("alias")
        if a is not None and a.get("name") == alias:
            return dev
    return None
