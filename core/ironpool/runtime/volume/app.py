"""Wiring of the volume runtime: configuration in, a driver on its storage pool out.

Used by ``ironpool volume-runtime`` and by anything that runs the runtime in its own process
(``ironpool up``, ``ironpool join``): ``driver = build(cfg)`` then ``await serve(driver, cfg.address,
stop, cfg.workers)``, which starts the driver (rebuilding its state from the pool) and serves it.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from pathlib import Path

from .classes import load_classes
from .driver import VolumeDriver
from .host import StorageHost
from .images import ImageCatalog
from .pool import StoragePool


@dataclass(frozen=True)
class VolumeRuntimeConfig:
    """Everything ``ironpool volume-runtime`` takes as flags."""

    classes_file: Path
    libvirt_uri: str = "qemu:///system"
    storage_pool: str = "ironpool"
    pool_path: Path = Path("/var/lib/ironpool/volumes")
    images_dir: Path | None = None
    address: str = "unix:///var/run/iri-volumeprovider.sock"
    workers: int = 8
    owner: str | None = None  # None: volume-runtime@HOSTNAME:POOL_PATH
    share_pool: bool = False

    @property
    def pool_owner(self) -> str:
        """Who the storage pool is recorded for (see :mod:`.owner`)."""
        return self.owner or f"volume-runtime@{socket.gethostname()}:{self.pool_path}"


def build(cfg: VolumeRuntimeConfig) -> VolumeDriver:
    """Load the classes and connect to libvirt; the driver is started by ``serve``.

    Raises ClassFileError (the classes file), ValueError (a relative pool path) or ConnectionError.
    """
    classes = load_classes(cfg.classes_file)
    if not cfg.pool_path.is_absolute():
        raise ValueError(f"the storage pool's folder must be an absolute path, got {cfg.pool_path}")
    pool = StoragePool(StorageHost(cfg.libvirt_uri), cfg.storage_pool, cfg.pool_path)
    return VolumeDriver(pool, classes, ImageCatalog(cfg.images_dir), owner=cfg.pool_owner,
                        share_pool=cfg.share_pool)
