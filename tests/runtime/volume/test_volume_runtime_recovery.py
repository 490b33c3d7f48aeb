"""Crash leftovers are finished on start; attached volumes are protected; pools of another type refused."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import grpc
import libvirt
import pytest
from ironpool.iri.gen.volume.v1alpha1 import api_pb2 as vpb
from volume_runtime_helpers import GiB, VolumeRuntimeProc, volume_request

from tests.helpers.runtimes import LIBVIRT_URI

pytestmark = pytest.mark.libvirt
MiB = 1 << 20


def sidecar(vid: str, phase: str) -> str:
    return json.dumps(
        {
            "schema": 1,
            "kind": "volume",
            "id": vid,
            "phase": phase,
            "created_at": 1,
            "class_name": "fast",
            "storage_bytes": 16 * MiB,
            "tps": 0,
            "iops": 0,
            "labels": {"left": "over"},
            "annotations": {},
            "image": "",
            "snapshot_id": "",
        }
    )


def test_start_finishes_crashed_work_and_reports_strays(runtime_env: VolumeRuntimeProc) -> None:
    rt = runtime_env
    rt.start()
    kept = rt.stub.CreateVolume(volume_request(size=16 * MiB)).volume.metadata.id
    rt.kill9()
    half_created, lost, stray = uuid.uuid4().hex, uuid.uuid4().hex, uuid.uuid4().hex
    (rt.meta_dir / f"{half_created}.volume.json").write_text(sidecar(half_created, "creating"))
    (rt.meta_dir / f"{lost}.volume.json").write_text(sidecar(lost, "ready"))
    (rt.meta_dir / ".tmp-abc.json").write_text("{")
    for vid in (half_created, stray):
        subprocess.run(
            ["qemu-img", "create", "-q", "-f", "qcow2", str(rt.pool_path / f"{vid}.qcow2"), "16M"], check=True
        )
    rt.start()
    volumes = {v.metadata.id: v for v in rt.stub.ListVolumes(vpb.ListVolumesRequest()).volumes}
    assert volumes.keys() == {kept, lost}
    assert volumes[kept].status.state == vpb.VOLUME_AVAILABLE
    lost_vol = volumes[lost]
    assert lost_vol.status.state == vpb.VOLUME_ERROR
    assert "missing" in lost_vol.status.volume_conditions[0].message
    assert not lost_vol.status.access.driver  # no access for a volume that is not there
    pool_files, meta_files = rt.files()
    assert pool_files == sorted([f"{kept}.qcow2", f"{stray}.qcow2"])  # a stray is reported, never deleted
    assert meta_files == sorted([f"{kept}.volume.json", f"{lost}.volume.json"])
    assert f"{stray}.qcow2 in pool" in rt.log_text() and "no metadata sidecar" in rt.log_text()
    with pytest.raises(grpc.RpcError) as err:
        rt.stub.ExpandVolume(
            vpb.ExpandVolumeRequest(volume_id=lost, resources=vpb.VolumeResources(storage_bytes=GiB))
        )
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    rt.stub.DeleteVolume(vpb.DeleteVolumeRequest(volume_id=lost))  # the broken volume can be cleaned up
    assert rt.files()[1] == [f"{kept}.volume.json"]


def domain_xml(name: str, disk_path: str) -> str:
    dom = ET.Element("domain", type="qemu")
    ET.SubElement(dom, "name").text = name
    ET.SubElement(dom, "memory", unit="MiB").text = "32"
    ET.SubElement(dom, "vcpu").text = "1"
    os_ = ET.SubElement(dom, "os")
    ET.SubElement(os_, "type", arch="x86_64", machine="pc").text = "hvm"
    devices = ET.SubElement(dom, "devices")
    disk = ET.SubElement(devices, "disk", type="file", device="disk")
    ET.SubElement(disk, "driver", name="qemu", type="qcow2")
    ET.SubElement(disk, "source", file=disk_path)
    ET.SubElement(disk, "target", dev="vdb", bus="virtio")
    return ET.tostring(dom, encoding="unicode")


@pytest.fixture
def conn() -> Iterator[libvirt.virConnect]:
    c = libvirt.open(LIBVIRT_URI)
    yield c
    c.close()


def _remove_domain(dom: libvirt.virDomain) -> None:
    try:
        if dom.isActive():
            dom.destroy()
        dom.undefine()
    except libvirt.libvirtError:
        pass


def test_attached_volume_cannot_be_deleted(runtime: VolumeRuntimeProc, conn: libvirt.virConnect) -> None:
    vol = runtime.stub.CreateVolume(volume_request(size=16 * MiB)).volume
    name = f"ivr-{vol.metadata.id[:8]}"
    dom = conn.defineXML(domain_xml(name, vol.status.access.attributes["path"]))
    try:
        with pytest.raises(grpc.RpcError) as err:
            runtime.stub.DeleteVolume(vpb.DeleteVolumeRequest(volume_id=vol.metadata.id))
        assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert name in (err.value.details() or "")
        assert len(runtime.stub.ListVolumes(vpb.ListVolumesRequest()).volumes) == 1
    finally:
        _remove_domain(dom)
    runtime.stub.DeleteVolume(vpb.DeleteVolumeRequest(volume_id=vol.metadata.id))


def test_expand_while_attached_to_running_domain(
    runtime: VolumeRuntimeProc, conn: libvirt.virConnect
) -> None:
    vol = runtime.stub.CreateVolume(volume_request(size=GiB)).volume
    path = vol.status.access.attributes["path"]
    dom = conn.defineXML(domain_xml(f"ivr-{vol.metadata.id[:8]}", path))
    try:
        dom.create()
        assert dom.blockInfo("vdb")[0] == GiB
        runtime.stub.ExpandVolume(
            vpb.ExpandVolumeRequest(
                volume_id=vol.metadata.id, resources=vpb.VolumeResources(storage_bytes=2 * GiB)
            )
        )
        assert dom.blockInfo("vdb")[0] == 2 * GiB  # the guest sees it at once
        [listed] = runtime.stub.ListVolumes(vpb.ListVolumesRequest()).volumes
        assert listed.status.resources.storage_bytes == 2 * GiB
    finally:
        _remove_domain(dom)


def test_pool_of_another_type_is_refused(runtime_env: VolumeRuntimeProc, conn: libvirt.virConnect) -> None:
    rt = runtime_env
    xml = (
        f"<pool type='netfs'><name>{rt.pool_name}</name><source><host name='127.0.0.1'/>"
        f"<dir path='/nowhere'/><format type='nfs'/></source>"
        f"<target><path>{rt.pool_path}</path></target></pool>"
    )
    pool = conn.storagePoolDefineXML(xml, 0)
    try:
        started = time.monotonic()
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "ironpool.cli.main",
                "volume-runtime",
                "--storage-pool",
                rt.pool_name,
                "--pool-path",
                str(rt.pool_path),
                "--classes",
                str(rt.classes),
                "--address",
                rt.address,
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode != 0
        assert f"storage pool '{rt.pool_name}' exists with type 'netfs'" in proc.stderr
        assert time.monotonic() - started < 60
        assert not rt.socket.exists()
    finally:
        pool.undefine()


def test_bad_classes_file_is_refused(runtime_env: VolumeRuntimeProc) -> None:
    rt = runtime_env
    rt.classes.write_text(
        "apiVersion: storage.ironcore.dev/v1alpha1\nkind: VolumeClass\nmetadata: {name: x}\n"
        "capabilities: {iops: lots}\n"
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "ironpool.cli.main",
            "volume-runtime",
            "--storage-pool",
            rt.pool_name,
            "--pool-path",
            str(rt.pool_path),
            "--classes",
            str(rt.classes),
            "--address",
            rt.address,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "capabilities.iops" in proc.stderr and "'lots'" in proc.stderr


def test_second_runtime_on_the_same_pool_is_refused(runtime: VolumeRuntimeProc) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "ironpool.cli.main",
            "volume-runtime",
            "--storage-pool",
            runtime.pool_name,
            "--pool-path",
            str(runtime.pool_path),
            "--classes",
            str(runtime.classes),
            "--address",
            f"unix://{runtime.workdir}/second.sock",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode != 0
    assert "already served by another volume runtime" in proc.stderr
    runtime.stub.Version(vpb.VersionRequest())  # the first one is unaffected


def test_file_removed_behind_our_back_shows_error_and_can_be_deleted(runtime: VolumeRuntimeProc) -> None:
    vol = runtime.stub.CreateVolume(volume_request(size=16 * MiB)).volume
    Path(vol.status.access.attributes["path"]).unlink()
    [listed] = runtime.stub.ListVolumes(vpb.ListVolumesRequest()).volumes
    assert listed.status.state == vpb.VOLUME_ERROR
    assert "missing" in listed.status.volume_conditions[0].message
    runtime.stub.DeleteVolume(vpb.DeleteVolumeRequest(volume_id=vol.metadata.id))
    assert runtime.files() == ([], [])


def test_events_name_the_volume(runtime: VolumeRuntimeProc) -> None:
    vid = runtime.stub.CreateVolume(volume_request(size=16 * MiB, labels={"app": "x"})).volume.metadata.id
    with pytest.raises(grpc.RpcError):
        runtime.stub.CreateVolume(volume_request(cls="nope", labels={"app": "x"}))
    events = runtime.stub.ListEvents(
        vpb.ListEventsRequest(filter=vpb.EventFilter(label_selector={"app": "x"}))
    ).events
    assert [(e.spec.reason, e.spec.type) for e in events] == [
        ("Created", "Normal"),
        ("CreateFailed", "Warning"),
    ]
    assert events[0].spec.involved_object_meta.id == vid
    assert "nope" in events[1].spec.message
    assert events[0].spec.event_time > 1_700_000_000 and events[0].spec.action == "Create"


def _volume_runtime(rt: VolumeRuntimeProc, *extra: str) -> subprocess.CompletedProcess[str]:
    """Run ``ironpool volume-runtime`` on ``rt``'s pool with ``extra`` options until it fails (or 5 s)."""
    argv = [sys.executable, "-m", "ironpool.cli.main", "volume-runtime", "--storage-pool", rt.pool_name,
            "--pool-path", str(rt.pool_path), "--classes", str(rt.classes), "--address",
            f"unix://{rt.workdir}/other.sock", *extra]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60)


