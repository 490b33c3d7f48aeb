"""Thin typed clients for the IRI ``MachineRuntime`` and ``VolumeRuntime`` services.

They add a default deadline per call and retry idempotent reads (``Version``, ``List*``,
``Status``) on ``UNAVAILABLE`` with exponential backoff; writes are sent once, and every other
``grpc.RpcError`` propagates unchanged so callers can branch on ``code()`` (NotFound, ...).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypeVar

import grpc

from ironpool.iri.endpoint import Endpoint
from ironpool.iri.gen.event.v1alpha1 import api_pb2 as event_pb2
from ironpool.iri.gen.machine.v1alpha1 import api_pb2 as machine_pb2
from ironpool.iri.gen.machine.v1alpha1 import api_pb2_grpc as machine_grpc
from ironpool.iri.gen.volume.v1alpha1 import api_pb2 as volume_pb2
from ironpool.iri.gen.volume.v1alpha1 import api_pb2_grpc as volume_grpc
from ironpool.iri.ssh import SSHOptions
from ironpool.iri.transport import connect

Req = TypeVar("Req")
Resp = TypeVar("Resp")
_ReqT = TypeVar("_ReqT", contravariant=True)
_RespT = TypeVar("_RespT", covariant=True)


class _Unary(Protocol[_ReqT, _RespT]):
    """What a generated stub attribute is: a blocking unary-unary multicallable."""

    def __call__(self, request: _ReqT, timeout: float | None = ...) -> _RespT: ...


DEFAULT_TIMEOUT = 30.0


def is_not_found(exc: BaseException) -> bool:
    """Whether ``exc`` is a gRPC ``NOT_FOUND`` (tolerated on Delete/Detach by poollets)."""
    return isinstance(exc, grpc.RpcError) and exc.code() == grpc.StatusCode.NOT_FOUND


class _RuntimeClient:
    def __init__(
        self,
        target: str | Endpoint | grpc.Channel,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        retries: int = 3,
        backoff: float = 0.2,
        ssh_options: SSHOptions | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if timeout <= 0:
            raise ValueError(f"timeout: must be > 0, not {timeout}")
        if retries < 0:
            raise ValueError(f"retries: must be >= 0, not {retries}")
        if isinstance(target, grpc.Channel):
            self.channel, self._owns_channel = target, False
        else:
            self.channel, self._owns_channel = connect(target, ssh_options=ssh_options), True
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self._sleep = sleep

    def close(self) -> None:
        """Close the channel (and its SSH tunnel) if this client opened it."""
        if self._owns_channel:
            self.channel.close()

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(
        self,
        rpc: _Unary[Req, Resp],
        request: Req,
        *,
        idempotent: bool,
        timeout: float | None = None,
    ) -> Resp:
        attempts = self.retries + 1 if idempotent else 1
        delay = self.backoff
        for attempt in range(attempts):
            try:
                return rpc(request, timeout=timeout or self.timeout)
            except grpc.RpcError as exc:
                code = exc.code()
                if code != grpc.StatusCode.UNAVAILABLE or attempt == attempts - 1:
                    raise
            self._sleep(delay)
            delay *= 2
        raise AssertionError("unreachable")


class MachineRuntimeClient(_RuntimeClient):
    """Client for ``machine.v1alpha1.MachineRuntime``."""

    def __init__(self, target: str | Endpoint | grpc.Channel, **kwargs: Any) -> None:
        super().__init__(target, **kwargs)
        self.stub = machine_grpc.MachineRuntimeStub(self.channel)

    def __enter__(self) -> MachineRuntimeClient:
        return self

    def version(self, version: str = "") -> machine_pb2.VersionResponse:
        return self._call(self.stub.Version, machine_pb2.VersionRequest(version=version), idempotent=True)

    def list_machines(
        self, id: str = "", labels: Mapping[str, str] | None = None
    ) -> list[machine_pb2.Machine]:
        flt = machine_pb2.MachineFilter(id=id, label_selector=dict(labels or {}))
        req = machine_pb2.ListMachinesRequest(filter=flt)
        resp = self._call(self.stub.ListMachines, req, idempotent=True)
        return list(resp.machines)

    def get_machine(self, id: str) -> machine_pb2.Machine | None:
        """The machine with ``id``, or None (IRI lists return nothing for unknown IDs)."""
        if not id:
            raise ValueError("id: must not be empty")
        found = self.list_machines(id=id)
        return found[0] if found else None

    def create_machine(self, machine: machine_pb2.Machine) -> machine_pb2.Machine:
        req = machine_pb2.CreateMachineRequest(machine=machine)
        return self._call(self.stub.CreateMachine, req, idempotent=False).machine

    def delete_machine(self, machine_id: str) -> None:
        req = machine_pb2.DeleteMachineRequest(machine_id=machine_id)
        self._call(self.stub.DeleteMachine, req, idempotent=False)

    def update_machine_annotations(self, machine_id: str, annotations: Mapping[str, str]) -> None:
        req = machine_pb2.UpdateMachineAnnotationsRequest(
            machine_id=machine_id, annotations=dict(annotations)
        )
        self._call(self.stub.UpdateMachineAnnotations, req, idempotent=False)

    def update_machine_power(self, machine_id: str, power: machine_pb2.Power.ValueType) -> None:
        req = machine_pb2.UpdateMachinePowerRequest(machine_id=machine_id, power=power)
        self._call(self.stub.UpdateMachinePower, req, idempotent=False)

    def attach_volume(self, machine_id: str, volume: machine_pb2.Volume) -> None:
        req = machine_pb2.AttachVolumeRequest(machine_id=machine_id, volume=volume)
        self._call(self.stub.AttachVolume, req, idempotent=False)

    def detach_volume(self, machine_id: str, name: str) -> None:
        req = machine_pb2.DetachVolumeRequest(machine_id=machine_id, name=name)
        self._call(self.stub.DetachVolume, req, idempotent=False)

    def update_volume(self, machine_id: str, volume: machine_pb2.Volume) -> None:
        req = machine_pb2.UpdateVolumeRequest(machine_id=machine_id, volume=volume)
        self._call(self.stub.UpdateVolume, req, idempotent=False)

    def attach_network_interface(self, machine_id: str, nic: machine_pb2.NetworkInterface) -> None:
        req = machine_pb2.AttachNetworkInterfaceRequest(machine_id=machine_id, network_interface=nic)
        self._call(self.stub.AttachNetworkInterface, req, idempotent=False)

    def detach_network_interface(self, machine_id: str, name: str) -> None:
        req = machine_pb2.DetachNetworkInterfaceRequest(machine_id=machine_id, name=name)
        self._call(self.stub.DetachNetworkInterface, req, idempotent=False)

    def status(self) -> list[machine_pb2.MachineClassStatus]:
        resp = self._call(self.stub.Status, machine_pb2.StatusRequest(), idempotent=True)
        return list(resp.machine_class_status)

    def exec(self, machine_id: str) -> str:
        """The one-shot streaming URL of the machine's serial console."""
        req = machine_pb2.ExecRequest(machine_id=machine_id)
        return self._call(self.stub.Exec, req, idempotent=False).url

    def list_events(
        self,
        id: str = "",
        labels: Mapping[str, str] | None = None,
        since: int = 0,
        until: int = 0,
    ) -> list[event_pb2.Event]:
        """Events, optionally filtered; ``since``/``until`` are Unix seconds (0 = unbounded)."""
        flt = machine_pb2.EventFilter(
            id=id, label_selector=dict(labels or {}), events_from_time=since, events_to_time=until
        )
        resp = self._call(self.stub.ListEvents, machine_pb2.ListEventsRequest(filter=flt), idempotent=True)
        return list(resp.events)


