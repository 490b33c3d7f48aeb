"""Local disks the runtime makes for a machine: qcow2 files, empty or overlaid on an image's disk.

An overlay is a copy-on-write qcow2 whose backing file is the image's disk in the catalog or the
host's image cache, with the backing format recorded (libvirt never probes it): making one costs
the same whatever the image's size, and ten machines from one image share its one base.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from ironpool.runtime.errors import Internal
from ironpool.runtime.images import Image
from ironpool.runtime.qemu_access import make_dirs

from .model import VolumeRecord

DEFAULT_EMPTY_DISK_BYTES = 500 * 1024**2  # IronCore's default for an empty local disk


def _qemu_img(*args: str) -> str:
    try:
        proc = subprocess.run(["qemu-img", *args], capture_output=True, text=True, timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise Internal(f"qemu-img {args[0]}: {exc}") from exc
    if proc.returncode != 0:
        raise Internal(f"qemu-img {args[0]} failed: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc.stdout


def virtual_size(path: Path) -> int:
    """The virtual size in bytes of a disk image file."""
    info = json.loads(_qemu_img("info", "--output=json", "-U", str(path)))
    return int(info["virtual-size"])


def create_empty(path: Path, size_bytes: int) -> None:
    """A sparse qcow2 of ``size_bytes`` (default 500 MiB when 0)."""
    make_dirs(path.parent)
    _qemu_img("create", "-q", "-f", "qcow2", str(path), str(size_bytes or DEFAULT_EMPTY_DISK_BYTES))


def create_overlay(path: Path, image: Path, image_format: str, size_bytes: int, base_size: int = 0) -> int:
    """A qcow2 overlay on ``image`` (never written), grown to ``size_bytes`` if larger; its size.
    ``base_size``: the image's virtual size when known (saves reading it)."""
    make_dirs(path.parent)
    base = base_size or virtual_size(image)
    size = max(base, size_bytes)
    _qemu_img("create", "-q", "-f", "qcow2", "-b", str(image), "-F", image_format, str(path), str(size))
    return size


def grow(path: Path, size_bytes: int) -> None:
    """Grow an image file that no running QEMU holds open (never shrinks it)."""
    if virtual_size(path) < size_bytes:
        _qemu_img("resize", "-q", str(path), str(size_bytes))


def make_local(vrec: VolumeRecord, image: Image | None) -> None:
    """The file of a local disk: an overlay on a disk image, or empty; records its size."""
    if vrec.kind != "local" or not vrec.path:
        return
    if image is not None and image.path is not None:
        vrec.size_bytes = create_overlay(
            Path(vrec.path), image.path, image.format, vrec.size_bytes, image.virtual_size
        )
    else:
        create_empty(Path(vrec.path), vrec.size_bytes)
        vrec.size_bytes = vrec.size_bytes or DEFAULT_EMPTY_DISK_BYTES
