"""The gRPC face of the machine runtime: ``machine.v1alpha1.MachineRuntime`` on grpc.aio.

Every RPC runs its blocking libvirt work in a worker thread and maps :class:`IriError` to its
status code; any other libvirt failure becomes INTERNAL with libvirt's message.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import grpc
import grpc.aio
import libvirt

from ironpool.iri.endpoint import parse_endpoint
from ironpool.iri.gen.machine.v1alpha1 import api_pb2 as machine_pb2
from ironpool.iri.gen.machine.v1alpha1 import api_pb2_grpc as machine_grpc
from ironpool.runtime.errors import IriError

from .console_server import ConsoleServer
from .convert import class_status_message, event_message, machine_message
from .core import MachineRuntimeCore

log = logging.getLogger(__name__)

RUNTIME_NAME = "ironpool-libvirt-runtime"
RUNTIME_VERSION = "0.1.0"
T = TypeVar("T")


class MachineRuntimeServicer(machine_grpc.MachineRuntimeServicer):
    """Adapts :class:`MachineRuntimeCore` to the generated servicer."""

    def __init__(
        self, core: MachineRuntimeCore, console: ConsoleServer | None = None, workers: int = 32
    ) -> None:
        self.core = core
        self.console = console
        # libvirt calls block: a pool of our own, so an embedding process keeps its default executor.
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="iri-rpc")

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)

    async def _run(self, context: grpc.aio.ServicerContext[Any, Any], fn: Callable[..., T], *args: Any) -> T:
        try:
            return await asyncio.get_running_loop().run_in_executor(
                self._executor, functools.partial(fn, *args)
            )
        except IriError as exc:
            await context.abort(exc.code, exc.message)
        except libvirt.libvirtError as exc:
            log.warning("%s: libvirt error: %s", getattr(fn, "__name__", fn), exc)
            await context.abort(grpc.StatusCode.INTERNAL, f"libvirt: {exc.get_error_message()}")
        except OSError as exc:
            log.warning("%s: host error: %s", getattr(fn, "__name__", fn), exc)
            await context.abort(grpc.StatusCode.INTERNAL, f"host: {exc}")
        raise AssertionError("unreachable: context.abort raises")

    async def Version(self, request: machine_pb2.VersionRequest, context: Any) -> machine_pb2.VersionResponse:
        return machine_pb2.VersionResponse(runtime_name=RUNTIME_NAME, runtime_version=RUNTIME_VERSION)

    async def ListEvents(
        self,
        request: machine_pb2.ListEventsRequest,
        context: Any,
    ) -> machine_pb2.ListEventsResponse:
        f = request.filter
        events = self.core.events.list(f.id, dict(f.label_selector), f.events_from_time, f.events_to_time)
        return machine_pb2.ListEventsResponse(events=[event_message(e) for e in events])

    async def ListMachines(
        self,
        request: machine_pb2.ListMachinesRequest,
        context: Any,
    ) -> machine_pb2.ListMachinesResponse:
        views = await self._run(
            context, self.core.list_machines, request.filter.id, dict(request.filter.label_selector)
        )
        return machine_pb2.ListMachinesResponse(machines=[machine_message(v) for v in views])

    async def CreateMachine(
        self,
        request: machine_pb2.CreateMachineRequest,
        context: Any,
    ) -> machine_pb2.CreateMachineResponse:
        view = await self._run(context, self.core.create_machine, request.machine)
        return machine_pb2.CreateMachineResponse(machine=machine_message(view))

    async def DeleteMachine(
        self,
        request: machine_pb2.DeleteMachineRequest,
        context: Any,
    ) -> machine_pb2.DeleteMachineResponse:
        await self._run(context, self.core.delete_machine, request.machine_id)
        return machine_pb2.DeleteMachineResponse()

    async def UpdateMachineAnnotations(
        self,
        request: machine_pb2.UpdateMachineAnnotationsRequest,
        context: Any,
    ) -> machine_pb2.UpdateMachineAnnotationsResponse:
        await self._run(context, self.core.update_annotations, request.machine_id, dict(request.annotations))
        return machine_pb2.UpdateMachineAnnotationsResponse()

    async def UpdateMachinePower(
        self,
        request: machine_pb2.UpdateMachinePowerRequest,
        context: Any,
    ) -> machine_pb2.UpdateMachinePowerResponse:
        await self._run(context, self.core.update_power, request.machine_id, int(request.power))
        return machine_pb2.UpdateMachinePowerResponse()

    async def AttachVolume(
        self,
        request: machine_pb2.AttachVolumeRequest,
        context: Any,
    ) -> machine_pb2.AttachVolumeResponse:
        await self._run(context, self.core.attach_volume, request.machine_id, request.volume)
        return machine_pb2.AttachVolumeResponse()

    async def DetachVolume(
        self,
        request: machine_pb2.DetachVolumeRequest,
        context: Any,
    ) -> machine_pb2.DetachVolumeResponse:
        await self._run(context, self.core.detach_volume, request.machine_id, request.name)
        return machine_pb2.DetachVolumeResponse()

    async def UpdateVolume(
        self,
        request: machine_pb2.UpdateVolumeRequest,
        context: Any,
    ) -> machine_pb2.UpdateVolumeResponse:
        await self._run(context, self.core.update_volume, request.machine_id, request.volume)
        return machine_pb2.UpdateVolumeResponse()

    async def AttachNetworkInterface(
        self,
        request: machine_pb2.AttachNetworkInterfaceRequest,
        context: Any,
    ) -> machine_pb2.AttachNetworkInterfaceResponse:
        await self._run(context, self.core.attach_nic, request.machine_id, request.network_interface)
        return machine_pb2.AttachNetworkInterfaceResponse()

    async def DetachNetworkInterface(
        self,
        request: machine_pb2.DetachNetworkInterfaceRequest,
        context: Any,
    ) -> machine_pb2.DetachNetworkInterfaceResponse:
        await self._run(context, self.core.detach_nic, request.machine_id, request.name)
        return machine_pb2.DetachNetworkInterfaceResponse()

    async def Status(self, request: machine_pb2.StatusRequest, context: Any) -> machine_pb2.StatusResponse:
        statuses = await self._run(context, self.core.status)
        return machine_pb2.StatusResponse(machine_class_status=[class_status_message(s) for s in statuses])

    async def Exec(self, request: machine_pb2.ExecRequest, context: Any) -> machine_pb2.ExecResponse:
        if self.console is None:
            await context.abort(grpc.StatusCode.UNIMPLEMENTED, "this runtime serves no console endpoint")
            raise AssertionError("unreachable")
        url = await self._run(context, self.console.new_session, request.machine_id)
        return machine_pb2.ExecResponse(url=url)


def bind_address(server: grpc.aio.Server, address: str) -> str:
    """Listen on ``unix:///path`` (a stale socket file is removed first) or ``tcp://host:port``."""
    ep = parse_endpoint(address)
    if ep.scheme == "unix":
        if os.path.exists(ep.path):
            os.unlink(ep.path)
        os.makedirs(os.path.dirname(ep.path) or ".", exist_ok=True)
        server.add_insecure_port(f"unix:{ep.path}")
        return f"unix://{ep.path}"
    if ep.scheme == "tcp":
        port = server.add_insecure_port(ep.grpc_target)
        return f"tcp://{ep.host}:{port}"
    raise ValueError(f"--address {address!r}: the runtime listens on unix:// or tcp:// only")


async def serve(
    core: MachineRuntimeCore,
    address: str,
    console: ConsoleServer | None,
    ready: Callable[[str], None] | None = None,
) -> None:
    """Run the gRPC server (and the console endpoint) until cancelled."""
    server = grpc.aio.server(
        options=[
            ("grpc.max_receive_message_length", 64 * 1024 * 1024),
            ("grpc.max_send_message_length", 64 * 1024 * 1024),
        ]
    )
    servicer = MachineRuntimeServicer(core, console)
    machine_grpc.add_MachineRuntimeServicer_to_server(servicer, server)
    bound = bind_address(server, address)
    if console is not None:
        await console.start()
    await server.start()
    log.info("machine runtime serving on %s", bound)
    if ready is not None:
        ready(bound)
    try:
        await server.wait_for_termination()
    finally:
        await server.stop(grace=2)
        servicer.close()
        if console is not None:
            await console.stop()
        ep = parse_endpoint(address)
        if ep.scheme == "unix" and os.path.exists(ep.path):
            os.unlink(ep.path)
