"""The volume runtime's storage pool and the volumes in it (synchronous; call from worker threads).

Makes sure the ``dir`` pool exists and is active and autostarted, reports its free space, and
creates, resizes, lists and deletes qcow2 volumes in it, over the host's connection
(:class:`~.host.StorageHost`). XML is built with ``xml.etree``; volume names come from
runtime-generated IDs only.
"""

from __future__ import annotations

import logging
import os
import subprocess
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import libvirt

from ironpool.runtime.errors import Internal
from ironpool.runtime.qemu_access import QemuAccessError, check_reachable

from .host import StorageHost

log = logging.getLogger(__name__)


class PoolConfigError(Exception):
    """The storage pool cannot be used as configured (wrong type, cannot be created)."""


@dataclass(frozen=True)
class VolumeInfo:
    """Sizes libvirt reports for one volume."""

    name: str
    path: str
    capacity: int
    allocation: int


def _pool_xml(name: str, path: Path) -> str:
    pool = ET.Element("pool", type="dir")
    ET.SubElement(pool, "name").text = name
    target = ET.SubElement(pool, "target")
    ET.SubElement(target, "path").text = str(path)
    return ET.tostring(pool, encoding="unicode")


def _volume_xml(name: str, capacity: int, backing: tuple[Path, str] | None = None) -> str:
    vol = ET.Element("volume", type="file")
    ET.SubElement(vol, "name").text = name
    ET.SubElement(vol, "capacity", unit="bytes").text = str(capacity)
    ET.SubElement(vol, "allocation", unit="bytes").text = "0"
    target = ET.SubElement(vol, "target")
    ET.SubElement(target, "format", type="qcow2")
    perms = ET.SubElement(target, "permissions")
    ET.SubElement(perms, "mode").text = "0600"
    if backing is not None:
        # A copy-on-write overlay; the backing format is recorded, so nothing probes it later.
        store = ET.SubElement(vol, "backingStore")
        ET.SubElement(store, "path").text = str(backing[0])
        ET.SubElement(store, "format", type=backing[1])
    return ET.tostring(vol, encoding="unicode")


