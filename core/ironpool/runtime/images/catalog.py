"""The local image catalog: a directory where each image is a disk file or a kernel bundle.

Layout of the catalog directory::

    <dir>/<name>.qcow2 | <name>.raw | <name>.img     a bootable disk image
    <dir>/<name>/kernel, initrd[, cmdline]           a direct-kernel-boot bundle
    <dir>/<name>/firmware, <dir>/<name>.firmware      optional: ``uefi`` (or ``bios``, the default)

An image asks for UEFI with that ``firmware`` file, beside its disk or in its bundle: the firmware a
guest needs is a property of what is on its disk (a GRUB for BIOS, an EFI system partition), so it
travels with the image rather than with a machine class, which is a size.

A catalog name may carry path components, a tag or a digest (``os/tiny:1``): it is looked up by its
last path component without them. References with a registry host are pulled instead (see
:mod:`.reference`).
"""

from __future__ import annotations

import re
from pathlib import Path

from .errors import ImageNotFound, InvalidImageName, NotAnImage
from .image import Image

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_REF = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:@+-]{0,511}$")
DISK_SUFFIXES: dict[str, str] = {".qcow2": "qcow2", ".raw": "raw", ".img": "raw"}
FIRMWARES = {"bios": "", "uefi": "uefi"}  # as written in a firmware file -> Image.firmware


def catalog_name(ref: str) -> str:
    """The catalog name for an image reference, or InvalidImageName."""
    if not _REF.match(ref) or ".." in ref:
        raise InvalidImageName(f"image {ref!r}: not a valid image name or reference")
    name = ref.rsplit("/", 1)[-1]
    name = name.split("@", 1)[0].split(":", 1)[0]
    if not _NAME.match(name):
        raise InvalidImageName(f"image {ref!r}: not a valid image name or reference")
    return name


def _firmware(ref: str, path: Path) -> str:
    """The firmware an image's ``firmware`` file names ("" without one); NotAnImage otherwise."""
    if not path.is_file():
        return ""
    word = path.read_text().strip().lower()
    if word not in FIRMWARES:
        raise NotAnImage(f"image {ref!r}: {path} names firmware {word!r} (known: bios, uefi)")
    return FIRMWARES[word]


class ImageCatalog:
    """Resolves image names against one catalog directory (read on every lookup: cheap, live)."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory).absolute()

    def resolve(self, ref: str) -> Image:
        """The image named by ``ref``; ImageNotFound naming the catalog when it is missing."""
        name = catalog_name(ref)
        bundle = self.directory / name
        if bundle.is_dir():
            kernel, initrd = bundle / "kernel", bundle / "initrd"
            if not kernel.is_file():
                raise ImageNotFound(f"image {ref!r}: kernel bundle {bundle} has no 'kernel' file")
            cmdline_file = bundle / "cmdline"
            cmdline = cmdline_file.read_text().strip() if cmdline_file.is_file() else ""
            return Image(
                name=name,
                kernel=kernel,
                initrd=initrd if initrd.is_file() else None,
                cmdline=cmdline,
                firmware=_firmware(ref, bundle / "firmware"),
            )
        for suffix, fmt in DISK_SUFFIXES.items():
            path = self.directory / f"{name}{suffix}"
            if path.is_file():
                # The file a link names: overlays made on it keep naming that file when the name
                # moves on to a newer build (``ironpool image build``).
                return Image(name=name, path=path.resolve(), format=fmt,
                             firmware=_firmware(ref, self.directory / f"{name}.firmware"))
        raise ImageNotFound(f"image {ref!r}: not found in the image catalog {self.directory}")

    def names(self) -> list[str]:
        """Every image name in the catalog, sorted."""
        if not self.directory.is_dir():
            return []
        found: set[str] = set()
        for entry in self.directory.iterdir():
            if entry.is_dir() and (entry / "kernel").is_file():
                found.add(entry.name)
            elif entry.is_file() and entry.suffix in DISK_SUFFIXES:
                found.add(entry.stem)
        return sorted(found)
