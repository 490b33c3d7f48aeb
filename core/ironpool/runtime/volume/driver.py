"""The volume runtime's driver: ordering, crash recovery and the in-memory index of volumes.

Split as the machine runtime is: the libvirt host (:mod:`.host`), the storage pool and its
volumes (:mod:`.pool`), records and their checks and IRI messages (:mod:`.records`), and this
driver over them. Synchronous and thread-safe; the gRPC layer calls it from worker threads. State
is rebuilt on :meth:`VolumeDriver.start` from the libvirt pool plus the sidecar files (see
:mod:`.sidecar`), after which reads (List, Status) are served from memory and the pool's
filesystem.
"""

from __future__ import annotations

import fcntl
import logging
import os
import re
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Literal, TypeVar

from ironpool.runtime.errors import FailedPrecondition, InvalidArgument, ResourceExhausted
from ironpool.runtime.events import EventRing, RuntimeEvent
from ironpool.runtime.metadata import check_string_map, select

from . import luks
from .classes import VolumeClassSpec
from .images import ImageInfo, VolumeImages
from .owner import claim_pool
from .pool import PoolConfigError, StoragePool, VolumeInfo, qemu_img
from .records import (
    CreateVolumeArgs,
    SnapshotRecord,
    SnapshotView,
    VolumeRecord,
    VolumeView,
    check_size,
    lookup,
    volume_class,
)
from .sidecar import META_DIR_NAME, SidecarStore

log = logging.getLogger(__name__)

R = TypeVar("R", VolumeRecord, SnapshotRecord)
_OWN_NAME_RE = re.compile(r"^(?:snapshot-)?[0-9a-f]{32}\.qcow2$")


