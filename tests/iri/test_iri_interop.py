"""Wire compatibility: a client built from an independent field table (copied from IronCore's
protos) talks to servers built on ironpool's generated stubs, and the tables agree."""

from __future__ import annotations

import grpc
import pytest
from google.protobuf import descriptor_pool
from iri_fakes import FakeServers
from iri_independent import ENUMS, TABLE, IndependentClient
from ironpool.iri.gen.machine.v1alpha1 import api_pb2 as machine_pb2
from ironpool.iri.gen.volume.v1alpha1 import api_pb2 as volume_pb2

MACHINE_METHODS = [
    "Version",
    "ListEvents",
    "ListMachines",
    "CreateMachine",
    "DeleteMachine",
    "UpdateMachineAnnotations",
    "UpdateMachinePower",
    "AttachVolume",
    "DetachVolume",
    "UpdateVolume",
    "AttachNetworkInterface",
    "DetachNetworkInterface",
    "ListReservations",
    "CreateReservation",
    "DeleteReservation",
    "Status",
    "Exec",
]
VOLUME_METHODS = [
    "Version",
    "ListEvents",
    "ListVolumes",
    "CreateVolume",
    "ExpandVolume",
    "DeleteVolume",
    "CreateVolumeSnapshot",
    "DeleteVolumeSnapshot",
    "ListVolumeSnapshots",
    "Status",
]


def test_generated_descriptors_match_the_independent_table() -> None:
    assert machine_pb2.DESCRIPTOR.package == "machine.v1alpha1"  # also loads meta/event into the pool
    assert volume_pb2.DESCRIPTOR.package == "volume.v1alpha1"
    pool = descriptor_pool.Default()
    checked = 0
    for package, messages in TABLE.items():
        for mname, fields in messages.items():
            ours = pool.FindMessageTypeByName(f"{package}.{mname}")
            for number, fname, ftype, *rest in fields:
                f = ours.fields_by_number.get(number)
                assert f is not None, f"{package}.{mname}: field {number} ({fname}) missing"
                assert f.name == fname, f"{package}.{mname}.{number}: {f.name} != {fname}"
                if isinstance(ftype, tuple):
                    assert f.message_type.GetOptions().map_entry, f"{mname}.{fname} is not a map"
                    key, value = f.message_type.fields_by_name["key"], f.message_type.fields_by_name["value"]
                    assert (key.type, value.type) == ftype[1:3], f"{mname}.{fname} map types"
                else:
                    assert f.type == ftype, f"{mname}.{fname}: type {f.type} != {ftype}"
                    if rest and rest[0]:
                        target = f.message_type or f.enum_type
                        assert "." + target.full_name == rest[0], (
                            f"{mname}.{fname} refers to {target.full_name}"
                        )
                    repeated = len(rest) > 1 and rest[1] == "repeated"
                    assert f.is_repeated == repeated, f"{mname}.{fname} repeated?"
                checked += 1
    for package, enums in ENUMS.items():
        for ename, values in enums.items():
            ours_enum = pool.FindEnumTypeByName(f"{package}.{ename}")
            assert [(v.name, v.number) for v in ours_enum.values] == values
    assert checked > 120


def test_service_and_method_names() -> None:
    svc = machine_pb2.DESCRIPTOR.services_by_name["MachineRuntime"]
    assert svc.full_name == "machine.v1alpha1.MachineRuntime"
    assert [m.name for m in svc.methods] == MACHINE_METHODS
    for m in svc.methods:
        assert m.input_type.full_name == f"machine.v1alpha1.{m.name}Request"
        assert m.output_type.full_name == f"machine.v1alpha1.{m.name}Response"
    vsvc = volume_pb2.DESCRIPTOR.services_by_name["VolumeRuntime"]
    assert vsvc.full_name == "volume.v1alpha1.VolumeRuntime"
    assert [m.name for m in vsvc.methods] == VOLUME_METHODS
    # go_package as IronCore's, so Go tooling reading our files lands in the same import path.
    assert (
        machine_pb2.DESCRIPTOR.GetOptions().go_package
        == "github.com/ironcore-dev/ironcore/iri/apis/machine/v1alpha1"
    )
    assert machine_pb2.DESCRIPTOR.name == "machine/v1alpha1/api.proto"


