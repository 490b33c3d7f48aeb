"""Helpers for the volume runtime tests: the runtime subprocess, pool teardown, request builders."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import pytest
from ironpool.iri.gen.volume.v1alpha1 import api_pb2 as vpb
from ironpool.iri.gen.volume.v1alpha1 import api_pb2_grpc as vgrpc

LIBVIRT_URI = "qemu:///system"
GiB = 1 << 30

CLASSES_YAML = """\
apiVersion: storage.ironcore.dev/v1alpha1
kind: VolumeClass
metadata:
  name: fast
capabilities:
  tps: 100Mi
  iops: "1000"
---
apiVersion: storage.ironcore.dev/v1alpha1
kind: VolumeClass
metadata:
  name: plain
"""


def libvirt_ok() -> bool:
    try:
        import libvirt

        libvirt.registerErrorHandler(lambda _c, _e: None, None)
        libvirt.open(LIBVIRT_URI).close()
        return True
    except Exception:
        return False


@dataclass
class VolumeRuntimeProc:
    """One runtime subprocess and its pool; restartable so tests can kill -9 it."""

    workdir: Path
    pool_name: str
    pool_path: Path
    socket: Path
    classes: Path
    images: Path
    process: subprocess.Popen[bytes] | None = None
    channel: grpc.Channel | None = None
    logs: list[Path] = field(default_factory=list)

    @property
    def address(self) -> str:
        return f"unix://{self.socket}"

    @property
    def meta_dir(self) -> Path:
        return self.pool_path / ".ironpool-meta"

    def start(self, timeout: float = 30.0) -> None:
        log_path = self.workdir / f"runtime-{len(self.logs)}.log"
        self.logs.append(log_path)
        with open(log_path, "wb") as log:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "ironpool.cli.main",
                    "volume-runtime",
                    "--libvirt-uri",
                    LIBVIRT_URI,
                    "--storage-pool",
                    self.pool_name,
                    "--pool-path",
                    str(self.pool_path),
                    "--classes",
                    str(self.classes),
                    "--images",
                    str(self.images),
                    "--address",
                    self.address,
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        self.channel = grpc.insecure_channel(self.address)
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                pytest.fail(f"volume runtime exited with {self.process.returncode}: {self.log_text()}")
            try:
                vgrpc.VolumeRuntimeStub(self.channel).Version(vpb.VersionRequest(), timeout=1)
                return
            except grpc.RpcError:
                if time.monotonic() > deadline:
                    pytest.fail(f"volume runtime not serving after {timeout}s: {self.log_text()}")
                time.sleep(0.05)

    def log_text(self) -> str:
        return self.logs[-1].read_text()[-3000:] if self.logs else ""

    @property
    def stub(self) -> vgrpc.VolumeRuntimeStub:
        assert self.channel is not None
        return vgrpc.VolumeRuntimeStub(self.channel)

    def kill9(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)
        self._close_channel()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._close_channel()

    def _close_channel(self) -> None:
        if self.channel is not None:
            self.channel.close()
            self.channel = None

    def files(self) -> tuple[list[str], list[str]]:
        """Files in the pool folder (besides the metadata folder) and in the metadata folder."""
        pool = sorted(p.name for p in self.pool_path.iterdir() if p.name != ".ironpool-meta")
        meta = (
            sorted(p.name for p in self.meta_dir.iterdir() if p.name != "runtime.lock")
            if self.meta_dir.exists()
            else []
        )
        return pool, meta


def destroy_pool(name: str) -> None:
    """Remove a test pool: its volumes, then the pool definition."""
    import libvirt

    conn = libvirt.open(LIBVIRT_URI)
    try:
        pool = conn.storagePoolLookupByName(name)
    except libvirt.libvirtError:
        conn.close()
        return
    try:
        if pool.isActive():
            pool.refresh(0)
            for vol in pool.listAllVolumes(0):
                with contextlib.suppress(libvirt.libvirtError):
                    vol.delete(0)
            pool.destroy()
        pool.undefine()
    finally:
        conn.close()


def volume_request(
    cls: str = "fast",
    size: int = GiB,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    image: str = "",
    snapshot_id: str = "",
) -> vpb.CreateVolumeRequest:
    spec = vpb.VolumeSpec(resources=vpb.VolumeResources(storage_bytes=size))
    setattr(spec, "class", cls)
    if image:
        spec.volume_data_source.image_data_source.image = image
    if snapshot_id:
        spec.volume_data_source.snapshot_data_source.snapshot_id = snapshot_id
    vol = vpb.Volume(spec=spec)
    vol.metadata.labels.update(labels or {})
    vol.metadata.annotations.update(annotations or {})
    return vpb.CreateVolumeRequest(volume=vol)
