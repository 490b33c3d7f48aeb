"""``ironpool image push``: publish a disk (qcow2 or raw) and/or a kernel with its initramfs to an
OCI registry in IronCore's image format.

The image is laid out as an OCI image layout in a scratch folder (blobs linked, not copied, so a
large disk costs one read to hash it) and uploaded by skopeo. Two layouts:

- ``classic`` (default): one image manifest as IronCore's ``ironcore-image`` builds it, config
  ``application/vnd.ironcore.image.config.v1+json``, layers ``rootfs`` / ``kernel`` / ``initramfs``;
  what IronCore's libvirt provider and ironpool both boot;
- ``index``: the multi-architecture layout, an image index with one manifest for this platform,
  annotated ``variant: virtualization``, its disk as ``disk.img``.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from . import diskfile, mediatypes
from .download import sha256_file
from .errors import InvalidImageName
from .reference import parse
from .registry import Credentials, RegistryOptions, Skopeo

Layout = Literal["classic", "index"]
REF_NAME = "org.opencontainers.image.ref.name"
TITLE = "org.opencontainers.image.title"


@dataclass(frozen=True)
class ImageFiles:
    """What to publish: a disk, a kernel with its initramfs, or both, and a kernel command line."""

    disk: Path | None = None
    kernel: Path | None = None
    initrd: Path | None = None
    cmdline: str = ""

    @classmethod
    def from_path(cls, path: Path, kernel: Path | None = None, initrd: Path | None = None,
                  cmdline: str | None = None) -> ImageFiles:
        """A disk file, or a kernel bundle folder (``kernel``, ``initrd``, optional ``cmdline``, as
        in the image catalog); explicit ``kernel``/``initrd``/``cmdline`` add to or override it."""
        if path.is_dir():
            k, i, c = path / "kernel", path / "initrd", path / "cmdline"
            if not k.is_file():
                raise InvalidImageName(f"FILE: folder {path} has no 'kernel' file (a kernel bundle)")
            return cls(None, kernel or k, initrd or (i if i.is_file() else None),
                       cmdline if cmdline is not None else (c.read_text().strip() if c.is_file() else ""))
        if not path.is_file():
            raise InvalidImageName(f"FILE: {path} is neither a disk file nor a kernel bundle folder")
        return cls(path, kernel, initrd, cmdline or "")


def _blob(
    layout: Path, src: Path, media_type: str, progress: Callable[[str], None] | None
) -> mediatypes.Descriptor:
    """Hash ``src`` and link it into the layout's blobs; its descriptor."""
    if progress is not None:
        progress(f"hashing {src} ({src.stat().st_size / 1024**2:.1f} MiB)")
    digest = sha256_file(src)
    dest = layout / "blobs" / "sha256" / digest.removeprefix("sha256:")
    if not dest.exists():
        os.symlink(src.resolve(), dest)
    return mediatypes.Descriptor(media_type, digest, src.stat().st_size, {TITLE: src.name})


def _json_blob(layout: Path, data: bytes, media_type: str) -> mediatypes.Descriptor:
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    (layout / "blobs" / "sha256" / digest.removeprefix("sha256:")).write_bytes(data)
    return mediatypes.Descriptor(media_type, digest, len(data), {})


def push(
    reference: str,
    files: ImageFiles,
    credentials: Credentials | None = None,
    options: RegistryOptions | None = None,
    layout: Layout = "classic",
    progress: Callable[[str], None] | None = None,
) -> str:
    """Publish ``files`` as ``reference`` (``registry/repo:tag``); the digest the registry stored."""
    ref = parse(reference)
    if ref.kind != "oci" or ref.digest:
        raise InvalidImageName(f"REF: {reference!r} must be registry[:port]/repository[:tag], no digest")
    if files.disk is None and files.kernel is None:
        raise InvalidImageName("FILE: nothing to publish (no disk and no kernel)")
    if files.kernel is not None and files.initrd is None and files.disk is None:
        raise InvalidImageName("--initrd: a kernel without a disk needs its initramfs")
    if files.disk is not None:
        diskfile.inspect(files.disk, f"disk {files.disk}")
    skopeo = Skopeo(options)
    with tempfile.TemporaryDirectory(prefix="ironpool-push-") as tmp:
        root = Path(tmp)
        (root / "blobs" / "sha256").mkdir(parents=True)
        (root / "oci-layout").write_text(json.dumps({"imageLayoutVersion": "1.0.0"}))
        layers = []
        if files.disk is not None:
            media = mediatypes.ROOTFS if layout == "classic" else mediatypes.DISK_IMG
            layers.append(_blob(root, files.disk, media, progress))
        if files.kernel is not None:
            layers.append(_blob(root, files.kernel, mediatypes.KERNEL, progress))
        if files.initrd is not None:
            layers.append(_blob(root, files.initrd, mediatypes.INITRAMFS, progress))
        config_doc = json.dumps({"commandLine": files.cmdline} if files.cmdline else {}).encode()
        config = _json_blob(root, config_doc, mediatypes.CONFIG)
        variant = {mediatypes.VARIANT_ANNOTATION: mediatypes.VIRTUALIZATION}
        annotations = variant if layout == "index" else None
        manifest_doc = mediatypes.manifest_json(config, layers, annotations)
        manifest = _json_blob(root, manifest_doc, mediatypes.OCI_MANIFEST)
        top = manifest
        if layout == "index":
            arch = mediatypes.GOARCH.get(platform.machine(), platform.machine())
            index_doc = {"schemaVersion": 2, "mediaType": mediatypes.OCI_INDEX, "manifests": [{
                "mediaType": mediatypes.OCI_MANIFEST, "digest": manifest.digest, "size": manifest.size,
                "platform": {"architecture": arch, "os": "linux"},
                "annotations": {mediatypes.VARIANT_ANNOTATION: mediatypes.VIRTUALIZATION},
            }]}
            top = _json_blob(root, json.dumps(index_doc, sort_keys=True).encode(), mediatypes.OCI_INDEX)
        (root / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": [{
            "mediaType": top.media_type, "digest": top.digest, "size": top.size,
            "annotations": {REF_NAME: "image"},
        }]}))
        if progress is not None:
            progress(f"uploading to {ref.text}")
        digest_file = root / "digest"
        skopeo.push_layout(root, ref, credentials, digest_file)
        pushed = digest_file.read_text().strip() if digest_file.exists() else top.digest
    return pushed