class VolumeDriver:
    """Volumes and snapshots in one libvirt ``dir`` pool."""

    def __init__(
        self,
        pool: StoragePool,
        classes: Mapping[str, VolumeClassSpec],
        images: VolumeImages,
        clock: Callable[[], int] = time.time_ns,
        owner: str | None = None,
        share_pool: bool = False,
    ) -> None:
        self.pool = pool
        self.owner = owner  # None: no ownership check (tests, a runtime that shares by design)
        self.share_pool = share_pool
        self.classes = dict(classes)
        self.images = images
        self._clock = clock
        self._lock = threading.Lock()  # serialises mutations (space check + create, delete, ...)
        # Mutated only under _lock; readers copy with list(...values()), atomic under the GIL.
        self._volumes: dict[str, VolumeView] = {}
        self._snapshots: dict[str, SnapshotView] = {}
        self._sidecars: SidecarStore | None = None
        self._lock_fd: int | None = None
        self.problems: list[str] = []  # what reconciliation found and could not fix
        self.events = EventRing(max_events=1000)

    # -- start-up ----------------------------------------------------------------------------
    @property
    def sidecars(self) -> SidecarStore:
        assert self._sidecars is not None, "start() first"
        return self._sidecars

    def start(self) -> None:
        """Ensure the pool and rebuild the index from libvirt + sidecars, finishing crashed work."""
        self.pool.ensure()
        self.images.resolver.start()
        self._sidecars = SidecarStore(self.pool.target_path / META_DIR_NAME)
        self.sidecars.ensure()
        if self.owner is not None:  # before anything of the pool is touched
            claim_pool(self.sidecars.directory, self.pool.name, self.owner, self.share_pool)
        self._take_pool_lock()
        with self._lock:
            self._reconcile()

    def close(self) -> None:
        """Stop image pulls under way; the pool's libvirt connection is its owner's to close."""
        self.images.resolver.close()

    def _take_pool_lock(self) -> None:
        """One runtime per pool: two would race on sidecars and free space. The kernel drops the
        lock when the process dies, so a kill -9 never leaves the pool locked."""
        lock_path = self.sidecars.directory / "runtime.lock"
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise PoolConfigError(
                f"storage pool {self.pool.name!r} is already served by another volume runtime "
                f"(lock {lock_path})"
            ) from None
        self._lock_fd = fd

    def _reconcile(self) -> None:
        present = self.pool.list_volumes()
        volumes, snapshots, problems = self.sidecars.load_all()
        self.problems = list(problems)
        known: set[str] = set()
        for rec in volumes:
            name = rec.libvirt_name
            known.add(name)
            if rec.phase != "ready":
                # Crashed mid-create or mid-delete: finish by removing both, volume first.
                log.warning("volume %s was left %s by a previous run; removing it", rec.id, rec.phase)
                self.pool.delete(name)
                self.sidecars.remove("volume", rec.id)
                continue
            info = present.get(name)
            if info is None:
                msg = f"volume {rec.id}: libvirt volume {name} is missing from pool {self.pool.name!r}"
                log.error("%s; reporting the volume as ERROR", msg)
                self.problems.append(msg)
                self._volumes[rec.id] = VolumeView(rec, str(self.pool.volume_path(name)), 0, error=msg)
            else:
                self._volumes[rec.id] = VolumeView(rec, info.path, info.capacity)
        for snap in snapshots:
            name = snap.libvirt_name
            known.add(name)
            if snap.phase != "ready" or name not in present:
                log.warning("snapshot %s is %s / missing its file; removing it", snap.id, snap.phase)
                self.pool.delete(name)
                self.sidecars.remove("snapshot", snap.id)
                continue
            self._snapshots[snap.id] = SnapshotView(snap, present[name].path)
        for name in sorted(set(present) - known):
            if _OWN_NAME_RE.match(name):
                # Never written by this runtime's ordering (sidecar first); maybe copied in by hand.
                msg = f"libvirt volume {name} in pool {self.pool.name!r} has no metadata sidecar; not served"
                log.warning("%s", msg)
                self.problems.append(msg)

    # -- reads -------------------------------------------------------------------------------
    def list_volumes(
        self, volume_id: str = "", selector: Mapping[str, str] | None = None
    ) -> list[VolumeView]:
        candidates = select(self._volumes, volume_id, selector, lambda v: v.record.labels)
        return sorted(
            (self._checked(v) for v in candidates), key=lambda v: (v.record.created_at, v.record.id)
        )

    def _checked(self, view: VolumeView) -> VolumeView:
        # One stat per volume (microseconds) so a file removed behind our back shows as ERROR
        # instead of an AVAILABLE volume a machine would fail to attach.
        if view.error or os.path.exists(view.path):
            return view
        return replace(view, error=f"volume {view.record.id}: backing file {view.path} is missing")

    def list_snapshots(
        self, snapshot_id: str = "", selector: Mapping[str, str] | None = None
    ) -> list[SnapshotView]:
        candidates = select(self._snapshots, snapshot_id, selector, lambda s: s.record.labels)
        return sorted(candidates, key=lambda s: (s.record.created_at, s.record.id))

    def free_bytes(self) -> int:
        return self.pool.space()[1]

    # -- create ------------------------------------------------------------------------------
    def _validate_create(
        self, args: CreateVolumeArgs
    ) -> tuple[VolumeClassSpec, Path | None, str, int, ImageInfo | None]:
        """Check everything that needs no lock; return class, source file, its format, min size, and
        the image when the source is one."""
        vclass = volume_class(args, self.classes)
        source: Path | None = None
        source_format = ""
        min_size = 0
        image: ImageInfo | None = None
        if args.image:
            image = self.images.resolve(
                args.image, "volume.spec.volume_data_source.image_data_source.image", args.pull_secret,
                (",".join(f"{k}={v}" for k, v in sorted(args.labels.items())), self._pull_event(args)),
                args.architecture,
            )
            source, source_format, min_size = image.path, image.format, image.virtual_size
        elif args.snapshot_id:
            field = "volume.spec.volume_data_source.snapshot_data_source.snapshot_id"
            snap = lookup(self._snapshots, args.snapshot_id, field, "snapshot")
            source, source_format, min_size = Path(snap.path), "qcow2", snap.record.size
        if args.storage_bytes < min_size:
            raise InvalidArgument(
                f"volume.spec.resources.storage_bytes: {args.storage_bytes} is smaller than the source's "
                f"virtual size {min_size}"
            )
        return vclass, source, source_format, min_size, image

    def _pull_event(self, args: CreateVolumeArgs) -> Callable[[str, str], None]:
        def emit(reason: str, message: str) -> None:
            self.events.add(RuntimeEvent("", dict(args.labels), dict(args.annotations), reason, message,
                                         "Normal", "PullImage"))
        return emit

    def _check_space(self, needed: int, field: str) -> None:
        free = self.free_bytes()
        if needed > free:
            raise ResourceExhausted(
                f"{field}: {needed} bytes requested but storage pool {self.pool.name!r} has only "
                f"{free} bytes free"
            )

    def _event(self, about: VolumeRecord | CreateVolumeArgs, reason: str, message: str, action: str) -> None:
        """Record an event about a volume, or about a request that made none (a Warning)."""
        if isinstance(about, VolumeRecord):
            event = RuntimeEvent(
                about.id, dict(about.labels), dict(about.annotations), reason, message, "Normal", action,
                about.created_at,
            )  # fmt: skip
        else:
            event = RuntimeEvent(
                "", dict(about.labels), dict(about.annotations), reason, message, "Warning", action
            )
        self.events.add(event)

    def create_volume(self, args: CreateVolumeArgs) -> VolumeView:
        """Check everything, then make the volume (from its source); nothing is left on failure."""
        try:
            view = self._create_volume(args)
        except Exception as exc:
            if getattr(exc, "reason", "") != "ImagePulling":  # that is progress, told by its own events
                self._event(args, "CreateFailed", str(getattr(exc, "message", exc)), "Create")
            raise
        self._event(view.record, "Created", f"created {view.effective_bytes} bytes", "Create")
        return view

    def _create_volume(self, args: CreateVolumeArgs) -> VolumeView:
        vclass, source, source_format, _, image = self._validate_create(args)
        record = VolumeRecord(
            id=uuid.uuid4().hex,
            phase="creating",
            created_at=self._clock(),
            class_name=vclass.name,
            storage_bytes=args.storage_bytes,
            tps=vclass.tps,
            iops=vclass.iops,
            labels=dict(args.labels),
            annotations=dict(args.annotations),
            image=args.image,
            snapshot_id=args.snapshot_id,
            encrypted=bool(args.encryption),
        )
        size = args.storage_bytes
        field = "volume.spec.resources.storage_bytes"
        key = luks.encryption_key(args.encryption, "volume.spec.encryption")
        if image is not None and image.immutable and not key:
            # A copy-on-write overlay on the cached image, which the cache keeps while we use it.
            path = self.pool.volume_path(record.libvirt_name)
            try:
                with self.images.resolver.lease(image.image, path, f"volume {record.id}"):
                    record, info = self._make(record, size, size, field, None, (image.path, image.format))
            except BaseException:
                self.images.resolver.release(path)
                raise
        else:
            # A full copy: a catalog file may be replaced or removed, the volume must outlive it;
            # an encrypted volume is a copy too, every block of it under its key.
            copy = (["-f", source_format], str(source)) if source is not None else None
            record, info = self._make(record, size, size, field, copy, key=key)
        view = VolumeView(record, info.path, info.capacity)
        with self._lock:
            self._volumes[record.id] = view
        log.info("created volume %s (%s bytes, class %s)", record.id, info.capacity, vclass.name)
        return view

    def _make(
        self, record: R, capacity: int, needed: int, field: str, copy: tuple[list[str], str] | None,
        backing: tuple[Path, str] | None = None, key: bytes = b"",
    ) -> tuple[R, VolumeInfo]:
        """A new volume or snapshot file in the order that survives a crash: sidecar (creating),
        libvirt volume, contents (``qemu-img convert`` options and source, or LUKS under ``key``),
        sidecar (ready).
        ``needed`` bytes must be free (ResourceExhausted naming ``field``); whatever fails
        removes what was made."""
        kind: Literal["volume", "snapshot"] = "volume" if isinstance(record, VolumeRecord) else "snapshot"
        with self._lock:
            self._check_space(needed, field)
            self.sidecars.write(record)
            try:
                info = self.pool.create_qcow2(record.libvirt_name, capacity, backing)
            except BaseException:
                self.sidecars.remove(kind, record.id)
                raise
        try:
            if key:  # copy's options are ["-f", its format]
                luks.format_luks(info.path, capacity, key, (copy[0][-1], copy[1]) if copy else None)
            elif copy is not None:
                options, source = copy
                qemu_img("convert", *options, "-n", "-O", "qcow2", source, info.path)
            record = replace(record, phase="ready")
            self.sidecars.write(record)
        except BaseException:
            self.pool.delete(record.libvirt_name)
            self.sidecars.remove(kind, record.id)
            raise
        return record, info

    # -- expand ------------------------------------------------------------------------------
    def _get(self, volume_id: str, field: str) -> VolumeView:
        return lookup(self._volumes, volume_id, field, "volume")

    def expand_volume(self, volume_id: str, storage_bytes: int) -> VolumeView:
        field = "resources.storage_bytes"
        with self._lock:
            view = self._get(volume_id, "volume_id")
            check_size(storage_bytes, field)
            if view.error:
                raise FailedPrecondition(f"volume {volume_id}: {view.error}")
            if storage_bytes < view.effective_bytes:
                raise InvalidArgument(
                    f"{field}: {storage_bytes} is smaller than the current size {view.effective_bytes}; "
                    "volumes can only be expanded"
                )
            if storage_bytes > view.effective_bytes:
                self._check_space(storage_bytes - view.effective_bytes, field)
                capacity = self._grow(view, storage_bytes)
            else:
                capacity = view.effective_bytes
            record = replace(view.record, storage_bytes=storage_bytes)
            if record != view.record:
                self.sidecars.write(record)
            view = replace(view, record=record, effective_bytes=capacity)
            self._volumes[volume_id] = view
        self._event(record, "Expanded", f"size is {view.effective_bytes} bytes", "Expand")
        return view

    def _grow(self, view: VolumeView, capacity: int) -> int:
        """Resize offline with libvirt, or through the running domain that holds the file open."""
        for dom_name, dev in self.pool.users(view.path):
            log.info("expanding volume %s online through domain %s (%s)", view.record.id, dom_name, dev)
            self.pool.host.block_resize(dom_name, dev, capacity)
            info = self.pool.info(view.record.libvirt_name)
            return info.capacity if info else capacity
        if view.record.encrypted:
            raise FailedPrecondition(
                f"volume {view.record.id}: encrypted, and growing it needs its key, which this runtime "
                "does not keep: expand it while a running machine has it attached"
            )
        return self.pool.resize(view.record.libvirt_name, capacity).capacity

    # -- delete ------------------------------------------------------------------------------
    def delete_volume(self, volume_id: str) -> None:
        with self._lock:
            view = self._get(volume_id, "volume_id")
            self.pool.ensure_unused(view.path, f"volume {volume_id}")
            record = replace(view.record, phase="deleting")
            self.sidecars.write(record)
            del self._volumes[volume_id]
            self.pool.delete(record.libvirt_name)
            self.sidecars.remove("volume", volume_id)
        self.images.resolver.release(view.path)
        log.info("deleted volume %s", volume_id)

    # -- status ------------------------------------------------------------------------------
    def status(self) -> list[tuple[VolumeClassSpec, int]]:
        free = self.free_bytes()
        return [(vclass, free) for vclass in sorted(self.classes.values(), key=lambda c: c.name)]

    # -- snapshots ---------------------------------------------------------------------------
    def create_snapshot(
        self, volume_id: str, labels: Mapping[str, str], annotations: Mapping[str, str]
    ) -> SnapshotView:
        field = "volume_snapshot.spec.volume_id"
        check_string_map(labels, "volume_snapshot.metadata.labels")
        check_string_map(annotations, "volume_snapshot.metadata.annotations")
        source = self._get(volume_id, field)
        if source.error:
            raise FailedPrecondition(f"{field}: volume {volume_id}: {source.error}")
        if source.record.encrypted:
            raise FailedPrecondition(
                f"{field}: volume {volume_id} is encrypted; copying it needs its key, which this "
                "runtime does not keep")
        record = SnapshotRecord(
            id=uuid.uuid4().hex,
            phase="creating",
            created_at=self._clock(),
            volume_id=volume_id,
            size=source.effective_bytes,
            labels=dict(labels),
            annotations=dict(annotations),
        )
        src_info = self.pool.info(source.record.libvirt_name)
        needed = src_info.allocation if src_info else source.effective_bytes
        # -U: the source may be open in a running QEMU. Its guest's filesystems are frozen through
        # the guest agent for the copy where one answers (consistent filesystems); otherwise the copy
        # is crash-consistent: the disk as at one instant, as after a power cut.
        copy = (["-U", "-f", "qcow2"], source.path)
        frozen = [dom for dom, _dev in self.pool.users(source.path) if self.pool.host.freeze_filesystems(dom)]
        try:
            record, info = self._make(record, source.effective_bytes, needed, field, copy)
        finally:
            for dom in frozen:
                self.pool.host.thaw_filesystems(dom)
        view = SnapshotView(record, info.path)
        with self._lock:
            self._snapshots[record.id] = view
        log.info("created snapshot %s of volume %s", record.id, volume_id)
        return view

    def delete_snapshot(self, snapshot_id: str) -> None:
        field = "volume_snapshot_id"
        with self._lock:
            view = lookup(self._snapshots, snapshot_id, field, "snapshot")
            self.sidecars.write(replace(view.record, phase="deleting"))
            del self._snapshots[snapshot_id]
            self.pool.delete(view.record.libvirt_name)
            self.sidecars.remove("snapshot", snapshot_id)
