"""A resolved image: the local files a machine boots from, and the content they were made from."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Image:
    """A base disk (``path``, ``format``), a kernel to boot directly (``kernel``, ``initrd``,
    ``cmdline``), or both, and the ``firmware`` it boots under. ``name`` is the reference as
    written; ``ref`` is what was booted, pinned to its ``digest`` where the image came from a
    registry or a URL."""

    name: str
    path: Path | None = None
    format: str = ""
    kernel: Path | None = None
    initrd: Path | None = None
    cmdline: str = ""
    digest: str = ""
    ref: str = ""
    virtual_size: int = 0  # of the disk, when known
    # "uefi": the image boots only under UEFI firmware (OVMF); "" boots the default, SeaBIOS.
    firmware: str = ""

    @property
    def has_disk(self) -> bool:
        return self.path is not None

    @property
    def boots_kernel(self) -> bool:
        return self.kernel is not None

    @property
    def booted_ref(self) -> str:
        """What ``status.imageRef`` reports: the pinned reference, else the name."""
        return self.ref or self.name