def test_independent_client_drives_the_machine_server(fake_servers: FakeServers) -> None:
    channel = grpc.insecure_channel(f"unix:{fake_servers.socket_path}")
    c = IndependentClient(channel)
    M = "machine.v1alpha1"
    call = lambda method, req: c.call(M, "MachineRuntime", method, req)  # noqa: E731

    assert call("Version", c.message(f"{M}.VersionRequest")(version="0.1")).runtime_name == "fake-machine"

    machine = c.message(f"{M}.Machine")()
    machine.metadata.labels["machinepoollet.ironcore.dev/machine-uid"] = "u-1"
    machine.metadata.annotations["machinepoollet.ironcore.dev/machine-generation"] = "3"
    setattr(machine.spec, "class", "x3-small")
    machine.spec.power = 1
    machine.spec.ignition_data = b'{"ignition":{"version":"3.4.0"}}'
    machine.spec.guest_config.hostname = "vm-1"
    vol = machine.spec.volumes.add(name="root", device="oda")
    vol.local_disk.size_bytes = 5 << 30
    vol.local_disk.image.image = "ghcr.io/ironcore-dev/os-images/gardenlinux:latest"
    nic = machine.spec.network_interfaces.add(name="eth0", network_id="net-1", ips=["10.0.0.5"])
    nic.attributes["mac"] = "52:54:00:00:00:01"
    created = call("CreateMachine", c.message(f"{M}.CreateMachineRequest")(machine=machine)).machine
    mid = created.metadata.id

    # The server decoded every field into ironpool's generated types.
    stored = fake_servers.machine.machines[mid]
    assert getattr(stored.spec, "class") == "x3-small"
    assert stored.spec.power == machine_pb2.POWER_OFF
    assert stored.spec.ignition_data == b'{"ignition":{"version":"3.4.0"}}'
    assert stored.spec.guest_config.hostname == "vm-1"
    assert stored.spec.volumes[0].local_disk.size_bytes == 5 << 30
    assert stored.spec.volumes[0].local_disk.image.image.endswith("gardenlinux:latest")
    assert list(stored.spec.network_interfaces[0].ips) == ["10.0.0.5"]
    assert stored.metadata.labels["machinepoollet.ironcore.dev/machine-uid"] == "u-1"

    flt = c.message(f"{M}.MachineFilter")(label_selector={"machinepoollet.ironcore.dev/machine-uid": "u-1"})
    listed = call("ListMachines", c.message(f"{M}.ListMachinesRequest")(filter=flt)).machines
    assert [m.metadata.id for m in listed] == [mid]
    assert listed[0].spec.guest_config.hostname == "vm-1"
    assert listed[0].metadata.created_at > 1_000_000_000_000_000_000  # Unix nanoseconds

    status = call("Status", c.message(f"{M}.StatusRequest")()).machine_class_status
    assert status[0].machine_class.capabilities.resources["cpu"] == 2

    call("UpdateMachinePower", c.message(f"{M}.UpdateMachinePowerRequest")(machine_id=mid, power=0))
    assert fake_servers.machine.machines[mid].spec.power == machine_pb2.POWER_ON
    call("DeleteMachine", c.message(f"{M}.DeleteMachineRequest")(machine_id=mid))
    with pytest.raises(grpc.RpcError) as err:
        call("DeleteMachine", c.message(f"{M}.DeleteMachineRequest")(machine_id=mid))
    assert err.value.code() == grpc.StatusCode.NOT_FOUND
    channel.close()


def test_independent_client_drives_the_volume_server(fake_servers: FakeServers) -> None:
    channel = grpc.insecure_channel(f"unix:{fake_servers.socket_path}")
    c = IndependentClient(channel)
    V = "volume.v1alpha1"
    call = lambda method, req: c.call(V, "VolumeRuntime", method, req)  # noqa: E731

    vol = c.message(f"{V}.Volume")()
    vol.metadata.labels["volumepoollet.ironcore.dev/volume-uid"] = "v-1"
    setattr(vol.spec, "class", "fast")
    vol.spec.resources.storage_bytes = 1 << 30
    vol.spec.volume_data_source.image_data_source.image = "img:latest"
    created = call("CreateVolume", c.message(f"{V}.CreateVolumeRequest")(volume=vol)).volume
    assert created.status.state == 1  # VOLUME_AVAILABLE
    stored = fake_servers.volume.volumes[created.metadata.id]
    assert stored.spec.volume_data_source.image_data_source.image == "img:latest"
    assert getattr(stored.spec, "class") == "fast"

    req = c.message(f"{V}.ExpandVolumeRequest")(volume_id=created.metadata.id)
    req.resources.storage_bytes = 3 << 30
    call("ExpandVolume", req)
    flt = c.message(f"{V}.VolumeFilter")(id=created.metadata.id)
    [listed] = call("ListVolumes", c.message(f"{V}.ListVolumesRequest")(filter=flt)).volumes
    assert listed.status.resources.storage_bytes == 3 << 30
    [cls] = call("Status", c.message(f"{V}.StatusRequest")()).volume_class_status
    assert (cls.volume_class.name, cls.volume_class.capabilities.iops, cls.quantity) == (
        "fast",
        1000,
        10 << 30,
    )
    channel.close()


