"""Typed clients of the IRI ``MachineRuntime`` and ``VolumeRuntime`` services, blocking and asyncio.

All four send the :class:`~ironpool.iri.calls.Call` objects of :mod:`ironpool.iri.calls`, so they
agree on the wire: a default deadline per call, idempotent reads retried on ``UNAVAILABLE`` with
backoff, writes sent once, ``NOT_FOUND`` on delete/detach answered as ``False`` when the caller says
``missing_ok=True`` (the poollets, as IronCore's), and every other ``grpc.RpcError`` raised unchanged
so callers can branch on ``code()``. The blocking clients serve the ``ironpool iri`` CLI and tests;
the asyncio ones the poollets.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import grpc
import grpc.aio

from ironpool.iri.calls import Call, MachineCalls, RetryPolicy, VolumeCalls
from ironpool.iri.endpoint import Endpoint
from ironpool.iri.gen.event.v1alpha1 import api_pb2 as epb
from ironpool.iri.gen.machine.v1alpha1 import api_pb2 as mpb
from ironpool.iri.gen.machine.v1alpha1 import api_pb2_grpc as mgrpc
from ironpool.iri.gen.volume.v1alpha1 import api_pb2 as vpb
from ironpool.iri.gen.volume.v1alpha1 import api_pb2_grpc as vgrpc
from ironpool.iri.ssh import SSHOptions
from ironpool.iri.transport import connect, connect_aio

Out = TypeVar("Out")

DEFAULT_TIMEOUT = 30.0

_M, _V = MachineCalls, VolumeCalls


def _check_timeout(timeout: float) -> float:
    if timeout <= 0:
        raise ValueError(f"timeout: must be > 0, not {timeout}")
    return timeout


class _Blocking:
    """Sends calls on a blocking channel."""

    def __init__(self, target: str | Endpoint | grpc.Channel, stub: Callable[[Any], Any], *,
                 timeout: float = DEFAULT_TIMEOUT, retries: int = 3, backoff: float = 0.2,
                 ssh_options: SSHOptions | None = None, sleep: Callable[[float], None] = time.sleep) -> None:
        self.timeout = _check_timeout(timeout)
        self.retry = RetryPolicy(retries, backoff)
        if isinstance(target, grpc.Channel):
            self.channel, self._owns_channel = target, False
        else:
            self.channel, self._owns_channel = connect(target, ssh_options=ssh_options), True
        self.stub = stub(self.channel)
        self._sleep = sleep

    def run(self, call: Call[Out]) -> Out:
        rpc = getattr(self.stub, call.method)
        attempts = self.retry.attempts(call)
        for attempt in range(attempts):
            try:
                return call.result(rpc(call.request, timeout=self.timeout))
            except grpc.RpcError as exc:
                if call.answer_missing(exc):
                    return call.missing
                if attempt == attempts - 1 or not self.retry.retryable(exc):
                    raise
            self._sleep(self.retry.delay(attempt))
        raise AssertionError("unreachable")

    def close(self) -> None:
        """Close the channel (and its SSH tunnel) if this client opened it."""
        if self._owns_channel:
            self.channel.close()


class _Async:
    """Sends calls on an asyncio channel."""

    def __init__(self, channel: grpc.aio.Channel, stub: Callable[[Any], Any], *,
                 timeout: float = DEFAULT_TIMEOUT, retries: int = 3, backoff: float = 0.2) -> None:
        self.timeout = _check_timeout(timeout)
        self.retry = RetryPolicy(retries, backoff)
        self.channel = channel
        self.stub = stub(channel)

    async def run(self, call: Call[Out]) -> Out:
        rpc = getattr(self.stub, call.method)
        attempts = self.retry.attempts(call)
        for attempt in range(attempts):
            try:
                return call.result(await rpc(call.request, timeout=self.timeout))
            except grpc.RpcError as exc:
                if call.answer_missing(exc):
                    return call.missing
                if attempt == attempts - 1 or not self.retry.retryable(exc):
                    raise
            await asyncio.sleep(self.retry.delay(attempt))
        raise AssertionError("unreachable")

    async def close(self) -> None:
        await self.channel.close()


class MachineRuntimeClient:
    """Blocking client of ``machine.v1alpha1.MachineRuntime``."""

    def __init__(self, target: str | Endpoint | grpc.Channel, **options: Any) -> None:
        self._wire = _Blocking(target, mgrpc.MachineRuntimeStub, **options)
        self.channel = self._wire.channel

    def close(self) -> None:
        self._wire.close()

    def __enter__(self) -> MachineRuntimeClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def version(self, version: str = "") -> mpb.VersionResponse:
        return self._wire.run(_M.version(version))

    def list_machines(self, machine_id: str = "", labels: Mapping[str, str] | None = None,
                      ) -> list[mpb.Machine]:
        return self._wire.run(_M.list_machines(machine_id, labels))

    def get_machine(self, machine_id: str) -> mpb.Machine | None:
        """The machine with ``machine_id``, or None (IRI lists return nothing for unknown IDs)."""
        if not machine_id:
            raise ValueError("machine_id: must not be empty")
        found = self.list_machines(machine_id)
        return found[0] if found else None

    def create_machine(self, machine: mpb.Machine) -> mpb.Machine:
        return self._wire.run(_M.create_machine(machine))

    def delete_machine(self, machine_id: str, missing_ok: bool = False) -> bool:
        return self._wire.run(_M.delete_machine(machine_id, missing_ok))

    def update_machine_annotations(self, machine_id: str, annotations: Mapping[str, str]) -> None:
        self._wire.run(_M.update_machine_annotations(machine_id, annotations))

    def update_machine_power(self, machine_id: str, power: mpb.Power.ValueType) -> None:
        self._wire.run(_M.update_machine_power(machine_id, power))

    def attach_volume(self, machine_id: str, volume: mpb.Volume) -> None:
        self._wire.run(_M.attach_volume(machine_id, volume))

    def update_volume(self, machine_id: str, volume: mpb.Volume) -> None:
        self._wire.run(_M.update_volume(machine_id, volume))

    def detach_volume(self, machine_id: str, name: str, missing_ok: bool = False) -> bool:
        return self._wire.run(_M.detach_volume(machine_id, name, missing_ok))

    def attach_network_interface(self, machine_id: str, nic: mpb.NetworkInterface) -> None:
        self._wire.run(_M.attach_network_interface(machine_id, nic))

    def detach_network_interface(self, machine_id: str, name: str, missing_ok: bool = False) -> bool:
        return self._wire.run(_M.detach_network_interface(machine_id, name, missing_ok))

    def list_reservations(self, reservation_id: str = "", labels: Mapping[str, str] | None = None,
                          ) -> list[mpb.Reservation]:
        return self._wire.run(_M.list_reservations(reservation_id, labels))

    def create_reservation(self, reservation: mpb.Reservation) -> mpb.Reservation:
        return self._wire.run(_M.create_reservation(reservation))

    def delete_reservation(self, reservation_id: str, missing_ok: bool = False) -> bool:
        return self._wire.run(_M.delete_reservation(reservation_id, missing_ok))

    def status(self) -> list[mpb.MachineClassStatus]:
        return self._wire.run(_M.status())

    def exec(self, machine_id: str) -> str:
        """The one-shot streaming URL of the machine's serial console."""
        return self._wire.run(_M.exec(machine_id))

    def list_events(self, object_id: str = "", labels: Mapping[str, str] | None = None, since: int = 0,
                    until: int = 0) -> list[epb.Event]:
        """Events, optionally filtered; ``since``/``until`` are Unix seconds (0 = unbounded)."""
        return self._wire.run(_M.list_events(object_id, labels, since, until))