def test_pool_of_another_owner_is_refused_unless_shared(runtime: VolumeRuntimeProc) -> None:
    vol = runtime.stub.CreateVolume(volume_request(size=16 * MiB)).volume
    runtime.stop()  # the pool lock would refuse a second runtime anyway; this is about ownership
    proc = _volume_runtime(runtime, "--owner", "someone-else")
    assert proc.returncode != 0
    refusal = f"storage pool '{runtime.pool_name}' belongs to another installation (volume-runtime@"
    assert refusal in proc.stderr
    assert "--share-storage-pool" in proc.stderr
    assert json.loads((runtime.meta_dir / "OWNER").read_text())["owner"].endswith(f":{runtime.pool_path}")
    runtime.extra_args = ["--owner", "someone-else", "--share-storage-pool"]
    runtime.start()
    assert [v.metadata.id for v in runtime.stub.ListVolumes(vpb.ListVolumesRequest()).volumes] == [
        vol.metadata.id]


def test_pool_already_serving_the_folder_is_used_whatever_its_name(
        runtime: VolumeRuntimeProc, conn: libvirt.virConnect) -> None:
    vol = runtime.stub.CreateVolume(volume_request(size=16 * MiB)).volume
    runtime.stop()
    old_name = runtime.pool_name
    runtime.pool_name = f"{old_name}-renamed"  # as an upgrade that derives pool names from the data dir
    try:
        runtime.start()
        assert [v.metadata.id for v in runtime.stub.ListVolumes(vpb.ListVolumesRequest()).volumes] == [
            vol.metadata.id]
        assert runtime.pool_name not in conn.listStoragePools() + conn.listDefinedStoragePools()
    finally:
        runtime.pool_name = old_name  # the fixture removes the pool under its real name
