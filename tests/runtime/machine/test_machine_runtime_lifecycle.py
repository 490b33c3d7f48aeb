"""The done-when list against real libvirtd/QEMU: boot, console, label list, power, volumes, delete.

One guest boots (TCG emulation, a few seconds) and is driven through its whole life.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import grpc
import libvirt
import pytest
from ironpool.iri.console import ConsoleSession
from ironpool.iri.gen.machine.v1alpha1 import api_pb2 as mpb
from ironpool.iri.gen.volume.v1alpha1 import api_pb2 as vpb
from ironpool.iri.gen.volume.v1alpha1 import api_pb2_grpc as vgrpc
from ironpool.runtime.machine import vcpu_slice
from machine_runtime_helpers import (
    GiB,
    RuntimeProc,
    domain_names,
    domain_state,
    machine_request,
)

from tests.helpers.qemu_dirs import qemu_tmpdir
from tests.helpers.runtimes import (
    LIBVIRT_URI,
    assert_vcpu_slice,
    destroy_storage_pool,
    rpc_answers,
    start_ironpool,
    stop_process,
    wait_serving,
)
from tests.helpers.wait import wait_for

pytestmark = pytest.mark.libvirt

VOLUME_CLASSES = """\
apiVersion: storage.ironcore.dev/v1alpha1
kind: VolumeClass
metadata: {name: plain}
"""


@pytest.fixture
def volume_runtime() -> Iterator[vgrpc.VolumeRuntimeStub]:
    """The project's volume runtime on its own libvirt dir pool (removed afterwards)."""
    workdir = qemu_tmpdir("imv-")
    (workdir / "classes.yaml").write_text(VOLUME_CLASSES)
    pool = f"ironpool-mtest-{os.getpid()}-{int(time.time())}"
    sock = workdir / "v.sock"
    log = workdir / "vr.log"
    proc = start_ironpool(
        [
            "volume-runtime",
            "--libvirt-uri",
            LIBVIRT_URI,
            "--storage-pool",
            pool,
            "--pool-path",
            str(workdir / "pool"),
            "--classes",
            str(workdir / "classes.yaml"),
            "--address",
            f"unix://{sock}",
        ],
        log,
    )
    channel = grpc.insecure_channel(f"unix:{sock}")
    stub = vgrpc.VolumeRuntimeStub(channel)
    try:
        wait_serving(proc, lambda: rpc_answers(lambda: stub.Version(vpb.VersionRequest(), timeout=1)), log,
                     "the volume runtime")
        yield stub
    finally:
        stop_process(proc)
        channel.close()
        with contextlib.suppress(libvirt.libvirtError):
            destroy_storage_pool(pool)
        shutil.rmtree(workdir, ignore_errors=True)


def _free_on_host(exclude: str) -> tuple[int, int]:
    """Host CPUs and memory minus the running domains (except ``exclude``), read from libvirt."""
    conn = libvirt.open(LIBVIRT_URI)
    try:
        _model, mem_mib, cpus, *_ = conn.getInfo()
        cpu, mem = int(cpus), int(mem_mib) << 20
        for dom in conn.listAllDomains(libvirt.VIR_CONNECT_LIST_DOMAINS_ACTIVE):
            if dom.name() != exclude:
                try:
                    _state, max_kib, _m, vcpus, _t = dom.info()
                except libvirt.libvirtError as exc:
                    if exc.get_error_code() == libvirt.VIR_ERR_NO_DOMAIN:
                        continue  # another test's domain, gone since the listing
                    raise
                cpu, mem = cpu - int(vcpus), mem - (int(max_kib) << 10)
        return cpu, mem
    finally:
        conn.close()


def _console_text(runtime: RuntimeProc, machine_id: str) -> str:
    path = runtime.console_log(machine_id)
    return path.read_text(errors="replace") if path.exists() else ""


