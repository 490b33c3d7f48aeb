"""Restart recovery and bad input against a real runtime process on qemu:///system.

Machines here are created powered off (defined, never booted), so these tests cost no guest boot.
"""

from __future__ import annotations

import shutil
import subprocess

import grpc
import libvirt
import pytest
from ironpool.iri.gen.machine.v1alpha1 import api_pb2 as mpb
from machine_runtime_helpers import (
    RuntimeProc,
    domain_names,
    domain_state,
    machine_request,
    session_domains,
)

from tests.helpers.qemu_dirs import copy_image, qemu_tmpdir
from tests.helpers.runtimes import LIBVIRT_URI
from tests.helpers.wait import wait_for

pytestmark = pytest.mark.libvirt

NASTY = "<x a='1'>&amp;\"]]></metadata><!--"


def _code(exc: pytest.ExceptionInfo[grpc.RpcError]) -> grpc.StatusCode:
    return exc.value.code()


def test_restart_rebuilds_state_from_libvirt(runtime: RuntimeProc, test_session: str) -> None:
    made: dict[str, tuple[dict[str, str], dict[str, str]]] = {}
    for i in range(3):
        labels = {"app": f"restart-{test_session}", "idx": str(i), "nasty": NASTY}
        annotations = {"a/b": NASTY * 2, "empty": ""}
        m = runtime.stub.CreateMachine(
            machine_request(test_session, power=mpb.POWER_OFF, labels=labels, annotations=annotations)
        ).machine
        made[m.metadata.id] = (dict(m.metadata.labels), dict(m.metadata.annotations))
        assert dict(m.metadata.labels)["nasty"] == NASTY
        assert m.status.state == mpb.MACHINE_PENDING or m.status.state == mpb.MACHINE_SUSPENDED
    some = next(iter(made))
    runtime.stub.UpdateMachineAnnotations(
        mpb.UpdateMachineAnnotationsRequest(machine_id=some, annotations={"replaced": "yes", "x": NASTY})
    )
    made[some] = (made[some][0], {"replaced": "yes", "x": NASTY})
    before = {m.metadata.id: m for m in runtime.machines(app=f"restart-{test_session}")}
    assert set(before) == set(made)

    runtime.kill9()
    runtime.start()

    after = {m.metadata.id: m for m in runtime.machines(app=f"restart-{test_session}")}
    assert set(after) == set(made)
    for mid, (labels, annotations) in made.items():
        m = after[mid]
        assert dict(m.metadata.labels) == labels
        assert dict(m.metadata.annotations) == annotations
        assert m.metadata.created_at == before[mid].metadata.created_at
        assert getattr(m.spec, "class") == "tiny"
        assert m.spec.power == mpb.POWER_OFF
        assert [v.name for v in m.spec.volumes] == ["root"]
        assert m.status.state == mpb.MACHINE_SUSPENDED
        assert domain_state(f"ironpool-{mid}") == libvirt.VIR_DOMAIN_SHUTOFF  # power off stays applied
    # label filters match exactly, including metacharacters
    assert {m.metadata.id for m in runtime.machines(nasty=NASTY, idx="1")} == {
        mid for mid, (labels, _) in made.items() if labels["idx"] == "1"
    }
    assert runtime.machines(nasty=NASTY[:-1]) == []

    # a second runtime on the same host (another state dir) leaves these machines alone
    other = RuntimeProc(workdir=qemu_tmpdir("imo-"), images=runtime.images)
    try:
        other.start()
        assert other.machines(app=f"restart-{test_session}") == []
        with pytest.raises(grpc.RpcError) as foreign:
            other.stub.DeleteMachine(mpb.DeleteMachineRequest(machine_id=some))
        assert _code(foreign) == grpc.StatusCode.NOT_FOUND
    finally:
        other.stop()
        shutil.rmtree(other.workdir, ignore_errors=True)
    assert {m.metadata.id for m in runtime.machines(app=f"restart-{test_session}")} == set(made)

    for mid in made:
        runtime.stub.DeleteMachine(mpb.DeleteMachineRequest(machine_id=mid))
    wait_for(lambda: not runtime.machines(app=f"restart-{test_session}"), 30, "the machines to be deleted")
    assert not any(f"ironpool-{mid}" in domain_names() for mid in made)


