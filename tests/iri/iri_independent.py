"""An IRI client built independently of ironpool's protos and generated stubs.

The field table below was copied by hand from IronCore's own ``iri/apis/*/v1alpha1/api.proto``
(machine after the Nov-2025 renumbering: MachineSpec class=2 ... guest_config=6; Volume.local_disk=4).
It is turned into descriptors in a private ``DescriptorPool`` and called through raw
``channel.unary_unary('/machine.v1alpha1.MachineRuntime/...')``, so a test passing with it proves
the wire format, not just agreement of ironpool with itself. Reusable against any IRI server.
"""

from __future__ import annotations

from typing import Any

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

F = descriptor_pb2.FieldDescriptorProto
STR, I64, BYTES, ENUM, MSG = F.TYPE_STRING, F.TYPE_INT64, F.TYPE_BYTES, F.TYPE_ENUM, F.TYPE_MESSAGE
REP = "repeated"

# package -> {message: [(number, name, type, type_name | None, "repeated" | "" | map value type)]}
# A map field is written as ("map", key_type, value_type[, value type_name]).
TABLE: dict[str, dict[str, list[tuple[Any, ...]]]] = {
    "meta.v1alpha1": {
        "ObjectMetadata": [
            (1, "id", STR),
            (2, "annotations", ("map", STR, STR)),
            (3, "labels", ("map", STR, STR)),
            (4, "generation", I64),
            (5, "created_at", I64),
            (6, "deleted_at", I64),
        ],
    },
    "event.v1alpha1": {
        "Event": [(2, "spec", MSG, ".event.v1alpha1.EventSpec")],
        "EventSpec": [
            (1, "involved_object_meta", MSG, ".meta.v1alpha1.ObjectMetadata"),
            (2, "reason", STR),
            (3, "message", STR),
            (4, "type", STR),
            (5, "event_time", I64),
            (6, "action", STR),
        ],
    },
    "machine.v1alpha1": {
        "MachineFilter": [(1, "id", STR), (2, "label_selector", ("map", STR, STR))],
        "EventFilter": [
            (1, "id", STR),
            (2, "label_selector", ("map", STR, STR)),
            (3, "events_from_time", I64),
            (4, "events_to_time", I64),
        ],
        "MachineClassCapabilities": [(1, "resources", ("map", STR, I64))],
        "Machine": [
            (1, "metadata", MSG, ".meta.v1alpha1.ObjectMetadata"),
            (2, "spec", MSG, ".machine.v1alpha1.MachineSpec"),
            (3, "status", MSG, ".machine.v1alpha1.MachineStatus"),
        ],
        "ImageSpec": [(1, "image", STR)],
        "LocalDisk": [(1, "size_bytes", I64), (2, "image", MSG, ".machine.v1alpha1.ImageSpec")],
        "VolumeConnection": [
            (1, "driver", STR),
            (2, "handle", STR),
            (3, "attributes", ("map", STR, STR)),
            (4, "secret_data", ("map", STR, BYTES)),
            (5, "encryption_data", ("map", STR, BYTES)),
            (6, "effective_storage_bytes", I64),
        ],
        "Volume": [
            (1, "name", STR),
            (2, "device", STR),
            (4, "local_disk", MSG, ".machine.v1alpha1.LocalDisk"),
            (5, "connection", MSG, ".machine.v1alpha1.VolumeConnection"),
        ],
        "NetworkInterface": [
            (1, "name", STR),
            (2, "network_id", STR),
            (3, "ips", STR, None, REP),
            (4, "attributes", ("map", STR, STR)),
        ],
        "GuestConfig": [(1, "hostname", STR)],
        "MachineSpec": [
            (1, "power", ENUM, ".machine.v1alpha1.Power"),
            (2, "class", STR),
            (3, "ignition_data", BYTES),
            (4, "volumes", MSG, ".machine.v1alpha1.Volume", REP),
            (5, "network_interfaces", MSG, ".machine.v1alpha1.NetworkInterface", REP),
            (6, "guest_config", MSG, ".machine.v1alpha1.GuestConfig"),
        ],
        "MachineStatus": [
            (1, "observed_generation", I64),
            (2, "state", ENUM, ".machine.v1alpha1.MachineState"),
            (3, "image_ref", STR),
            (4, "volumes", MSG, ".machine.v1alpha1.VolumeStatus", REP),
            (5, "network_interfaces", MSG, ".machine.v1alpha1.NetworkInterfaceStatus", REP),
            (6, "machine_conditions", MSG, ".machine.v1alpha1.Conditions", REP),
        ],
        "Conditions": [
            (1, "type", STR),
            (2, "status", STR),
            (3, "reason", STR),
            (4, "message", STR),
            (5, "last_transition_time", I64),
        ],
        "VolumeStatus": [
            (1, "name", STR),
            (2, "handle", STR),
            (3, "state", ENUM, ".machine.v1alpha1.VolumeState"),
        ],
        "NetworkInterfaceStatus": [
            (1, "name", STR),
            (2, "handle", STR),
            (3, "state", ENUM, ".machine.v1alpha1.NetworkInterfaceState"),
        ],
        "MachineClass": [
            (1, "name", STR),
            (2, "capabilities", MSG, ".machine.v1alpha1.MachineClassCapabilities"),
        ],
        "MachineClassStatus": [
            (1, "machine_class", MSG, ".machine.v1alpha1.MachineClass"),
            (2, "quantity", I64),
        ],
        "VersionRequest": [(1, "version", STR)],
        "VersionResponse": [(1, "runtime_name", STR), (2, "runtime_version", STR)],
        "ListMachinesRequest": [(1, "filter", MSG, ".machine.v1alpha1.MachineFilter")],
        "ListMachinesResponse": [(1, "machines", MSG, ".machine.v1alpha1.Machine", REP)],
        "ListEventsRequest": [(1, "filter", MSG, ".machine.v1alpha1.EventFilter")],
        "ListEventsResponse": [(1, "events", MSG, ".event.v1alpha1.Event", REP)],
        "CreateMachineRequest": [(1, "machine", MSG, ".machine.v1alpha1.Machine")],
        "CreateMachineResponse": [(1, "machine", MSG, ".machine.v1alpha1.Machine")],
        "DeleteMachineRequest": [(1, "machine_id", STR)],
        "DeleteMachineResponse": [],
        "UpdateMachinePowerRequest": [(1, "machine_id", STR), (2, "power", ENUM, ".machine.v1alpha1.Power")],
        "UpdateMachinePowerResponse": [],
        "AttachVolumeRequest": [(1, "machine_id", STR), (2, "volume", MSG, ".machine.v1alpha1.Volume")],
        "AttachVolumeResponse": [],
        "DetachVolumeRequest": [(1, "machine_id", STR), (2, "name", STR)],
        "DetachVolumeResponse": [],
        "UpdateVolumeRequest": [(1, "machine_id", STR), (2, "volume", MSG, ".machine.v1alpha1.Volume")],
        "UpdateVolumeResponse": [],
        "StatusRequest": [],
        "StatusResponse": [(1, "machine_class_status", MSG, ".machine.v1alpha1.MachineClassStatus", REP)],
        "ExecRequest": [(1, "machine_id", STR)],
        "ExecResponse": [(1, "url", STR)],
        # IronCore's IEP-11 draft (ironcore PR #1172), copied by hand from its api.proto.
        "ReservationFilter": [(1, "id", STR), (2, "label_selector", ("map", STR, STR))],
        "Reservation": [
            (1, "metadata", MSG, ".meta.v1alpha1.ObjectMetadata"),
            (2, "spec", MSG, ".machine.v1alpha1.ReservationSpec"),
            (3, "status", MSG, ".machine.v1alpha1.ReservationStatus"),
        ],
        "ReservationSpec": [(1, "resources", ("map", STR, BYTES))],
        "ReservationStatus": [(1, "state", ENUM, ".machine.v1alpha1.ReservationState")],
        "ListReservationsRequest": [(1, "filter", MSG, ".machine.v1alpha1.ReservationFilter")],
        "ListReservationsResponse": [(1, "reservations", MSG, ".machine.v1alpha1.Reservation", REP)],
        "CreateReservationRequest": [(1, "reservation", MSG, ".machine.v1alpha1.Reservation")],
        "CreateReservationResponse": [(1, "reservation", MSG, ".machine.v1alpha1.Reservation")],
        "DeleteReservationRequest": [(1, "reservation_id", STR)],
        "DeleteReservationResponse": [],
    },
    "volume.v1alpha1": {
        "VolumeFilter": [(1, "id", STR), (2, "label_selector", ("map", STR, STR))],
        "VolumeResources": [(1, "storage_bytes", I64)],
        "EncryptionSpec": [(1, "secret_data", ("map", STR, BYTES))],
        "ImageDataSource": [(1, "image", STR), (2, "architecture", STR)],
        "SnapshotDataSource": [(1, "snapshot_id", STR)],
        "VolumeDataSource": [
            (1, "image_data_source", MSG, ".volume.v1alpha1.ImageDataSource"),
            (2, "snapshot_data_source", MSG, ".volume.v1alpha1.SnapshotDataSource"),
        ],
        "VolumeSpec": [
            (2, "class", STR),
            (3, "resources", MSG, ".volume.v1alpha1.VolumeResources"),
            (4, "encryption", MSG, ".volume.v1alpha1.EncryptionSpec"),
            (5, "volume_data_source", MSG, ".volume.v1alpha1.VolumeDataSource"),
        ],
        "VolumeAccess": [
            (1, "driver", STR),
            (2, "handle", STR),
            (3, "attributes", ("map", STR, STR)),
            (4, "secret_data", ("map", STR, BYTES)),
        ],
        "VolumeStatus": [
            (1, "state", ENUM, ".volume.v1alpha1.VolumeState"),
            (2, "access", MSG, ".volume.v1alpha1.VolumeAccess"),
            (3, "resources", MSG, ".volume.v1alpha1.VolumeResources"),
        ],
        "Volume": [
            (1, "metadata", MSG, ".meta.v1alpha1.ObjectMetadata"),
            (2, "spec", MSG, ".volume.v1alpha1.VolumeSpec"),
            (3, "status", MSG, ".volume.v1alpha1.VolumeStatus"),
        ],
        "VolumeClassCapabilities": [(1, "tps", I64), (2, "iops", I64)],
        "VolumeClass": [
            (1, "name", STR),
            (2, "capabilities", MSG, ".volume.v1alpha1.VolumeClassCapabilities"),
        ],
        "VolumeClassStatus": [(1, "volume_class", MSG, ".volume.v1alpha1.VolumeClass"), (2, "quantity", I64)],
        "VersionRequest": [(1, "version", STR)],
        "VersionResponse": [(1, "runtime_name", STR), (2, "runtime_version", STR)],
        "ListVolumesRequest": [(1, "filter", MSG, ".volume.v1alpha1.VolumeFilter")],
        "ListVolumesResponse": [(1, "volumes", MSG, ".volume.v1alpha1.Volume", REP)],
        "CreateVolumeRequest": [(1, "volume", MSG, ".volume.v1alpha1.Volume")],
        "CreateVolumeResponse": [(1, "volume", MSG, ".volume.v1alpha1.Volume")],
        "ExpandVolumeRequest": [
            (1, "volume_id", STR),
            (2, "resources", MSG, ".volume.v1alpha1.VolumeResources"),
        ],
        "ExpandVolumeResponse": [],
        "DeleteVolumeRequest": [(1, "volume_id", STR)],
        "DeleteVolumeResponse": [],
        "StatusRequest": [],
        "StatusResponse": [(1, "volume_class_status", MSG, ".volume.v1alpha1.VolumeClassStatus", REP)],
    },
}

