"""Volume runtime against real libvirt: create, expand, list, restart, delete, images, snapshots."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import grpc
import pytest
from ironpool.iri.gen.volume.v1alpha1 import api_pb2 as vpb
from volume_runtime_helpers import GiB, VolumeRuntimeProc, volume_request

pytestmark = pytest.mark.libvirt
MiB = 1 << 20


def qemu_img_info(path: str) -> dict[str, object]:
    out = subprocess.run(["qemu-img", "info", "-U", "--output=json", path], check=True, capture_output=True)
    data = json.loads(out.stdout)
    assert isinstance(data, dict)
    return data


def list_volumes(
    rt: VolumeRuntimeProc, vid: str = "", labels: dict[str, str] | None = None
) -> list[vpb.Volume]:
    flt = vpb.VolumeFilter(id=vid, label_selector=labels or {})
    return list(rt.stub.ListVolumes(vpb.ListVolumesRequest(filter=flt)).volumes)


def test_create_1gib_then_expand_to_2gib(runtime: VolumeRuntimeProc) -> None:
    vol = runtime.stub.CreateVolume(volume_request(size=GiB, labels={"app": "db"})).volume
    vid = vol.metadata.id
    assert len(vid) == 32
    assert vol.status.state == vpb.VOLUME_AVAILABLE
    assert vol.status.resources.storage_bytes == GiB
    access = vol.status.access
    assert access.driver == "ironpool-local"
    assert access.handle == vid
    assert not access.secret_data
    path = access.attributes["path"]
    assert dict(access.attributes) == {
        "path": str(runtime.pool_path / f"{vid}.qcow2"),
        "format": "qcow2",
        "pool": runtime.pool_name,
        "volume": f"{vid}.qcow2",
        "iops": "1000",
        "tps": str(100 * MiB),
    }
    info = qemu_img_info(path)
    assert info["format"] == "qcow2"
    assert info["virtual-size"] == GiB

    runtime.stub.ExpandVolume(
        vpb.ExpandVolumeRequest(volume_id=vid, resources=vpb.VolumeResources(storage_bytes=2 * GiB))
    )
    assert qemu_img_info(path)["virtual-size"] == 2 * GiB
    [listed] = list_volumes(runtime, vid)
    assert listed.status.resources.storage_bytes == 2 * GiB
    assert listed.spec.resources.storage_bytes == 2 * GiB

    # Same size again is a no-op; shrinking is refused and changes nothing.
    runtime.stub.ExpandVolume(
        vpb.ExpandVolumeRequest(volume_id=vid, resources=vpb.VolumeResources(storage_bytes=2 * GiB))
    )
    with pytest.raises(grpc.RpcError) as err:
        runtime.stub.ExpandVolume(
            vpb.ExpandVolumeRequest(volume_id=vid, resources=vpb.VolumeResources(storage_bytes=GiB))
        )
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "only be expanded" in (err.value.details() or "")
    assert qemu_img_info(path)["virtual-size"] == 2 * GiB


def test_class_without_capabilities_has_no_iotune_attributes(runtime: VolumeRuntimeProc) -> None:
    vol = runtime.stub.CreateVolume(volume_request(cls="plain", size=64 * MiB)).volume
    assert "iops" not in vol.status.access.attributes
    assert "tps" not in vol.status.access.attributes
    assert getattr(vol.spec, "class") == "plain"


def test_list_by_id_and_labels(runtime: VolumeRuntimeProc) -> None:
    ids = {}
    for name, labels in {
        "a": {"tier": "db", "zone": "1"},
        "b": {"tier": "db", "zone": "2"},
        "c": {"tier": "web"},
    }.items():
        ids[name] = runtime.stub.CreateVolume(volume_request(size=16 * MiB, labels=labels)).volume.metadata.id
    assert {v.metadata.id for v in list_volumes(runtime)} == set(ids.values())
    assert [v.metadata.id for v in list_volumes(runtime, ids["b"])] == [ids["b"]]
    assert {v.metadata.id for v in list_volumes(runtime, labels={"tier": "db"})} == {ids["a"], ids["b"]}
    assert [v.metadata.id for v in list_volumes(runtime, labels={"tier": "db", "zone": "2"})] == [ids["b"]]
    assert list_volumes(runtime, ids["c"], labels={"tier": "db"}) == []
    assert list_volumes(runtime, "0" * 32) == []  # unknown: empty, as IRI wants
    assert list_volumes(runtime, "../etc") == []  # an id never issued lists nothing, whatever its shape


def test_kill9_and_restart_keeps_ids_labels_annotations(runtime: VolumeRuntimeProc) -> None:
    annotations = {"note": "<disk name='x'/> & \"quotes\"", "volumepoollet.ironcore.dev/gen": "3"}
    created = [
        runtime.stub.CreateVolume(
            volume_request(size=(i + 1) * 32 * MiB, labels={"n": str(i)}, annotations=annotations)
        ).volume
        for i in range(3)
    ]
    runtime.stub.ExpandVolume(
        vpb.ExpandVolumeRequest(
            volume_id=created[0].metadata.id, resources=vpb.VolumeResources(storage_bytes=128 * MiB)
        )
    )
    before = {v.metadata.id: v for v in list_volumes(runtime)}
    runtime.kill9()
    runtime.start()
    after = {v.metadata.id: v for v in list_volumes(runtime)}
    assert after.keys() == {v.metadata.id for v in created}
    for vid, vol in after.items():
        assert vol == before[vid]  # metadata (labels, annotations, created_at), spec and status
        assert dict(vol.metadata.annotations) == annotations
    assert after[created[0].metadata.id].status.resources.storage_bytes == 128 * MiB


def test_delete_twice_is_not_found_and_removes_files(runtime: VolumeRuntimeProc) -> None:
    vid = runtime.stub.CreateVolume(volume_request(size=16 * MiB)).volume.metadata.id
    assert runtime.files() == ([f"{vid}.qcow2"], [f"{vid}.volume.json"])
    runtime.stub.DeleteVolume(vpb.DeleteVolumeRequest(volume_id=vid))
    assert runtime.files() == ([], [])
    assert list_volumes(runtime, vid) == []
    with pytest.raises(grpc.RpcError) as err:
        runtime.stub.DeleteVolume(vpb.DeleteVolumeRequest(volume_id=vid))
    assert err.value.code() == grpc.StatusCode.NOT_FOUND
    assert vid in (err.value.details() or "")


def test_status_reports_classes_with_free_bytes(runtime: VolumeRuntimeProc) -> None:
    import libvirt

    status = runtime.stub.Status(vpb.StatusRequest())
    by_name = {s.volume_class.name: s for s in status.volume_class_status}
    assert by_name.keys() == {"fast", "plain"}
    assert by_name["fast"].volume_class.capabilities.tps == 100 * MiB
    assert by_name["fast"].volume_class.capabilities.iops == 1000
    assert by_name["plain"].volume_class.capabilities.iops == 0
    conn = libvirt.open("qemu:///system")
    try:
        pool = conn.storagePoolLookupByName(runtime.pool_name)
        pool.refresh(0)
        free = pool.info()[3]
        assert pool.autostart() == 1 and pool.isActive()
    finally:
        conn.close()
    # Same filesystem figure, give or take what other processes wrote in between.
    assert abs(by_name["fast"].quantity - free) < 512 * MiB
    assert by_name["fast"].quantity == by_name["plain"].quantity


def write_image(path: Path, size: int, marker: bytes, offset: int) -> None:
    with open(path, "wb") as fh:
        fh.truncate(size)
        fh.seek(offset)
        fh.write(marker)


def read_guest_bytes(qcow2: str, offset: int, length: int, tmp: Path) -> bytes:
    raw = tmp / "readback.raw"
    subprocess.run(
        ["qemu-img", "convert", "-U", "-O", "raw", qcow2, str(raw)], check=True, capture_output=True
    )
    with open(raw, "rb") as fh:
        fh.seek(offset)
        data = fh.read(length)
    raw.unlink()
    return data


def test_create_from_catalog_image_is_a_flat_copy(runtime: VolumeRuntimeProc, tmp_path: Path) -> None:
    write_image(runtime.images / "tiny.raw", 8 * MiB, b"IRONPOOL-IMAGE", 3 * MiB)
    vol = runtime.stub.CreateVolume(
        volume_request(size=32 * MiB, image="os/tiny:1.0")
    ).volume
    path = vol.status.access.attributes["path"]
    info = qemu_img_info(path)
    assert info["virtual-size"] == 32 * MiB
    assert "backing-filename" not in info  # a copy, independent of the catalog
    (runtime.images / "tiny.raw").unlink()
    assert read_guest_bytes(path, 3 * MiB, 14, tmp_path) == b"IRONPOOL-IMAGE"
    assert vol.spec.volume_data_source.image_data_source.image == "os/tiny:1.0"


def test_snapshot_and_volume_from_snapshot(runtime: VolumeRuntimeProc, tmp_path: Path) -> None:
    write_image(runtime.images / "seed.raw", 4 * MiB, b"SNAPSHOT-ME", MiB)
    src = runtime.stub.CreateVolume(volume_request(size=16 * MiB, image="seed")).volume
    snap = runtime.stub.CreateVolumeSnapshot(
        vpb.CreateVolumeSnapshotRequest(
            volume_snapshot=vpb.VolumeSnapshot(
                metadata={"labels": {"k": "v"}}, spec=vpb.VolumeSnapshotSpec(volume_id=src.metadata.id)
            )
        )
    ).volume_snapshot
    assert snap.status.state == vpb.VOLUME_SNAPSHOT_READY
    assert snap.status.size == 16 * MiB
    listed = runtime.stub.ListVolumeSnapshots(
        vpb.ListVolumeSnapshotsRequest(filter=vpb.VolumeSnapshotFilter(label_selector={"k": "v"}))
    ).volume_snapshots
    assert [s.metadata.id for s in listed] == [snap.metadata.id]
    # The source can go; the snapshot is a full copy.
    runtime.stub.DeleteVolume(vpb.DeleteVolumeRequest(volume_id=src.metadata.id))
    with pytest.raises(grpc.RpcError) as err:
        runtime.stub.CreateVolume(volume_request(size=8 * MiB, snapshot_id=snap.metadata.id))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT  # smaller than the snapshot
    clone = runtime.stub.CreateVolume(volume_request(size=32 * MiB, snapshot_id=snap.metadata.id)).volume
    assert read_guest_bytes(clone.status.access.attributes["path"], MiB, 11, tmp_path) == b"SNAPSHOT-ME"
    runtime.kill9()
    runtime.start()
    assert [
        s.metadata.id
        for s in runtime.stub.ListVolumeSnapshots(vpb.ListVolumeSnapshotsRequest()).volume_snapshots
    ] == [snap.metadata.id]
    runtime.stub.DeleteVolumeSnapshot(vpb.DeleteVolumeSnapshotRequest(volume_snapshot_id=snap.metadata.id))
    with pytest.raises(grpc.RpcError) as err:
        runtime.stub.DeleteVolumeSnapshot(
            vpb.DeleteVolumeSnapshotRequest(volume_snapshot_id=snap.metadata.id)
        )
    assert err.value.code() == grpc.StatusCode.NOT_FOUND
    runtime.stub.DeleteVolume(vpb.DeleteVolumeRequest(volume_id=clone.metadata.id))
    assert runtime.files() == ([], [])


def test_concurrent_creates_and_deletes(runtime: VolumeRuntimeProc) -> None:
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(8) as pool:
        vols = list(
            pool.map(
                lambda i: (
                    runtime.stub.CreateVolume(volume_request(size=8 * MiB, labels={"i": str(i)})).volume
                ),
                range(16),
            )
        )
        ids = {v.metadata.id for v in vols}
        assert len(ids) == 16
        assert {v.metadata.id for v in list_volumes(runtime)} == ids
        list(pool.map(lambda vid: runtime.stub.DeleteVolume(vpb.DeleteVolumeRequest(volume_id=vid)), ids))
    assert list_volumes(runtime) == []
    assert runtime.files() == ([], [])