class StoragePool:
    """One libvirt ``dir`` storage pool on the host's connection."""

    def __init__(self, host: StorageHost, name: str, path: Path) -> None:
        self.host = host
        self.name = name
        self.requested_path = path
        self.target_path = path

    def _pool(self, conn: libvirt.virConnect) -> libvirt.virStoragePool:
        return conn.storagePoolLookupByName(self.name)

    # -- the pool ----------------------------------------------------------------------------
    def _find(self, conn: libvirt.virConnect) -> libvirt.virStoragePool | None:
        """The pool by name or, failing that, the ``dir`` pool already serving our folder."""
        try:
            return conn.storagePoolLookupByName(self.name)
        except libvirt.libvirtError as exc:
            if exc.get_error_code() != libvirt.VIR_ERR_NO_STORAGE_POOL:
                raise PoolConfigError(f"storage pool {self.name!r}: {exc.get_error_message()}") from exc
        for candidate in conn.listAllStoragePools(0):
            try:
                root = ET.fromstring(candidate.XMLDesc(0))
            except libvirt.libvirtError:
                continue  # undefined while we looked
            if root.get("type") == "dir" and root.findtext("target/path") == str(self.requested_path):
                # Our folder under another name (made before pool names followed the data dir):
                # libvirt refuses a second pool on one folder, and the volumes in it are these.
                log.info(
                    "using storage pool %s, which already serves %s", candidate.name(), self.requested_path
                )
                self.name = candidate.name()
                return candidate
        return None

    def _check_reachable(self, conn: libvirt.virConnect, path: Path) -> None:
        try:
            check_reachable(conn, "qemu", {f"storage pool {self.name}": path})
        except QemuAccessError as exc:
            raise PoolConfigError(str(exc)) from exc

    def ensure(self) -> None:
        """Create the pool if missing, start it, set autostart; refuse a pool of another type or one
        whose folder QEMU cannot reach (before anything is made)."""
        conn = self.host.connection.get()
        self._check_reachable(conn, self.requested_path)
        pool = self._find(conn)
        if pool is None:
            try:
                pool = conn.storagePoolDefineXML(_pool_xml(self.name, self.requested_path), 0)
                pool.build(0)  # creates the target folder
            except libvirt.libvirtError as exc:
                raise PoolConfigError(
                    f"cannot define dir storage pool {self.name!r} at {self.requested_path}: "
                    f"{exc.get_error_message()}"
                ) from exc
            log.info("defined dir storage pool %s at %s", self.name, self.requested_path)
        root = ET.fromstring(pool.XMLDesc(0))
        pool_type = root.get("type")
        if pool_type != "dir":
            raise PoolConfigError(
                f"storage pool {self.name!r} exists with type {pool_type!r}; the volume runtime needs a "
                "'dir' pool (choose another --storage-pool name)"
            )
        path_text = root.findtext("target/path")
        if not path_text:
            raise PoolConfigError(f"storage pool {self.name!r} has no target path")
        self.target_path = Path(path_text)
        if self.target_path != self.requested_path:
            log.warning(
                "storage pool %s already exists at %s (not %s); using it",
                self.name,
                self.target_path,
                self.requested_path,
            )
        try:
            if not pool.isActive():
                pool.create(0)
            if not pool.autostart():
                pool.setAutostart(1)
        except libvirt.libvirtError as exc:
            msg = f"cannot start storage pool {self.name!r}: {exc.get_error_message()}"
            raise PoolConfigError(msg) from exc
        if self.target_path != self.requested_path:
            self._check_reachable(conn, self.target_path)

    def space(self) -> tuple[int, int]:
        """``(capacity, free)`` bytes of the pool's filesystem, read now.

        The same formula libvirt's ``dir`` backend uses on refresh (``f_blocks``/``f_bfree`` times
        ``f_frsize``), without ``pool.refresh()``, which re-probes every volume file (ms per 100).
        The runtime shares the host with the pool anyway (it keeps sidecars there).
        """
        try:
            st = os.statvfs(self.target_path)
        except OSError as exc:
            raise Internal(
                f"storage pool {self.name!r}: cannot stat {self.target_path}: {exc.strerror}"
            ) from exc
        return st.f_blocks * st.f_frsize, st.f_bfree * st.f_frsize

    # -- volumes -----------------------------------------------------------------------------
    def volume_path(self, name: str) -> Path:
        return self.target_path / name

    def create_qcow2(self, name: str, capacity: int, backing: tuple[Path, str] | None = None) -> VolumeInfo:
        """A new qcow2 volume, empty or (``backing``: file and format) an overlay on that file."""
        def create(conn: libvirt.virConnect) -> VolumeInfo:
            vol = self._pool(conn).createXML(_volume_xml(name, capacity, backing), 0)
            _type, cap, alloc = vol.info()
            return VolumeInfo(name, vol.path(), int(cap), int(alloc))

        return self.host.connection.call(f"create volume {name}", create)

    def info(self, name: str) -> VolumeInfo | None:
        """The volume's sizes, or ``None`` if libvirt has no such volume."""

        def read(conn: libvirt.virConnect) -> VolumeInfo | None:
            pool = self._pool(conn)
            try:
                vol = pool.storageVolLookupByName(name)
                _type, cap, alloc = vol.info()
            except libvirt.libvirtError as exc:
                if exc.get_error_code() == libvirt.VIR_ERR_NO_STORAGE_VOL:
                    # The file may have appeared outside libvirt's view (e.g. after a crash):
                    # refresh once before answering "absent".
                    pool.refresh(0)
                    try:
                        vol = pool.storageVolLookupByName(name)
                        _type, cap, alloc = vol.info()
                    except libvirt.libvirtError as exc2:
                        if exc2.get_error_code() == libvirt.VIR_ERR_NO_STORAGE_VOL:
                            return None
                        raise
                else:
                    raise
            return VolumeInfo(name, vol.path(), int(cap), int(alloc))

        return self.host.connection.call(f"look up volume {name}", read)

    def list_volumes(self) -> dict[str, VolumeInfo]:
        def read(conn: libvirt.virConnect) -> dict[str, VolumeInfo]:
            pool = self._pool(conn)
            pool.refresh(0)
            out: dict[str, VolumeInfo] = {}
            for vol in pool.listAllVolumes(0):
                _type, cap, alloc = vol.info()
                out[vol.name()] = VolumeInfo(vol.name(), vol.path(), int(cap), int(alloc))
            return out

        return self.host.connection.call(f"list volumes of pool {self.name!r}", read)

    def resize(self, name: str, capacity: int) -> VolumeInfo:
        def grow(conn: libvirt.virConnect) -> VolumeInfo:
            vol = self._pool(conn).storageVolLookupByName(name)
            vol.resize(capacity, 0)
            _type, cap, alloc = vol.info()
            return VolumeInfo(name, vol.path(), int(cap), int(alloc))

        return self.host.connection.call(f"resize volume {name}", grow)

    def delete(self, name: str) -> None:
        def remove(conn: libvirt.virConnect) -> None:
            pool = self._pool(conn)
            try:
                vol = pool.storageVolLookupByName(name)
            except libvirt.libvirtError as exc:
                if exc.get_error_code() == libvirt.VIR_ERR_NO_STORAGE_VOL:
                    return
                raise
            try:
                vol.delete(0)
            except libvirt.libvirtError:
                # The file may already be gone behind libvirt's back: then the refreshed pool no
                # longer lists it and the delete is done; otherwise the error is real.
                pool.refresh(0)
                if name in pool.listVolumes():
                    raise

        self.host.connection.call(f"delete volume {name}", remove)

    def ensure_unused(self, path: str, what: str) -> None:
        """FailedPrecondition naming the domains that still use the volume file ``path``."""
        self.host.ensure_unused(path, self.name, what)

    def users(self, path: str) -> list[tuple[str, str]]:
        """``(domain, target dev)`` of the running domains that hold the volume file ``path``."""
        return self.host.disk_users(path, self.name, active_only=True)


def qemu_img(*args: str, timeout: float = 3600) -> None:
    """Run ``qemu-img`` and raise :class:`Internal` with its stderr on failure."""
    proc = subprocess.run(["qemu-img", *args], capture_output=True, text=True, timeout=timeout, check=False)
    if proc.returncode != 0:
        raise Internal(f"qemu-img {args[0]}: {proc.stderr.strip() or f'exit {proc.returncode}'}")
