"""The tiny bootable image in the catalog, built (or brought up to date) by the package's
``images/build-tiny-image.sh``.

The example Machine boots ``image: tiny``; ``ironpool up`` makes sure the catalog holds the current
build so the example works with no other step (the script does nothing when the image is current).
Building needs the kernel package from Debian once (cached).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import ironpool

TINY = "tiny"


class ImageError(Exception):
    """The tiny image could not be found or built; the message says why."""


def build_script() -> Path | None:
    """The build script shipped with the package (a checkout or an installed wheel)."""
    script = Path(ironpool.__file__).resolve().parent / "images" / "build-tiny-image.sh"
    return script if script.is_file() else None


def has_tiny(catalog: Path) -> bool:
    bundle = catalog / TINY
    return (bundle / "kernel").is_file() and (bundle / "initrd").is_file()


async def ensure_tiny_image(catalog: Path, log_file: Path) -> bool:
    """Build the tiny image into ``catalog`` unless the current build is there; True if it was built."""
    script = build_script()
    if script is None:
        if has_tiny(catalog):
            return False
        raise ImageError(
            f"the image catalog {catalog} has no '{TINY}' image and the package has no build script; "
            "build it there or pass --no-tiny-image"
        )
    stamp = catalog / TINY / "STAMP"
    before = stamp.read_text() if stamp.exists() else None
    with open(log_file, "ab") as log:
        proc = await asyncio.create_subprocess_exec(
            "bash", str(script), str(catalog), stdout=log, stderr=log
        )
        try:
            rc = await proc.wait()
        except asyncio.CancelledError:
            proc.kill()
            await proc.wait()
            raise
    if rc != 0 or not has_tiny(catalog):
        raise ImageError(f"{script} {catalog} failed (exit {rc}); see {log_file}")
    return not stamp.exists() or stamp.read_text() != before
