"""Encrypted volumes in the volume runtime: a LUKS qcow2 made with the request's key, whose file
holds no plaintext, readable with the key only, and work that would need the key later refused."""

from __future__ import annotations

import base64
import json
import subprocess
from pathlib import Path

import grpc
import pytest
from ironpool.iri.gen.volume.v1alpha1 import api_pb2 as vpb
from volume_runtime_helpers import GiB, VolumeRuntimeProc, volume_request

from tests.helpers.luks_io import luks_read, luks_write

pytestmark = pytest.mark.libvirt
KEY = b"volume-key-7f3a9c1e5b"
MiB = 1 << 20
PATTERN = b"IRONPOOL-PLAINTEXT-PATTERN-" * 64


def _encrypted(runtime: VolumeRuntimeProc) -> vpb.Volume:
    request = volume_request(size=GiB // 16)
    request.volume.spec.encryption.secret_data["encryptionKey"] = KEY
    return runtime.stub.CreateVolume(request).volume


def test_encrypted_volume_is_luks_with_no_plaintext_and_no_key_in_the_log(
    runtime: VolumeRuntimeProc, tmp_path: Path
) -> None:
    vol = _encrypted(runtime)
    access = vol.status.access
    assert access.attributes["encryption"] == "luks"
    path = Path(access.attributes["path"])
    info = subprocess.run(["qemu-img", "info", "--output=json", str(path)], capture_output=True, text=True,
                          check=True).stdout  # fmt: skip
    assert '"encrypted": true' in info and '"format": "luks"' in info
    # SHA-512 for its PBKDF: QEMU could not time SHA-256's first round on a tick-accounting kernel.
    assert json.loads(info)["format-specific"]["data"]["encrypt"]["hash-alg"] == "sha512"
    assert not access.secret_data  # the key goes back to nobody

    luks_write(path, KEY, PATTERN, tmp_path / "pattern")
    assert luks_read(path, KEY, 64) == PATTERN[:64]
    assert PATTERN[:27] not in path.read_bytes()  # the file holds ciphertext only
    with pytest.raises(RuntimeError):
        luks_read(path, b"another-key", 16)

    for text in [p.read_bytes() for p in runtime.logs] + [p.read_bytes() for p in runtime.meta_dir.iterdir()
                                                           if p.is_file()]:
        assert KEY not in text and base64.b64encode(KEY) not in text

    # Growing it offline or copying it would need the key, which the runtime does not keep.
    with pytest.raises(grpc.RpcError) as grow:
        grown = vpb.VolumeResources(storage_bytes=GiB // 8)
        runtime.stub.ExpandVolume(vpb.ExpandVolumeRequest(volume_id=vol.metadata.id, resources=grown))
    assert grow.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "encrypted" in (grow.value.details() or "")
    with pytest.raises(grpc.RpcError) as snap:
        request = vpb.CreateVolumeSnapshotRequest(
            volume_snapshot=vpb.VolumeSnapshot(spec=vpb.VolumeSnapshotSpec(volume_id=vol.metadata.id)))
        runtime.stub.CreateVolumeSnapshot(request)
    assert snap.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "encrypted" in (snap.value.details() or "")

    runtime.stub.DeleteVolume(vpb.DeleteVolumeRequest(volume_id=vol.metadata.id))
    assert not path.exists()


def test_encrypted_volume_from_an_image_holds_its_data_under_the_key(
    runtime: VolumeRuntimeProc, tmp_path: Path
) -> None:
    with open(runtime.images / "patterned.raw", "wb") as fh:
        fh.write(PATTERN)
        fh.truncate(4 * MiB)
    request = volume_request(size=GiB // 16, image="patterned")
    request.volume.spec.encryption.secret_data["encryptionKey"] = KEY
    vol = runtime.stub.CreateVolume(request).volume
    path = Path(vol.status.access.attributes["path"])
    assert vol.status.access.attributes["encryption"] == "luks"
    assert luks_read(path, KEY, 64) == PATTERN[:64]
    assert PATTERN[:27] not in path.read_bytes()


def test_encrypted_volume_stays_encrypted_across_a_restart(runtime: VolumeRuntimeProc) -> None:
    vol = _encrypted(runtime)
    runtime.stop()
    runtime.start()
    listed = runtime.stub.ListVolumes(vpb.ListVolumesRequest(filter=vpb.VolumeFilter(id=vol.metadata.id)))
    (again,) = listed.volumes
    assert again.status.access.attributes["encryption"] == "luks"
