"""Wiring of the volume runtime: configuration in, a driver on its storage pool out.

Used by ``ironpool volume-runtime`` and by anything that runs the runtime in its own process
(``ironpool up``, ``ironpool join``): ``driver = build(cfg)`` then ``await serve(driver, cfg.address,
stop, cfg.workers)``, which starts the driver (rebuilding its state from the pool) and serves it.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from pathlib import Path

from ironpool.runtime.images import open_resolver
from ironpool.runtime.images.cache import DEFAULT_LIMIT

from .classes import load_classes
from .driver import VolumeDriver
from .host import StorageHost
from .images import VolumeImages
from .pool import StoragePool


@dataclass(frozen=True)
class VolumeRuntimeConfig:
    """Everything ``ironpool volume-runtime`` takes as flags."""

    classes_file: Path
    libvirt_uri: str = "qemu:///system"
    storage_pool: str = "ironpool"
    pool_path: Path = Path("/var/lib/ironpool/volumes")
    images_dir: Path | None = None
    image_cache: Path = Path("/var/lib/ironpool/image-cache")
    image_cache_size: int = DEFAULT_LIMIT
    insecure_registries: tuple[str, ...] = ()
    file_images: tuple[Path, ...] = ()
    image_pull_wait: float = 10.0
    address: str = "unix:///var/run/iri-volumeprovider.sock"
    workers: int = 8
    owner: str | None = None  # None: volume-runtime@HOSTNAME:POOL_PATH
    share_pool: bool = False

    @property
    def pool_owner(self) -> str:
        """Who the storage pool is recorded for (see :mod:`.owner`)."""
        return self.owner or f"volume-runtime@{socket.gethostname()}:{self.pool_path}"


def build(cfg: VolumeRuntimeConfig) -> VolumeDriver:
    """Load the classes, open the image resolver and connect to libvirt; the driver is started by
    ``serve``.

    Raises ClassFileError (the classes file), ValueError (a relative pool path) or ConnectionError.
    """
    classes = load_classes(cfg.classes_file)
    if not cfg.pool_path.is_absolute():
        raise ValueError(f"the storage pool's folder must be an absolute path, got {cfg.pool_path}")
    pool = StoragePool(StorageHost(cfg.libvirt_uri), cfg.storage_pool, cfg.pool_path)
    images = VolumeImages(open_resolver(cfg.images_dir, cfg.image_cache, cfg.image_cache_size,
                                        cfg.insecure_registries, cfg.file_images, cfg.image_pull_wait))
    return VolumeDriver(pool, classes, images, owner=cfg.pool_owner, share_pool=cfg.share_pool)