def _snapshot(runtime: RuntimeProc, session: str) -> tuple[set[str], set[str]]:
    """This session's domains (other tests on a shared host may make their own) and machine dirs."""
    machines_dir = runtime.state_dir / "machines"
    dirs = {p.name for p in machines_dir.iterdir()} if machines_dir.exists() else set()
    return set(session_domains(session)), dirs


def test_bad_input_is_rejected_and_leaves_nothing(runtime: RuntimeProc, test_session: str) -> None:
    stub = runtime.stub
    before = _snapshot(runtime, test_session)

    def create_fails(req: mpb.CreateMachineRequest, code: grpc.StatusCode, words: str) -> None:
        with pytest.raises(grpc.RpcError) as exc:
            stub.CreateMachine(req)
        assert _code(exc) == code, exc.value.details()
        assert words in (exc.value.details() or ""), exc.value.details()

    create_fails(machine_request(test_session, cls="nope"), grpc.StatusCode.NOT_FOUND, "'nope'")
    create_fails(machine_request(test_session, cls=""), grpc.StatusCode.INVALID_ARGUMENT, "spec.class")
    create_fails(
        machine_request(test_session, image="missing-image"), grpc.StatusCode.NOT_FOUND, "missing-image"
    )
    create_fails(
        machine_request(test_session, image="../etc/passwd"), grpc.StatusCode.INVALID_ARGUMENT, "image"
    )

    huge = machine_request(test_session, image="")
    huge.machine.spec.volumes.add(name="big", device="oda", local_disk=mpb.LocalDisk(size_bytes=1 << 62))
    create_fails(huge, grpc.StatusCode.INVALID_ARGUMENT, "size_bytes")
    negative = machine_request(test_session, image="")
    negative.machine.spec.volumes.add(name="neg", device="oda", local_disk=mpb.LocalDisk(size_bytes=-1))
    create_fails(negative, grpc.StatusCode.INVALID_ARGUMENT, "negative")

    bad_device = machine_request(test_session, image="")
    bad_device.machine.spec.volumes.add(
        name="d", device="<vda/>", local_disk=mpb.LocalDisk(size_bytes=1 << 20)
    )
    create_fails(bad_device, grpc.StatusCode.INVALID_ARGUMENT, "device")

    # a valid local disk first, then a bad one: the first must not be left behind either
    half = machine_request(test_session)
    half.machine.spec.volumes.add(name="ok", device="odb", local_disk=mpb.LocalDisk(size_bytes=1 << 20))
    half.machine.spec.volumes.add(
        name="bad",
        device="odc",
        connection=mpb.VolumeConnection(
            driver="ironpool-local", handle="h", attributes={"path": "/nonexistent/vol.qcow2"}
        ),
    )
    create_fails(half, grpc.StatusCode.NOT_FOUND, "/nonexistent/vol.qcow2")
    wrong_driver = machine_request(test_session)
    wrong_driver.machine.spec.volumes.add(
        name="c", device="odb", connection=mpb.VolumeConnection(driver="ceph")
    )
    create_fails(wrong_driver, grpc.StatusCode.INVALID_ARGUMENT, "ceph")

    net = machine_request(test_session)
    net.machine.spec.network_interfaces.add(
        name="n<0>", network_id="no-such-net-<&>",
        attributes={"rawNetworkLabels": '{"networking.ironpool.dev/mode": "bridge", '
                                        '"networking.ironpool.dev/bridge": "nobr<&>"}'},
    )
    create_fails(net, grpc.StatusCode.INVALID_ARGUMENT, "networking.ironpool.dev/bridge")
    gateway = machine_request(test_session)
    gateway.machine.spec.network_interfaces.add(name="n", network_id="x", ips=["10.0.0.1"])
    create_fails(gateway, grpc.StatusCode.INVALID_ARGUMENT, "interfaces[0].ips[0]: 10.0.0.1 is the gateway")
    dup = machine_request(test_session)
    dup.machine.spec.network_interfaces.add(name="n", network_id="")
    dup.machine.spec.network_interfaces.add(name="n", network_id="")
    create_fails(dup, grpc.StatusCode.ALREADY_EXISTS, "'n'")

    bad_id = machine_request(test_session)
    bad_id.machine.metadata.id = "../../x"
    create_fails(bad_id, grpc.StatusCode.INVALID_ARGUMENT, "metadata.id")

    # An id the runtime never issued is NOT_FOUND whatever its shape: IronCore's poollet takes
    # NotFound as "gone" and would retry anything else forever. Only a missing id is malformed.
    for machine_id, code in (
        ("", grpc.StatusCode.INVALID_ARGUMENT),
        ("not-an-id", grpc.StatusCode.NOT_FOUND),
        ("<a>&", grpc.StatusCode.NOT_FOUND),
        ("f" * 32, grpc.StatusCode.NOT_FOUND),
    ):
        for method, request in (
            (stub.DeleteMachine, mpb.DeleteMachineRequest(machine_id=machine_id)),
            (stub.UpdateMachinePower, mpb.UpdateMachinePowerRequest(machine_id=machine_id, power=1)),
            (stub.UpdateMachineAnnotations, mpb.UpdateMachineAnnotationsRequest(machine_id=machine_id)),
            (stub.DetachVolume, mpb.DetachVolumeRequest(machine_id=machine_id, name="x")),
            (stub.UpdateVolume, mpb.UpdateVolumeRequest(machine_id=machine_id, volume=mpb.Volume(name="x"))),
            (stub.DetachNetworkInterface, mpb.DetachNetworkInterfaceRequest(machine_id=machine_id, name="x")),
            (stub.Exec, mpb.ExecRequest(machine_id=machine_id)),
        ):
            with pytest.raises(grpc.RpcError) as exc:
                method(request)
            assert _code(exc) == code, (machine_id, exc.value.details())
            assert "machine_id" in (exc.value.details() or "") or "machine" in (exc.value.details() or "")
    # unknown or malformed ids in a list filter give an empty list, as IronCore's provider does
    for machine_id in ("f" * 32, "garbage<>"):
        assert not stub.ListMachines(
            mpb.ListMachinesRequest(filter=mpb.MachineFilter(id=machine_id))
        ).machines

    assert _snapshot(runtime, test_session) == before

    # names and label values with XML metacharacters are fine, stored and returned verbatim
    ok = machine_request(test_session, power=mpb.POWER_OFF, labels={"k<&>": NASTY})
    ok.machine.spec.volumes[0].name = NASTY
    ok.machine.spec.network_interfaces.add(name=NASTY, network_id="")
    ok.machine.spec.volumes.add(name="extra", device="odb", local_disk=mpb.LocalDisk(size_bytes=2 << 20))
    m = stub.CreateMachine(ok).machine
    assert dict(m.metadata.labels)["k<&>"] == NASTY
    assert m.spec.volumes[0].name == NASTY and m.spec.network_interfaces[0].name == NASTY
    conn = libvirt.open(LIBVIRT_URI)
    try:
        assert conn.lookupByName(f"ironpool-{m.metadata.id}").isPersistent()
    finally:
        conn.close()
    # a volume must not shrink; growing an offline disk works
    with pytest.raises(grpc.RpcError) as shrink:
        stub.UpdateVolume(
            mpb.UpdateVolumeRequest(
                machine_id=m.metadata.id,
                volume=mpb.Volume(name="extra", device="odb", local_disk=mpb.LocalDisk(size_bytes=1 << 20)),
            )
        )
    assert _code(shrink) == grpc.StatusCode.INVALID_ARGUMENT
    assert "shrink" in (shrink.value.details() or "")
    stub.UpdateVolume(
        mpb.UpdateVolumeRequest(
            machine_id=m.metadata.id,
            volume=mpb.Volume(name="extra", device="odb", local_disk=mpb.LocalDisk(size_bytes=4 << 20)),
        )
    )
    grown = runtime.machine(m.metadata.id)
    assert grown is not None and grown.spec.volumes[1].local_disk.size_bytes == 4 << 20
    stub.DeleteMachine(mpb.DeleteMachineRequest(machine_id=m.metadata.id))
    wait_for(lambda: runtime.machine(m.metadata.id) is None, 30, "the machine to be deleted")


