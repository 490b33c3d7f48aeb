"""Reading and writing LUKS-encrypted qcow2 files from the host with ``qemu-io``, the key passed
through a pipe (never a file or an argument), so tests can put known data in and take it out."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path


def _qemu_io(path: Path, key: bytes, command: str) -> str:
    read_fd, write_fd = os.pipe()
    os.write(write_fd, key)
    os.close(write_fd)
    try:
        proc = subprocess.run(
            ["qemu-io", "--object", f"secret,id=key,file=/dev/fd/{read_fd}", "--image-opts",
             f"driver=qcow2,file.filename={path},encrypt.key-secret=key", "-c", command],
            pass_fds=(read_fd,), capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
    finally:
        os.close(read_fd)
    if proc.returncode != 0 or "error" in proc.stdout.lower():
        raise RuntimeError(f"qemu-io {command!r} on {path}: {proc.stderr or proc.stdout}")
    return proc.stdout


def luks_write(path: Path, key: bytes, data: bytes, scratch: Path) -> None:
    """Write ``data`` at offset 0 of the encrypted disk (``scratch``: a file to stage it in)."""
    scratch.write_bytes(data)
    _qemu_io(path, key, f"write -s {scratch} 0 {len(data)}")


def luks_read(path: Path, key: bytes, length: int) -> bytes:
    """The first ``length`` bytes (a multiple of 16) of the encrypted disk, decrypted."""
    out = bytearray()
    for line in _qemu_io(path, key, f"read -v 0 {length}").splitlines():
        if ":  " in line:
            out += bytes.fromhex("".join(line.split(":  ", 1)[1].split()[:16]))
    return bytes(out[:length])