class VolumeRuntimeClient:
    """Blocking client of ``volume.v1alpha1.VolumeRuntime``."""

    def __init__(self, target: str | Endpoint | grpc.Channel, **options: Any) -> None:
        self._wire = _Blocking(target, vgrpc.VolumeRuntimeStub, **options)
        self.channel = self._wire.channel

    def close(self) -> None:
        self._wire.close()

    def __enter__(self) -> VolumeRuntimeClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def version(self, version: str = "") -> vpb.VersionResponse:
        return self._wire.run(_V.version(version))

    def list_volumes(self, volume_id: str = "", labels: Mapping[str, str] | None = None) -> list[vpb.Volume]:
        return self._wire.run(_V.list_volumes(volume_id, labels))

    def get_volume(self, volume_id: str) -> vpb.Volume | None:
        if not volume_id:
            raise ValueError("volume_id: must not be empty")
        found = self.list_volumes(volume_id)
        return found[0] if found else None

    def create_volume(self, volume: vpb.Volume) -> vpb.Volume:
        return self._wire.run(_V.create_volume(volume))

    def expand_volume(self, volume_id: str, storage_bytes: int) -> None:
        self._wire.run(_V.expand_volume(volume_id, storage_bytes))

    def delete_volume(self, volume_id: str, missing_ok: bool = False) -> bool:
        return self._wire.run(_V.delete_volume(volume_id, missing_ok))

    def list_volume_snapshots(self, snapshot_id: str = "", labels: Mapping[str, str] | None = None,
                              ) -> list[vpb.VolumeSnapshot]:
        return self._wire.run(_V.list_volume_snapshots(snapshot_id, labels))

    def create_volume_snapshot(self, snapshot: vpb.VolumeSnapshot) -> vpb.VolumeSnapshot:
        return self._wire.run(_V.create_volume_snapshot(snapshot))

    def delete_volume_snapshot(self, snapshot_id: str, missing_ok: bool = False) -> bool:
        return self._wire.run(_V.delete_volume_snapshot(snapshot_id, missing_ok))

    def status(self) -> list[vpb.VolumeClassStatus]:
        return self._wire.run(_V.status())

    def list_events(self, object_id: str = "", labels: Mapping[str, str] | None = None, since: int = 0,
                    until: int = 0) -> list[epb.Event]:
        return self._wire.run(_V.list_events(object_id, labels, since, until))


