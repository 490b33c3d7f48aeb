"""Encrypted volumes attached to a machine on real libvirt/QEMU: the guest reads what was written
through the key, the file on the host holds no plaintext, the libvirt secret holding the key exists
only while the volume is attached (in libvirtd's memory, unreadable), and the key is in no log."""

from __future__ import annotations

import base64
import shutil
from collections.abc import Iterator
from pathlib import Path

import grpc
import libvirt
import pytest
from ironpool.iri.gen.machine.v1alpha1 import api_pb2 as mpb
from ironpool.runtime.volume.luks import format_luks
from machine_runtime_helpers import RuntimeProc, machine_request, session_domains

from tests.helpers.luks_io import luks_write
from tests.helpers.qemu_dirs import qemu_tmpdir
from tests.helpers.runtimes import LIBVIRT_URI
from tests.helpers.wait import wait_for

MiB = 1 << 20
KEYS = {"data": b"first-key-0c8e2d", "hot": b"second-key-91ab4f"}
PATTERNS = {"data": b"IRONPOOL-ENCRYPTED-FIRST-" * 80, "hot": b"IRONPOOL-ENCRYPTED-HOTPLUG-" * 80}
SECRET_FILE_DIRS = (Path("/etc/libvirt/secrets"), Path("/var/lib/libvirt/secrets"))


@pytest.fixture
def volume_files() -> Iterator[dict[str, Path]]:
    """Two LUKS qcow2 volumes made as the volume runtime makes them, each holding its pattern."""
    folder = qemu_tmpdir("ime-")
    files = {}
    for name, key in KEYS.items():
        files[name] = folder / f"{name}.qcow2"
        format_luks(str(files[name]), 64 * MiB, key)
        luks_write(files[name], key, PATTERNS[name], folder / "pattern")
    (folder / "pattern").unlink()
    try:
        yield files
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _volume(name: str, device: str, path: Path, key: bytes | None) -> mpb.Volume:
    conn = mpb.VolumeConnection(
        driver="ironpool-local", handle=name, effective_storage_bytes=64 * MiB,
        attributes={"path": str(path), "format": "qcow2", "encryption": "luks"},
    )  # fmt: skip
    if key is not None:
        conn.encryption_data["encryptionKey"] = key
    return mpb.Volume(name=name, device=device, connection=conn)


def _secrets(machine_id: str) -> dict[str, str]:
    """This machine's libvirt secrets: description -> UUID (others' are left alone)."""
    conn = libvirt.open(LIBVIRT_URI)
    try:
        return {
            s.XMLDesc(0).split("<description>")[1].split("</description>")[0]: s.UUIDString()
            for s in conn.listAllSecrets(0)
            if f"<description>ironpool-{machine_id} " in s.XMLDesc(0)
        }
    finally:
        conn.close()


def _console(runtime: RuntimeProc, machine_id: str) -> str:
    path = runtime.console_log(machine_id)
    return path.read_text(errors="replace") if path.exists() else ""


def test_encrypted_volume_needs_its_key_and_leaves_nothing_without(
    runtime: RuntimeProc, test_session: str, volume_files: dict[str, Path]
) -> None:
    before = set(session_domains(test_session))
    req = machine_request(test_session, power=mpb.POWER_OFF)
    req.machine.spec.volumes.append(_volume("data", "odb", volume_files["data"], None))
    with pytest.raises(grpc.RpcError) as exc:
        runtime.stub.CreateMachine(req)
    assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "machine.spec.volumes[1].connection.encryption_data" in (exc.value.details() or "")
    assert set(session_domains(test_session)) == before


def test_encrypted_volumes_are_read_by_the_guest_through_a_secret_that_lives_while_attached(
    runtime: RuntimeProc, test_session: str, volume_files: dict[str, Path]
) -> None:
    req = machine_request(test_session)
    req.machine.spec.volumes.append(_volume("data", "odb", volume_files["data"], KEYS["data"]))
    mid = runtime.stub.CreateMachine(req).machine.metadata.id
    try:
        _check_attached(runtime, mid, volume_files)
    finally:
        runtime.stub.DeleteMachine(mpb.DeleteMachineRequest(machine_id=mid))
        wait_for(lambda: runtime.machine(mid) is None, 60, "the machine to be gone")
    assert _secrets(mid) == {}  # removed with the machine

    logs = [*runtime.logs, Path(f"/var/log/libvirt/qemu/ironpool-{mid}.log")]
    for log in logs:
        text = log.read_bytes() if log.exists() else b""
        for key in KEYS.values():
            assert key not in text and base64.b64encode(key) not in text, f"key in {log}"


def _check_attached(runtime: RuntimeProc, mid: str, files: dict[str, Path]) -> None:
    # The guest reads the first volume's pattern: QEMU opened the LUKS disk with the key.
    wait_for(lambda: "starts with: IRONPOOL-ENCRYPTED-FIRST-" in _console(runtime, mid), 90,
             "the guest to read the encrypted volume")  # fmt: skip
    secrets = _secrets(mid)
    assert list(secrets) == [f"ironpool-{mid} volume data"]
    conn = libvirt.open(LIBVIRT_URI)
    try:
        with pytest.raises(libvirt.libvirtError):  # private: libvirt never gives the key back
            conn.secretLookupByUUIDString(secrets[f"ironpool-{mid} volume data"]).value()
    finally:
        conn.close()
    for folder in SECRET_FILE_DIRS:  # ephemeral: not on libvirt's disk either
        assert not list(folder.glob(f"{secrets[f'ironpool-{mid} volume data']}*"))
    for name, path in files.items():
        assert PATTERNS[name][:26] not in path.read_bytes(), f"plaintext in {path}"

    # Hot-plugged: its own secret while attached, gone once detached.
    runtime.stub.AttachVolume(mpb.AttachVolumeRequest(
        machine_id=mid, volume=_volume("hot", "odc", files["hot"], KEYS["hot"])))
    wait_for(lambda: "starts with: IRONPOOL-ENCRYPTED-HOTPLUG-" in _console(runtime, mid), 60,
             "the guest to read the hot-plugged encrypted volume")  # fmt: skip
    assert set(_secrets(mid)) == {f"ironpool-{mid} volume data", f"ironpool-{mid} volume hot"}
    runtime.stub.DetachVolume(mpb.DetachVolumeRequest(machine_id=mid, name="hot"))
    assert set(_secrets(mid)) == {f"ironpool-{mid} volume data"}
