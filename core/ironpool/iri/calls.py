"""The IRI wire layer shared by the sync and async clients: every RPC as a :class:`Call`.

A :class:`Call` says which stub method to invoke with which request, whether it is safe to retry
(reads are; writes are sent once), whether ``NOT_FOUND`` means "already gone" for this caller
(``missing_ok``: the poollets delete and detach that way, as IronCore's do), and how to read the
answer. :mod:`ironpool.iri.client` only executes calls, blocking or with asyncio, under one
:class:`RetryPolicy`, so both clients behave the same on the wire.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import grpc

from ironpool.iri.gen.event.v1alpha1 import api_pb2 as epb
from ironpool.iri.gen.machine.v1alpha1 import api_pb2 as mpb
from ironpool.iri.gen.volume.v1alpha1 import api_pb2 as vpb

Out = TypeVar("Out")

# What a poollet tells the runtime it speaks (IRI has one version so far).
IRI_VERSION = "0.1.0"


def is_not_found(exc: BaseException) -> bool:
    """Whether ``exc`` is a gRPC ``NOT_FOUND`` (sync or asyncio)."""
    return isinstance(exc, grpc.RpcError) and exc.code() == grpc.StatusCode.NOT_FOUND


@dataclass(frozen=True)
class Call(Generic[Out]):
    """One RPC to send; ``result`` turns the response into what the client method returns."""

    method: str
    request: Any
    result: Callable[[Any], Out]
    idempotent: bool = False
    missing_ok: bool = False
    missing: Any = None  # returned instead of raising NOT_FOUND when ``missing_ok``

    def answer_missing(self, exc: BaseException) -> bool:
        return self.missing_ok and is_not_found(exc)


@dataclass(frozen=True)
class RetryPolicy:
    """Idempotent calls are retried on ``UNAVAILABLE`` (a runtime restarting) with exponential backoff."""

    retries: int = 3
    backoff: float = 0.2

    def __post_init__(self) -> None:
        if self.retries < 0:
            raise ValueError(f"retries: must be >= 0, not {self.retries}")

    def attempts(self, call: Call[Any]) -> int:
        return self.retries + 1 if call.idempotent else 1

    def delay(self, attempt: int) -> float:
        return self.backoff * 2**attempt

    @staticmethod
    def retryable(exc: BaseException) -> bool:
        return isinstance(exc, grpc.RpcError) and exc.code() == grpc.StatusCode.UNAVAILABLE


def _done(_resp: Any) -> bool:
    return True


def _events(resp: Any) -> list[epb.Event]:
    return list(resp.events)


class MachineCalls:
    """The calls of ``machine.v1alpha1.MachineRuntime``."""

    @staticmethod
    def version(version: str = IRI_VERSION) -> Call[mpb.VersionResponse]:
        return Call("Version", mpb.VersionRequest(version=version), lambda r: r, idempotent=True)

    @staticmethod
    def list_machines(machine_id: str = "", labels: Mapping[str, str] | None = None,
                      ) -> Call[list[mpb.Machine]]:
        flt = mpb.MachineFilter(id=machine_id, label_selector=dict(labels or {}))
        return Call("ListMachines", mpb.ListMachinesRequest(filter=flt), lambda r: list(r.machines),
                    idempotent=True)

    @staticmethod
    def create_machine(machine: mpb.Machine) -> Call[mpb.Machine]:
        return Call("CreateMachine", mpb.CreateMachineRequest(machine=machine), lambda r: r.machine)

    @staticmethod
    def delete_machine(machine_id: str, missing_ok: bool = False) -> Call[bool]:
        return Call("DeleteMachine", mpb.DeleteMachineRequest(machine_id=machine_id), _done,
                    missing_ok=missing_ok, missing=False)

    @staticmethod
    def update_machine_annotations(machine_id: str, annotations: Mapping[str, str]) -> Call[bool]:
        req = mpb.UpdateMachineAnnotationsRequest(machine_id=machine_id, annotations=dict(annotations))
        return Call("UpdateMachineAnnotations", req, _done)

    @staticmethod
    def update_machine_power(machine_id: str, power: mpb.Power.ValueType) -> Call[bool]:
        req = mpb.UpdateMachinePowerRequest(machine_id=machine_id, power=power)
        return Call("UpdateMachinePower", req, _done)

    @staticmethod
    def attach_volume(machine_id: str, volume: mpb.Volume) -> Call[bool]:
        return Call("AttachVolume", mpb.AttachVolumeRequest(machine_id=machine_id, volume=volume), _done)

    @staticmethod
    def update_volume(machine_id: str, volume: mpb.Volume) -> Call[bool]:
        return Call("UpdateVolume", mpb.UpdateVolumeRequest(machine_id=machine_id, volume=volume), _done)

    @staticmethod
    def detach_volume(machine_id: str, name: str, missing_ok: bool = False) -> Call[bool]:
        return Call("DetachVolume", mpb.DetachVolumeRequest(machine_id=machine_id, name=name), _done,
                    missing_ok=missing_ok, missing=False)

    @staticmethod
    def attach_network_interface(machine_id: str, nic: mpb.NetworkInterface) -> Call[bool]:
        req = mpb.AttachNetworkInterfaceRequest(machine_id=machine_id, network_interface=nic)
        return Call("AttachNetworkInterface", req, _done)

    @staticmethod
    def detach_network_interface(machine_id: str, name: str, missing_ok: bool = False) -> Call[bool]:
        req = mpb.DetachNetworkInterfaceRequest(machine_id=machine_id, name=name)
        return Call("DetachNetworkInterface", req, _done, missing_ok=missing_ok, missing=False)

    @staticmethod
    def list_reservations(reservation_id: str = "", labels: Mapping[str, str] | None = None,
                          ) -> Call[list[mpb.Reservation]]:
        flt = mpb.ReservationFilter(id=reservation_id, label_selector=dict(labels or {}))
        return Call("ListReservations", mpb.ListReservationsRequest(filter=flt),
                    lambda r: list(r.reservations), idempotent=True)

    @staticmethod
    def create_reservation(reservation: mpb.Reservation) -> Call[mpb.Reservation]:
        return Call("CreateReservation", mpb.CreateReservationRequest(reservation=reservation),
                    lambda r: r.reservation)

    @staticmethod
    def delete_reservation(reservation_id: str, missing_ok: bool = False) -> Call[bool]:
        return Call("DeleteReservation", mpb.DeleteReservationRequest(reservation_id=reservation_id), _done,
                    missing_ok=missing_ok, missing=False)

    @staticmethod
    def status() -> Call[list[mpb.MachineClassStatus]]:
        return Call("Status", mpb.StatusRequest(), lambda r: list(r.machine_class_status), idempotent=True)

    @staticmethod
    def exec(machine_id: str) -> Call[str]:
        return Call("Exec", mpb.ExecRequest(machine_id=machine_id), lambda r: r.url)

    @staticmethod
    def list_events(object_id: str = "", labels: Mapping[str, str] | None = None, since: int = 0,
                    until: int = 0) -> Call[list[epb.Event]]:
        flt = mpb.EventFilter(id=object_id, label_selector=dict(labels or {}), events_from_time=since,
                              events_to_time=until)
        return Call("ListEvents", mpb.ListEventsRequest(filter=flt), _events, idempotent=True)


class VolumeCalls:
    """The calls of ``volume.v1alpha1.VolumeRuntime``."""

    @staticmethod
    def version(version: str = IRI_VERSION) -> Call[vpb.VersionResponse]:
        return Call("Version", vpb.VersionRequest(version=version), lambda r: r, idempotent=True)

    @staticmethod
    def list_volumes(volume_id: str = "", labels: Mapping[str, str] | None = None) -> Call[list[vpb.Volume]]:
        flt = vpb.VolumeFilter(id=volume_id, label_selector=dict(labels or {}))
        return Call("ListVolumes", vpb.ListVolumesRequest(filter=flt), lambda r: list(r.volumes),
                    idempotent=True)

    @staticmethod
    def create_volume(volume: vpb.Volume) -> Call[vpb.Volume]:
        return Call("CreateVolume", vpb.CreateVolumeRequest(volume=volume), lambda r: r.volume)

    @staticmethod
    def expand_volume(volume_id: str, storage_bytes: int) -> Call[bool]:
        req = vpb.ExpandVolumeRequest(volume_id=volume_id,
                                      resources=vpb.VolumeResources(storage_bytes=storage_bytes))
        return Call("ExpandVolume", req, _done)

    @staticmethod
    def delete_volume(volume_id: str, missing_ok: bool = False) -> Call[bool]:
        return Call("DeleteVolume", vpb.DeleteVolumeRequest(volume_id=volume_id), _done,
                    missing_ok=missing_ok, missing=False)

    @staticmethod
    def list_volume_snapshots(snapshot_id: str = "", labels: Mapping[str, str] | None = None,
                              ) -> Call[list[vpb.VolumeSnapshot]]:
        flt = vpb.VolumeSnapshotFilter(id=snapshot_id, label_selector=dict(labels or {}))
        return Call("ListVolumeSnapshots", vpb.ListVolumeSnapshotsRequest(filter=flt),
                    lambda r: list(r.volume_snapshots), idempotent=True)

    @staticmethod
    def create_volume_snapshot(snapshot: vpb.VolumeSnapshot) -> Call[vpb.VolumeSnapshot]:
        return Call("CreateVolumeSnapshot", vpb.CreateVolumeSnapshotRequest(volume_snapshot=snapshot),
                    lambda r: r.volume_snapshot)

    @staticmethod
    def delete_volume_snapshot(snapshot_id: str, missing_ok: bool = False) -> Call[bool]:
        return Call("DeleteVolumeSnapshot", vpb.DeleteVolumeSnapshotRequest(volume_snapshot_id=snapshot_id),
                    _done, missing_ok=missing_ok, missing=False)

    @staticmethod
    def status() -> Call[list[vpb.VolumeClassStatus]]:
        return Call("Status", vpb.StatusRequest(), lambda r: list(r.volume_class_status), idempotent=True)

    @staticmethod
    def list_events(object_id: str = "", labels: Mapping[str, str] | None = None, since: int = 0,
                    until: int = 0) -> Call[list[epb.Event]]:
        flt = vpb.EventFilter(id=object_id, label_selector=dict(labels or {}), events_from_time=since,
                              events_to_time=until)
        return Call("ListEvents", vpb.ListEventsRequest(filter=flt), _events, idempotent=True)
