"""A snapshot of a volume a running QEMU holds open: the runtime asks the domain's guest agent to
freeze the guest's filesystems, and without an agent answering takes a crash-consistent copy, leaving
the domain running. The domain here is a real QEMU (TCG) with the volume as its disk and a guest
agent channel, but no operating system (no guest boots: nothing answers on the channel)."""

from __future__ import annotations

import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path

import grpc
import libvirt
import pytest
from ironpool.iri.gen.volume.v1alpha1 import api_pb2 as vpb
from volume_runtime_helpers import VolumeRuntimeProc, volume_request

from tests.helpers.runtimes import LIBVIRT_URI

pytestmark = pytest.mark.libvirt
MiB = 1 << 20


def domain_xml(name: str, disk: str) -> str:
    return f"""<domain type='qemu'>
  <name>{name}</name>
  <memory unit='MiB'>32</memory>
  <vcpu>1</vcpu>
  <os><type arch='x86_64'>hvm</type></os>
  <devices>
    <disk type='file' device='disk'>
      <driver name='qemu' type='qcow2'/>
      <source file='{disk}'/>
      <target dev='vda' bus='virtio'/>
    </disk>
    <channel type='unix'>
      <target type='virtio' name='org.qemu.guest_agent.0'/>
    </channel>
  </devices>
</domain>"""


@pytest.fixture
def conn() -> Iterator[libvirt.virConnect]:
    c = libvirt.open(LIBVIRT_URI)
    try:
        yield c
    finally:
        c.close()


def test_snapshot_of_a_disk_held_by_a_running_domain(runtime: VolumeRuntimeProc, conn: libvirt.virConnect,
                                                      tmp_path: Path) -> None:
    src = runtime.stub.CreateVolume(volume_request(size=16 * MiB)).volume
    path = src.status.access.attributes["path"]
    subprocess.run(["qemu-io", "-f", "qcow2", "-c", f"write -P 0x6b {MiB} {MiB}", path],
                   check=True, capture_output=True)
    name = f"ironpool-snaptest-{secrets.token_hex(4)}"
    # Transient, and destroyed with this connection should the test die: never left behind.
    dom = conn.createXML(domain_xml(name, path), libvirt.VIR_DOMAIN_START_AUTODESTROY)
    try:
        assert dom.isActive()
        snap = runtime.stub.CreateVolumeSnapshot(vpb.CreateVolumeSnapshotRequest(
            volume_snapshot=vpb.VolumeSnapshot(spec=vpb.VolumeSnapshotSpec(volume_id=src.metadata.id)))
        ).volume_snapshot
        assert snap.status.state == vpb.VOLUME_SNAPSHOT_READY
        assert dom.isActive(), "the snapshot stopped the domain"
        log = runtime.log_text()
        assert f"domain {name}: no guest agent froze its filesystems" in log
        assert "the copy is crash-consistent" in log
        with pytest.raises(grpc.RpcError) as err:  # still the running domain's disk
            runtime.stub.DeleteVolume(vpb.DeleteVolumeRequest(volume_id=src.metadata.id))
        assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        restored = runtime.stub.CreateVolume(volume_request(size=16 * MiB, snapshot_id=snap.metadata.id))
        raw = tmp_path / "restored.raw"
        restored_path = restored.volume.status.access.attributes["path"]
        subprocess.run(["qemu-img", "convert", "-U", "-O", "raw", restored_path, str(raw)],
                       check=True, capture_output=True)
        with raw.open("rb") as f:
            f.seek(MiB)
            assert f.read(MiB) == b"\x6b" * MiB
    finally:
        dom.destroy()
    for vol in (src, restored.volume):
        runtime.stub.DeleteVolume(vpb.DeleteVolumeRequest(volume_id=vol.metadata.id))
    runtime.stub.DeleteVolumeSnapshot(vpb.DeleteVolumeSnapshotRequest(volume_snapshot_id=snap.metadata.id))
    assert runtime.files() == ([], [])