ENUMS: dict[str, dict[str, list[tuple[str, int]]]] = {
    "machine.v1alpha1": {
        "Power": [("POWER_ON", 0), ("POWER_OFF", 1)],
        "MachineState": [
            ("MACHINE_PENDING", 0),
            ("MACHINE_RUNNING", 1),
            ("MACHINE_SUSPENDED", 2),
            ("MACHINE_TERMINATED", 3),
            ("MACHINE_TERMINATING", 4),
            ("MACHINE_STOPPED", 5),
        ],
        "VolumeState": [("VOLUME_PENDING", 0), ("VOLUME_ATTACHED", 1)],
        "NetworkInterfaceState": [("NETWORK_INTERFACE_PENDING", 0), ("NETWORK_INTERFACE_ATTACHED", 1)],
        "ReservationState": [("RESERVATION_STATE_PENDING", 0), ("RESERVATION_STATE_ACCEPTED", 1),
                             ("RESERVATION_STATE_REJECTED", 2)],
    },
    "volume.v1alpha1": {
        "VolumeState": [("VOLUME_PENDING", 0), ("VOLUME_AVAILABLE", 1), ("VOLUME_ERROR", 2)],
    },
}

DEPS = {
    "meta.v1alpha1": [],
    "event.v1alpha1": ["meta.v1alpha1"],
    "machine.v1alpha1": ["meta.v1alpha1", "event.v1alpha1"],
    "volume.v1alpha1": ["meta.v1alpha1"],
}


