"""An image folder copied for a test leaves libvirt's labels behind (tests/helpers/qemu_dirs.py):
a copy that said "in use by root" made libvirt refuse to start the UEFI test's domain whenever
another test's domain was using the source at that moment."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.helpers.qemu_dirs import copy_image

IN_USE = {"trusted.libvirt.security.dac": b"+0:+0", "trusted.libvirt.security.ref_dac": b"1"}


def test_a_copied_image_does_not_take_libvirts_labels_along(tmp_path: Path) -> None:
    source = tmp_path / "tiny"
    source.mkdir()
    kernel = source / "kernel"
    kernel.write_bytes(b"\x7fELF kernel")
    kernel.chmod(0o644)
    try:
        for name, value in IN_USE.items():
            os.setxattr(kernel, name, value)
    except OSError as exc:  # trusted.* needs root and a file system that keeps them
        pytest.fail(f"cannot set libvirt's attributes here ({exc}): the suite runs as root on ext4/tmpfs")
    copy_image(source, tmp_path / "copy")
    copied = tmp_path / "copy" / "kernel"
    assert copied.read_bytes() == kernel.read_bytes()
    assert copied.stat().st_mode & 0o777 == 0o644
    assert not [a for a in os.listxattr(copied) if a.startswith("trusted.libvirt.")]
