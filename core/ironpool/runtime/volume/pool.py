"""libvirt storage-pool operations for the volume runtime (synchronous; call from worker threads).

Owns the connection (reopened when libvirtd restarts), makes sure the ``dir`` pool exists and is
active and autostarted, and creates, resizes, lists and deletes qcow2 volumes in it. XML is built
with ``xml.etree``; volume names come from runtime-generated IDs only.
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import threading
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import libvirt

from ironpool.runtime.errors import FailedPrecondition, Internal, Unavailable

log = logging.getLogger(__name__)
T = TypeVar("T")

# libvirt error codes meaning "the connection is gone": reconnect and let the caller retry.
_CONNECTION_ERRORS = frozenset(
    {
        libvirt.VIR_ERR_SYSTEM_ERROR,
        libvirt.VIR_ERR_RPC,
        libvirt.VIR_ERR_NO_CONNECT,
        libvirt.VIR_ERR_INVALID_CONN,
    }
)


def _quiet(_ctx: object, _err: object) -> None:
    """libvirt prints every error to stderr by default; ours are raised and logged instead."""


libvirt.registerErrorHandler(_quiet, None)


def _alive(conn: libvirt.virConnect) -> bool:
    try:
        return bool(conn.isAlive())
    except libvirt.libvirtError:
        return False


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


def _volume_xml(name: str, capacity: int) -> str:
    vol = ET.Element("volume", type="file")
    ET.SubElement(vol, "name").text = name
    ET.SubElement(vol, "capacity", unit="bytes").text = str(capacity)
    ET.SubElement(vol, "allocation", unit="bytes").text = "0"
    target = ET.SubElement(vol, "target")
    ET.SubElement(target, "format", type="qcow2")
    perms = ET.SubElement(target, "permissions")
    ET.SubElement(perms, "mode").text = "0600"
    return ET.tostring(vol, encoding="unicode")


class StoragePool:
    """One libvirt ``dir`` storage pool on one connection."""

    def __init__(self, uri: str, name: str, path: Path) -> None:
        self.uri = uri
        self.name = name
        self.requested_path = path
        self.target_path = path
        self._conn: libvirt.virConnect | None = None
        self._lock = threading.Lock()

    # -- connection --------------------------------------------------------------------------
    def _connection(self) -> libvirt.virConnect:
        with self._lock:
            if self._conn is not None:
                if _alive(self._conn):
                    return self._conn
                log.warning("libvirt connection to %s lost; reconnecting", self.uri)
                self._conn = None
            try:
                self._conn = libvirt.open(self.uri)
            except libvirt.libvirtError as exc:
                msg = f"cannot connect to libvirt at {self.uri}: {exc.get_error_message()}"
                raise Unavailable(msg) from exc
            return self._conn

    def _call(self, what: str, fn: Callable[[libvirt.virConnect], T]) -> T:
        """Run ``fn`` on the connection; one retry after a reconnect if the connection broke."""
        for attempt in (1, 2):
            conn = self._connection()
            try:
                return fn(conn)
            except libvirt.libvirtError as exc:
                if attempt == 1 and exc.get_error_code() in _CONNECTION_ERRORS and not _alive(conn):
                    continue
                raise Internal(f"{what}: {exc.get_error_message()}") from exc
        raise Unavailable(f"{what}: libvirt connection keeps failing")  # pragma: no cover

    def _pool(self, conn: libvirt.virConnect) -> libvirt.virStoragePool:
        return conn.storagePoolLookupByName(self.name)

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                with contextlib.suppress(libvirt.libvirtError):
                    self._conn.close()
                self._conn = None

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
                log.info("using storage pool %s, which already serves %s", candidate.name(),
                         self.requested_path)
                self.name = candidate.name()
                return candidate
        return None

    def ensure(self) -> None:
        """Create the pool if missing, start it, set autostart; refuse a pool of another type."""
        conn = self._connection()
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

    def create_qcow2(self, name: str, capacity: int) -> VolumeInfo:
        def create(conn: libvirt.virConnect) -> VolumeInfo:
            vol = self._pool(conn).createXML(_volume_xml(name, capacity), 0)
            _type, cap, alloc = vol.info()
            return VolumeInfo(name, vol.path(), int(cap), int(alloc))

        return self._call(f"create volume {name}", create)

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

        return self._call(f"look up volume {name}", read)

    def list_volumes(self) -> dict[str, VolumeInfo]:
        def read(conn: libvirt.virConnect) -> dict[str, VolumeInfo]:
            pool = self._pool(conn)
            pool.refresh(0)
            out: dict[str, VolumeInfo] = {}
            for vol in pool.listAllVolumes(0):
                _type, cap, alloc = vol.info()
                out[vol.name()] = VolumeInfo(vol.name(), vol.path(), int(cap), int(alloc))
            return out

        return self._call(f"list volumes of pool {self.name!r}", read)

    def resize(self, name: str, capacity: int) -> VolumeInfo:
        def grow(conn: libvirt.virConnect) -> VolumeInfo:
            vol = self._pool(conn).storageVolLookupByName(name)
            vol.resize(capacity, 0)
            _type, cap, alloc = vol.info()
            return VolumeInfo(name, vol.path(), int(cap), int(alloc))

        return self._call(f"resize volume {name}", grow)

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

        self._call(f"delete volume {name}", remove)

    def disk_users(self, path: str, active_only: bool = False) -> list[tuple[str, str]]:
        """``(domain, target dev)`` of every disk backed by this volume, by file or pool/volume."""
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
                        source.get("pool") == self.name and source.get("volume") == volume
                    ):
                        users.append((dom.name(), target.get("dev", "") if target is not None else ""))
            return users

        return self._call("list domains", scan)

    def ensure_unused(self, path: str, what: str) -> None:
        users = sorted({dom for dom, _dev in self.disk_users(path)})
        if users:
            raise FailedPrecondition(
                f"{what} is still attached to domain(s) {', '.join(users)}; detach it first"
            )

    def block_resize(self, domain: str, dev: str, capacity: int) -> None:
        """Grow a disk of a running domain (QEMU holds the file locked, so qemu-img cannot)."""

        def resize(conn: libvirt.virConnect) -> None:
            conn.lookupByName(domain).blockResize(dev, capacity, libvirt.VIR_DOMAIN_BLOCK_RESIZE_BYTES)

        self._call(f"block resize {dev} of domain {domain}", resize)


def qemu_img(*args: str, timeout: float = 3600) -> None:
    """Run ``qemu-img`` and raise :class:`Internal` with its stderr on failure."""
    proc = subprocess.run(["qemu-img", *args], capture_output=True, text=True, timeout=timeout, check=False)
    if proc.returncode != 0:
        raise Internal(f"qemu-img {args[0]}: {proc.stderr.strip() or f'exit {proc.returncode}'}")
