"""Volumes from images: the host's shared image catalog (:mod:`ironpool.runtime.images`) plus the
checks a volume source needs.

The machine runtime and this runtime read the same ``--images`` folder the same way: an image
reference (``debian-12`` or an OCI-style ``registry/path/debian-12:tag``) names
``<dir>/debian-12.qcow2|.raw|.img``, and the suffix fixes the format (so a raw image that starts
with a qcow2 header is never read as qcow2). The image is *copied* (flattened with
``qemu-img convert``) into the new volume, so the volume does not depend on the image file.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ironpool.runtime import images as catalog
from ironpool.runtime.errors import Internal, InvalidArgument, NotFound

_FORMATS = frozenset({"qcow2", "raw"})


@dataclass(frozen=True)
class ImageInfo:
    """A resolved disk image: file, disk format and virtual size in bytes."""

    name: str
    path: Path
    format: str
    virtual_size: int


def qemu_img_info(path: Path, fmt: str = "", force_share: bool = False) -> dict[str, object]:
    """``qemu-img info`` as a dict; raises :class:`Internal` with qemu-img's message on failure."""
    cmd = ["qemu-img", "info", "--output=json"]
    if fmt:
        cmd += ["-f", fmt]
    if force_share:
        cmd.append("-U")
    proc = subprocess.run([*cmd, str(path)], capture_output=True, text=True, timeout=60, check=False)
    if proc.returncode != 0:
        raise Internal(f"qemu-img info {path}: {proc.stderr.strip()}")
    data = json.loads(proc.stdout)
    assert isinstance(data, dict)
    return data


class ImageCatalog:
    """Resolves image references to disk files (or refuses every image when there is no catalog)."""

    def __init__(self, directory: Path | None) -> None:
        self.directory = directory
        self._catalog = catalog.ImageCatalog(directory) if directory is not None else None

    def resolve(self, ref: str, field: str) -> ImageInfo:
        try:
            catalog.catalog_name(ref)
        except catalog.InvalidImageName as exc:
            raise InvalidArgument(f"{field}: {exc}") from exc
        if self._catalog is None:
            raise NotFound(f"{field}: image {ref!r} not found: this runtime has no image catalog (--images)")
        try:
            image = self._catalog.resolve(ref)
        except catalog.InvalidImageName as exc:
            raise InvalidArgument(f"{field}: {exc}") from exc
        except catalog.ImageNotFound as exc:
            raise NotFound(f"{field}: {exc}") from exc
        if image.kind != "disk" or image.path is None:
            raise InvalidArgument(f"{field}: image {ref!r} is a kernel bundle, not a disk image")
        try:
            info = qemu_img_info(image.path, fmt=image.format)
        except Internal as exc:
            raise InvalidArgument(f"{field}: image {ref!r} is unreadable: {exc.message}") from exc
        if info.get("backing-filename"):
            raise InvalidArgument(
                f"{field}: image {ref!r} has a backing file; flatten it into one file first"
            )
        fmt = str(info.get("format", ""))
        if fmt not in _FORMATS:
            raise InvalidArgument(
                f"{field}: image {ref!r} has format {fmt!r}; only qcow2 and raw are supported"
            )
        size = info.get("virtual-size")
        if not isinstance(size, int) or size <= 0:
            raise InvalidArgument(f"{field}: image {ref!r} has no usable virtual size")
        return ImageInfo(name=image.name, path=image.path, format=fmt, virtual_size=size)