def _camel(name: str) -> str:
    return "".join(p.capitalize() for p in name.split("_"))


def _file(package: str) -> descriptor_pb2.FileDescriptorProto:
    # A different file name than ironpool's protos: only package + names + numbers must agree.
    fd = descriptor_pb2.FileDescriptorProto(
        name=f"independent/{package}.proto",
        package=package,
        syntax="proto3",
        dependency=[f"independent/{d}.proto" for d in DEPS[package]],
    )
    for ename, values in ENUMS.get(package, {}).items():
        e = fd.enum_type.add(name=ename)
        for vname, number in values:
            e.value.add(name=vname, number=number)
    for mname, fields in TABLE[package].items():
        msg = fd.message_type.add(name=mname)
        for number, fname, ftype, *rest in fields:
            if isinstance(ftype, tuple):
                _, ktype, vtype, *vname = ftype
                entry = msg.nested_type.add(name=f"{_camel(fname)}Entry")
                entry.options.map_entry = True
                entry.field.add(name="key", number=1, type=ktype, label=F.LABEL_OPTIONAL)
                value = entry.field.add(name="value", number=2, type=vtype, label=F.LABEL_OPTIONAL)
                if vname:
                    value.type_name = vname[0]
                msg.field.add(
                    name=fname,
                    number=number,
                    type=MSG,
                    label=F.LABEL_REPEATED,
                    type_name=f".{package}.{mname}.{entry.name}",
                )
                continue
            type_name = rest[0] if rest else None
            repeated = len(rest) > 1 and rest[1] == REP
            f = msg.field.add(
                name=fname,
                number=number,
                type=ftype,
                label=F.LABEL_REPEATED if repeated else F.LABEL_OPTIONAL,
            )
            if type_name:
                f.type_name = type_name
    return fd


def build_pool() -> descriptor_pool.DescriptorPool:
    pool = descriptor_pool.DescriptorPool()
    for package in ("meta.v1alpha1", "event.v1alpha1", "machine.v1alpha1", "volume.v1alpha1"):
        pool.Add(_file(package))
    return pool


class IndependentClient:
    """Raw unary calls by full method name with messages from the independent pool."""

    def __init__(self, channel: grpc.Channel) -> None:
        self.channel = channel
        self.pool = build_pool()

    def message(self, full_name: str) -> Any:
        return message_factory.GetMessageClass(self.pool.FindMessageTypeByName(full_name))

    def call(self, package: str, service: str, method: str, request: Any, timeout: float = 10) -> Any:
        response_cls = self.message(f"{package}.{method}Response")
        rpc = self.channel.unary_unary(
            f"/{package}.{service}/{method}",
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=response_cls.FromString,
        )
        return rpc(request, timeout=timeout)
