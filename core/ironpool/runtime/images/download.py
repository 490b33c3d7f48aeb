"""Disk images from ``https://`` and ``file://`` URLs, hashed (sha256) while they are copied.

The copy goes to a file the caller names (in the cache's scratch folder) and is flushed to disk
before the digest is returned; a checksum the URL demands is compared by the caller, which then
keeps or drops the file. ``file://`` is limited to folders the runtime was told to trust: a Machine
must not be able to boot the host's own files as its disk.
"""

from __future__ import annotations

import hashlib
import os
import ssl
import stat
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from . import errors
from .reference import ImageRef, file_path

CHUNK = 1 << 20
CONNECT_TIMEOUT = 30.0
Progress = Callable[[int, int], None]  # (bytes so far, total or 0)


@dataclass(frozen=True)
class Fetched:
    """A finished download: its digest, and what tells next time whether the source changed
    (an HTTP ETag / Last-Modified, or a file's size and modification time)."""

    digest: str
    validators: Mapping[str, str] = field(default_factory=dict)


class Digester:
    """sha256 of a stream, hashed on a helper thread so hashing overlaps reading and writing
    (hashlib lets go of the GIL for large updates)."""

    def __init__(self) -> None:
        self._hash = hashlib.sha256()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sha256")
        self._pending: Future[None] | None = None

    def update(self, chunk: bytes) -> None:
        if self._pending is not None:
            self._pending.result()
        self._pending = self._pool.submit(self._hash.update, chunk)

    def hexdigest(self) -> str:
        if self._pending is not None:
            self._pending.result()
        self._pool.shutdown()
        return self._hash.hexdigest()

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


def copy_stream(src: BinaryIO, dest: Path, total: int, progress: Progress | None) -> str:
    """Copy ``src`` into a new file ``dest`` (fsynced); its ``sha256:<hex>``."""
    digester = Digester()
    done = 0
    try:
        with open(dest, "xb") as out:
            while True:
                chunk = src.read(CHUNK)
                if not chunk:
                    break
                digester.update(chunk)
                out.write(chunk)
                done += len(chunk)
                if progress is not None:
                    progress(done, total)
            out.flush()
            os.fsync(out.fileno())
        return "sha256:" + digester.hexdigest()
    except OSError as exc:
        if exc.errno == 28:  # ENOSPC
            raise errors.NoSpace(f"writing {dest.name}: no space left on device") from exc
        raise
    finally:
        digester.close()


def sha256_file(path: Path) -> str:
    """``sha256:<hex>`` of a file."""
    digester = Digester()
    try:
        with open(path, "rb") as f:
            while chunk := f.read(CHUNK):
                digester.update(chunk)
        return "sha256:" + digester.hexdigest()
    finally:
        digester.close()


def inside(path: Path, roots: Sequence[Path]) -> bool:
    """``path`` (symlinks resolved) lies below one of ``roots``."""
    real = path.resolve()
    return any(real.is_relative_to(root.resolve()) for root in roots)


def fetch(
    ref: ImageRef,
    dest: Path,
    file_roots: Sequence[Path],
    progress: Progress | None = None,
    known: Mapping[str, str] | None = None,
) -> Fetched | None:
    """Copy the image at ``ref``'s URL into ``dest``; None when ``known`` validators of an earlier
    download say the source has not changed (nothing is copied then)."""
    if ref.url.startswith("file:"):
        return _fetch_file(ref, dest, file_roots, progress, known or {})
    return _fetch_https(ref, dest, progress, known or {})


def _fetch_file(
    ref: ImageRef, dest: Path, roots: Sequence[Path], progress: Progress | None, known: Mapping[str, str]
) -> Fetched | None:
    path = Path(file_path(ref))
    if not roots or not inside(path, roots):
        allowed = ", ".join(str(r) for r in roots) or "none"
        raise errors.ImageUnauthorized(
            f"image {ref.text}: {path} is outside the folders this runtime serves file:// images from "
            f"({allowed}; see --file-images)"
        )
    try:
        # The resolved path, and no symlink at its end: what was checked is what is read.
        src = open(os.open(path.resolve(), os.O_RDONLY | os.O_NOFOLLOW), "rb")  # noqa: SIM115 - closed below
    except FileNotFoundError:
        raise errors.ImageNotFound(f"image {ref.text}: no such file {path}") from None
    except OSError as exc:
        raise errors.ImageError(f"image {ref.text}: cannot read {path}: {exc.strerror}") from exc
    with src:
        st = os.fstat(src.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise errors.NotAnImage(f"image {ref.text}: {path} is not a regular file")
        validators = {"size": str(st.st_size), "mtime_ns": str(st.st_mtime_ns), "inode": str(st.st_ino)}
        if known and all(known.get(k) == v for k, v in validators.items()):
            return None
        return Fetched(copy_stream(src, dest, st.st_size, progress), validators)


def _fetch_https(
    ref: ImageRef, dest: Path, progress: Progress | None, known: Mapping[str, str]
) -> Fetched | None:
    headers = {"User-Agent": "ironpool-image-fetch"}
    if known.get("etag"):
        headers["If-None-Match"] = known["etag"]
    if known.get("last_modified"):
        headers["If-Modified-Since"] = known["last_modified"]
    request = urllib.request.Request(ref.url, headers=headers)
    # The system's trust store (SSL_CERT_FILE / SSL_CERT_DIR name another one).
    context = ssl.create_default_context()
    try:
        resp = urllib.request.urlopen(request, timeout=CONNECT_TIMEOUT, context=context)
    except urllib.error.HTTPError as exc:
        exc.close()
        if exc.code == 304 and known:
            return None
        if exc.code in (401, 403):
            raise errors.ImageUnauthorized(f"image {ref.text}: {exc.code} {exc.reason}") from None
        if exc.code in (404, 410):
            raise errors.ImageNotFound(f"image {ref.text}: {exc.code} {exc.reason}") from None
        raise errors.ImageUnreachable(f"image {ref.text}: {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise errors.ImageUnreachable(f"image {ref.text}: {reason}") from None
    with resp:
        total = int(resp.headers.get("Content-Length") or 0)
        validators = {k: resp.headers[h] for k, h in (("etag", "ETag"), ("last_modified", "Last-Modified"))
                      if resp.headers.get(h)}
        try:
            return Fetched(copy_stream(resp, dest, total, progress), validators)
        except (TimeoutError, ConnectionError, urllib.error.URLError) as exc:
            raise errors.ImageUnreachable(f"image {ref.text}: download broke off: {exc}") from None
