"""The libvirt host under the volume runtime: the connection and the domains that use volumes.

The runtime's own objects are in its storage pool (:mod:`.pool`); what it must ask the host as a
whole is which domains hold a volume's file (deleting a volume in use is refused, and a running
domain's disk is grown through QEMU, which holds the file locked).
"""

from __future__ import annotations

import logging
import xml.etree.ElementTree as ET
from pathlib import Path

import libvirt

from ironpool.runtime import libvirt_util
from ironpool.runtime.errors import FailedPrecondition

log = logging.getLogger(__name__)


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

    def freeze_filesystems(self, domain: str) -> bool:
        """Ask the guest agent of a running domain to flush and freeze its filesystems (``fsfreeze``);
        False when the guest has no agent answering (nothing was frozen: the caller's copy is then
        crash-consistent). A True must be followed by :meth:`thaw_filesystems`."""

        def freeze(conn: libvirt.virConnect) -> int:
            return int(conn.lookupByName(domain).fsFreeze())

        try:
            frozen = self.connection.call(f"freeze the filesystems of domain {domain}", freeze)
        except Exception as exc:  # no agent channel, agent not connected or not answering
            log.info("domain %s: no guest agent froze its filesystems (%s); the copy is crash-consistent",
                     domain, exc)
            return False
        log.info("domain %s: guest agent froze %d filesystem(s)", domain, frozen)
        return True

    def thaw_filesystems(self, domain: str) -> None:
        """Thaw what :meth:`freeze_filesystems` froze; a failure is logged loudly with the command
        that thaws by hand (a guest left frozen blocks every write to its filesystems)."""

        def thaw(conn: libvirt.virConnect) -> None:
            conn.lookupByName(domain).fsThaw()

        try:
            self.connection.call(f"thaw the filesystems of domain {domain}", thaw)
        except Exception as exc:
            log.error("domain %s: thawing its filesystems failed: %s; run `virsh domfsthaw %s`",
                      domain, exc, domain)

    def block_resize(self, domain: str, dev: str, capacity: int) -> None:
        """Grow a disk of a running domain (QEMU holds the file locked, so qemu-img cannot)."""

        def resize(conn: libvirt.virConnect) -> None:
            conn.lookupByName(domain).blockResize(dev, capacity, libvirt.VIR_DOMAIN_BLOCK_RESIZE_BYTES)

        self.connection.call(f"block resize {dev} of domain {domain}", resize)