class VolumeRuntimeClient(_RuntimeClient):
    """Client for ``volume.v1alpha1.VolumeRuntime``."""

    def __init__(self, target: str | Endpoint | grpc.Channel, **kwargs: Any) -> None:
        super().__init__(target, **kwargs)
        self.stub = volume_grpc.VolumeRuntimeStub(self.channel)

    def __enter__(self) -> VolumeRuntimeClient:
        return self

    def version(self, version: str = "") -> volume_pb2.VersionResponse:
        return self._call(self.stub.Version, volume_pb2.VersionRequest(version=version), idempotent=True)

    def list_volumes(self, id: str = "", labels: Mapping[str, str] | None = None) -> list[volume_pb2.Volume]:
        flt = volume_pb2.VolumeFilter(id=id, label_selector=dict(labels or {}))
        resp = self._call(self.stub.ListVolumes, volume_pb2.ListVolumesRequest(filter=flt), idempotent=True)
        return list(resp.volumes)

    def get_volume(self, id: str) -> volume_pb2.Volume | None:
        if not id:
            raise ValueError("id: must not be empty")
        found = self.list_volumes(id=id)
        return found[0] if found else None

    def create_volume(self, volume: volume_pb2.Volume) -> volume_pb2.Volume:
        req = volume_pb2.CreateVolumeRequest(volume=volume)
        return self._call(self.stub.CreateVolume, req, idempotent=False).volume

    def expand_volume(self, volume_id: str, storage_bytes: int) -> None:
        req = volume_pb2.ExpandVolumeRequest(
            volume_id=volume_id, resources=volume_pb2.VolumeResources(storage_bytes=storage_bytes)
        )
        self._call(self.stub.ExpandVolume, req, idempotent=False)

    def delete_volume(self, volume_id: str) -> None:
        req = volume_pb2.DeleteVolumeRequest(volume_id=volume_id)
        self._call(self.stub.DeleteVolume, req, idempotent=False)

    def list_volume_snapshots(
        self, id: str = "", labels: Mapping[str, str] | None = None
    ) -> list[volume_pb2.VolumeSnapshot]:
        flt = volume_pb2.VolumeSnapshotFilter(id=id, label_selector=dict(labels or {}))
        req = volume_pb2.ListVolumeSnapshotsRequest(filter=flt)
        return list(self._call(self.stub.ListVolumeSnapshots, req, idempotent=True).volume_snapshots)

    def create_volume_snapshot(self, snapshot: volume_pb2.VolumeSnapshot) -> volume_pb2.VolumeSnapshot:
        req = volume_pb2.CreateVolumeSnapshotRequest(volume_snapshot=snapshot)
        return self._call(self.stub.CreateVolumeSnapshot, req, idempotent=False).volume_snapshot

    def delete_volume_snapshot(self, snapshot_id: str) -> None:
        req = volume_pb2.DeleteVolumeSnapshotRequest(volume_snapshot_id=snapshot_id)
        self._call(self.stub.DeleteVolumeSnapshot, req, idempotent=False)

    def status(self) -> list[volume_pb2.VolumeClassStatus]:
        resp = self._call(self.stub.Status, volume_pb2.StatusRequest(), idempotent=True)
        return list(resp.volume_class_status)

    def list_events(
        self,
        id: str = "",
        labels: Mapping[str, str] | None = None,
        since: int = 0,
        until: int = 0,
    ) -> list[event_pb2.Event]:
        flt = volume_pb2.EventFilter(
            id=id, label_selector=dict(labels or {}), events_from_time=since, events_to_time=until
        )
        resp = self._call(self.stub.ListEvents, volume_pb2.ListEventsRequest(filter=flt), idempotent=True)
        return list(resp.events)
