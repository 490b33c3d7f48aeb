"""The IRI ``VolumeRuntime`` gRPC servicer over :class:`~.core.VolumeRuntimeCore`, and its server.

Calls that touch libvirt or qemu-img run in a thread pool so the event loop keeps answering;
``ListVolumes``/``ListVolumeSnapshots`` are served from the in-memory index on the loop itself.
Errors carry the gRPC code of the :class:`~ironpool.runtime.errors.IriError` raised and a message
naming the field.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import stat
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, TypeAlias, TypeVar

import grpc

from ironpool.iri.gen.event.v1alpha1 import api_pb2 as event_pb2
from ironpool.iri.gen.meta.v1alpha1 import api_pb2 as meta_pb2
from ironpool.iri.gen.volume.v1alpha1 import api_pb2 as volume_pb2
from ironpool.iri.gen.volume.v1alpha1 import api_pb2_grpc as volume_grpc
from ironpool.runtime.errors import InvalidArgument, IriError

from .core import DRIVER, CreateVolumeArgs, SnapshotView, VolumeRuntimeCore, VolumeView
from .events import EventLog, RuntimeEvent

log = logging.getLogger(__name__)
T = TypeVar("T")
Context: TypeAlias = "grpc.aio.ServicerContext[Any, Any]"

RUNTIME_NAME = "ironpool-volume"


def _runtime_version() -> str:
    try:
        return version("ironpool")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "0.0.0"


def volume_to_proto(view: VolumeView, pool_name: str) -> volume_pb2.Volume:
    rec = view.record
    status = volume_pb2.VolumeStatus(
        state=volume_pb2.VOLUME_ERROR if view.error else volume_pb2.VOLUME_AVAILABLE,
        resources=volume_pb2.VolumeResources(storage_bytes=view.effective_bytes),
    )
    if view.error:
        status.volume_conditions.append(
            volume_pb2.Conditions(
                type="Ready", status="False", reason="BackingVolumeMissing", message=view.error
            )
        )
    else:
        # Access only when available, as the volumepoollet expects.
        status.access.CopyFrom(
            volume_pb2.VolumeAccess(
                driver=DRIVER, handle=rec.id, attributes=view.access_attributes(pool_name)
            )
        )
    spec = volume_pb2.VolumeSpec(resources=volume_pb2.VolumeResources(storage_bytes=rec.storage_bytes))
    setattr(spec, "class", rec.class_name)
    if rec.image:
        spec.volume_data_source.image_data_source.image = rec.image
    elif rec.snapshot_id:
        spec.volume_data_source.snapshot_data_source.snapshot_id = rec.snapshot_id
    return volume_pb2.Volume(
        metadata=meta_pb2.ObjectMetadata(
            id=rec.id, labels=rec.labels, annotations=rec.annotations, created_at=rec.created_at
        ),
        spec=spec,
        status=status,
    )


def snapshot_to_proto(view: SnapshotView) -> volume_pb2.VolumeSnapshot:
    rec = view.record
    return volume_pb2.VolumeSnapshot(
        metadata=meta_pb2.ObjectMetadata(
            id=rec.id, labels=rec.labels, annotations=rec.annotations, created_at=rec.created_at
        ),
        spec=volume_pb2.VolumeSnapshotSpec(volume_id=rec.volume_id),
        status=volume_pb2.VolumeSnapshotStatus(state=volume_pb2.VOLUME_SNAPSHOT_READY, size=rec.size),
    )


class VolumeRuntimeServicer(volume_grpc.VolumeRuntimeServicer):
    """IRI ``volume.v1alpha1.VolumeRuntime`` on one libvirt storage pool."""

    def __init__(self, core: VolumeRuntimeCore, executor: ThreadPoolExecutor) -> None:
        self.core = core
        self.executor = executor
        self.events = EventLog()

    async def _blocking(self, fn: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self.executor, fn)

    async def _fail(self, context: Context, exc: BaseException, what: str) -> None:
        if isinstance(exc, IriError):
            await context.abort(exc.code, exc.message)
        log.exception("%s failed", what)
        await context.abort(grpc.StatusCode.INTERNAL, f"{what}: {exc}")

    async def Version(
        self, request: volume_pb2.VersionRequest, context: Context
    ) -> volume_pb2.VersionResponse:
        return volume_pb2.VersionResponse(runtime_name=RUNTIME_NAME, runtime_version=_runtime_version())

    async def ListEvents(
        self, request: volume_pb2.ListEventsRequest, context: Context
    ) -> volume_pb2.ListEventsResponse:
        f = request.filter
        out = volume_pb2.ListEventsResponse()
        for e in self.events.list(f.id, dict(f.label_selector), f.events_from_time, f.events_to_time):
            out.events.append(
                event_pb2.Event(
                    spec=event_pb2.EventSpec(
                        involved_object_meta=meta_pb2.ObjectMetadata(
                            id=e.object_id, labels=e.labels, annotations=e.annotations
                        ),
                        reason=e.reason,
                        message=e.message,
                        type=e.type,
                        event_time=e.event_time,
                        action=e.action,
                    )
                )
            )
        return out

    async def ListVolumes(
        self, request: volume_pb2.ListVolumesRequest, context: Context
    ) -> volume_pb2.ListVolumesResponse:
        try:
            views = self.core.list_volumes(request.filter.id, dict(request.filter.label_selector))
        except Exception as exc:
            await self._fail(context, exc, "ListVolumes")
            raise
        pool = self.core.pool.name
        return volume_pb2.ListVolumesResponse(volumes=[volume_to_proto(v, pool) for v in views])

    async def CreateVolume(
        self, request: volume_pb2.CreateVolumeRequest, context: Context
    ) -> volume_pb2.CreateVolumeResponse:
        vol = request.volume
        source = vol.spec.volume_data_source
        args = CreateVolumeArgs(
            class_name=getattr(vol.spec, "class"),
            storage_bytes=vol.spec.resources.storage_bytes,
            labels=dict(vol.metadata.labels),
            annotations=dict(vol.metadata.annotations),
            image=source.image_data_source.image,
            snapshot_id=source.snapshot_data_source.snapshot_id,
            encrypted=bool(vol.spec.encryption.secret_data),
        )
        try:
            view = await self._blocking(lambda: self.core.create_volume(args))
        except Exception as exc:
            self.events.record(
                RuntimeEvent(
                    "",
                    args.labels,
                    args.annotations,
                    "CreateFailed",
                    str(getattr(exc, "message", exc)),
                    "Warning",
                    "Create",
                )
            )
            await self._fail(context, exc, "CreateVolume")
            raise
        self.events.record(
            RuntimeEvent(
                view.record.id,
                args.labels,
                args.annotations,
                "Created",
                f"created {view.effective_bytes} bytes",
                "Normal",
                "Create",
            )
        )
        return volume_pb2.CreateVolumeResponse(volume=volume_to_proto(view, self.core.pool.name))

    async def ExpandVolume(
        self, request: volume_pb2.ExpandVolumeRequest, context: Context
    ) -> volume_pb2.ExpandVolumeResponse:
        size = request.resources.storage_bytes
        try:
            view = await self._blocking(lambda: self.core.expand_volume(request.volume_id, size))
        except Exception as exc:
            await self._fail(context, exc, "ExpandVolume")
            raise
        rec = view.record
        self.events.record(
            RuntimeEvent(
                rec.id,
                rec.labels,
                rec.annotations,
                "Expanded",
                f"size is {view.effective_bytes} bytes",
                "Normal",
                "Expand",
            )
        )
        return volume_pb2.ExpandVolumeResponse()

    async def DeleteVolume(
        self, request: volume_pb2.DeleteVolumeRequest, context: Context
    ) -> volume_pb2.DeleteVolumeResponse:
        try:
            await self._blocking(lambda: self.core.delete_volume(request.volume_id))
        except Exception as exc:
            await self._fail(context, exc, "DeleteVolume")
            raise
        return volume_pb2.DeleteVolumeResponse()

    async def CreateVolumeSnapshot(
        self, request: volume_pb2.CreateVolumeSnapshotRequest, context: Context
    ) -> volume_pb2.CreateVolumeSnapshotResponse:
        snap = request.volume_snapshot
        try:
            view = await self._blocking(
                lambda: self.core.create_snapshot(
                    snap.spec.volume_id, dict(snap.metadata.labels), dict(snap.metadata.annotations)
                )
            )
        except Exception as exc:
            await self._fail(context, exc, "CreateVolumeSnapshot")
            raise
        return volume_pb2.CreateVolumeSnapshotResponse(volume_snapshot=snapshot_to_proto(view))

    async def DeleteVolumeSnapshot(
        self, request: volume_pb2.DeleteVolumeSnapshotRequest, context: Context
    ) -> volume_pb2.DeleteVolumeSnapshotResponse:
        try:
            await self._blocking(lambda: self.core.delete_snapshot(request.volume_snapshot_id))
        except Exception as exc:
            await self._fail(context, exc, "DeleteVolumeSnapshot")
            raise
        return volume_pb2.DeleteVolumeSnapshotResponse()

    async def ListVolumeSnapshots(
        self, request: volume_pb2.ListVolumeSnapshotsRequest, context: Context
    ) -> volume_pb2.ListVolumeSnapshotsResponse:
        try:
            views = self.core.list_snapshots(request.filter.id, dict(request.filter.label_selector))
        except Exception as exc:
            await self._fail(context, exc, "ListVolumeSnapshots")
            raise
        return volume_pb2.ListVolumeSnapshotsResponse(volume_snapshots=[snapshot_to_proto(v) for v in views])

    async def Status(self, request: volume_pb2.StatusRequest, context: Context) -> volume_pb2.StatusResponse:
        try:
            classes = await self._blocking(self.core.status)
        except Exception as exc:
            await self._fail(context, exc, "Status")
            raise
        out = volume_pb2.StatusResponse()
        for vclass, quantity in classes:
            out.volume_class_status.append(
                volume_pb2.VolumeClassStatus(
                    volume_class=volume_pb2.VolumeClass(
                        name=vclass.name,
                        capabilities=volume_pb2.VolumeClassCapabilities(tps=vclass.tps, iops=vclass.iops),
                    ),
                    quantity=quantity,
                )
            )
        return out


def grpc_bind_address(address: str) -> str:
    """``unix:///path`` or ``tcp://host:port`` → the address grpc binds; removes a stale socket."""
    if address.startswith("unix://"):
        path = Path(address[len("unix://") :])
        if not path.is_absolute():
            raise InvalidArgument(f"--address: unix socket path must be absolute: {address!r}")
        path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            if stat.S_ISSOCK(path.lstat().st_mode):
                path.unlink()
            else:
                raise InvalidArgument(f"--address: {path} exists and is not a socket")
        return f"unix:{path}"
    if address.startswith("tcp://"):
        return address[len("tcp://") :]
    raise InvalidArgument(f"--address: expected unix:///path or tcp://host:port, got {address!r}")


async def serve(
    core: VolumeRuntimeCore, address: str, workers: int = 8, on_ready: Callable[[int], None] | None = None
) -> None:
    """Start ``core``, serve it on ``address`` until SIGTERM/SIGINT, then stop gracefully."""
    executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="volume-runtime")
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(executor, core.start)
    for problem in core.problems:
        log.warning("reconcile: %s", problem)
    server = grpc.aio.server()
    volume_grpc.add_VolumeRuntimeServicer_to_server(VolumeRuntimeServicer(core, executor), server)
    port = server.add_insecure_port(grpc_bind_address(address))
    await server.start()
    log.info(
        "volume runtime serving pool %s (%s) on %s (%d volumes)",
        core.pool.name,
        core.pool.target_path,
        address,
        len(core.list_volumes()),
    )
    if on_ready is not None:
        on_ready(port)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await server.stop(grace=5)
        executor.shutdown(wait=True)
        core.pool.close()
        if address.startswith("unix://"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(address[len("unix://") :])
