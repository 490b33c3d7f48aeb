"""Small in-memory IRI servers for the wire-layer tests (the real runtimes live in ironpool.runtime)."""

from __future__ import annotations

import itertools
import threading
import time
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from ironpool.iri.gen.event.v1alpha1 import api_pb2 as event_pb2
from ironpool.iri.gen.machine.v1alpha1 import api_pb2 as machine_pb2
from ironpool.iri.gen.machine.v1alpha1 import api_pb2_grpc as machine_grpc
from ironpool.iri.gen.meta.v1alpha1 import api_pb2 as meta_pb2
from ironpool.iri.gen.volume.v1alpha1 import api_pb2 as volume_pb2
from ironpool.iri.gen.volume.v1alpha1 import api_pb2_grpc as volume_grpc


def _labels_match(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


class FakeMachineRuntime(machine_grpc.MachineRuntimeServicer):
    """Keeps machines in a dict; enough RPCs for the client, CLI and transport tests."""

    def __init__(self) -> None:
        self.machines: dict[str, machine_pb2.Machine] = {}
        self.events: list[event_pb2.Event] = []
        self.calls: list[str] = []
        self.exec_base = "http://127.0.0.1:1"
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    def Version(self, request, context):  # type: ignore[no-untyped-def]
        self.calls.append("Version")
        return machine_pb2.VersionResponse(runtime_name="fake-machine", runtime_version="0.1.0")

    def ListMachines(self, request, context):  # type: ignore[no-untyped-def]
        self.calls.append("ListMachines")
        with self._lock:
            items = list(self.machines.values())
        flt = request.filter
        if flt.id:
            items = [m for m in items if m.metadata.id == flt.id]
        sel = dict(flt.label_selector)
        items = [m for m in items if _labels_match(sel, dict(m.metadata.labels))]
        return machine_pb2.ListMachinesResponse(machines=items)

    def CreateMachine(self, request, context):  # type: ignore[no-untyped-def]
        self.calls.append("CreateMachine")
        if not getattr(request.machine.spec, "class"):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "machine.spec.class: must not be empty")
        m = machine_pb2.Machine()
        m.CopyFrom(request.machine)
        with self._lock:
            m.metadata.id = f"m{next(self._ids):04d}"
            m.metadata.created_at = time.time_ns()
            m.status.state = machine_pb2.MACHINE_PENDING
            self.machines[m.metadata.id] = m
        ev = event_pb2.Event(
            spec=event_pb2.EventSpec(
                involved_object_meta=m.metadata,
                reason="Created",
                message="machine created",
                type="Normal",
                event_time=int(time.time()),
                action="Create",
            )
        )
        self.events.append(ev)
        return machine_pb2.CreateMachineResponse(machine=m)

    def _get(self, machine_id: str, context) -> machine_pb2.Machine:  # type: ignore[no-untyped-def]
        with self._lock:
            m = self.machines.get(machine_id)
        if m is None:
            context.abort(grpc.StatusCode.NOT_FOUND, f"machine {machine_id} not found")
        return m

    def DeleteMachine(self, request, context):  # type: ignore[no-untyped-def]
        self.calls.append("DeleteMachine")
        self._get(request.machine_id, context)
        with self._lock:
            del self.machines[request.machine_id]
        return machine_pb2.DeleteMachineResponse()

    def UpdateMachinePower(self, request, context):  # type: ignore[no-untyped-def]
        self.calls.append("UpdateMachinePower")
        self._get(request.machine_id, context).spec.power = request.power
        return machine_pb2.UpdateMachinePowerResponse()

    def UpdateMachineAnnotations(self, request, context):  # type: ignore[no-untyped-def]
        m = self._get(request.machine_id, context)
        m.metadata.annotations.clear()
        m.metadata.annotations.update(request.annotations)
        return machine_pb2.UpdateMachineAnnotationsResponse()

    def AttachVolume(self, request, context):  # type: ignore[no-untyped-def]
        self.calls.append("AttachVolume")
        m = self._get(request.machine_id, context)
        if any(v.name == request.volume.name for v in m.spec.volumes):
            context.abort(grpc.StatusCode.ALREADY_EXISTS, f"volume {request.volume.name} already attached")
        m.spec.volumes.append(request.volume)
        return machine_pb2.AttachVolumeResponse()

    def DetachVolume(self, request, context):  # type: ignore[no-untyped-def]
        self.calls.append("DetachVolume")
        m = self._get(request.machine_id, context)
        keep = [v for v in m.spec.volumes if v.name != request.name]
        if len(keep) == len(m.spec.volumes):
            context.abort(grpc.StatusCode.NOT_FOUND, f"volume {request.name} not attached")
        del m.spec.volumes[:]
        m.spec.volumes.extend(keep)
        return machine_pb2.DetachVolumeResponse()

    def UpdateVolume(self, request, context):  # type: ignore[no-untyped-def]
        self.calls.append("UpdateVolume")
        m = self._get(request.machine_id, context)
        for v in m.spec.volumes:
            if v.name == request.volume.name:
                v.CopyFrom(request.volume)
                return machine_pb2.UpdateVolumeResponse()
        context.abort(grpc.StatusCode.NOT_FOUND, f"volume {request.volume.name} not attached")

    def Status(self, request, context):  # type: ignore[no-untyped-def]
        self.calls.append("Status")
        cls = machine_pb2.MachineClass(
            name="x3-small",
            capabilities=machine_pb2.MachineClassCapabilities(resources={"cpu": 2, "memory": 2 << 30}),
        )
        return machine_pb2.StatusResponse(
            machine_class_status=[machine_pb2.MachineClassStatus(machine_class=cls, quantity=7)]
        )

    def Exec(self, request, context):  # type: ignore[no-untyped-def]
        self.calls.append("Exec")
        self._get(request.machine_id, context)
        return machine_pb2.ExecResponse(url=f"{self.exec_base}/exec/{request.machine_id}-token")

    def ListEvents(self, request, context):  # type: ignore[no-untyped-def]
        self.calls.append("ListEvents")
        sel = dict(request.filter.label_selector)
        items = [e for e in self.events if _labels_match(sel, dict(e.spec.involved_object_meta.labels))]
        return machine_pb2.ListEventsResponse(events=items)


