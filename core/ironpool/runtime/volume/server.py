"""The gRPC face of the volume runtime: IRI ``VolumeRuntime`` over a :class:`~.driver.VolumeDriver`.

Thin: each RPC unpacks its request with :mod:`.records`, runs the driver call and packs the
answer. Calls that touch libvirt or qemu-img run in a thread pool so the event loop keeps
answering; ``ListVolumes``/``ListVolumeSnapshots`` are served from the in-memory index on the loop
itself. Errors are answered by :class:`~ironpool.runtime.service.RuntimeService`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from importlib.metadata import PackageNotFoundError, version

import grpc.aio

from ironpool.iri.gen.volume.v1alpha1 import api_pb2 as volume_pb2
from ironpool.iri.gen.volume.v1alpha1 import api_pb2_grpc as volume_grpc
from ironpool.runtime.events import listed_events
from ironpool.runtime.service import Context, RuntimeService, bind_address, remove_socket

from .driver import VolumeDriver
from .records import class_status_message, create_args, snapshot_message, volume_message

log = logging.getLogger(__name__)

RUNTIME_NAME = "ironpool-volume"


def _runtime_version() -> str:
    try:
        return version("ironpool")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "0.0.0"


class VolumeRuntimeServicer(RuntimeService, volume_grpc.VolumeRuntimeServicer):
    """IRI ``volume.v1alpha1.VolumeRuntime`` on one libvirt storage pool."""

    def __init__(self, driver: VolumeDriver, executor: ThreadPoolExecutor) -> None:
        super().__init__(executor)
        self.driver = driver

    async def Version(
        self, request: volume_pb2.VersionRequest, context: Context
    ) -> volume_pb2.VersionResponse:
        return volume_pb2.VersionResponse(runtime_name=RUNTIME_NAME, runtime_version=_runtime_version())

    async def ListEvents(
        self, request: volume_pb2.ListEventsRequest, context: Context
    ) -> volume_pb2.ListEventsResponse:
        return volume_pb2.ListEventsResponse(events=listed_events(self.driver.events, request.filter))

    async def ListVolumes(
        self, request: volume_pb2.ListVolumesRequest, context: Context
    ) -> volume_pb2.ListVolumesResponse:
        f = request.filter
        views = await self.now(context, self.driver.list_volumes, f.id, dict(f.label_selector))
        pool = self.driver.pool.name
        return volume_pb2.ListVolumesResponse(volumes=[volume_message(v, pool) for v in views])

    async def CreateVolume(
        self, request: volume_pb2.CreateVolumeRequest, context: Context
    ) -> volume_pb2.CreateVolumeResponse:
        view = await self.call(context, self.driver.create_volume, create_args(request.volume))
        return volume_pb2.CreateVolumeResponse(volume=volume_message(view, self.driver.pool.name))

    async def ExpandVolume(
        self, request: volume_pb2.ExpandVolumeRequest, context: Context
    ) -> volume_pb2.ExpandVolumeResponse:
        size = request.resources.storage_bytes
        await self.call(context, self.driver.expand_volume, request.volume_id, size)
        return volume_pb2.ExpandVolumeResponse()

    async def DeleteVolume(
        self, request: volume_pb2.DeleteVolumeRequest, context: Context
    ) -> volume_pb2.DeleteVolumeResponse:
        await self.call(context, self.driver.delete_volume, request.volume_id)
        return volume_pb2.DeleteVolumeResponse()

    async def CreateVolumeSnapshot(
        self, request: volume_pb2.CreateVolumeSnapshotRequest, context: Context
    ) -> volume_pb2.CreateVolumeSnapshotResponse:
        snap = request.volume_snapshot
        labels, annotations = dict(snap.metadata.labels), dict(snap.metadata.annotations)
        view = await self.call(context, self.driver.create_snapshot, snap.spec.volume_id, labels, annotations)
        return volume_pb2.CreateVolumeSnapshotResponse(volume_snapshot=snapshot_message(view))

    async def DeleteVolumeSnapshot(
        self, request: volume_pb2.DeleteVolumeSnapshotRequest, context: Context
    ) -> volume_pb2.DeleteVolumeSnapshotResponse:
        await self.call(context, self.driver.delete_snapshot, request.volume_snapshot_id)
        return volume_pb2.DeleteVolumeSnapshotResponse()

    async def ListVolumeSnapshots(
        self, request: volume_pb2.ListVolumeSnapshotsRequest, context: Context
    ) -> volume_pb2.ListVolumeSnapshotsResponse:
        f = request.filter
        views = await self.now(context, self.driver.list_snapshots, f.id, dict(f.label_selector))
        return volume_pb2.ListVolumeSnapshotsResponse(volume_snapshots=[snapshot_message(v) for v in views])

    async def Status(self, request: volume_pb2.StatusRequest, context: Context) -> volume_pb2.StatusResponse:
        classes = await self.call(context, self.driver.status)
        return volume_pb2.StatusResponse(volume_class_status=[class_status_message(c, q) for c, q in classes])


async def serve(
    driver: VolumeDriver, address: str, stop: asyncio.Event, workers: int = 8,
    ready: Callable[[str], None] | None = None,
) -> None:
    """Start ``driver`` (its state rebuilt from the pool), serve it on ``address`` until ``stop`` is
    set (or the task is cancelled), then stop gracefully; ``ready`` is told the address bound.

    Raises PoolConfigError or IriError when the pool cannot be used.
    """
    executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="volume-runtime")
    server = None
    try:
        await asyncio.get_running_loop().run_in_executor(executor, driver.start)
        for problem in driver.problems:
            log.warning("reconcile: %s", problem)
        server = grpc.aio.server()
        volume_grpc.add_VolumeRuntimeServicer_to_server(VolumeRuntimeServicer(driver, executor), server)
        bound = bind_address(server, address)
        await server.start()
        log.info(
            "volume runtime serving pool %s (%s) on %s (%d volumes)",
            driver.pool.name,
            driver.pool.target_path,
            bound,
            len(driver.list_volumes()),
        )
        if ready is not None:
            ready(bound)
        await stop.wait()
    finally:
        if server is not None:
            await server.stop(grace=5)
            remove_socket(address)
        executor.shutdown(wait=True)
        driver.close()
        driver.pool.host.close()
