"""The libvirt host under the volume runtime: the connection and the domains that use volumes.

The runtime's own objects are in its storage pool (:mod:`.pool`); what it must ask the host as a
whole is which domains hold a volume's file (deleting a volume in use is refused, and a running
domain's disk is grown through QEMU, which holds the file locked).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import libvirt

from ironpool.runtime import libvirt_util
from ironpool.runtime.errors import FailedPrecondition


class StorageHost:
    """One libvirt connection (re-opened when libvirtd went away) and domain queries over it."""

    def __init__(self, uri: str) -> None:
        self.uri = uri
        # Calls only: no event loop (it would slow every call), no keepalive; a connection that
        # broke is re-opened by the next call.
        self.connection = libvirt_util.Connection(uri, events=False)  # ConnectionError names the URI

    def close(self) -> None:
        self.connection.close()

    def disk_users(self, path: str, pool: str, active_only: bool = False) -> list[tuple[str, str]]:
        """``(domain, target dev)`` of every disk backed by the volume file ``path`` of ``pool``,
        named by file or by pool and volume."""
        volume = Path(path).name
        flags = libvirt.VIR_CONNECT_LIST_DOMAINS_ACTIVE if active_only else 0

        def scan(conn: libvirt.virConnect) -> list[tuple[str, str]]:
            users = []
            for dom in conn.listAllDomains(flags):
                try:
                    root = ET.fromstring(dom.XMLDesc(0))
                except libvirt.libvirtError:
                    continue  # the domain vanished while we looked
                for disk in root.iterfind("devices/disk"):
                    source, target = disk.find("source"), disk.find("target")
                    if source is None:
                        continue
                    if source.get("file") == path or (
                        source.get("pool") == pool and source.get("volume") == volume
                    ):
                        users.append((dom.name(), target.get("dev", "") if target is not None else ""))
            return users

        return self.connection.call("list domains", scan)

    def ensure_unused(self, path: str, pool: str, what: str) -> None:
        """FailedPrecondition naming the domains that still use the volume file ``path``."""
        users = sorted({dom for dom, _dev in self.disk_users(path, pool)})
        if users:
            raise FailedPrecondition(
                f"{what} is still attached to domain(s) {', '.join(users)}; detach it first"
            )

    def block_resize(self, domain: str, dev: str, capacity: int) -> None:
        """Grow a disk of a running domain (QEMU holds the file locked, so qemu-img cannot)."""

        def resize(conn: libvirt.virConnect) -> None:
            conn.lookupByName(domain).blockResize(dev, capacity, libvirt.VIR_DOMAIN_BLOCK_RESIZE_BYTES)

        self.connection.call(f"block resize {dev} of domain {domain}", resize)
