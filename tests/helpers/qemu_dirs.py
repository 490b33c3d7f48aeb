"""Test directories that QEMU can reach.

QEMU runs as an unprivileged user (Debian's ``libvirt-qemu``) and libvirt's dynamic ownership hands
it each disk, kernel, initrd and fw_cfg file when a domain starts, but not the directories above
them: every directory on the way must be searchable by that user, as ``/var/lib/ironpool`` is on a
host. ``tempfile.mkdtemp`` and pytest make their directories 0700; these helpers add search (not
read) permission for others, from the temporary root down to the directory a test uses.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from pathlib import Path


def let_qemu_through(path: Path) -> Path:
    """Add search permission for others to ``path`` and each of its parents below the temp root."""
    root = Path(tempfile.gettempdir()).resolve()
    path = path.resolve()
    for directory in (path, *path.parents):
        if directory == root or root not in directory.parents:
            break
        mode = directory.stat().st_mode
        if not mode & stat.S_IXOTH:
            os.chmod(directory, stat.S_IMODE(mode) | stat.S_IXOTH)
    return path


def qemu_tmpdir(prefix: str) -> Path:
    """A new directory under the temp root (short, for unix socket paths) that QEMU can reach."""
    return let_qemu_through(Path(tempfile.mkdtemp(prefix=prefix)))


def copy_image(source: Path, target: Path) -> None:
    """Copy an image folder (the tiny image's kernel and initramfs) without its extended attributes.

    libvirt records a file's owner and how many running domains use it in ``trusted.libvirt.security.*``
    attributes. A copy that takes them along (``shutil.copy2``, copytree's default) while a domain of
    another test uses the source says "in use by root" for a file nothing uses, and libvirt then
    refuses to label it for QEMU ("Setting different DAC user or group ... already in use"): the
    domain never starts.
    """
    shutil.copytree(source, target, copy_function=shutil.copy)