def test_our_client_against_an_independently_built_server() -> None:
    """The other direction: a server speaking only the independent descriptors (as an IronCore
    provider would) serves ironpool's MachineRuntimeClient."""
    import shutil
    import tempfile
    from concurrent import futures

    from ironpool.iri.client import MachineRuntimeClient

    pool_client = IndependentClient(grpc.insecure_channel("unix:/nonexistent"))
    msg = pool_client.message
    M = "machine.v1alpha1"
    stored: dict[str, object] = {}

    def create(req: object, ctx: grpc.ServicerContext) -> object:
        m = msg(f"{M}.Machine")()
        m.CopyFrom(req.machine)  # type: ignore[attr-defined]
        m.metadata.id = "0123456789abcdef0123456789abcdef"
        m.status.state = 1  # MACHINE_RUNNING
        m.status.volumes.add(name="root", handle="h-1", state=1)
        stored[m.metadata.id] = m
        return msg(f"{M}.CreateMachineResponse")(machine=m)

    def list_machines(req: object, ctx: grpc.ServicerContext) -> object:
        return msg(f"{M}.ListMachinesResponse")(machines=list(stored.values()))

    def version(req: object, ctx: grpc.ServicerContext) -> object:
        return msg(f"{M}.VersionResponse")(runtime_name="independent", runtime_version="9.9.9")

    def handler(fn: object, method: str) -> grpc.RpcMethodHandler:
        return grpc.unary_unary_rpc_method_handler(
            fn, request_deserializer=msg(f"{M}.{method}Request").FromString,
            response_serializer=lambda m: m.SerializeToString(),
        )  # fmt: skip

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    server.add_generic_rpc_handlers([
        grpc.method_handlers_generic_handler(f"{M}.MachineRuntime", {
            "CreateMachine": handler(create, "CreateMachine"),
            "ListMachines": handler(list_machines, "ListMachines"),
            "Version": handler(version, "Version"),
        })
    ])  # fmt: skip
    sock_dir = tempfile.mkdtemp(prefix="iri-")
    sock = f"{sock_dir}/indep.sock"
    server.add_insecure_port(f"unix:{sock}")
    server.start()
    try:
        with MachineRuntimeClient(f"unix://{sock}") as c:
            assert c.version().runtime_version == "9.9.9"
            spec = machine_pb2.MachineSpec(power=machine_pb2.POWER_OFF, ignition_data=b"ign")
            setattr(spec, "class", "c1")
            spec.guest_config.hostname = "h"
            spec.volumes.add(name="root", device="oda").local_disk.size_bytes = 1 << 30
            created = c.create_machine(machine_pb2.Machine(spec=spec))
            assert created.status.state == machine_pb2.MACHINE_RUNNING
            assert created.status.volumes[0].state == machine_pb2.VOLUME_ATTACHED
            [listed] = c.list_machines()
            assert getattr(listed.spec, "class") == "c1"
            assert listed.spec.guest_config.hostname == "h"
            assert listed.spec.volumes[0].local_disk.size_bytes == 1 << 30
            assert listed.spec.power == machine_pb2.POWER_OFF
            # UpdateMachinePower is not implemented by this server: UNIMPLEMENTED, not a hang.
            with pytest.raises(grpc.RpcError) as err:
                c.update_machine_power(created.metadata.id, machine_pb2.POWER_ON)
            assert err.value.code() == grpc.StatusCode.UNIMPLEMENTED
    finally:
        server.stop(None)
        pool_client.channel.close()
        shutil.rmtree(sock_dir, ignore_errors=True)