class AsyncMachineRuntimeClient:
    """asyncio client of ``machine.v1alpha1.MachineRuntime`` (the machinepoollet's)."""

    def __init__(self, channel: grpc.aio.Channel, **options: Any) -> None:
        self._wire = _Async(channel, mgrpc.MachineRuntimeStub, **options)
        self.channel = channel

    @classmethod
    def connect(cls, endpoint: str | Endpoint, **options: Any) -> AsyncMachineRuntimeClient:
        return cls(connect_aio(endpoint), **options)

    async def close(self) -> None:
        await self._wire.close()

    async def version(self) -> mpb.VersionResponse:
        return await self._wire.run(_M.version())

    async def list_machines(self, machine_id: str = "", labels: Mapping[str, str] | None = None,
                            ) -> list[mpb.Machine]:
        return await self._wire.run(_M.list_machines(machine_id, labels))

    async def exec(self, machine_id: str) -> str:
        """The one-time URL of the machine's serial console (a websocket of raw bytes)."""
        return await self._wire.run(_M.exec(machine_id))

    async def create_machine(self, machine: mpb.Machine) -> mpb.Machine:
        return await self._wire.run(_M.create_machine(machine))

    async def delete_machine(self, machine_id: str, missing_ok: bool = False) -> bool:
        return await self._wire.run(_M.delete_machine(machine_id, missing_ok))

    async def update_machine_annotations(self, machine_id: str, annotations: Mapping[str, str]) -> None:
        await self._wire.run(_M.update_machine_annotations(machine_id, annotations))

    async def update_machine_power(self, machine_id: str, power: mpb.Power.ValueType) -> None:
        await self._wire.run(_M.update_machine_power(machine_id, power))

    async def attach_volume(self, machine_id: str, volume: mpb.Volume) -> None:
        await self._wire.run(_M.attach_volume(machine_id, volume))

    async def update_volume(self, machine_id: str, volume: mpb.Volume) -> None:
        await self._wire.run(_M.update_volume(machine_id, volume))

    async def detach_volume(self, machine_id: str, name: str, missing_ok: bool = False) -> bool:
        return await self._wire.run(_M.detach_volume(machine_id, name, missing_ok))

    async def attach_network_interface(self, machine_id: str, nic: mpb.NetworkInterface) -> None:
        await self._wire.run(_M.attach_network_interface(machine_id, nic))

    async def detach_network_interface(self, machine_id: str, name: str, missing_ok: bool = False) -> bool:
        return await self._wire.run(_M.detach_network_interface(machine_id, name, missing_ok))

    async def list_reservations(self, reservation_id: str = "", labels: Mapping[str, str] | None = None,
                                ) -> list[mpb.Reservation]:
        return await self._wire.run(_M.list_reservations(reservation_id, labels))

    async def create_reservation(self, reservation: mpb.Reservation) -> mpb.Reservation:
        return await self._wire.run(_M.create_reservation(reservation))

    async def delete_reservation(self, reservation_id: str, missing_ok: bool = False) -> bool:
        return await self._wire.run(_M.delete_reservation(reservation_id, missing_ok))

    async def status(self) -> list[mpb.MachineClassStatus]:
        return await self._wire.run(_M.status())

    async def list_events(self, object_id: str = "", labels: Mapping[str, str] | None = None, since: int = 0,
                          until: int = 0) -> list[epb.Event]:
        return await self._wire.run(_M.list_events(object_id, labels, since, until))


