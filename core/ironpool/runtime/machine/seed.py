"""The NoCloud seed of a cloud-init guest: an ISO 9660 image labelled ``cidata`` on a virtio disk.

cloud-init's NoCloud datasource looks for a file system labelled ``cidata`` holding ``user-data``,
``meta-data`` and ``network-config``. The runtime makes one per machine at create:

- ``user-data``: the machine's boot configuration as the user wrote it;
- ``meta-data``: ``instance-id`` (the Machine's uid, so cloud-init runs its once-per-instance work
  once per Machine) and ``local-hostname`` (``guestConfig.hostname``, else the Machine's name);
- ``network-config`` (version 2): each NIC matched by its MAC with the address IPAM allocated and a
  default route through the network's gateway (its first host address, where every mode of this
  runtime puts it), so the guest needs no DHCP; a NIC without an address asks DHCP.

The seed goes on a virtio disk, not a CD-ROM: Debian's cloud kernel has virtio but no AHCI, so a
SATA CD-ROM is never seen. The file is made by pycdlib (Joliet and Rock Ridge names, as
``genisoimage -J -r`` writes them) and readable by its owner only (it may hold keys and passwords;
libvirt hands it to QEMU's user while the domain runs).
"""

from __future__ import annotations

import io
import ipaddress
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pycdlib
import yaml

from ironpool.iri.labels import MACHINE_NAME_LABEL, MACHINE_UID_LABEL

from .model import MachineRecord, NicRecord

VOLUME_LABEL = "cidata"
#: The libvirt target of the seed disk: past any the IRI device names give volumes first, so the
#: root disk stays the guest's first virtio disk.
SEED_TARGET = "vdzz"
SEED_FILE = "seed.iso"
# ISO 9660 names (8.3, upper case) beside the names cloud-init reads (Joliet / Rock Ridge).
_FILES = (("user-data", "/USERDATA.;1"), ("meta-data", "/METADATA.;1"), ("network-config", "/NETCFG.;1"))


def instance_id(rec: MachineRecord) -> str:
    """The Machine's uid as the IRI labels carry it, else the runtime's machine id."""
    return rec.labels.get(MACHINE_UID_LABEL) or rec.id


def hostname(rec: MachineRecord) -> str:
    """``guestConfig.hostname``, else the Machine's name, else the runtime's machine id."""
    return rec.hostname or rec.labels.get(MACHINE_NAME_LABEL) or rec.id


def meta_data(rec: MachineRecord) -> dict[str, str]:
    return {"instance-id": instance_id(rec), "local-hostname": hostname(rec)}


def network_config(nics: Sequence[NicRecord]) -> dict[str, Any]:
    """cloud-init network config version 2 for ``nics``: static addresses, one default route."""
    ethernets: dict[str, Any] = {}
    routed = False
    for i, nic in enumerate(nics):
        eth: dict[str, Any] = {"match": {"macaddress": nic.mac}}
        if nic.address:
            iface = ipaddress.IPv4Interface(nic.address)
            eth["addresses"] = [str(iface)]
            if not routed:  # one default route; more would compete
                eth["routes"] = [{"to": "0.0.0.0/0", "via": str(iface.network.network_address + 1)}]
                routed = True
        else:
            eth["dhcp4"] = True
        ethernets[f"nic{i}"] = eth
    return {"version": 2, "ethernets": ethernets}


def seed_files(rec: MachineRecord, user_data: bytes) -> dict[str, bytes]:
    """The three files of the seed, by their NoCloud names."""
    def dump(doc: Mapping[str, Any]) -> bytes:
        return yaml.safe_dump(dict(doc), sort_keys=False, default_flow_style=False).encode()

    return {
        "user-data": user_data,
        "meta-data": dump(meta_data(rec)),
        "network-config": dump(network_config(rec.nics)),
    }


def write_seed(path: Path, files: Mapping[str, bytes]) -> None:
    """Write the ISO to ``path`` (which must not exist), readable by its owner only."""
    iso = pycdlib.PyCdlib()
    iso.new(interchange_level=3, joliet=3, rock_ridge="1.09", vol_ident=VOLUME_LABEL)
    try:
        for name, iso_path in _FILES:
            data = files[name]
            iso.add_fp(io.BytesIO(data), len(data), iso_path, rr_name=name, joliet_path=f"/{name}")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with open(fd, "wb") as out:
            iso.write_fp(out)
    finally:
        iso.close()


def make_seed(directory: Path, rec: MachineRecord, user_data: bytes) -> Path:
    """The seed ISO of ``rec`` in ``directory``; returns its path."""
    path = directory / SEED_FILE
    write_seed(path, seed_files(rec, user_data))
    return path

