"""IronCore's OS image format on OCI: which manifests and layers make an image, and what each is.

Two generations are read:

- the classic ``ironcore-image`` format (what IronCore's libvirt provider pulls): one OCI image
  manifest with config ``application/vnd.ironcore.image.config.v1+json`` (JSON ``commandLine``,
  the kernel command line) and layers ``…image.rootfs`` (a bootable disk), ``…image.kernel``,
  ``…image.initramfs``, ``…image.squashfs``, ``…image.uki``, ``…image.iso`` (and the older
  ``v1alpha1`` names);
- the multi-architecture layout: an OCI image index whose manifests carry a ``platform`` and, per
  boot variant, an annotation ``variant`` (``virtualization`` or ``metal``), each manifest with the
  disk as ``…image.disk.img``; the ``osboot`` names (``application/vnd.ironcore.osboot.…``) of the
  same layout are read too.

A machine boots the disk, or the kernel and initramfs directly (with the disk attached when there
is one). Layer types IronCore does not define are refused, as IronCore's resolver does.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .errors import NotAnImage

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
OSBOOT_ARTIFACT = "application/vnd.ironcore.osboot.artifacts.v1+json"
MANIFEST_TYPES = (OCI_MANIFEST, OSBOOT_ARTIFACT)
INDEX_TYPES = (OCI_INDEX, DOCKER_LIST)

CONFIG = "application/vnd.ironcore.image.config.v1+json"
CONFIG_TYPES = (CONFIG, "application/vnd.ironcore.image.config.v1alpha1+json",
                "application/vnd.ironcore.osboot.config.v1+json")

ROOTFS = "application/vnd.ironcore.image.rootfs"
DISK_IMG = "application/vnd.ironcore.image.disk.img"
KERNEL = "application/vnd.ironcore.image.kernel"
INITRAMFS = "application/vnd.ironcore.image.initramfs"

Role = Literal["disk", "kernel", "initrd", "unused"]
LAYER_ROLES: dict[str, Role] = {
    ROOTFS: "disk",
    DISK_IMG: "disk",
    "application/vnd.ironcore.osboot.disk.img": "disk",
    "application/vnd.ironcore.image.rootfs.v1alpha1.rootfs": "disk",
    KERNEL: "kernel",
    "application/vnd.ironcore.osboot.kernel": "kernel",
    "application/vnd.ironcore.image.vmlinuz.v1alpha1.vmlinuz": "kernel",
    INITRAMFS: "initrd",
    "application/vnd.ironcore.osboot.initramfs": "initrd",
    "application/vnd.ironcore.image.initramfs.v1alpha1.initramfs": "initrd",
    "application/vnd.ironcore.image.squashfs": "unused",
    "application/vnd.ironcore.osboot.squashfs": "unused",
    "application/vnd.ironcore.image.squashfs.v1alpha1.squashfs": "unused",
    "application/vnd.ironcore.image.uki": "unused",
    "application/vnd.ironcore.image.iso": "unused",
}
VARIANT_ANNOTATION = "variant"
VIRTUALIZATION = "virtualization"
_DIGEST = re.compile(r"^sha256:[a-f0-9]{64}$")
# Go's architecture names, as OCI platforms use them.
GOARCH = {"x86_64": "amd64", "aarch64": "arm64", "amd64": "amd64", "arm64": "arm64"}


@dataclass(frozen=True)
class Descriptor:
    """A checked OCI descriptor: media type, ``sha256:`` digest (safe as a file name), size."""

    media_type: str
    digest: str
    size: int
    annotations: Mapping[str, str]

    @property
    def hex(self) -> str:
        return self.digest.removeprefix("sha256:")


@dataclass(frozen=True)
class Layout:
    """What an image manifest holds: config, disk, kernel and initramfs descriptors."""

    config: Descriptor
    disk: Descriptor | None
    kernel: Descriptor | None
    initrd: Descriptor | None

    @property
    def blobs(self) -> list[Descriptor]:
        """The blobs a machine needs (unused layers such as squashfs are not pulled)."""
        return [d for d in (self.config, self.disk, self.kernel, self.initrd) if d is not None]


def descriptor(raw: Any, where: str) -> Descriptor:
    if not isinstance(raw, dict):
        raise NotAnImage(f"{where} is not an OCI descriptor")
    digest, size, media_type = raw.get("digest"), raw.get("size"), raw.get("mediaType", "")
    if not isinstance(digest, str) or not _DIGEST.match(digest):
        raise NotAnImage(f"{where} has digest {str(digest)[:80]!r}; only sha256 digests are supported")
    if not isinstance(size, int) or size < 0 or not isinstance(media_type, str):
        raise NotAnImage(f"{where} has no valid size or media type")
    annotations = raw.get("annotations") or {}
    if not isinstance(annotations, dict):
        annotations = {}
    return Descriptor(media_type, digest, size, {str(k): str(v) for k, v in annotations.items()})


def parse_json(data: bytes, what: str) -> dict[str, Any]:
    try:
        doc = json.loads(data)
    except ValueError as exc:
        raise NotAnImage(f"{what} is not JSON: {exc}") from exc
    if not isinstance(doc, dict):
        raise NotAnImage(f"{what} is not a JSON object")
    return doc


def media_type(doc: Mapping[str, Any]) -> str:
    """A manifest's media type: its own field, or guessed from its shape as registries do."""
    declared = doc.get("mediaType")
    if isinstance(declared, str) and declared:
        return declared
    return OCI_INDEX if "manifests" in doc else OCI_MANIFEST