class FakeVolumeRuntime(volume_grpc.VolumeRuntimeServicer):
    """Keeps volumes in a dict."""

    def __init__(self) -> None:
        self.volumes: dict[str, volume_pb2.Volume] = {}
        self._ids = itertools.count(1)

    def Version(self, request, context):  # type: ignore[no-untyped-def]
        return volume_pb2.VersionResponse(runtime_name="fake-volume", runtime_version="0.1.0")

    def ListVolumes(self, request, context):  # type: ignore[no-untyped-def]
        items = list(self.volumes.values())
        if request.filter.id:
            items = [v for v in items if v.metadata.id == request.filter.id]
        sel = dict(request.filter.label_selector)
        items = [v for v in items if _labels_match(sel, dict(v.metadata.labels))]
        return volume_pb2.ListVolumesResponse(volumes=items)

    def CreateVolume(self, request, context):  # type: ignore[no-untyped-def]
        v = volume_pb2.Volume()
        v.CopyFrom(request.volume)
        v.metadata.id = f"v{next(self._ids):04d}"
        v.status.state = volume_pb2.VOLUME_AVAILABLE
        v.status.resources.storage_bytes = v.spec.resources.storage_bytes
        self.volumes[v.metadata.id] = v
        return volume_pb2.CreateVolumeResponse(volume=v)

    def ExpandVolume(self, request, context):  # type: ignore[no-untyped-def]
        v = self.volumes.get(request.volume_id)
        if v is None:
            context.abort(grpc.StatusCode.NOT_FOUND, f"volume {request.volume_id} not found")
        v.spec.resources.storage_bytes = request.resources.storage_bytes
        v.status.resources.storage_bytes = request.resources.storage_bytes
        return volume_pb2.ExpandVolumeResponse()

    def DeleteVolume(self, request, context):  # type: ignore[no-untyped-def]
        if self.volumes.pop(request.volume_id, None) is None:
            context.abort(grpc.StatusCode.NOT_FOUND, f"volume {request.volume_id} not found")
        return volume_pb2.DeleteVolumeResponse()

    def Status(self, request, context):  # type: ignore[no-untyped-def]
        cls = volume_pb2.VolumeClass(
            name="fast", capabilities=volume_pb2.VolumeClassCapabilities(tps=100, iops=1000)
        )
        return volume_pb2.StatusResponse(
            volume_class_status=[volume_pb2.VolumeClassStatus(volume_class=cls, quantity=10 << 30)]
        )


@dataclass
class FakeServers:
    """One grpc server serving both fakes on a unix socket and a loopback TCP port."""

    socket_path: str
    tcp_port: int
    machine: FakeMachineRuntime
    volume: FakeVolumeRuntime
    server: grpc.Server = field(repr=False)

    def stop(self) -> None:
        self.server.stop(grace=None).wait()


def start_fake_servers(socket_path: str) -> FakeServers:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    machine, volume = FakeMachineRuntime(), FakeVolumeRuntime()
    machine_grpc.add_MachineRuntimeServicer_to_server(machine, server)
    volume_grpc.add_VolumeRuntimeServicer_to_server(volume, server)
    server.add_insecure_port(f"unix:{socket_path}")
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return FakeServers(socket_path, port, machine, volume, server)


def sample_machine(name: str = "web", labels: dict[str, str] | None = None) -> machine_pb2.Machine:
    spec = machine_pb2.MachineSpec(power=machine_pb2.POWER_ON, ignition_data=b"{}")
    setattr(spec, "class", "x3-small")
    spec.guest_config.hostname = name
    return machine_pb2.Machine(metadata=meta_pb2.ObjectMetadata(labels=labels or {"app": name}), spec=spec)


@dataclass(frozen=True)
class Sshd:
    """A throwaway sshd on loopback that accepts ``client_key`` for ``user``."""

    host: str
    port: int
    user: str
    client_key: Path
    known_hosts: Path
    host_public_key: str
    log: Path

    def endpoint(self, socket_path: str) -> str:
        return f"ssh://{self.user}@{self.host}:{self.port}{socket_path}"
