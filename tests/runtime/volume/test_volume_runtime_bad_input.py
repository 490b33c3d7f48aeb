"""Bad requests get INVALID_ARGUMENT / NOT_FOUND / RESOURCE_EXHAUSTED naming the problem and leave nothing."""

from __future__ import annotations

import grpc
import pytest
from ironpool.iri.gen.volume.v1alpha1 import api_pb2 as vpb
from volume_runtime_helpers import GiB, VolumeRuntimeProc, volume_request

pytestmark = pytest.mark.libvirt
INVALID, NOT_FOUND, EXHAUSTED = (
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
)

# (request, code, words the message must contain)
CREATE_CASES: dict[str, tuple[vpb.CreateVolumeRequest, grpc.StatusCode, list[str]]] = {
    "unknown class": (volume_request(cls="gold"), INVALID, ["volume.spec.class", "'gold'"]),
    "empty class": (volume_request(cls=""), INVALID, ["volume.spec.class", "required"]),
    "class with xml": (volume_request(cls="<fast/>"), INVALID, ["volume.spec.class", "unknown"]),
    "size zero": (volume_request(size=0), INVALID, ["storage_bytes", "greater than 0"]),
    "size negative": (volume_request(size=-GiB), INVALID, ["storage_bytes", "greater than 0"]),
    "size beyond free space": (volume_request(size=1 << 62), EXHAUSTED, ["storage_bytes", "free"]),
    "label with NUL": (volume_request(labels={"name": "a\x00b"}), INVALID, ["volume.metadata.labels", "NUL"]),
    "empty label key": (volume_request(labels={"": "x"}), INVALID, ["volume.metadata.labels", "empty"]),
    "annotations too large": (
        volume_request(annotations={f"k{i}": "x" * 60_000 for i in range(5)}),
        INVALID,
        ["volume.metadata.annotations", "bytes in total"],
    ),
    "missing image": (volume_request(image="no-such-image"), NOT_FOUND, ["image", "no-such-image"]),
    "image name with xml": (volume_request(image="<img>"), INVALID, ["image", "not a valid image name"]),
    "image path traversal": (
        volume_request(image="../../etc/passwd"),
        INVALID,
        ["image", "not a valid image name"],
    ),
    "missing snapshot": (volume_request(snapshot_id="0" * 32), NOT_FOUND, ["snapshot_id", "not found"]),
    # an id the runtime never issued is NOT_FOUND whatever its shape
    "snapshot id never issued": (volume_request(snapshot_id="a/b"), NOT_FOUND, ["snapshot_id", "not found"]),
    "image and snapshot": (
        volume_request(image="x", snapshot_id="0" * 32),
        INVALID,
        ["either an image or a snapshot"],
    ),
}


def assert_clean(rt: VolumeRuntimeProc) -> None:
    assert list(rt.stub.ListVolumes(vpb.ListVolumesRequest()).volumes) == []
    assert rt.files() == ([], [])


def test_bad_create_requests(runtime: VolumeRuntimeProc) -> None:
    # One runtime for every case keeps the test fast; each case checks it left nothing behind.
    failures = []
    for case, (request, code, words) in CREATE_CASES.items():
        try:
            runtime.stub.CreateVolume(request)
            failures.append(f"{case}: accepted")
            continue
        except grpc.RpcError as err:
            details = err.details() or ""
            if err.code() != code or not all(w in details for w in words):
                failures.append(f"{case}: got {err.code()} {details!r}")
        assert_clean(runtime)
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize(
    ("secret_data", "image", "code", "words"),
    [
        ({"other": b"k"}, "", INVALID, "encryption.secret_data: needs a non-empty 'encryptionKey'"),
        ({"encryptionKey": b"k" * 5000}, "", INVALID, "longer than 4096 bytes"),
        ({"encryptionKey": b"k"}, "missing", NOT_FOUND, "image_data_source.image"),
    ],
)
def test_bad_encrypted_volumes_are_refused_clearly(
    runtime: VolumeRuntimeProc, secret_data: dict[str, bytes], image: str, code: grpc.StatusCode, words: str
) -> None:
    request = volume_request(image=image)
    request.volume.spec.encryption.secret_data.update(secret_data)
    with pytest.raises(grpc.RpcError) as err:
        runtime.stub.CreateVolume(request)
    assert err.value.code() == code
    assert words in (err.value.details() or "")
    assert_clean(runtime)


def test_image_smaller_than_request_and_bad_image_file(runtime: VolumeRuntimeProc) -> None:
    with open(runtime.images / "big.raw", "wb") as fh:
        fh.truncate(64 << 20)
    (runtime.images / "junk.qcow2").write_bytes(b"QFI\xfb" + b"\0" * 100)  # a broken qcow2 header
    with pytest.raises(grpc.RpcError) as err:
        runtime.stub.CreateVolume(volume_request(size=32 << 20, image="big"))
    assert err.value.code() == INVALID and "smaller than the source" in (err.value.details() or "")
    with pytest.raises(grpc.RpcError) as err:
        runtime.stub.CreateVolume(volume_request(size=32 << 20, image="junk"))
    assert err.value.code() == INVALID
    assert "'junk' is unreadable" in (err.value.details() or "")
    assert_clean(runtime)


def test_client_supplied_id_is_ignored(runtime: VolumeRuntimeProc) -> None:
    request = volume_request(size=16 << 20)
    request.volume.metadata.id = "<volume name='../../x'/>"
    vol = runtime.stub.CreateVolume(request).volume
    assert vol.metadata.id != request.volume.metadata.id
    assert len(vol.metadata.id) == 32 and vol.metadata.id.isalnum()


