"""Checking a downloaded disk before anything boots from it: qcow2 or raw, self-contained.

A disk from a registry or a URL is someone else's file. Its format is probed once, here, and then
always named explicitly; a qcow2 that points at a backing file or an external data file is refused,
since QEMU would open that host path for the guest (the classic image-probing hole).
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

from .errors import NotAnImage

FORMATS = ("qcow2", "raw")


@dataclass(frozen=True)
class DiskInfo:
    """A checked disk: its format and virtual size in bytes."""

    format: str
    virtual_size: int


def qemu_img_info(path: Path, fmt: str = "") -> dict[str, object]:
    """``qemu-img info --output=json`` of ``path`` (read-shared: running guests may hold it)."""
    cmd = ["qemu-img", "info", "--output=json", "-U"]
    if fmt:
        cmd += ["-f", fmt]
    try:
        proc = subprocess.run([*cmd, str(path)], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise NotAnImage(f"qemu-img info {path}: {exc}") from exc
    if proc.returncode != 0:
        raise NotAnImage(f"qemu-img cannot read it: {proc.stderr.strip()}")
    data = json.loads(proc.stdout)
    if not isinstance(data, dict):
        raise NotAnImage("qemu-img info gave no description")
    return data


def inspect(path: Path, what: str, fmt: str = "") -> DiskInfo:
    """Probe (or, with ``fmt``, check) the disk at ``path``; NotAnImage naming ``what`` otherwise."""
    info = qemu_img_info(path, fmt)
    found = str(info.get("format", ""))
    if found not in FORMATS:
        raise NotAnImage(f"{what} is a {found or 'unknown'} file; only qcow2 and raw disks are supported")
    if info.get("backing-filename"):
        raise NotAnImage(f"{what} refers to a backing file; flatten it into one file first")
    specific = info.get("format-specific")
    data = specific.get("data", {}) if isinstance(specific, dict) else {}
    if isinstance(data, dict) and data.get("data-file"):
        raise NotAnImage(f"{what} keeps its data in an external file; flatten it into one file first")
    size = info.get("virtual-size")
    if not isinstance(size, int) or size <= 0:
        raise NotAnImage(f"{what} has no usable virtual size")
    return DiskInfo(found, size)
