"""Volumes from images: the host's image resolver (:mod:`ironpool.runtime.images`) plus the checks a
volume source needs.

The machine runtime and this runtime resolve references the same way (catalog names, OCI
references, ``https://``/``file://`` URLs) through the same per-host cache. An image from the cache
is content-addressed and never changes, so a volume is a copy-on-write overlay on it (the cache
keeps it while the volume lives); a catalog image is an ordinary file someone may replace, so a
volume from it is a flattened copy (``qemu-img convert``) that does not depend on the file.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ironpool.runtime.errors import InvalidArgument
from ironpool.runtime.images import Credentials, Image, ImageError, ImageResolver
from ironpool.runtime.images.diskfile import qemu_img_info
from ironpool.runtime.images.mediatypes import GOARCH


@dataclass(frozen=True)
class ImageInfo:
    """A resolved disk image: file, disk format, virtual size in bytes, and whether it is a
    cached (immutable) image a volume may overlay."""

    name: str
    path: Path
    format: str
    virtual_size: int
    image: Image
    immutable: bool


class VolumeImages:
    """Resolves image references to disk files for new volumes."""

    def __init__(self, resolver: ImageResolver) -> None:
        self.resolver = resolver

    def resolve(
        self,
        ref: str,
        field: str,
        pull_secret: Mapping[str, bytes] | None = None,
        requester: tuple[str, Callable[[str, str], None]] | None = None,
        architecture: str = "",
    ) -> ImageInfo:
        host_arch = self.resolver.options.architecture
        if architecture and GOARCH.get(architecture, architecture) != GOARCH.get(host_arch, host_arch):
            raise InvalidArgument(
                f"{field.rsplit('.', 1)[0]}.architecture: {architecture!r} images do not run on this "
                f"host ({host_arch}); its machines boot the host's architecture"
            )
        try:
            creds = Credentials.from_secret(dict(pull_secret or {}), "the pull secret")
        except ImageError as exc:
            raise exc.as_iri(field.rsplit(".", 1)[0] + ".pull_secret_data") from exc
        try:
            image = self.resolver.resolve(ref, creds, requester)
        except ImageError as exc:
            raise exc.as_iri(field) from exc
        if image.path is None:
            raise InvalidArgument(f"{field}: image {ref!r} has no disk (a kernel image boots a machine only)")
        immutable = image.digest != ""
        size = image.virtual_size
        if not immutable or not size:
            size = self._checked_size(ref, field, image)
        return ImageInfo(image.name, image.path, image.format, size, image, immutable)

    @staticmethod
    def _checked_size(ref: str, field: str, image: Image) -> int:
        assert image.path is not None
        try:
            info = qemu_img_info(image.path, fmt=image.format)
        except ImageError as exc:
            raise InvalidArgument(f"{field}: image {ref!r} is unreadable: {exc.message}") from exc
        if info.get("backing-filename"):
            raise InvalidArgument(
                f"{field}: image {ref!r} has a backing file; flatten it into one file first"
            )
        size = info.get("virtual-size")
        if not isinstance(size, int) or size <= 0:
            raise InvalidArgument(f"{field}: image {ref!r} has no usable virtual size")
        return size
