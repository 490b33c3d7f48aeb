"""Thin async wrappers over the IRI stubs, with the error semantics the poollets rely on.

``NotFound`` on delete/detach means "already gone" and is not an error (iri.md); every other gRPC
failure propagates as :class:`grpc.aio.AioRpcError` and makes the reconcile retry with backoff.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import grpc
import grpc.aio

from ironpool.iri.gen.event.v1alpha1 import api_pb2 as epb
from ironpool.iri.gen.machine.v1alpha1 import api_pb2 as mpb
from ironpool.iri.gen.machine.v1alpha1 import api_pb2_grpc as mgrpc
from ironpool.iri.gen.volume.v1alpha1 import api_pb2 as vpb
from ironpool.iri.gen.volume.v1alpha1 import api_pb2_grpc as vgrpc
from ironpool.iri.transport import connect_aio
from ironpool.poollet.classes import RuntimeClass


def is_not_found(exc: BaseException) -> bool:
    return isinstance(exc, grpc.aio.AioRpcError) and exc.code() == grpc.StatusCode.NOT_FOUND


class MachineRuntime:
    """The ``MachineRuntime`` service of one endpoint."""

    def __init__(self, channel: grpc.aio.Channel, timeout: float = 30.0) -> None:
        self.channel = channel
        self.timeout = timeout
        self._stub: Any = mgrpc.MachineRuntimeStub(channel)

    @classmethod
    def connect(cls, endpoint: str, timeout: float = 30.0) -> MachineRuntime:
        return cls(connect_aio(endpoint), timeout)

    async def close(self) -> None:
        await self.channel.close()

    async def version(self) -> mpb.VersionResponse:
        resp: mpb.VersionResponse = await self._stub.Version(mpb.VersionRequest(version="0.1.0"),
                                                             timeout=self.timeout)
        return resp

    async def list_machines(self, machine_id: str = "", labels: Mapping[str, str] | None = None,
                            ) -> list[mpb.Machine]:
        flt = mpb.MachineFilter(id=machine_id, label_selector=dict(labels or {}))
        resp: mpb.ListMachinesResponse = await self._stub.ListMachines(
            mpb.ListMachinesRequest(filter=flt), timeout=self.timeout)
        return list(resp.machines)

    async def create_machine(self, machine: mpb.Machine) -> mpb.Machine:
        resp: mpb.CreateMachineResponse = await self._stub.CreateMachine(
            mpb.CreateMachineRequest(machine=machine), timeout=self.timeout)
        return resp.machine

    async def delete_machine(self, machine_id: str) -> bool:
        """Ask for deletion; False if the runtime no longer knows the machine."""
        try:
            await self._stub.DeleteMachine(mpb.DeleteMachineRequest(machine_id=machine_id),
                                           timeout=self.timeout)
        except grpc.aio.AioRpcError as exc:
            if is_not_found(exc):
                return False
            raise
        return True

    async def update_annotations(self, machine_id: str, annotations: Mapping[str, str]) -> None:
        await self._stub.UpdateMachineAnnotations(
            mpb.UpdateMachineAnnotationsRequest(machine_id=machine_id, annotations=dict(annotations)),
            timeout=self.timeout)

    async def update_power(self, machine_id: str, power: int) -> None:
        await self._stub.UpdateMachinePower(
            mpb.UpdateMachinePowerRequest(machine_id=machine_id, power=power),  # type: ignore[arg-type]
            timeout=self.timeout)

    async def attach_volume(self, machine_id: str, volume: mpb.Volume) -> None:
        await self._stub.AttachVolume(mpb.AttachVolumeRequest(machine_id=machine_id, volume=volume),
                                      timeout=self.timeout)

    async def update_volume(self, machine_id: str, volume: mpb.Volume) -> None:
        await self._stub.UpdateVolume(mpb.UpdateVolumeRequest(machine_id=machine_id, volume=volume),
                                      timeout=self.timeout)

    async def detach_volume(self, machine_id: str, name: str) -> None:
        try:
            await self._stub.DetachVolume(mpb.DetachVolumeRequest(machine_id=machine_id, name=name),
                                          timeout=self.timeout)
        except grpc.aio.AioRpcError as exc:
            if not is_not_found(exc):
                raise

    async def attach_nic(self, machine_id: str, nic: mpb.NetworkInterface) -> None:
        await self._stub.AttachNetworkInterface(
            mpb.AttachNetworkInterfaceRequest(machine_id=machine_id, network_interface=nic),
            timeout=self.timeout)

    async def detach_nic(self, machine_id: str, name: str) -> None:
        try:
            await self._stub.DetachNetworkInterface(
                mpb.DetachNetworkInterfaceRequest(machine_id=machine_id, name=name), timeout=self.timeout)
        except grpc.aio.AioRpcError as exc:
            if not is_not_found(exc):
                raise

    async def list_events(self, since: int = 0, until: int = 0) -> list[epb.Event]:
        """Runtime events in ``[since, until]`` (Unix seconds, 0 = unbounded)."""
        flt = mpb.EventFilter(events_from_time=since, events_to_time=until)
        resp: mpb.ListEventsResponse = await self._stub.ListEvents(mpb.ListEventsRequest(filter=flt),
                                                                   timeout=self.timeout)
        return list(resp.events)

    async def status(self) -> list[RuntimeClass]:
        resp: mpb.StatusResponse = await self._stub.Status(mpb.StatusRequest(), timeout=self.timeout)
        return [RuntimeClass(s.machine_class.name, dict(s.machine_class.capabilities.resources), s.quantity)
                for s in resp.machine_class_status]


class VolumeRuntime:
    """The ``VolumeRuntime`` service of one endpoint."""

    def __init__(self, channel: grpc.aio.Channel, timeout: float = 30.0) -> None:
        self.channel = channel
        self.timeout = timeout
        self._stub: Any = vgrpc.VolumeRuntimeStub(channel)

    @classmethod
    def connect(cls, endpoint: str, timeout: float = 30.0) -> VolumeRuntime:
        return cls(connect_aio(endpoint), timeout)

    async def close(self) -> None:
        await self.channel.close()

    async def version(self) -> vpb.VersionResponse:
        resp: vpb.VersionResponse = await self._stub.Version(vpb.VersionRequest(version="0.1.0"),
                                                             timeout=self.timeout)
        return resp

    async def list_volumes(self, volume_id: str = "", labels: Mapping[str, str] | None = None,
                           ) -> list[vpb.Volume]:
        flt = vpb.VolumeFilter(id=volume_id, label_selector=dict(labels or {}))
        resp: vpb.ListVolumesResponse = await self._stub.ListVolumes(vpb.ListVolumesRequest(filter=flt),
                                                                     timeout=self.timeout)
        return list(resp.volumes)

    async def create_volume(self, volume: vpb.Volume) -> vpb.Volume:
        resp: vpb.CreateVolumeResponse = await self._stub.CreateVolume(vpb.CreateVolumeRequest(volume=volume),
                                                                       timeout=self.timeout)
        return resp.volume

    async def expand_volume(self, volume_id: str, storage_bytes: int) -> None:
        await self._stub.ExpandVolume(
            vpb.ExpandVolumeRequest(volume_id=volume_id,
                                    resources=vpb.VolumeResources(storage_bytes=storage_bytes)),
            timeout=self.timeout)

    async def delete_volume(self, volume_id: str) -> bool:
        try:
            await self._stub.DeleteVolume(vpb.DeleteVolumeRequest(volume_id=volume_id), timeout=self.timeout)
        except grpc.aio.AioRpcError as exc:
            if is_not_found(exc):
                return False
            raise
        return True

    async def status(self) -> list[RuntimeClass]:
        resp: vpb.StatusResponse = await self._stub.Status(vpb.StatusRequest(), timeout=self.timeout)
        return [RuntimeClass(s.volume_class.name, {"tps": s.volume_class.capabilities.tps,
                                                   "iops": s.volume_class.capabilities.iops}, s.quantity)
                for s in resp.volume_class_status]