def test_named_libvirt_network(runtime: RuntimeProc, test_session: str) -> None:
    """A NIC whose network_id names a libvirt network becomes ``<interface type='network'>``."""
    net_name = f"ironpool-t-{test_session}"
    conn = libvirt.open(LIBVIRT_URI)
    # No <ip>: libvirt needs no dnsmasq for it; the machine stays powered off so no bridge is used.
    net = conn.networkDefineXML(
        f"<network><name>{net_name}</name><bridge name='ipt{test_session[:8]}'/></network>"
    )
    try:
        req = machine_request(test_session, power=mpb.POWER_OFF)
        req.machine.spec.network_interfaces.add(name="eth0", network_id=net_name, ips=["10.0.0.5"])
        m = runtime.stub.CreateMachine(req).machine
        xml = conn.lookupByName(f"ironpool-{m.metadata.id}").XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE)
        assert f"<source network='{net_name}'/>" in xml
        assert list(m.spec.network_interfaces[0].ips) == ["10.0.0.5"]
        runtime.stub.DetachNetworkInterface(
            mpb.DetachNetworkInterfaceRequest(machine_id=m.metadata.id, name="eth0")
        )
        xml = conn.lookupByName(f"ironpool-{m.metadata.id}").XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE)
        assert "<interface" not in xml
        runtime.stub.DeleteMachine(mpb.DeleteMachineRequest(machine_id=m.metadata.id))
        wait_for(lambda: runtime.machine(m.metadata.id) is None, 30, "the machine to be deleted")
    finally:
        net.undefine()
        conn.close()


