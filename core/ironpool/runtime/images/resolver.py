"""The one door to images for both runtimes: a reference in, local files plus a digest out.

``ImageResolver.resolve(reference, credentials)`` answers

- a catalog name from the catalog folder, at once;
- an OCI reference or URL from the host's cache when its content is there (a tag or an unpinned
  URL is looked up first: one small request), else by pulling it.

One pull runs per reference at a time: callers asking meanwhile wait for the same download (other
processes of the host wait on the cache's lock). A caller waits at most ``wait`` seconds and then
gets :class:`~.errors.ImagePulling`; asking again later finds the image, or the pull's failure.
A failed pull is remembered for a backoff that doubles up to a minute, so many machines retrying
one broken image do not hammer the registry; a different credential is a different pull.
"""

from __future__ import annotations

import hashlib
import logging
import platform
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path

from . import diskfile, download, errors, mediatypes
from .cache import DEFAULT_LIMIT, ImageCache, ImageRecord
from .catalog import ImageCatalog
from .image import Image
from .reference import ImageRef, parse
from .registry import Credentials, RegistryOptions, Skopeo

log = logging.getLogger(__name__)

MiB = 1024 * 1024
Emit = Callable[[str, str], None]  # (reason, message): a Normal event about one requester
BACKOFF_START, BACKOFF_MAX = 1.0, 60.0
PROGRESS_STEPS = 4  # progress events per pull: at 25 %, 50 %, 75 %


@dataclass(frozen=True)
class ResolverOptions:
    """How a runtime gets images: registries' TLS, where ``file://`` may point, how long a create
    waits for a pull, which architecture an image index is read for."""

    registry: RegistryOptions = field(default_factory=RegistryOptions)
    file_roots: tuple[Path, ...] = ()
    wait: float = 10.0
    architecture: str = field(default_factory=platform.machine)


@dataclass
class _Pull:
    """One pull in flight (or just finished) and who is waiting for it."""

    done: threading.Event = field(default_factory=threading.Event)
    image: ImageRecord | None = None
    error: errors.ImageError | None = None
    requesters: dict[str, Emit] = field(default_factory=dict)
    progress: str = "starting"
    lock: threading.Lock = field(default_factory=threading.Lock)

    def emit(self, reason: str, message: str) -> None:
        with self.lock:
            targets = list(self.requesters.values())
        for fn in targets:
            try:
                fn(reason, message)
            except Exception:  # an event sink must never break a pull
                log.exception("image event failed")


@dataclass
class _Failure:
    error: errors.ImageError
    until: float
    count: int