@pytest.mark.parametrize(
    ("volume_id", "size", "code", "words"),
    [
        ("", 2 * GiB, INVALID, ["volume_id", "required"]),
        # An id the runtime never issued is NOT_FOUND whatever its shape: IronCore's poollet takes
        # NotFound as "gone" and would retry anything else forever.
        ("x" * 100, 2 * GiB, NOT_FOUND, ["volume_id", "not found"]),
        ("<a>", 2 * GiB, NOT_FOUND, ["volume_id", "not found"]),
        ("0" * 32, 2 * GiB, NOT_FOUND, ["volume_id", "not found"]),
    ],
)
def test_bad_expand_and_delete_ids(
    runtime: VolumeRuntimeProc, volume_id: str, size: int, code: grpc.StatusCode, words: list[str]
) -> None:
    for call in (
        lambda: runtime.stub.ExpandVolume(
            vpb.ExpandVolumeRequest(volume_id=volume_id, resources=vpb.VolumeResources(storage_bytes=size))
        ),
        lambda: runtime.stub.DeleteVolume(vpb.DeleteVolumeRequest(volume_id=volume_id)),
    ):
        with pytest.raises(grpc.RpcError) as err:
            call()
        assert err.value.code() == code
        assert all(w in (err.value.details() or "") for w in words), err.value.details()


def test_bad_expand_sizes_change_nothing(runtime: VolumeRuntimeProc) -> None:
    vid = runtime.stub.CreateVolume(volume_request(size=GiB)).volume.metadata.id
    for size, code in ((0, INVALID), (-1, INVALID), (GiB - 512, INVALID), (1 << 62, EXHAUSTED)):
        with pytest.raises(grpc.RpcError) as err:
            runtime.stub.ExpandVolume(
                vpb.ExpandVolumeRequest(volume_id=vid, resources=vpb.VolumeResources(storage_bytes=size))
            )
        assert err.value.code() == code, (size, err.value.details())
        assert "storage_bytes" in (err.value.details() or "")
    [vol] = runtime.stub.ListVolumes(vpb.ListVolumesRequest()).volumes
    assert vol.status.resources.storage_bytes == GiB
    assert vol.spec.resources.storage_bytes == GiB


def test_metadata_is_any_text_kept_verbatim_across_a_restart(runtime: VolumeRuntimeProc) -> None:
    """IRI label and annotation strings are unrestricted (IronCore copies what its objects carry);
    the volume runtime takes what the machine runtime takes, and keeps it exactly."""
    odd = "v<&>\"']]>\n é"
    labels, annotations = {"name": "<evil>&'", "a<b": odd}, {"]]>": odd}
    vol = runtime.stub.CreateVolume(
        volume_request(size=16 << 20, labels=labels, annotations=annotations)
    ).volume
    assert dict(vol.metadata.labels) == labels and dict(vol.metadata.annotations) == annotations
    flt = vpb.VolumeFilter(label_selector={"a<b": odd})
    assert [v.metadata.id for v in runtime.stub.ListVolumes(vpb.ListVolumesRequest(filter=flt)).volumes] == [
        vol.metadata.id
    ]
    snap = runtime.stub.CreateVolumeSnapshot(
        vpb.CreateVolumeSnapshotRequest(
            volume_snapshot=vpb.VolumeSnapshot(
                metadata={"labels": labels}, spec=vpb.VolumeSnapshotSpec(volume_id=vol.metadata.id)
            )
        )
    ).volume_snapshot
    runtime.kill9()
    runtime.start()
    [after] = runtime.stub.ListVolumes(vpb.ListVolumesRequest()).volumes
    assert dict(after.metadata.labels) == labels and dict(after.metadata.annotations) == annotations
    [snap_after] = runtime.stub.ListVolumeSnapshots(vpb.ListVolumeSnapshotsRequest()).volume_snapshots
    assert dict(snap_after.metadata.labels) == labels
    runtime.stub.DeleteVolumeSnapshot(vpb.DeleteVolumeSnapshotRequest(volume_snapshot_id=snap.metadata.id))
    runtime.stub.DeleteVolume(vpb.DeleteVolumeRequest(volume_id=vol.metadata.id))
    assert runtime.files() == ([], [])


def test_ids_never_issued_are_not_found_for_snapshots_and_list_nothing(runtime: VolumeRuntimeProc) -> None:
    for never_issued in ("<a>&", "a/b", "0" * 32):
        with pytest.raises(grpc.RpcError) as err:
            runtime.stub.DeleteVolumeSnapshot(
                vpb.DeleteVolumeSnapshotRequest(volume_snapshot_id=never_issued)
            )
        assert err.value.code() == NOT_FOUND and "not found" in (err.value.details() or "")
        with pytest.raises(grpc.RpcError) as err:
            runtime.stub.CreateVolumeSnapshot(
                vpb.CreateVolumeSnapshotRequest(
                    volume_snapshot=vpb.VolumeSnapshot(spec=vpb.VolumeSnapshotSpec(volume_id=never_issued))
                )
            )
        assert err.value.code() == NOT_FOUND and "volume_id" in (err.value.details() or "")
        flt = vpb.VolumeSnapshotFilter(id=never_issued)
        assert not runtime.stub.ListVolumeSnapshots(
            vpb.ListVolumeSnapshotsRequest(filter=flt)
        ).volume_snapshots
