"""The machine record: everything the runtime needs to rebuild a machine from libvirt alone.

A record is stored as JSON inside the domain's ``<metadata>`` element, so the in-memory state of
the runtime is only a cache that a restarted runtime reloads from libvirt.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

METADATA_NS = "https://ironpool.dev/iri/machine/v1"
METADATA_KEY = "ironpool"
DOMAIN_PREFIX = "ironpool-"
RECORD_VERSION = 1


@dataclass
class VolumeRecord:
    """One attached volume: a local disk the runtime made, or a connection to another's volume."""

    name: str
    device: str  # as IRI sent it (``oda``); the libvirt target is ``vd`` + device[2:]
    target: str  # libvirt target dev (``vda``)
    kind: Literal["local", "connection"]
    size_bytes: int = 0
    image: str = ""  # local disk: the image reference as written (a catalog name, OCI reference, URL)
    image_ref: str = ""  # local disk: that image pinned to its digest, as status.imageRef reports it
    driver: str = ""
    handle: str = ""
    attributes: dict[str, str] = field(default_factory=dict)
    effective_storage_bytes: int = 0
    path: str = ""  # the disk file; "" for a kernel-boot local disk without a size
    format: str = "qcow2"
    owned: bool = False  # True: the runtime made the file and deletes it with the machine
    secret: str = ""  # an encrypted volume's libvirt secret (UUID) while attached; see .volume_secrets


@dataclass
class NicRecord:
    """One network interface: the IRI NIC as requested and how this host realises it.

    ``mode`` is ``user`` (QEMU user networking, plugged through the QEMU monitor with an SSH
    forward), ``nat`` / ``isolated`` (a libvirt network the runtime keeps, DHCP reservation per
    MAC), ``bridge`` (an existing host bridge), ``provider`` (a libvirt network someone else made,
    named by ``network_id``) or ``""`` for records written before networks were realised (a
    libvirt-managed ``<interface type='user'>``, or the libvirt network named by ``network_id``).
    """

    name: str
    network_id: str = ""
    ips: list[str] = field(default_factory=list)
    attributes: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    mode: str = ""
    mac: str = ""
    address: str = ""  # the IPv4 address the guest gets, with its prefix length ("10.0.0.5/24")
    network: str = ""  # the libvirt network (nat, isolated, provider) or host bridge (bridge)
    forward: str = ""  # user mode: the host address:port forwarded to the guest's SSH port


@dataclass
class MachineRecord:
    """The IRI machine as persisted in the domain metadata."""

    id: str
    class_name: str
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    power: int = 0  # IRI Power: 0 = on, 1 = off
    hostname: str = ""
    ignition: bool = False
    seed: str = ""  # the cloud-init NoCloud seed ISO of a machine booted with user data
    boot_image: str = ""  # an image whose kernel is booted directly; "" for boot from disk
    nvram: str = ""  # a UEFI machine's NVRAM file (OVMF's variables); "" for one booting BIOS
    volumes: list[VolumeRecord] = field(default_factory=list)
    nics: list[NicRecord] = field(default_factory=list)
    cpu: int = 1
    memory_bytes: int = 0
    created_at: int = 0  # Unix ns
    deleted_at: int = 0  # Unix ns, 0 = not deleted
    generation: int = 0
    # The state dir of the runtime that made the machine: several runtimes may share one libvirt
    # host (tests, a second pool), and each manages only its own domains.
    owner: str = ""

    @property
    def domain_name(self) -> str:
        return domain_name(self.id)

    def volume(self, name: str) -> VolumeRecord | None:
        return next((v for v in self.volumes if v.name == name), None)

    def nic(self, name: str) -> NicRecord | None:
        return next((n for n in self.nics if n.name == name), None)

    def to_json(self) -> str:
        return json.dumps({"version": RECORD_VERSION, **asdict(self)}, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> MachineRecord:
        data: dict[str, Any] = json.loads(text)
        data.pop("version", None)
        data["volumes"] = [VolumeRecord(**v) for v in data.get("volumes", [])]
        data["nics"] = [NicRecord(**n) for n in data.get("nics", [])]
        return cls(**data)


def domain_name(machine_id: str) -> str:
    """The libvirt domain name of a machine: nothing user-supplied ends up in it."""
    return DOMAIN_PREFIX + machine_id