def is_index(doc: Mapping[str, Any]) -> bool:
    return media_type(doc) in INDEX_TYPES


def select_manifest(index: Mapping[str, Any], architecture: str = "x86_64") -> Descriptor:
    """The manifest of ``index`` for ``linux/<architecture>``, preferring the virtualization variant."""
    arch = GOARCH.get(architecture, architecture)
    raw = index.get("manifests")
    if not isinstance(raw, list) or not raw:
        raise NotAnImage("the image index lists no manifests")
    candidates: list[Descriptor] = []
    seen: list[str] = []
    for i, entry in enumerate(raw):
        desc = descriptor(entry, f"index manifest {i}")
        platform = entry.get("platform") if isinstance(entry, dict) else None
        platform = platform if isinstance(platform, dict) else {}
        p_os, p_arch = str(platform.get("os", "linux")), str(platform.get("architecture", arch))
        seen.append(f"{p_os}/{p_arch}")
        if p_os == "linux" and p_arch == arch and desc.media_type in MANIFEST_TYPES:
            candidates.append(desc)
    if not candidates:
        raise NotAnImage(f"the image index has no manifest for linux/{arch} (it has {', '.join(seen)})")
    for desc in candidates:
        if desc.annotations.get(VARIANT_ANNOTATION) == VIRTUALIZATION:
            return desc
    return candidates[0]


def variant(doc: Mapping[str, Any]) -> str:
    """The boot variant a manifest declares in its annotations ("" when it says none)."""
    annotations = doc.get("annotations")
    return str(annotations.get(VARIANT_ANNOTATION, "")) if isinstance(annotations, dict) else ""


def layout(manifest: Mapping[str, Any]) -> Layout:
    """The IronCore image a manifest describes; NotAnImage saying why when it is none."""
    kind = media_type(manifest)
    if kind not in MANIFEST_TYPES:
        raise NotAnImage(f"manifest type {kind!r} is not an IronCore image (an OCI image manifest)")
    config = descriptor(manifest.get("config"), "the manifest's config")
    if config.media_type not in CONFIG_TYPES:
        raise NotAnImage(
            f"config media type {config.media_type!r} is not an IronCore image config "
            f"({CONFIG}): this artifact is not an IronCore OS image"
        )
    found: dict[Role, Descriptor] = {}
    layers = manifest.get("layers")
    if not isinstance(layers, list):
        raise NotAnImage("the manifest lists no layers")
    for i, raw in enumerate(layers):
        desc = descriptor(raw, f"layer {i}")
        role = LAYER_ROLES.get(desc.media_type)
        if role is None:
            raise NotAnImage(
                f"layer {i} has media type {desc.media_type!r}, which IronCore images do not use"
            )
        if role != "unused":
            found.setdefault(role, desc)  # the current media type comes first where both are present
    if "disk" not in found and "kernel" not in found:
        raise NotAnImage("the image has neither a disk (rootfs) nor a kernel layer")
    if "kernel" in found and "initrd" not in found and "disk" not in found:
        raise NotAnImage("the image has a kernel but no initramfs and no disk to boot")
    return Layout(config, found.get("disk"), found.get("kernel"), found.get("initrd"))


def command_line(config: bytes) -> str:
    """The kernel command line from an image config blob ("" when it sets none)."""
    doc = parse_json(config, "the image config")
    value = doc.get("commandLine", "")
    if not isinstance(value, str):
        raise NotAnImage("the image config's commandLine is not a string")
    return value


def manifest_json(config: Descriptor, layers: Sequence[Descriptor],
                  annotations: Mapping[str, str] | None = None) -> bytes:
    """An OCI image manifest for an IronCore image (what ``ironpool image push`` uploads)."""
    def desc(d: Descriptor) -> dict[str, Any]:
        out: dict[str, Any] = {"mediaType": d.media_type, "digest": d.digest, "size": d.size}
        if d.annotations:
            out["annotations"] = dict(d.annotations)
        return out

    doc: dict[str, Any] = {"schemaVersion": 2, "mediaType": OCI_MANIFEST, "config": desc(config),
                           "layers": [desc(d) for d in layers]}
    if annotations:
        doc["annotations"] = dict(annotations)
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
