"""Helpers for the volume runtime tests: the runtime subprocess and request builders."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from ironpool.iri.gen.volume.v1alpha1 import api_pb2 as vpb
from ironpool.iri.gen.volume.v1alpha1 import api_pb2_grpc as vgrpc

from tests.helpers.runtimes import LIBVIRT_URI, RuntimeProcess

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


@dataclass(kw_only=True)
class VolumeRuntimeProc(RuntimeProcess):
    """One runtime subprocess and its pool; restartable so tests can kill -9 it."""

    what: ClassVar[str] = "volume runtime"

    pool_name: str
    pool_path: Path
    socket: Path
    classes: Path
    images: Path
    extra_args: list[str] = field(default_factory=list)

    @property
    def address(self) -> str:
        return f"unix://{self.socket}"

    @property
    def target(self) -> str:
        return self.address

    @property
    def meta_dir(self) -> Path:
        return self.pool_path / ".ironpool-meta"

    def argv(self) -> list[str]:
        return [
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
            "--image-cache",
            str(self.workdir / "image-cache"),
            "--address",
            self.address,
            *self.extra_args,
        ]

    def probe(self) -> object:
        return self.stub.Version(vpb.VersionRequest(), timeout=1)

    @property
    def stub(self) -> vgrpc.VolumeRuntimeStub:
        assert self.channel is not None
        return vgrpc.VolumeRuntimeStub(self.channel)

    def files(self) -> tuple[list[str], list[str]]:
        """Files in the pool folder (besides the metadata folder) and in the metadata folder (besides
        the runtime's lock and owner record)."""
        pool = sorted(p.name for p in self.pool_path.iterdir() if p.name != ".ironpool-meta")
        meta = (
            sorted(p.name for p in self.meta_dir.iterdir() if p.name not in ("runtime.lock", "OWNER"))
            if self.meta_dir.exists()
            else []
        )
        return pool, meta


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