class AsyncVolumeRuntimeClient:
    """asyncio client of ``volume.v1alpha1.VolumeRuntime`` (the volumepoollet's)."""

    def __init__(self, channel: grpc.aio.Channel, **options: Any) -> None:
        self._wire = _Async(channel, vgrpc.VolumeRuntimeStub, **options)
        self.channel = channel

    @classmethod
    def connect(cls, endpoint: str | Endpoint, **options: Any) -> AsyncVolumeRuntimeClient:
        return cls(connect_aio(endpoint), **options)

    async def close(self) -> None:
        await self._wire.close()

    async def version(self) -> vpb.VersionResponse:
        return await self._wire.run(_V.version())

    async def list_volumes(self, volume_id: str = "", labels: Mapping[str, str] | None = None,
                           ) -> list[vpb.Volume]:
        return await self._wire.run(_V.list_volumes(volume_id, labels))

    async def create_volume(self, volume: vpb.Volume) -> vpb.Volume:
        return await self._wire.run(_V.create_volume(volume))

    async def expand_volume(self, volume_id: str, storage_bytes: int) -> None:
        await self._wire.run(_V.expand_volume(volume_id, storage_bytes))

    async def delete_volume(self, volume_id: str, missing_ok: bool = False) -> bool:
        return await self._wire.run(_V.delete_volume(volume_id, missing_ok))

    async def status(self) -> list[vpb.VolumeClassStatus]:
        return await self._wire.run(_V.status())

    async def list_volume_snapshots(self, snapshot_id: str = "", labels: Mapping[str, str] | None = None,
                                    ) -> list[vpb.VolumeSnapshot]:
        return await self._wire.run(_V.list_volume_snapshots(snapshot_id, labels))

    async def create_volume_snapshot(self, snapshot: vpb.VolumeSnapshot) -> vpb.VolumeSnapshot:
        return await self._wire.run(_V.create_volume_snapshot(snapshot))

    async def delete_volume_snapshot(self, snapshot_id: str, missing_ok: bool = False) -> bool:
        return await self._wire.run(_V.delete_volume_snapshot(snapshot_id, missing_ok))