class ImageResolver:
    """Catalog, cache and pulls behind one :meth:`resolve` (see the module docstring)."""

    def __init__(
        self,
        catalog: ImageCatalog | None,
        cache: ImageCache | None,
        options: ResolverOptions | None = None,
        skopeo: Skopeo | None = None,
        workers: int = 4,
    ) -> None:
        self.catalog = catalog
        self.cache = cache
        self.options = options or ResolverOptions()
        self.skopeo = skopeo or Skopeo(self.options.registry, cache.tmp if cache is not None else None)
        self._pulls: dict[str, _Pull] = {}
        self._failures: dict[str, _Failure] = {}
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="image-pull")

    @property
    def directory(self) -> Path | None:
        """The catalog folder (QEMU reads kernels and disks there)."""
        return self.catalog.directory if self.catalog is not None else None

    def folders(self) -> dict[str, Path]:
        """What QEMU must reach, for the runtimes' start-up check."""
        out: dict[str, Path] = {}
        if self.catalog is not None:
            out["the image catalog"] = self.catalog.directory
        if self.cache is not None:
            out["the image cache"] = self.cache.blobs
        return out

    def start(self) -> None:
        if self.cache is not None:
            self.cache.ensure()

    def close(self) -> None:
        """Stop pulls under way (a process ending must not wait for a download) and the workers."""
        self.skopeo.close()
        self._pool.shutdown(wait=False, cancel_futures=True)

    # -- users of cached images --------------------------------------------------------------
    def _blobs(self, image: Image | None) -> list[str]:
        if image is None or self.cache is None:
            return []
        files = (image.path, image.kernel, image.initrd)
        return ["sha256:" + f.name for f in files if f is not None and f.parent == self.cache.blobs]

    def lease(self, image: Image | None, path: str | Path, user: str) -> AbstractContextManager[None]:
        """Hold ``image``'s cached files for ``path`` (made inside the block; an overlay, a volume,
        a machine's folder) until :meth:`release`; nothing to hold for catalog images."""
        blobs = self._blobs(image)
        if not blobs:
            return nullcontext()
        assert self.cache is not None
        return self.cache.use(blobs, path, user)

    def hold(self, image: Image | None, path: str | Path, user: str) -> None:
        """:meth:`lease` for a ``path`` that exists already."""
        with self.lease(image, path, user):
            pass

    def release(self, *paths: str | Path) -> None:
        """``paths`` no longer use cached images; the cache may collect what nothing else uses."""
        if self.cache is not None and paths:
            for path in paths:
                self.cache.release(path, collect=False)
            self.cache.collect()

    # -- the one entry point -----------------------------------------------------------------
    def check(self, text: str) -> ImageRef:
        """The parsed reference, or InvalidImageName / ImageNotFound (no catalog or cache for it)."""
        ref = parse(text)
        if ref.kind == "catalog" and self.catalog is None:
            raise errors.ImageNotFound(f"image {text!r} not found: this runtime has no image catalog")
        if ref.kind != "catalog" and self.cache is None:
            raise errors.ImageNotFound(f"image {text!r}: this runtime has no image cache to pull into")
        return ref

    def resolve(
        self,
        text: str,
        credentials: Credentials | None = None,
        requester: tuple[str, Emit] | None = None,
        wait: float | None = None,
    ) -> Image:
        """The image ``text`` names (see the module docstring). ``requester`` is (a key, a sink for
        Normal events: pulling, progress, pulled) for whom asks; ``wait`` overrides the options."""
        ref = self.check(text)
        if ref.kind == "catalog":
            assert self.catalog is not None
            return self.catalog.resolve(text)
        cache = self.cache
        assert cache is not None
        if ref.pinned:
            rec = cache.record(ref.digest)
            if rec is not None:
                cache.touch(rec, ref.text)
                return cache.image(rec, ref.text, ref.at(rec.digest))
        key = ref.text + "\0" + (hashlib.sha256(credentials.docker_config).hexdigest() if credentials else "")
        pull = self._join(key, ref, credentials, requester)
        timeout = self.options.wait if wait is None else wait
        if not pull.done.wait(timeout):
            raise errors.ImagePulling(f"image {ref.text} is being pulled ({pull.progress})")
        if pull.error is not None:
            raise pull.error
        assert pull.image is not None
        return cache.image(pull.image, ref.text, ref.at(pull.image.digest))

    def _join(self, key: str, ref: ImageRef, creds: Credentials | None,
              requester: tuple[str, Emit] | None) -> _Pull:
        with self._lock:
            failure = self._failures.get(key)
            if failure is not None and time.monotonic() < failure.until:
                raise failure.error
            pull = self._pulls.get(key)
            if pull is None:
                pull = _Pull()
                self._pulls[key] = pull
                self._pool.submit(self._run, key, ref, creds, pull)
            if requester is not None:
                with pull.lock:
                    pull.requesters[requester[0]] = requester[1]
            return pull

    def _run(self, key: str, ref: ImageRef, creds: Credentials | None, pull: _Pull) -> None:
        try:
            pull.image = self._fetch(ref, creds, pull)
        except errors.ImageError as exc:
            pull.error = exc
        except Exception as exc:  # a bug or a host failure: reported, never left hanging
            log.exception("pulling %s failed", ref.text)
            pull.error = errors.ImageError(f"image {ref.text}: {exc}")
        with self._lock:
            self._pulls.pop(key, None)
            if pull.error is not None:
                now = time.monotonic()
                for stale in [k for k, f in self._failures.items() if f.until < now - BACKOFF_MAX]:
                    del self._failures[stale]  # long past its backoff: a later failure starts afresh
                old = self._failures.get(key)
                count = old.count + 1 if old else 1
                delay = min(BACKOFF_START * 2 ** (count - 1), BACKOFF_MAX)
                self._failures[key] = _Failure(pull.error, now + delay, count)
                log.warning("%s (retry allowed in %.0fs)", pull.error.message, delay)
            else:
                self._failures.pop(key, None)
        pull.done.set()

    # -- pulling -----------------------------------------------------------------------------
    def _fetch(self, ref: ImageRef, creds: Credentials | None, pull: _Pull) -> ImageRecord:
        assert self.cache is not None
        if ref.kind == "url":
            return self._fetch_url(ref, pull)
        return self._fetch_oci(ref, creds, pull)

    def _fetch_oci(self, ref: ImageRef, creds: Credentials | None, pull: _Pull) -> ImageRecord:
        cache = self.cache
        assert cache is not None
        pull.progress = "reading its manifest"
        target = f"{ref.repository_ref}@{ref.digest}" if ref.digest else f"{ref.repository_ref}:{ref.tag}"
        raw = self.skopeo.manifest(ref, target, creds)
        top = "sha256:" + hashlib.sha256(raw).hexdigest()
        if ref.digest and top != ref.digest:
            raise errors.DigestMismatch(f"image {ref.text}: the registry sent a manifest with digest {top}")
        rec = cache.record(top)
        if rec is not None:
            cache.touch(rec, ref.text)
            return rec
        try:
            doc = mediatypes.parse_json(raw, "the manifest")
            manifest_digest = top
            if mediatypes.is_index(doc):
                desc = mediatypes.select_manifest(doc, self.options.architecture)
                raw = self.skopeo.manifest(ref, f"{ref.repository_ref}@{desc.digest}", creds)
                got = "sha256:" + hashlib.sha256(raw).hexdigest()
                if got != desc.digest:
                    raise errors.DigestMismatch(
                        f"image {ref.text}: manifest {desc.digest} arrived with digest {got}")
                doc, manifest_digest = mediatypes.parse_json(raw, "the manifest"), desc.digest
            lay = mediatypes.layout(doc)
        except errors.NotAnImage as exc:
            raise errors.NotAnImage(f"image {ref.text}: {exc.message}") from None
        with cache.pull_lock(top):
            rec = cache.record(top)  # another runtime of this host may have pulled it meanwhile
            if rec is not None:
                cache.touch(rec, ref.text)
                return rec
            return self._copy_oci(ref, creds, pull, top, manifest_digest, lay)

    def _copy_oci(self, ref: ImageRef, creds: Credentials | None, pull: _Pull, top: str,
                  manifest_digest: str, lay: mediatypes.Layout) -> ImageRecord:
        cache = self.cache
        assert cache is not None
        total = sum(d.size for d in lay.blobs)
        self._make_room(ref, total)
        started = time.monotonic()
        pull.emit("Pulling", f"pulling image {ref.text} ({total / MiB:.1f} MiB)")
        with cache.scratch() as tmp:
            dest = tmp / "image"
            steps = [0]

            def watch() -> None:
                done = sum(f.stat().st_size for f in tmp.rglob("*") if f.is_file())
                pull.progress = f"{done / MiB:.0f} of {total / MiB:.0f} MiB"
                step = min(PROGRESS_STEPS - 1, done * PROGRESS_STEPS // max(total, 1))
                if step > steps[0]:
                    steps[0] = step
                    pull.emit("PullProgress", f"image {ref.text}: {pull.progress} pulled")

            pull.progress = f"0 of {total / MiB:.0f} MiB"
            self.skopeo.copy_to_dir(ref, manifest_digest, dest, creds, watch)
            files = {d.digest: dest / d.hex for d in lay.blobs}
            for d in lay.blobs:
                f = files[d.digest]
                if not f.is_file() or f.stat().st_size != d.size:
                    raise errors.DigestMismatch(
                        f"image {ref.text}: blob {d.digest} is missing or has the wrong size"
                    )
            cmdline = mediatypes.command_line(files[lay.config.digest].read_bytes())
            disk_format, vsize = "", 0
            if lay.disk is not None:
                info = diskfile.inspect(files[lay.disk.digest], f"image {ref.text}: its disk layer")
                disk_format, vsize = info.format, info.virtual_size
            for blob in (lay.disk, lay.kernel, lay.initrd):
                if blob is not None:
                    cache.add_blob(files[blob.digest], blob.digest)
        rec = ImageRecord(
            ref=ref.text, digest=top, disk=lay.disk.digest if lay.disk else "", disk_format=disk_format,
            virtual_size=vsize, kernel=lay.kernel.digest if lay.kernel else "",
            initrd=lay.initrd.digest if lay.initrd else "", cmdline=cmdline, pulled_at=time.time(),
        )
        cache.put(rec)
        self._pulled(ref, pull, rec, total, started)
        return rec

    def _fetch_url(self, ref: ImageRef, pull: _Pull) -> ImageRecord:
        cache = self.cache
        assert cache is not None
        with cache.pull_lock(ref.text):
            last, validators = cache.recall(ref.text)
            previous = cache.record(last) if last else None
            if ref.digest and previous is not None and previous.digest != ref.digest:
                previous = None  # the checksum asks for other content than we have
            started = time.monotonic()
            with cache.scratch() as tmp:
                dest = tmp / "disk"
                steps = [0]

                def progress(done: int, total: int) -> None:
                    pull.progress = f"{done / MiB:.0f} MiB" + (f" of {total / MiB:.0f} MiB" if total else "")
                    step = done * PROGRESS_STEPS // total if total else 0
                    if 0 < step < PROGRESS_STEPS and step > steps[0]:
                        steps[0] = step
                        pull.emit("PullProgress", f"image {ref.text}: {pull.progress} downloaded")

                pull.emit("Pulling", f"downloading image {ref.text}")
                fetched = download.fetch(ref, dest, self.options.file_roots, progress,
                                         validators if previous is not None else None)
                if fetched is None:
                    assert previous is not None
                    cache.touch(previous, ref.text)
                    return previous
                if ref.digest and fetched.digest != ref.digest:
                    raise errors.DigestMismatch(
                        f"image {ref.text}: checksum mismatch: expected {ref.digest}, got {fetched.digest}"
                    )
                rec = cache.record(fetched.digest)
                if rec is None:
                    info = diskfile.inspect(dest, f"image {ref.text}")
                    cache.collect(reserve=dest.stat().st_size)  # it is on the cache's disk already
                    cache.add_blob(dest, fetched.digest)
                    rec = ImageRecord(ref=ref.text, digest=fetched.digest, disk=fetched.digest,
                                      disk_format=info.format, virtual_size=info.virtual_size,
                                      pulled_at=time.time())
                    cache.put(rec)
                else:
                    cache.touch(rec, ref.text)
            cache.remember(ref.text, rec.digest, fetched.validators)
            self._pulled(ref, pull, rec, dest_size(cache, rec), started)
            return rec

    def _make_room(self, ref: ImageRef, needed: int) -> None:
        cache = self.cache
        assert cache is not None
        cache.collect(reserve=needed)
        free = cache.free_bytes()
        if needed > free:
            raise errors.NoSpace(
                f"image {ref.text}: needs {needed / MiB:.0f} MiB but the image cache's disk has "
                f"{free / MiB:.0f} MiB free"
            )

    @staticmethod
    def _pulled(ref: ImageRef, pull: _Pull, rec: ImageRecord, size: int, started: float) -> None:
        took = max(time.monotonic() - started, 1e-6)
        pull.emit("Pulled", f"pulled image {ref.text} ({rec.digest}): {size / MiB:.1f} MiB in "
                            f"{took:.1f}s ({size / MiB / took:.0f} MiB/s)")


def dest_size(cache: ImageCache, rec: ImageRecord) -> int:
    return sum(cache.blob_path(b).stat().st_size for b in rec.blobs if cache.has_blob(b))


def open_resolver(
    catalog_dir: Path | None,
    cache_dir: Path | None,
    cache_limit: int | None = None,
    insecure_registries: Sequence[str] = (),
    file_roots: Sequence[Path] = (),
    wait: float = 10.0,
) -> ImageResolver:
    """A resolver over a catalog folder and a cache folder (either may be None); ``file://`` images
    are served from ``file_roots`` and the catalog folder."""
    catalog = ImageCatalog(catalog_dir) if catalog_dir is not None else None
    limit = DEFAULT_LIMIT if cache_limit is None else cache_limit
    cache = ImageCache(cache_dir, limit) if cache_dir is not None else None
    roots = tuple(Path(r).absolute() for r in file_roots)
    if catalog_dir is not None:
        roots += (Path(catalog_dir).absolute(),)
    options = ResolverOptions(RegistryOptions(frozenset(insecure_registries)), roots, wait)
    return ImageResolver(catalog, cache, options)