def test_machine_lifecycle(
    runtime: RuntimeProc, test_session: str, volume_runtime: vgrpc.VolumeRuntimeStub
) -> None:
    stub = runtime.stub

    # -- create: boots, prints on the serial console within 60 s ----------------------------
    app = f"boot-{test_session}"
    req = machine_request(test_session, labels={"app": app}, annotations={"note": "<b>&'\"</b>"})
    req.machine.spec.network_interfaces.add(name="eth0", network_id="")
    req.machine.spec.ignition_data = b'{"ignition": {"version": "3.4.0"}}'
    created = stub.CreateMachine(req).machine
    mid = created.metadata.id
    assert len(mid) == 32
    assert created.metadata.created_at > 1_600_000_000 * 10**9  # Unix ns
    domain = f"ironpool-{mid}"
    assert domain in domain_names()
    wait_for(
        lambda: "ironpool-tiny-image: init started" in _console_text(runtime, mid),
        60,
        "the guest's init line on the serial console",
    )
    assert_vcpu_slice(domain, vcpu_slice.DEFAULT_NS)  # a runtime told nothing: the default
    # the guest read the Ignition data from fw_cfg opt/com.coreos/config, as IronCore passes it
    wait_for(
        lambda: 'ignition 34 bytes: {"ignition": {"version": "3.4.0"}}' in _console_text(runtime, mid),
        30,
        "the guest to print the ignition data it got through fw_cfg",
    )

    # -- listed by label selector, RUNNING, labels and annotations verbatim ---------------
    found = runtime.machines(app=app)
    assert [m.metadata.id for m in found] == [mid]
    assert mpb.MachineState.Name(found[0].status.state) == "MACHINE_RUNNING"
    assert dict(found[0].metadata.annotations) == {"note": "<b>&'\"</b>"}
    assert runtime.machines(app=app + "-other") == []

    # -- Status counts what is free: host minus every running domain, ours included -------
    # (other domains on a shared host may come and go, so compare with libvirt at the same time)
    def status_matches_host() -> bool:
        expected_cpu, expected_mem = _free_on_host(exclude="")
        without_ours = _free_on_host(exclude=domain)
        quantities = {
            s.machine_class.name: s.quantity for s in stub.Status(mpb.StatusRequest()).machine_class_status
        }
        return (
            without_ours[0] == expected_cpu + 1
            and quantities
            == {
                "tiny": max(0, min(expected_cpu // 1, expected_mem // (128 << 20))),
                "huge": 0,
            }
            and _free_on_host(exclude="") == (expected_cpu, expected_mem)
        )

    wait_for(status_matches_host, 20, "Status to match the free host resources")

    # -- a 1 GiB volume from the volume runtime, expanded to 2 GiB, attached live ----------
    vspec = vpb.VolumeSpec(resources=vpb.VolumeResources(storage_bytes=GiB))
    setattr(vspec, "class", "plain")
    vol = volume_runtime.CreateVolume(vpb.CreateVolumeRequest(volume=vpb.Volume(spec=vspec))).volume
    vid = vol.metadata.id

    def available() -> vpb.Volume | None:
        vs = volume_runtime.ListVolumes(vpb.ListVolumesRequest(filter=vpb.VolumeFilter(id=vid))).volumes
        return vs[0] if vs and vs[0].status.state == vpb.VOLUME_AVAILABLE else None

    vol = wait_for(available, 30, "the volume to be available")
    url = stub.Exec(mpb.ExecRequest(machine_id=mid)).url
    with ConsoleSession(url) as console:
        with pytest.raises(grpc.RpcError) as busy:
            stub.Exec(mpb.ExecRequest(machine_id=mid))
        assert busy.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        access = vol.status.access
        assert access.driver == "ironpool-local"
        volume = mpb.Volume(
            name="data",
            device="odb",
            connection=mpb.VolumeConnection(
                driver=access.driver,
                handle=access.handle,
                attributes=dict(access.attributes),
                effective_storage_bytes=GiB,
            ),
        )
        stub.AttachVolume(mpb.AttachVolumeRequest(machine_id=mid, volume=volume))
        console.read_until(r"disks: vda=2097152\b", 60)  # 1 GiB in 512-byte sectors
        volume_runtime.ExpandVolume(
            vpb.ExpandVolumeRequest(volume_id=vid, resources=vpb.VolumeResources(storage_bytes=2 * GiB))
        )
        volume.connection.effective_storage_bytes = 2 * GiB
        stub.UpdateVolume(mpb.UpdateVolumeRequest(machine_id=mid, volume=volume))
        console.read_until(r"disks: vda=4194304\b", 60)
    conn = libvirt.open(LIBVIRT_URI)
    try:
        disk_xml = conn.lookupByName(domain).XMLDesc(0)
    finally:
        conn.close()
    assert f"file='{access.attributes['path']}'" in disk_xml
    assert "<target dev='vdb' bus='virtio'/>" in disk_xml
    # The tiny image's kernel skips the boot-time timer check an emulated vCPU on a crowded host fails.
    assert "no_timer_check" in ET.fromstring(disk_xml).findtext("os/cmdline", "").split()
    listed = runtime.machine(mid)
    assert listed is not None
    assert [(v.name, v.state) for v in listed.status.volumes] == [("root", 1), ("data", 1)]
    with pytest.raises(grpc.RpcError) as dup:
        stub.AttachVolume(mpb.AttachVolumeRequest(machine_id=mid, volume=volume))
    assert dup.value.code() == grpc.StatusCode.ALREADY_EXISTS
    stub.DetachVolume(mpb.DetachVolumeRequest(machine_id=mid, name="data"))
    with pytest.raises(grpc.RpcError) as gone:
        stub.DetachVolume(mpb.DetachVolumeRequest(machine_id=mid, name="data"))
    assert gone.value.code() == grpc.StatusCode.NOT_FOUND

    # -- a second NIC on a running machine ------------------------------------------------
    stub.AttachNetworkInterface(
        mpb.AttachNetworkInterfaceRequest(
            machine_id=mid, network_interface=mpb.NetworkInterface(name="eth1", network_id="isolated")
        )
    )
    listed = runtime.machine(mid)
    assert listed is not None and [n.name for n in listed.spec.network_interfaces] == ["eth0", "eth1"]
    stub.DetachNetworkInterface(mpb.DetachNetworkInterfaceRequest(machine_id=mid, name="eth1"))

    # -- power off: the domain really shuts off; power on boots it again -----------------
    boots = _console_text(runtime, mid).count("init started")
    stub.UpdateMachinePower(mpb.UpdateMachinePowerRequest(machine_id=mid, power=mpb.POWER_OFF))
    runtime.wait_state(mid, "MACHINE_SUSPENDED", 30)
    assert domain_state(domain) == libvirt.VIR_DOMAIN_SHUTOFF
    # 60 s is the target for a boot; a busy shared host gets more slack for this second one.
    stub.UpdateMachinePower(mpb.UpdateMachinePowerRequest(machine_id=mid, power=mpb.POWER_ON))
    runtime.wait_state(mid, "MACHINE_RUNNING", 30)
    wait_for(
        lambda: _console_text(runtime, mid).count("init started") > boots, 120, "the guest to boot again"
    )

    # -- events: lifecycle from libvirt, times in Unix seconds ---------------------------
    events = stub.ListEvents(
        mpb.ListEventsRequest(filter=mpb.EventFilter(label_selector={"app": app}))
    ).events
    reasons = [e.spec.reason for e in events]
    assert "Started" in reasons and "Stopped" in reasons and "AttachVolumeSucceeded" in reasons
    assert all(abs(e.spec.event_time - time.time()) < 600 for e in events)
    assert all(e.spec.involved_object_meta.id == mid for e in events)

    # -- delete: listed with deleted_at until gone, domain and own disks removed ----------
    disk_dir = runtime.state_dir / "machines" / mid
    assert any((disk_dir).iterdir())
    stub.DeleteMachine(mpb.DeleteMachineRequest(machine_id=mid))
    during = runtime.machine(mid)
    if during is not None:  # teardown may already be done
        assert during.metadata.deleted_at > 0
        assert during.status.state == mpb.MACHINE_TERMINATING
    wait_for(lambda: runtime.machine(mid) is None, 30, "the machine to be gone")
    assert domain not in domain_names()
    assert not disk_dir.exists()
    assert Path(access.attributes["path"]).exists()  # the volume runtime's volume is not ours to delete
    with pytest.raises(grpc.RpcError) as again:
        stub.DeleteMachine(mpb.DeleteMachineRequest(machine_id=mid))
    assert again.value.code() == grpc.StatusCode.NOT_FOUND
