"""Fast checks of the image pieces that need no registry: references, IronCore's media types,
skopeo's failures, pull secrets, and the cache's users and collection."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from ironpool.runtime.images import errors, mediatypes
from ironpool.runtime.images.cache import ImageCache, ImageRecord
from ironpool.runtime.images.reference import parse
from ironpool.runtime.images.registry import Credentials, classify

HEX = "a" * 64
D = f"sha256:{HEX}"


@pytest.mark.parametrize(("text", "kind", "fields"), [
    ("tiny", "catalog", {"name": "tiny"}),
    ("os/tiny:1.0", "catalog", {"name": "tiny"}),
    ("127.0.0.1:5000/os/debian:12", "oci", {"registry": "127.0.0.1:5000", "repository": "os/debian",
                                            "tag": "12"}),
    ("ghcr.io/ironcore-dev/os-images/gardenlinux", "oci", {"tag": "latest"}),
    (f"localhost/x@{D}", "oci", {"registry": "localhost", "digest": D, "tag": ""}),
    (f"reg.io:443/a/b:v1@{D}", "oci", {"tag": "v1", "digest": D}),
    ("https://example.org/img/debian-12.qcow2", "url", {"digest": ""}),
    (f"https://example.org/d.qcow2?x=1#{D}", "url", {"digest": D, "url": "https://example.org/d.qcow2?x=1"}),
    (f"file:///srv/images/d.raw#{D}", "url", {"url": "file:///srv/images/d.raw"}),
])
def test_references_are_told_apart_by_their_shape(text: str, kind: str, fields: dict[str, str]) -> None:
    ref = parse(text)
    assert ref.kind == kind
    for key, value in fields.items():
        assert getattr(ref, key) == value, key


@pytest.mark.parametrize(("text", "words"), [
    ("", "not a valid"),
    ("../../etc/passwd", "not a valid image name"),
    ("a b", "not a valid"),
    ("reg.io/UPPER/case:1", "lowercase"),
    ("reg.io/x:bad tag", "not a valid"),
    ("reg.io/x@sha512:" + "a" * 128, "sha256"),
    ("reg.io/x@sha256:abc", "sha256"),
    ("http://example.org/x.qcow2", "scheme 'http'"),
    ("ftp://example.org/x", "scheme"),
    ("https://example.org/x.qcow2#md5:abc", "checksum"),
    ("https://user:pw@example.org/x.qcow2", "user:password"),
    ("file://host/x.raw", "file:///absolute"),
])
def test_bad_references_say_what_is_wrong(text: str, words: str) -> None:
    with pytest.raises(errors.InvalidImageName, match=words):
        parse(text)


def test_pinned_reference_for_status() -> None:
    assert parse("127.0.0.1:5000/os/d:12").at(D) == f"127.0.0.1:5000/os/d:12@{D}"
    assert parse("https://h/x.qcow2").at(D) == f"https://h/x.qcow2#{D}"
    assert parse("127.0.0.1:5000/os/d:12").loopback and parse("localhost/x").loopback
    assert parse("[::1]:5000/x").loopback
    for remote in ("reg.io/x", "127.example.com/x", "localhost.example.com:5000/x"):
        assert not parse(remote).loopback, remote


def _desc(media: str, digest: str = D, size: int = 1) -> dict[str, object]:
    return {"mediaType": media, "digest": digest, "size": size}


def _manifest(config: str, *layers: str) -> dict[str, object]:
    return {"schemaVersion": 2, "mediaType": mediatypes.OCI_MANIFEST, "config": _desc(config),
            "layers": [_desc(m, "sha256:" + f"{i:x}" * 64, 10 + i) for i, m in enumerate(layers)]}


def test_classic_ironcore_image_layout() -> None:
    lay = mediatypes.layout(_manifest(mediatypes.CONFIG, mediatypes.ROOTFS, mediatypes.KERNEL,
                                      mediatypes.INITRAMFS, "application/vnd.ironcore.image.squashfs"))
    assert lay.disk is not None and lay.kernel is not None and lay.initrd is not None
    assert [d.media_type for d in lay.blobs][1:] == [
        mediatypes.ROOTFS, mediatypes.KERNEL, mediatypes.INITRAMFS]


def test_osboot_and_legacy_names_are_read() -> None:
    lay = mediatypes.layout(_manifest("application/vnd.ironcore.osboot.config.v1+json",
                                      "application/vnd.ironcore.osboot.disk.img",
                                      "application/vnd.ironcore.osboot.kernel"))
    assert lay.disk is not None and lay.kernel is not None and lay.initrd is None
    legacy = mediatypes.layout(_manifest("application/vnd.ironcore.image.config.v1alpha1+json",
                                         "application/vnd.ironcore.image.vmlinuz.v1alpha1.vmlinuz",
                                         "application/vnd.ironcore.image.initramfs.v1alpha1.initramfs"))
    assert legacy.kernel is not None and legacy.initrd is not None and legacy.disk is None


@pytest.mark.parametrize(("manifest", "words"), [
    (_manifest("application/vnd.oci.image.config.v1+json", "application/vnd.oci.image.layer.v1.tar+gzip"),
     "not an IronCore image config"),
    (_manifest(mediatypes.CONFIG, "application/vnd.cncf.helm.chart.content.v1.tar+gzip"),
     "IronCore images do not use"),
    (_manifest(mediatypes.CONFIG), "neither a disk"),
    (_manifest(mediatypes.CONFIG, mediatypes.KERNEL), "no initramfs"),
    ({**_manifest(mediatypes.CONFIG, mediatypes.ROOTFS), "mediaType": mediatypes.DOCKER_MANIFEST},
     "not an IronCore image"),
    ({**_manifest(mediatypes.CONFIG), "layers": [_desc(mediatypes.ROOTFS, "sha256:../../etc/passwd")]},
     "only sha256 digests"),
])
def test_what_is_not_an_image(manifest: dict[str, object], words: str) -> None:
    with pytest.raises(errors.NotAnImage, match=words):
        mediatypes.layout(manifest)


def test_index_picks_this_platform_and_the_virtualization_variant() -> None:
    def entry(arch: str, variant: str, n: str) -> dict[str, object]:
        return {**_desc(mediatypes.OCI_MANIFEST, "sha256:" + n * 64),
                "platform": {"os": "linux", "architecture": arch}, "annotations": {"variant": variant}}

    index = {"mediaType": mediatypes.OCI_INDEX, "manifests": [entry("amd64", "metal", "1"),
                                                              entry("arm64", "virtualization", "2"),
                                                              entry("amd64", "virtualization", "3")]}
    assert mediatypes.select_manifest(index, "x86_64").digest == "sha256:" + "3" * 64
    assert mediatypes.select_manifest(index, "aarch64").digest == "sha256:" + "2" * 64
    with pytest.raises(errors.NotAnImage, match="no manifest for linux/riscv64"):
        mediatypes.select_manifest(index, "riscv64")


@pytest.mark.parametrize(("stderr", "kind"), [
    ('level=fatal msg="reading manifest 1 in r/x: manifest unknown: manifest unknown"', errors.ImageNotFound),
    ('level=fatal msg="reading manifest 1 in r/x: unauthorized: authentication required"',
     errors.ImageUnauthorized),
    ('level=fatal msg="pinging container registry 127.0.0.1:1: Get \\"http://127.0.0.1:1/v2/\\": dial tcp '
     '127.0.0.1:1: connect: connection refused"', errors.ImageUnreachable),
    ('level=fatal msg="writing blob: write /c/tmp/x: no space left on device"', errors.NoSpace),
    ('level=fatal msg="open /c/tmp/x: permission denied"', errors.ImageError),
])
def test_skopeo_failures_are_named(stderr: str, kind: type[errors.ImageError]) -> None:
    err = classify("r/x:1", stderr)
    assert type(err) is kind
    assert err.message.startswith("image r/x:1: ") and '\\"' not in err.message


def test_pull_secret_data() -> None:
    config = {"auths": {"127.0.0.1:5000": {"auth": "cHVsbGVyOnB3"}}}
    creds = Credentials.from_secret({".dockerconfigjson": json.dumps(config).encode()}, "s")
    assert creds is not None and json.loads(creds.docker_config) == config
    assert "cHVsbGVy" not in repr(creds)
    old = Credentials.from_secret({".dockercfg": json.dumps(config["auths"]).encode()}, "s")
    assert old == creds
    assert Credentials.from_secret({}, "s") is None
    for bad, words in (({"token": b"x"}, "no .dockerconfigjson"), ({".dockerconfigjson": b"{"}, "not JSON"),
                       ({".dockerconfigjson": b'{"auths": []}'}, "auths")):
        with pytest.raises(errors.InvalidImageName, match=words):
            Credentials.from_secret(bad, "s")


# -- the cache -------------------------------------------------------------------------------------
def _blob(cache: ImageCache, tmp: Path, content: bytes) -> str:
    import hashlib

    digest = "sha256:" + hashlib.sha256(content).hexdigest()
    src = tmp / "src"
    src.write_bytes(content)
    cache.add_blob(src, digest)
    return digest


def test_cache_leases_and_collection(tmp_path: Path) -> None:
    cache = ImageCache(tmp_path / "c", limit_bytes=0)  # collect everything unused at once
    cache.ensure()
    a, b = _blob(cache, tmp_path, b"a" * 8192), _blob(cache, tmp_path, b"b" * 8192)
    cache.put(ImageRecord(ref="r/a", digest=a, disk=a, used_at=1.0))
    cache.put(ImageRecord(ref="r/b", digest=b, disk=b, used_at=2.0))
    overlay = tmp_path / "overlay.qcow2"
    with cache.use([a], overlay, "machine m1"):
        overlay.write_bytes(b"o")
    assert [e.record.ref for e in cache.entries() if e.users] == ["r/a"]
    assert cache.collect() == [b]  # b has no user
    assert cache.record(a) is not None and cache.record(b) is None and not cache.has_blob(b)
    overlay.unlink()  # the user went away without releasing (a crash): its lease is stale
    assert cache.collect() == [a]
    assert cache.entries() == [] and cache.size() == 0


def test_cache_collects_least_recently_used_first_down_to_its_limit(tmp_path: Path) -> None:
    cache = ImageCache(tmp_path / "c", limit_bytes=20000)
    cache.ensure()
    digests = [_blob(cache, tmp_path, bytes([i]) * 8192) for i in range(3)]
    for i, d in enumerate(digests):
        cache.put(ImageRecord(ref=f"r/{i}", digest=d, disk=d, used_at=float(10 - i)))  # r/2 oldest
    assert cache.collect() == [digests[2]]
    assert cache.collect(reserve=8192) == [digests[1]]


def test_cache_drops_scratch_of_dead_pulls_only(tmp_path: Path) -> None:
    cache = ImageCache(tmp_path / "c")
    cache.ensure()
    dead = subprocess.Popen(["true"])
    dead.wait()
    (cache.tmp / f"{dead.pid}-x").mkdir()
    (cache.tmp / f"{dead.pid}-x" / "partial").write_bytes(b"half")
    (cache.tmp / f"{os.getpid()}-y").mkdir()
    cache.ensure()
    assert sorted(p.name for p in cache.tmp.iterdir()) == [f"{os.getpid()}-y"]
    with cache.scratch() as scratch:
        (scratch / "f").write_bytes(b"x")
        raise_inside = scratch
    assert not raise_inside.exists()
