"""The tiny bootable image in the catalog: found, or built with ``scripts/build-tiny-image.sh``.

The example Machine boots ``image: tiny``; ``ironpool up`` makes sure the catalog holds it so the
example works with no other step. Building needs the kernel package from Debian once (cached).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import ironpool

TINY = "tiny"


class ImageError(Exception):
    """The tiny image could not be found or built; the message says why."""


def build_script() -> Path | None:
    """``scripts/build-tiny-image.sh`` of the source tree this package runs from, if any."""
    script = Path(ironpool.__file__).resolve().parents[2] / "scripts" / "build-tiny-image.sh"
    return script if script.is_file() else None


def has_tiny(catalog: Path) -> bool:
    bundle = catalog / TINY
    return (bundle / "kernel").is_file() and (bundle / "initrd").is_file()


async def ensure_tiny_image(catalog: Path, log_file: Path) -> bool:
    """Build the tiny image into ``catalog`` unless it is there; True if it had to be built."""
    if has_tiny(catalog):
        return False
    script = build_script()
    if script is None:
        raise ImageError(
            f"the image catalog {catalog} has no '{TINY}' image and scripts/build-tiny-image.sh is not "
            "available; build it there or pass --no-tiny-image"
        )
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
    return True
