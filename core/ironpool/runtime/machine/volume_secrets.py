"""The libvirt secrets that open encrypted volumes: one per attachment, existing only while attached.

A volume whose access attributes say ``encryption=luks`` (see
:mod:`ironpool.runtime.volume.luks`) is a qcow2 with LUKS inside; the machinepoollet hands its key
over in ``VolumeConnection.encryption_data["encryptionKey"]`` (read from the Volume's
``encryption.secretRef``). The runtime puts the key in an *ephemeral, private* libvirt secret —
libvirt keeps it in memory only, never on disk, and never gives it back through its API — and names
that secret in the disk's ``<encryption>``; libvirt hands it to QEMU encrypted with a per-domain
master key, so it is not on QEMU's command line either. The secret is undefined when the volume is
detached or its machine deleted. The key is in no record, file or log of the runtime: its records
hold the secret's UUID only.

A secret lives in libvirtd's memory: after libvirtd restarts, running guests keep their open disks,
but a machine booted again later cannot open them until the volume is attached anew.
"""

from __future__ import annotations

import logging
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Iterable

import libvirt

from ironpool.iri.encryption import ENCRYPTION_ATTRIBUTE, KEY_NAME, LUKS
from ironpool.iri.gen.machine.v1alpha1 import api_pb2 as machine_pb2
from ironpool.runtime import libvirt_util
from ironpool.runtime.errors import Internal, InvalidArgument

from .model import MachineRecord, VolumeRecord

log = logging.getLogger(__name__)

DESCRIPTION_PREFIX = "ironpool-"  # "ironpool-<machine id> volume <name>": ours, for clean-ups


def volume_key(vol: machine_pb2.Volume, vrec: VolumeRecord, field: str) -> bytes:
    """The key an attachment needs (b"" for a volume that is not encrypted); InvalidArgument naming
    the field when an encrypted volume comes without one."""
    scheme = vrec.attributes.get(ENCRYPTION_ATTRIBUTE, "")
    if not scheme or vrec.kind != "connection":
        return b""
    if scheme != LUKS:
        raise InvalidArgument(
            f"{field}.connection.attributes.{ENCRYPTION_ATTRIBUTE}: {scheme[:40]!r} is not {LUKS!r}")
    key = vol.connection.encryption_data.get(KEY_NAME, b"")
    if not key:
        raise InvalidArgument(
            f"{field}.connection.encryption_data: the volume is encrypted; {KEY_NAME!r} is required")
    return bytes(key)


def volume_keys(volumes: Iterable[machine_pb2.Volume], rec: MachineRecord, field: str) -> dict[str, bytes]:
    """The keys of a new machine's encrypted volumes, by volume name (``rec`` holds their records)."""
    keys: dict[str, bytes] = {}
    for i, vol in enumerate(volumes):
        vrec = rec.volume(vol.name)
        if vrec is not None:
            key = volume_key(vol, vrec, f"{field}[{i}]")
            if key:
                keys[vrec.name] = key
    return keys


def define(conn: libvirt.virConnect, machine_id: str, vrec: VolumeRecord, key: bytes) -> str:
    """An ephemeral, private secret holding ``key`` for ``vrec``; its UUID (also set on ``vrec``)."""
    secret_uuid = str(uuid.uuid4())
    el = ET.Element("secret", {"ephemeral": "yes", "private": "yes"})
    ET.SubElement(el, "uuid").text = secret_uuid
    ET.SubElement(el, "description").text = f"{DESCRIPTION_PREFIX}{machine_id} volume {vrec.name}"
    try:
        secret = conn.secretDefineXML(ET.tostring(el, encoding="unicode"))
    except libvirt.libvirtError as exc:
        raise Internal(f"volume {vrec.name!r}: defining its libvirt secret failed: {exc}") from exc
    try:
        secret.setValue(key)
    except libvirt.libvirtError as exc:
        secret.undefine()
        raise Internal(f"volume {vrec.name!r}: setting its libvirt secret failed: {exc}") from exc
    vrec.secret = secret_uuid
    return secret_uuid


def define_all(conn: libvirt.virConnect, rec: MachineRecord, keys: dict[str, bytes]) -> None:
    """The secrets of every volume of ``rec`` that has a key; none is left if one fails."""
    try:
        for vrec in rec.volumes:
            if vrec.name in keys:
                define(conn, rec.id, vrec, keys[vrec.name])
    except BaseException:
        remove_all(conn, rec)
        raise


def remove(conn: libvirt.virConnect, vrec: VolumeRecord) -> None:
    """Undefine the secret of ``vrec`` (one already gone is fine)."""
    if not vrec.secret:
        return
    try:
        conn.secretLookupByUUIDString(vrec.secret).undefine()
    except libvirt.libvirtError as exc:
        if exc.get_error_code() != libvirt.VIR_ERR_NO_SECRET and not libvirt_util.is_no_domain(exc):
            raise
    vrec.secret = ""


def remove_all(conn: libvirt.virConnect, rec: MachineRecord) -> None:
    """Undefine the secrets of every volume of ``rec``; a failure is logged, the rest go on."""
    for vrec in rec.volumes:
        try:
            remove(conn, vrec)
        except libvirt.libvirtError as exc:
            log.warning("machine %s: volume %r: removing its secret failed: %s", rec.id, vrec.name, exc)
