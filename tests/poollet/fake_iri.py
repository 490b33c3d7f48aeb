"""In-memory IRI runtimes served by a real ``grpc.aio`` server on a unix socket.

For fast poollet tests and the benchmark only: every RPC the poollets call is implemented on plain
dicts, and every call is recorded (name, request, monotonic time) so tests can assert what the
poollet asked for. The real libvirt runtimes are exercised by the ``libvirt``-marked test.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from ironpool.iri.gen.event.v1alpha1 import api_pb2 as epb
from ironpool.iri.gen.machine.v1alpha1 import api_pb2 as mpb
from ironpool.iri.gen.machine.v1alpha1 import api_pb2_grpc as mgrpc
from ironpool.iri.gen.volume.v1alpha1 import api_pb2 as vpb
from ironpool.iri.gen.volume.v1alpha1 import api_pb2_grpc as vgrpc

GiB = 1024**3


@dataclass
class Call:
    method: str
    request: Any
    at: float


def _matches(labels: Any, selector: Any) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


@dataclass
class FakeMachineRuntime(mgrpc.MachineRuntimeServicer):
    """A MachineRuntime that keeps machines in memory; ``power`` and volumes take effect at once."""

    classes: dict[str, tuple[int, int]] = field(
        default_factory=lambda: {"small": (1, 1 * GiB), "large": (4, 8 * GiB)}
    )
    host_cpu: int = 8
    host_memory: int = 16 * GiB
    runtime_name: str = "fake-machine-runtime"
    machines: dict[str, mpb.Machine] = field(default_factory=dict)
    calls: list[Call] = field(default_factory=list)
    # Set to make CreateMachine store the machine, then never answer (the caller dies before the reply).
    stall_create: bool = False
    # Set to make CreateMachine fail with INVALID_ARGUMENT and this message (e.g. an unknown image).
    refuse_create: str = ""
    call_event: asyncio.Event = field(default_factory=asyncio.Event)
    events: list[epb.Event] = field(default_factory=list)
    forwards: dict[tuple[str, str], int] = field(default_factory=dict)  # (machine id, NIC) -> SSH port

    def _record(self, method: str, request: Any) -> None:
        self.calls.append(Call(method, request, time.monotonic()))
        self.call_event.set()

    def count(self, method: str) -> int:
        return sum(1 for c in self.calls if c.method == method)

    async def Version(self, request: mpb.VersionRequest, context: Any) -> mpb.VersionResponse:
        return mpb.VersionResponse(runtime_name=self.runtime_name, runtime_version="0.1.0")

    async def ListEvents(self, request: mpb.ListEventsRequest, context: Any) -> mpb.ListEventsResponse:
        flt = request.filter
        return mpb.ListEventsResponse(events=[
            e for e in self.events
            if (not flt.events_from_time or e.spec.event_time >= flt.events_from_time)
            and (not flt.events_to_time or e.spec.event_time <= flt.events_to_time)])

    def add_event(self, machine: mpb.Machine, reason: str, message: str, type_: str = "Warning") -> None:
        self.events.append(epb.Event(spec=epb.EventSpec(
            involved_object_meta=machine.metadata, reason=reason, message=message, type=type_,
            event_time=int(time.time()), action=reason)))

    async def ListMachines(self, request: mpb.ListMachinesRequest, context: Any) -> mpb.ListMachinesResponse:
        self._record("ListMachines", request)
        flt = request.filter
        out = []
        for m in self.machines.values():
            if flt.id and m.metadata.id != flt.id:
                continue
            if not _matches(m.metadata.labels, flt.label_selector):
                continue
            out.append(m)
        return mpb.ListMachinesResponse(machines=out)

    def _status_for(self, m: mpb.Machine) -> None:
        m.status.observed_generation = m.metadata.generation
        m.status.state = mpb.MACHINE_RUNNING if m.spec.power == mpb.POWER_ON else mpb.MACHINE_SUSPENDED
        del m.status.volumes[:]
        for v in m.spec.volumes:
            handle = v.connection.handle if v.HasField("connection") else f"local-{v.name}"
            m.status.volumes.append(mpb.VolumeStatus(name=v.name, handle=handle, state=mpb.VOLUME_ATTACHED))
        del m.status.network_interfaces[:]
        for n in m.spec.network_interfaces:
            # As the libvirt runtime in its default (user) mode: the handle is the SSH forward.
            port = self.forwards.setdefault((m.metadata.id, n.name), 22000 + len(self.forwards))
            m.status.network_interfaces.append(
                mpb.NetworkInterfaceStatus(
                    name=n.name, handle=f"user://127.0.0.1:{port}", state=mpb.NETWORK_INTERFACE_ATTACHED
                )
            )

    async def CreateMachine(
        self, request: mpb.CreateMachineRequest, context: Any
    ) -> mpb.CreateMachineResponse:
        self._record("CreateMachine", request)
        cls = getattr(request.machine.spec, "class")
        if cls not in self.classes:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"machine class {cls!r} not supported")
        if self.refuse_create:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, self.refuse_create)
        m = mpb.Machine()
        m.CopyFrom(request.machine)
        m.metadata.id = uuid.uuid4().hex
        m.metadata.created_at = time.time_ns()
        m.metadata.generation = 0
        self._status_for(m)
        self.machines[m.metadata.id] = m
        if self.stall_create:
            await asyncio.Event().wait()
        return mpb.CreateMachineResponse(machine=m)

    async def _get(self, machine_id: str, context: Any) -> mpb.Machine:
        m = self.machines.get(machine_id)
        if m is None:
            await context.abort(grpc.StatusCode.NOT_FOUND, f"machine {machine_id!r} not found")
        assert m is not None
        return m

    def _bump(self, m: mpb.Machine) -> None:
        m.metadata.generation += 1
        self._status_for(m)

    async def DeleteMachine(
        self, request: mpb.DeleteMachineRequest, context: Any
    ) -> mpb.DeleteMachineResponse:
        self._record("DeleteMachine", request)
        await self._get(request.machine_id, context)
        del self.machines[request.machine_id]
        return mpb.DeleteMachineResponse()

    async def UpdateMachineAnnotations(
        self, request: mpb.UpdateMachineAnnotationsRequest, context: Any
    ) -> mpb.UpdateMachineAnnotationsResponse:
        self._record("UpdateMachineAnnotations", request)
        m = await self._get(request.machine_id, context)
        m.metadata.annotations.clear()
        m.metadata.annotations.update(request.annotations)
        self._bump(m)
        return mpb.UpdateMachineAnnotationsResponse()

    async def UpdateMachinePower(
        self, request: mpb.UpdateMachinePowerRequest, context: Any
    ) -> mpb.UpdateMachinePowerResponse:
        self._record("UpdateMachinePower", request)
        m = await self._get(request.machine_id, context)
        m.spec.power = request.power
        self._bump(m)
        return mpb.UpdateMachinePowerResponse()

    async def AttachVolume(self, request: mpb.AttachVolumeRequest, context: Any) -> mpb.AttachVolumeResponse:
        self._record("AttachVolume", request)
        m = await self._get(request.machine_id, context)
        if any(v.name == request.volume.name for v in m.spec.volumes):
            await context.abort(grpc.StatusCode.ALREADY_EXISTS, f"volume {request.volume.name} attached")
        m.spec.volumes.append(request.volume)
        self._bump(m)
        return mpb.AttachVolumeResponse()

    async def DetachVolume(self, request: mpb.DetachVolumeRequest, context: Any) -> mpb.DetachVolumeResponse:
        self._record("DetachVolume", request)
        m = await self._get(request.machine_id, context)
        keep = [v for v in m.spec.volumes if v.name != request.name]
        if len(keep) == len(m.spec.volumes):
            await context.abort(grpc.StatusCode.NOT_FOUND, f"volume {request.name} not attached")
        del m.spec.volumes[:]
        m.spec.volumes.extend(keep)
        self._bump(m)
        return mpb.DetachVolumeResponse()

    async def UpdateVolume(self, request: mpb.UpdateVolumeRequest, context: Any) -> mpb.UpdateVolumeResponse:
        self._record("UpdateVolume", request)
        m = await self._get(request.machine_id, context)
        for v in m.spec.volumes:
            if v.name == request.volume.name:
                v.CopyFrom(request.volume)
                self._bump(m)
                return mpb.UpdateVolumeResponse()
        await context.abort(grpc.StatusCode.NOT_FOUND, f"volume {request.volume.name} not attached")
        raise AssertionError("unreachable")

    async def AttachNetworkInterface(
        self, request: mpb.AttachNetworkInterfaceRequest, context: Any
    ) -> mpb.AttachNetworkInterfaceResponse:
        self._record("AttachNetworkInterface", request)
        m = await self._get(request.machine_id, context)
        m.spec.network_interfaces.append(request.network_interface)
        self._bump(m)
        return mpb.AttachNetworkInterfaceResponse()

    async def DetachNetworkInterface(
        self, request: mpb.DetachNetworkInterfaceRequest, context: Any
    ) -> mpb.DetachNetworkInterfaceResponse:
        self._record("DetachNetworkInterface", request)
        m = await self._get(request.machine_id, context)
        keep = [n for n in m.spec.network_interfaces if n.name != request.name]
        del m.spec.network_interfaces[:]
        m.spec.network_interfaces.extend(keep)
        self._bump(m)
        return mpb.DetachNetworkInterfaceResponse()

    def free(self) -> tuple[int, int]:
        cpu, mem = self.host_cpu, self.host_memory
        for m in self.machines.values():
            c, b = self.classes.get(getattr(m.spec, "class"), (0, 0))
            cpu, mem = cpu - c, mem - b
        return cpu, mem

    async def Status(self, request: mpb.StatusRequest, context: Any) -> mpb.StatusResponse:
        self._record("Status", request)
        cpu, mem = self.free()
        out = []
        for name, (c, b) in self.classes.items():
            caps = mpb.MachineClassCapabilities(resources={"cpu": c, "memory": b})
            out.append(
                mpb.MachineClassStatus(
                    machine_class=mpb.MachineClass(name=name, capabilities=caps),
                    quantity=max(0, min(cpu // c, mem // b)),
                )
            )
        return mpb.StatusResponse(machine_class_status=out)

    def by_uid(self, uid: str) -> list[mpb.Machine]:
        return [
            m
            for m in self.machines.values()
            if m.metadata.labels.get("machinepoollet.ironcore.dev/machine-uid") == uid
        ]


@dataclass
class FakeVolumeRuntime(vgrpc.VolumeRuntimeServicer):
    """A VolumeRuntime on a pretend storage pool of ``pool_bytes``; volumes are Available at once."""

    classes: dict[str, tuple[int, int]] = field(default_factory=lambda: {"fast": (100, 1000)})
    pool_bytes: int = 100 * GiB
    runtime_name: str = "fake-volume-runtime"
    volumes: dict[str, vpb.Volume] = field(default_factory=dict)
    calls: list[Call] = field(default_factory=list)
    stall_create: bool = False

    def _record(self, method: str, request: Any) -> None:
        self.calls.append(Call(method, request, time.monotonic()))

    def count(self, method: str) -> int:
        return sum(1 for c in self.calls if c.method == method)

    async def Version(self, request: vpb.VersionRequest, context: Any) -> vpb.VersionResponse:
        return vpb.VersionResponse(runtime_name=self.runtime_name, runtime_version="0.1.0")

    async def ListEvents(self, request: vpb.ListEventsRequest, context: Any) -> vpb.ListEventsResponse:
        return vpb.ListEventsResponse()

    async def ListVolumes(self, request: vpb.ListVolumesRequest, context: Any) -> vpb.ListVolumesResponse:
        self._record("ListVolumes", request)
        flt = request.filter
        out = [
            v
            for v in self.volumes.values()
            if (not flt.id or v.metadata.id == flt.id) and _matches(v.metadata.labels, flt.label_selector)
        ]
        return vpb.ListVolumesResponse(volumes=out)

    def _status_for(self, v: vpb.Volume) -> None:
        v.status.state = vpb.VOLUME_AVAILABLE
        v.status.resources.storage_bytes = v.spec.resources.storage_bytes
        v.status.access.CopyFrom(
            vpb.VolumeAccess(
                driver="ironpool-local",
                handle=v.metadata.id,
                attributes={
                    "path": f"/var/lib/fake/{v.metadata.id}.qcow2",
                    "format": "qcow2",
                    "pool": "fake",
                    "volume": f"{v.metadata.id}.qcow2",
                },
            )
        )

    async def CreateVolume(self, request: vpb.CreateVolumeRequest, context: Any) -> vpb.CreateVolumeResponse:
        self._record("CreateVolume", request)
        cls = getattr(request.volume.spec, "class")
        if cls not in self.classes:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"volume class {cls!r} not supported")
        v = vpb.Volume()
        v.CopyFrom(request.volume)
        v.metadata.id = uuid.uuid4().hex
        v.metadata.created_at = time.time_ns()
        self._status_for(v)
        self.volumes[v.metadata.id] = v
        if self.stall_create:
            await asyncio.Event().wait()
        return vpb.CreateVolumeResponse(volume=v)

    async def _get(self, volume_id: str, context: Any) -> vpb.Volume:
        v = self.volumes.get(volume_id)
        if v is None:
            await context.abort(grpc.StatusCode.NOT_FOUND, f"volume {volume_id!r} not found")
        assert v is not None
        return v

    async def ExpandVolume(self, request: vpb.ExpandVolumeRequest, context: Any) -> vpb.ExpandVolumeResponse:
        self._record("ExpandVolume", request)
        v = await self._get(request.volume_id, context)
        if request.resources.storage_bytes < v.spec.resources.storage_bytes:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "cannot shrink a volume")
        v.spec.resources.storage_bytes = request.resources.storage_bytes
        self._status_for(v)
        return vpb.ExpandVolumeResponse()

    async def DeleteVolume(self, request: vpb.DeleteVolumeRequest, context: Any) -> vpb.DeleteVolumeResponse:
        self._record("DeleteVolume", request)
        await self._get(request.volume_id, context)
        del self.volumes[request.volume_id]
        return vpb.DeleteVolumeResponse()

    async def Status(self, request: vpb.StatusRequest, context: Any) -> vpb.StatusResponse:
        used = sum(v.spec.resources.storage_bytes for v in self.volumes.values())
        return vpb.StatusResponse(
            volume_class_status=[
                vpb.VolumeClassStatus(
                    volume_class=vpb.VolumeClass(
                        name=n, capabilities=vpb.VolumeClassCapabilities(tps=t, iops=i)
                    ),
                    quantity=max(0, self.pool_bytes - used),
                )
                for n, (t, i) in self.classes.items()
            ]
        )


class FakeIriServer:
    """A grpc.aio server on ``unix://<path>`` serving the given fake runtimes."""

    def __init__(self, path: Path, servicers: Iterable[Any]) -> None:
        self.path = path
        self.endpoint = f"unix://{path}"
        self._server = grpc.aio.server()
        for s in servicers:
            if isinstance(s, FakeMachineRuntime):
                mgrpc.add_MachineRuntimeServicer_to_server(s, self._server)
            elif isinstance(s, FakeVolumeRuntime):
                vgrpc.add_VolumeRuntimeServicer_to_server(s, self._server)
        self._server.add_insecure_port(self.endpoint)

    async def start(self) -> None:
        await self._server.start()

    async def stop(self) -> None:
        await self._server.stop(grace=None)
