"""The host's image cache: content-addressed blobs, image records, the users of each, collection.

Layout of the cache folder (shared by the machine and the volume runtime of a host)::

    blobs/sha256/<hex>            verified content (disks, kernels, initramfs), never changed
    images/<hex>.json             an image: its reference, digest, which blobs it uses, when used
    refs/<hash of reference>.json what a moving reference (a tag, a URL) resolved to last
    leases/<blob hex>/<id>.json   a user of a blob: the file that depends on it (an overlay disk,
                                  a volume, a machine's folder); gone file = stale lease
    tmp/<pid>-<random>/           a pull in progress; removed on failure and when its process is gone
    locks/                        one lock file per pull and the cache's own lock

A pull writes only below ``tmp`` and moves finished, verified blobs into ``blobs`` by rename, so a
crash never leaves a partial blob where a machine could find it. A user takes its lease before it
makes its file, under the cache lock held shared; collection holds it exclusively and removes images
no live lease needs, least recently used first, while the cache is above its size limit.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import secrets
import shutil
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ironpool.runtime.qemu_access import make_dirs

from .image import Image

log = logging.getLogger(__name__)

DEFAULT_LIMIT = 50 * 1024**3
USED_AT_GRANULARITY = 60.0  # seconds: a record is rewritten at most this often for its last use


@dataclass
class ImageRecord:
    """One cached image, as stored in ``images/<hex>.json``."""

    ref: str  # the reference as first written
    digest: str  # what the reference resolved to: manifest, index or file digest
    disk: str = ""  # blob digests ("sha256:…"), "" when absent
    disk_format: str = ""
    virtual_size: int = 0
    kernel: str = ""
    initrd: str = ""
    cmdline: str = ""
    pulled_at: float = 0.0
    used_at: float = 0.0
    refs: list[str] = field(default_factory=list)  # every reference that resolved here

    @property
    def blobs(self) -> list[str]:
        return [d for d in (self.disk, self.kernel, self.initrd) if d]


@dataclass(frozen=True)
class Lease:
    """A file that depends on cached blobs, and who it belongs to (``machine <id>``)."""

    path: str
    user: str


@dataclass(frozen=True)
class CacheEntry:
    """One image as ``ironpool image ls`` shows it."""

    record: ImageRecord
    size: int  # bytes on disk of its blobs
    users: list[Lease]


def _hex(digest: str) -> str:
    return digest.removeprefix("sha256:")


def _atomic_write(path: Path, data: bytes, mode: int = 0o644) -> None:
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
    with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode), "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class ImageCache:
    """One host's cache folder (see the module docstring); safe across threads and processes."""

    def __init__(self, root: str | Path, limit_bytes: int = DEFAULT_LIMIT) -> None:
        if limit_bytes < 0:
            raise ValueError(f"image cache limit: must not be negative, got {limit_bytes}")
        self.root = Path(root).absolute()
        self.limit = limit_bytes
        self.blobs = self.root / "blobs" / "sha256"
        self.images = self.root / "images"
        self.refs = self.root / "refs"
        self.leases = self.root / "leases"
        self.tmp = self.root / "tmp"
        self.locks = self.root / "locks"

    # -- set-up ------------------------------------------------------------------------------
    def ensure(self) -> None:
        """Make the folders (QEMU's user passes through to the blobs) and drop dead pulls' scratch."""
        make_dirs(self.blobs)
        for d in (self.images, self.refs, self.leases, self.tmp, self.locks):
            d.mkdir(mode=0o700, exist_ok=True)
        for entry in self.tmp.iterdir():
            pid = entry.name.split("-", 1)[0]
            if not pid.isdigit() or not _pid_alive(int(pid)):
                log.info("image cache: removing %s, left by an interrupted pull", entry)
                shutil.rmtree(entry, ignore_errors=True)

    @contextlib.contextmanager
    def scratch(self) -> Iterator[Path]:
        """A private folder below ``tmp`` for one pull, removed afterwards whatever happens."""
        path = self.tmp / f"{os.getpid()}-{secrets.token_hex(8)}"
        path.mkdir(mode=0o700)
        try:
            yield path
        finally:
            shutil.rmtree(path, ignore_errors=True)

    @contextlib.contextmanager
    def _flock(self, name: str, exclusive: bool) -> Iterator[None]:
        fd = os.open(self.locks / name, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
            yield
        finally:
            os.close(fd)  # closing drops the lock

    @contextlib.contextmanager
    def pull_lock(self, key: str) -> Iterator[None]:
        """Held while one process pulls ``key``: another runtime of the host waits, then finds it."""
        with self._flock("pull-" + hashlib.sha256(key.encode()).hexdigest()[:32], exclusive=True):
            yield

    # -- blobs and images --------------------------------------------------------------------
    def blob_path(self, digest: str) -> Path:
        return self.blobs / _hex(digest)

    def has_blob(self, digest: str) -> bool:
        return self.blob_path(digest).is_file()

    def add_blob(self, src: Path, digest: str) -> Path:
        """Move a verified file into the cache (or drop it: the same content is already there)."""
        dest = self.blob_path(digest)
        if dest.exists():
            src.unlink(missing_ok=True)
            return dest
        os.chmod(src, 0o644)
        os.rename(src, dest)
        return dest

    def _record_path(self, digest: str) -> Path:
        return self.images / f"{_hex(digest)}.json"

    def record(self, digest: str) -> ImageRecord | None:
        """The image stored under ``digest``, if it and all its blobs are there."""
        try:
            data = json.loads(self._record_path(digest).read_bytes())
            rec = ImageRecord(**data)
        except (OSError, ValueError, TypeError):
            return None
        return rec if all(self.has_blob(b) for b in rec.blobs) else None

    def put(self, rec: ImageRecord) -> None:
        rec.used_at = rec.used_at or time.time()
        if rec.ref not in rec.refs:
            rec.refs.append(rec.ref)
        _atomic_write(self._record_path(rec.digest), json.dumps(asdict(rec), sort_keys=True).encode())

    def touch(self, rec: ImageRecord, ref: str) -> None:
        """Note a use of ``rec`` through ``ref`` (for least-recently-used collection)."""
        now = time.time()
        if now - rec.used_at < USED_AT_GRANULARITY and ref in rec.refs:
            return
        rec.used_at = now
        if ref not in rec.refs:
            rec.refs.append(ref)
        with contextlib.suppress(OSError):
            self.put(rec)

    def image(self, rec: ImageRecord, name: str, pinned: str) -> Image:
        """The :class:`Image` a machine boots from ``rec``."""
        return Image(
            name=name,
            path=self.blob_path(rec.disk) if rec.disk else None,
            format=rec.disk_format,
            kernel=self.blob_path(rec.kernel) if rec.kernel else None,
            initrd=self.blob_path(rec.initrd) if rec.initrd else None,
            cmdline=rec.cmdline,
            digest=rec.digest,
            ref=pinned,
            virtual_size=rec.virtual_size,
        )

    # -- moving references -------------------------------------------------------------------
    def _ref_path(self, text: str) -> Path:
        return self.refs / f"{hashlib.sha256(text.encode()).hexdigest()[:40]}.json"

    def remember(self, text: str, digest: str, validators: Mapping[str, str] | None = None) -> None:
        doc = {"ref": text, "digest": digest, "validators": dict(validators or {})}
        _atomic_write(self._ref_path(text), json.dumps(doc).encode(), 0o600)

    def recall(self, text: str) -> tuple[str, dict[str, str]]:
        """The digest ``text`` resolved to last ("" if never) and what validated the download."""
        try:
            doc = json.loads(self._ref_path(text).read_bytes())
            return str(doc["digest"]), {str(k): str(v) for k, v in doc.get("validators", {}).items()}
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return "", {}

    # -- users -------------------------------------------------------------------------------
    @staticmethod
    def _lease_id(path: str) -> str:
        return hashlib.sha256(path.encode()).hexdigest()[:32]

    @contextlib.contextmanager
    def use(self, blobs: Iterable[str], path: str | Path, user: str) -> Iterator[None]:
        """Lease ``blobs`` for ``path`` (made inside the block); collection cannot take them
        meanwhile. The lease stays until :meth:`release` or until ``path`` is gone."""
        path = str(path)
        lease = json.dumps(asdict(Lease(path, user))).encode()
        with self._flock("cache", exclusive=False):
            for digest in blobs:
                d = self.leases / _hex(digest)
                d.mkdir(mode=0o700, exist_ok=True)
                _atomic_write(d / f"{self._lease_id(path)}.json", lease, 0o600)
            yield

    def release(self, path: str | Path, collect: bool = True) -> None:
        """Drop every lease ``path`` holds, then collect if the cache is over its limit."""
        name = f"{self._lease_id(str(path))}.json"
        with self._flock("cache", exclusive=False):
            for d in self.leases.iterdir():
                with contextlib.suppress(FileNotFoundError):
                    (d / name).unlink()
        if collect:
            self.collect()

    def _users(self, digest: str) -> list[Lease]:
        d = self.leases / _hex(digest)
        out: list[Lease] = []
        if not d.is_dir():
            return out
        for f in d.iterdir():
            try:
                lease = Lease(**json.loads(f.read_bytes()))
            except (OSError, ValueError, TypeError):
                continue
            if os.path.exists(lease.path):
                out.append(lease)
        return out

    # -- listing and collection --------------------------------------------------------------
    def _records(self) -> list[ImageRecord]:
        out = []
        for f in sorted(self.images.glob("*.json")):
            try:
                out.append(ImageRecord(**json.loads(f.read_bytes())))
            except (OSError, ValueError, TypeError):
                log.warning("image cache: unreadable record %s", f)
        return out

    def _blob_bytes(self, digest: str) -> int:
        try:
            return self.blob_path(digest).stat().st_blocks * 512
        except OSError:
            return 0

    def entries(self) -> list[CacheEntry]:
        """Every cached image with its size on disk and its live users, most recently used first."""
        out = []
        for rec in self._records():
            users: dict[str, Lease] = {}
            for b in rec.blobs:
                for lease in self._users(b):
                    users.setdefault(lease.path, lease)
            size = sum(self._blob_bytes(b) for b in rec.blobs)
            out.append(CacheEntry(rec, size, sorted(users.values(), key=lambda u: u.user)))
        out.sort(key=lambda e: -e.record.used_at)
        return out

    def size(self) -> int:
        """Bytes on disk of all blobs."""
        return sum(f.stat().st_blocks * 512 for f in self.blobs.iterdir() if f.is_file())

    def collect(self, reserve: int = 0) -> list[str]:
        """Remove unused images, least recently used first, until the cache plus ``reserve`` bytes
        fits the limit; the digests of the images removed."""
        removed: list[str] = []
        with self._flock("cache", exclusive=True):
            total = self.size()
            if total + reserve <= self.limit:
                return removed
            records = self._records()
            needed: dict[str, int] = {}
            for rec in records:
                for b in rec.blobs:
                    needed[b] = needed.get(b, 0) + 1
            for rec in sorted(records, key=lambda r: r.used_at):
                if total + reserve <= self.limit:
                    break
                if any(self._users(b) for b in rec.blobs):
                    continue
                with contextlib.suppress(FileNotFoundError):
                    self._record_path(rec.digest).unlink()
                for b in rec.blobs:
                    needed[b] -= 1
                    if needed[b] == 0:
                        total -= self._blob_bytes(b)
                        with contextlib.suppress(FileNotFoundError):
                            self.blob_path(b).unlink()
                        shutil.rmtree(self.leases / _hex(b), ignore_errors=True)
                removed.append(rec.digest)
                log.info("image cache: collected %s (%s), unused", rec.ref, rec.digest)
        return removed

    def free_bytes(self) -> int:
        st = os.statvfs(self.root)
        return st.f_bavail * st.f_frsize