def _libvirt_clients_of(pid: int) -> list[str]:
    out = subprocess.run(
        ["virt-admin", "srv-clients-list", "libvirtd"], capture_output=True, text=True, check=True
    )
    ids = [line.split()[0] for line in out.stdout.splitlines()[2:] if line.strip()]
    mine = []
    for cid in ids:
        info = subprocess.run(["virt-admin", "client-info", "libvirtd", cid], capture_output=True, text=True)
        if f"unix_process_id: {pid}\n" in info.stdout + "\n":
            mine.append(cid)
    return mine


@pytest.mark.skipif(shutil.which("virt-admin") is None, reason="needs virt-admin")
def test_reconnects_when_libvirtd_drops_the_connection(runtime: RuntimeProc, test_session: str) -> None:
    """libvirtd closing our connection (as on a libvirtd restart) costs at most one failed call."""
    assert runtime.process is not None
    m = runtime.stub.CreateMachine(machine_request(test_session, power=mpb.POWER_OFF)).machine
    clients = _libvirt_clients_of(runtime.process.pid)
    assert clients, "the runtime has no libvirt connection?"
    for cid in clients:
        subprocess.run(["virt-admin", "client-disconnect", "libvirtd", cid], capture_output=True, check=True)

    def listed() -> bool:
        try:
            return runtime.machine(m.metadata.id) is not None
        except grpc.RpcError:
            return False

    wait_for(listed, 20, "the runtime to reconnect to libvirtd")
    after = set(_libvirt_clients_of(runtime.process.pid))
    assert after and after.isdisjoint(clients)  # a new connection, not the old one
    runtime.stub.DeleteMachine(mpb.DeleteMachineRequest(machine_id=m.metadata.id))
    wait_for(lambda: runtime.machine(m.metadata.id) is None, 30, "the machine to be deleted")


def test_image_gone_later_is_pending_with_a_warning(runtime: RuntimeProc, test_session: str) -> None:
    """An image removed from the catalog after create: power on gives a Warning event and Pending."""
    workdir = qemu_tmpdir("imi-")
    copy_image(runtime.images / "tiny", workdir / "images" / "vanishing")
    own = RuntimeProc(workdir=workdir, images=workdir / "images")
    try:
        own.start()
        m = own.stub.CreateMachine(
            machine_request(test_session, image="vanishing", power=mpb.POWER_OFF)
        ).machine
        shutil.rmtree(workdir / "images" / "vanishing")
        own.stub.UpdateMachinePower(
            mpb.UpdateMachinePowerRequest(machine_id=m.metadata.id, power=mpb.POWER_ON)
        )

        def start_failed() -> bool:
            events = own.stub.ListEvents(
                mpb.ListEventsRequest(filter=mpb.EventFilter(id=m.metadata.id))
            ).events
            return any(e.spec.reason == "StartFailed" and e.spec.type == "Warning" for e in events)

        wait_for(start_failed, 30, "a StartFailed warning event")
        assert own.state(m.metadata.id) == "MACHINE_PENDING"
        assert own.process is not None and own.process.poll() is None  # no crash
        own.stub.DeleteMachine(mpb.DeleteMachineRequest(machine_id=m.metadata.id))
        wait_for(lambda: own.machine(m.metadata.id) is None, 30, "the machine to be deleted")
    finally:
        own.stop()
        shutil.rmtree(workdir, ignore_errors=True)
