"""Encrypted volumes: qcow2 files whose data is LUKS-encrypted by QEMU, keyed by the Volume's Secret.

The key comes in ``CreateVolume`` (``spec.encryption.secret_data["encryptionKey"]``, which the
volumepoollet reads from the Volume's ``encryption.secretRef``), is used once to format the file and
is never stored by this runtime: it reaches ``qemu-img`` through a pipe (``/dev/fd/N``), so it is
in no file, no command line and no log. A machine runtime opens the disk with the same key, handed
to it with the attachment (see :mod:`ironpool.iri.encryption`). A volume from an image or a
snapshot is a full copy into the encrypted file. Work that needs the key later — growing a
detached volume, snapshotting — is refused naming why.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Mapping

from ironpool.iri.encryption import ENCRYPTION_ATTRIBUTE, KEY_NAME, LUKS
from ironpool.runtime.errors import Internal, InvalidArgument

__all__ = ["ENCRYPTION_ATTRIBUTE", "LUKS", "encryption_key", "format_luks"]

MAX_KEY_BYTES = 4096
# QEMU times PBKDF2 by the thread's CPU time to choose LUKS's iteration counts, and gives up when a
# round measured 0 ms. Its first round is 32768 iterations; with SHA-256 (LUKS's default) and the
# CPU's SHA instructions that is a few ms, under the 4 ms a tick-accounting kernel counts CPU time
# in, and 17 of 40 creates failed so on one such host. With SHA-512 (no such instructions; a hash
# cryptsetup offers as well) the round takes several ticks: 0 of 40 failed. A new try still measures
# anew; anything else qemu-img says is not retried.
_PBKDF_UNMEASURED = "Unable to get accurate CPU usage"
CREATE_ATTEMPTS = 5
PBKDF_HASH = "sha512"


def encryption_key(secret_data: Mapping[str, bytes], field: str) -> bytes:
    """The key of an encrypted volume's request (b"" for none); InvalidArgument naming the field."""
    if not secret_data:
        return b""
    key = secret_data.get(KEY_NAME, b"")
    if not key:
        raise InvalidArgument(f"{field}.secret_data: needs a non-empty {KEY_NAME!r}")
    if len(key) > MAX_KEY_BYTES:
        raise InvalidArgument(f"{field}.secret_data[{KEY_NAME!r}]: longer than {MAX_KEY_BYTES} bytes")
    return bytes(key)


def format_luks(
    path: str, capacity: int, key: bytes, source: tuple[str, str] | None = None, timeout: float = 3600
) -> None:
    """Write ``path`` anew as a qcow2 of ``capacity`` bytes with LUKS encryption under ``key``, empty
    or holding a copy of ``source`` (its format and file: an image or a snapshot)."""

    def create(secret: str) -> list[str]:
        options = f"encrypt.format=luks,encrypt.key-secret=volkey,encrypt.hash-alg={PBKDF_HASH}"
        return ["create", "-q", "-f", "qcow2", "--object", secret, "-o", options, path, str(capacity)]

    for attempt in range(1, CREATE_ATTEMPTS + 1):
        try:
            _with_key(key, create, timeout)
            break
        except Internal as e:
            if _PBKDF_UNMEASURED not in str(e) or attempt == CREATE_ATTEMPTS:
                raise
    if source is not None:
        fmt, src = source
        # -n: into the encrypted file just made, which the target options open with the key.
        _with_key(key, lambda secret: [
            "convert", "-n", "--object", secret, "-f", fmt, src, "--target-image-opts",
            f"driver=qcow2,file.filename={path},encrypt.key-secret=volkey"], timeout)


def _with_key(key: bytes, argv: Callable[[str], list[str]], timeout: float) -> None:
    """Run ``qemu-img`` with ``argv(secret object)``, the key read from a pipe as secret ``volkey``."""
    read_fd, write_fd = os.pipe()
    try:
        # A key up to MAX_KEY_BYTES fits the pipe's buffer: the write never blocks.
        os.write(write_fd, key)
        os.close(write_fd)
        write_fd = -1
        args = argv(f"secret,id=volkey,file=/dev/fd/{read_fd}")
        proc = subprocess.run(["qemu-img", *args], pass_fds=(read_fd,), capture_output=True, text=True,
                              timeout=timeout, check=False)  # fmt: skip
    finally:
        os.close(read_fd)
        if write_fd >= 0:
            os.close(write_fd)
    if proc.returncode != 0:
        raise Internal(f"qemu-img {args[0]} (LUKS): {proc.stderr.strip() or f'exit {proc.returncode}'}")
