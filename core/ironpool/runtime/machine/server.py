"""The gRPC face of the machine runtime: ``machine.v1alpha1.MachineRuntime`` on grpc.aio.

Thin: each RPC unpacks its request, runs the :class:`~.driver.MachineDriver` call in a worker
thread (libvirt blocks) and packs the answer with :mod:`.records`; errors are answered by
:class:`~ironpool.runtime.service.RuntimeService`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc
import grpc.aio

from ironpool.iri.gen.machine.v1alpha1 import api_pb2 as machine_pb2
from ironpool.iri.gen.machine.v1alpha1 import api_pb2_grpc as machine_grpc
from ironpool.runtime.events import listed_events
from ironpool.runtime.service import GRPC_OPTIONS, RuntimeService, bind_address, remove_socket

from .console_server import ConsoleServer
from .driver import MachineDriver
from .records import class_status_message, machine_message

log = logging.getLogger(__name__)

RUNTIME_NAME = "ironpool-libvirt-runtime"
RUNTIME_VERSION = "0.1.0"


class MachineRuntimeServicer(RuntimeService, machine_grpc.MachineRuntimeServicer):
    """IRI ``MachineRuntime`` over a :class:`~.driver.MachineDriver`."""

    def __init__(
        self, driver: MachineDriver, console: ConsoleServer | None = None, workers: int = 32
    ) -> None:
        super().__init__(ThreadPoolExecutor(max_workers=workers, thread_name_prefix="iri-rpc"))
        self.driver = driver
        self.console = console

    def close(self) -> None:
        self.executor.shutdown(wait=False, cancel_futures=True)

    async def Version(self, request: machine_pb2.VersionRequest, context: Any) -> machine_pb2.VersionResponse:
        return machine_pb2.VersionResponse(runtime_name=RUNTIME_NAME, runtime_version=RUNTIME_VERSION)

    async def ListEvents(
        self, request: machine_pb2.ListEventsRequest, context: Any
    ) -> machine_pb2.ListEventsResponse:
        return machine_pb2.ListEventsResponse(events=listed_events(self.driver.events, request.filter))

    async def ListMachines(
        self, request: machine_pb2.ListMachinesRequest, context: Any
    ) -> machine_pb2.ListMachinesResponse:
        f = request.filter
        views = await self.call(context, self.driver.list_machines, f.id, dict(f.label_selector))
        return machine_pb2.ListMachinesResponse(machines=[machine_message(v) for v in views])

    async def CreateMachine(
        self, request: machine_pb2.CreateMachineRequest, context: Any
    ) -> machine_pb2.CreateMachineResponse:
        view = await self.call(context, self.driver.create_machine, request.machine)
        return machine_pb2.CreateMachineResponse(machine=machine_message(view))

    async def DeleteMachine(
        self, request: machine_pb2.DeleteMachineRequest, context: Any
    ) -> machine_pb2.DeleteMachineResponse:
        await self.call(context, self.driver.delete_machine, request.machine_id)
        return machine_pb2.DeleteMachineResponse()

    async def UpdateMachineAnnotations(
        self, request: machine_pb2.UpdateMachineAnnotationsRequest, context: Any
    ) -> machine_pb2.UpdateMachineAnnotationsResponse:
        await self.call(
            context, self.driver.update_annotations, request.machine_id, dict(request.annotations)
        )
        return machine_pb2.UpdateMachineAnnotationsResponse()

    async def UpdateMachinePower(
        self, request: machine_pb2.UpdateMachinePowerRequest, context: Any
    ) -> machine_pb2.UpdateMachinePowerResponse:
        await self.call(context, self.driver.update_power, request.machine_id, int(request.power))
        return machine_pb2.UpdateMachinePowerResponse()

    async def AttachVolume(
        self, request: machine_pb2.AttachVolumeRequest, context: Any
    ) -> machine_pb2.AttachVolumeResponse:
        await self.call(context, self.driver.devices.attach_volume, request.machine_id, request.volume)
        return machine_pb2.AttachVolumeResponse()

    async def DetachVolume(
        self, request: machine_pb2.DetachVolumeRequest, context: Any
    ) -> machine_pb2.DetachVolumeResponse:
        await self.call(context, self.driver.devices.detach_volume, request.machine_id, request.name)
        return machine_pb2.DetachVolumeResponse()

    async def UpdateVolume(
        self, request: machine_pb2.UpdateVolumeRequest, context: Any
    ) -> machine_pb2.UpdateVolumeResponse:
        await self.call(context, self.driver.devices.update_volume, request.machine_id, request.volume)
        return machine_pb2.UpdateVolumeResponse()

    async def AttachNetworkInterface(
        self, request: machine_pb2.AttachNetworkInterfaceRequest, context: Any
    ) -> machine_pb2.AttachNetworkInterfaceResponse:
        nic = request.network_interface
        await self.call(context, self.driver.devices.attach_nic, request.machine_id, nic)
        return machine_pb2.AttachNetworkInterfaceResponse()

    async def DetachNetworkInterface(
        self, request: machine_pb2.DetachNetworkInterfaceRequest, context: Any
    ) -> machine_pb2.DetachNetworkInterfaceResponse:
        await self.call(context, self.driver.devices.detach_nic, request.machine_id, request.name)
        return machine_pb2.DetachNetworkInterfaceResponse()

    async def Status(self, request: machine_pb2.StatusRequest, context: Any) -> machine_pb2.StatusResponse:
        statuses = await self.call(context, self.driver.status)
        return machine_pb2.StatusResponse(machine_class_status=[class_status_message(s) for s in statuses])

    async def Exec(self, request: machine_pb2.ExecRequest, context: Any) -> machine_pb2.ExecResponse:
        if self.console is None:
            await context.abort(grpc.StatusCode.UNIMPLEMENTED, "this runtime serves no console endpoint")
            raise AssertionError("unreachable")
        url = await self.call(context, self.console.new_session, request.machine_id)
        return machine_pb2.ExecResponse(url=url)


async def serve(
    driver: MachineDriver,
    address: str,
    console: ConsoleServer | None,
    stop: asyncio.Event,
    ready: Callable[[str], None] | None = None,
) -> None:
    """Serve the started ``driver`` (and the console endpoint) on ``address`` until ``stop`` is set
    (or the task is cancelled), then stop gracefully; ``ready`` is told the address bound."""
    server = grpc.aio.server(options=GRPC_OPTIONS)
    servicer = MachineRuntimeServicer(driver, console)
    machine_grpc.add_MachineRuntimeServicer_to_server(servicer, server)
    bound = bind_address(server, address)
    try:
        if console is not None:
            await console.start()
        await server.start()
        log.info("machine runtime serving on %s", bound)
        if ready is not None:
            ready(bound)
        await stop.wait()
    finally:
        await server.stop(grace=2)
        servicer.close()
        if console is not None:
            await console.stop()
        remove_socket(address)
