"""Pulls from a real registry (Debian's docker-registry on loopback) through real skopeo, and
downloads from a real HTTPS server: what arrives, what is shared, what each failure says, and that
a failure leaves nothing in the cache."""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ironpool.runtime.images import Credentials, ImageResolver, errors, open_resolver
from ironpool.runtime.images.blobs import BlobClient
from ironpool.runtime.images.publish import ImageFiles, push

from tests.helpers.https import serve_https
from tests.helpers.registry import Registry, TokenRegistry, push_not_an_image
from tests.helpers.wait import wait_for

MiB = 1 << 20


def qcow2(path: Path, size: str = "64M", marker: bytes = b"") -> Path:
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", str(path), size], check=True)
    if marker:
        subprocess.run(["qemu-io", "-f", "qcow2", "-c", f"write -P 0x5a 1M {len(marker)}", str(path)],
                       check=True, capture_output=True)
    return path


def kernel_bundle(path: Path) -> Path:
    path.mkdir()
    (path / "kernel").write_bytes(os.urandom(4096))
    (path / "initrd").write_bytes(os.urandom(2048))
    (path / "cmdline").write_text("console=ttyS0 quiet\n")
    return path


@pytest.fixture
def work(tmp_path: Path) -> Path:
    return tmp_path


def resolver(cache: Path, **kw: Any) -> ImageResolver:
    r = open_resolver(None, cache, wait=120, **kw)
    r.start()
    return r


def no_partial(r: ImageResolver) -> None:
    assert r.cache is not None
    assert list(r.cache.tmp.iterdir()) == []  # no scratch left
    assert [f for f in r.cache.blobs.iterdir() if r.cache.record(f.name) is None and not any(
        rec for rec in r.cache._records() if f"sha256:{f.name}" in rec.blobs)] == []


def repo(registry: Registry) -> str:
    return f"{registry.address}/t{secrets.token_hex(4)}"


def test_push_then_pull_every_layout(registry: Registry, work: Path) -> None:
    disk = qcow2(work / "d.qcow2", marker=b"x")
    bundle = kernel_bundle(work / "k")
    base = repo(registry)
    d1 = push(f"{base}/disk:1", ImageFiles.from_path(disk))
    d2 = push(f"{base}/disk:index", ImageFiles.from_path(disk), layout="index")
    d3 = push(f"{base}/kernel:1", ImageFiles.from_path(bundle))
    both_files = ImageFiles.from_path(disk, bundle / "kernel", bundle / "initrd", "root=/dev/vda")
    d4 = push(f"{base}/both:1", both_files)
    r = resolver(work / "cache")
    events: list[tuple[str, str]] = []
    sink = ("t", lambda reason, msg: events.append((reason, msg)))

    img = r.resolve(f"{base}/disk:1", requester=sink)
    assert img.has_disk and not img.boots_kernel and img.format == "qcow2" and img.virtual_size == 64 * MiB
    assert img.digest == d1 and img.ref == f"{base}/disk:1@{d1}"
    assert img.path is not None and img.path.parent == work / "cache" / "blobs" / "sha256"
    assert hashlib.sha256(img.path.read_bytes()).hexdigest() == img.path.name  # content-addressed
    assert [e[0] for e in events] == ["Pulling", "Pulled"]

    idx = r.resolve(f"{base}/disk:index")
    assert idx.digest == d2 and idx.path == img.path  # one base blob for both layouts
    k = r.resolve(f"{base}/kernel:1")
    assert k.boots_kernel and not k.has_disk and k.digest == d3 and k.cmdline == "console=ttyS0 quiet"
    assert k.kernel is not None and k.kernel.read_bytes() == (bundle / "kernel").read_bytes()
    both = r.resolve(f"{base}/both:1")
    assert both.has_disk and both.boots_kernel and both.cmdline == "root=/dev/vda" and both.digest == d4

    events.clear()
    again = r.resolve(f"{base}/disk@{d1}", requester=sink)  # pinned and cached: no registry round trip
    assert again.path == img.path and events == []
    no_partial(r)


def test_concurrent_pulls_of_one_image_share_one_download(registry: Registry, work: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    ref = f"{repo(registry)}/disk:1"
    push(ref, ImageFiles.from_path(qcow2(work / "d.qcow2", "256M", marker=b"x")))
    r = resolver(work / "cache")
    fetched: list[str] = []
    real_fetch = BlobClient.fetch

    def counted(self: BlobClient, desc: Any, *args: Any, **kw: Any) -> None:
        fetched.append(desc.digest)
        real_fetch(self, desc, *args, **kw)

    monkeypatch.setattr(BlobClient, "fetch", counted)
    results: list[Any] = []
    threads = [threading.Thread(target=lambda i=i: results.append(r.resolve(ref, requester=(f"m{i}", print))))
               for i in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert len(results) == 10 and len({x.path for x in results}) == 1
    assert len(fetched) == len(set(fetched)) == 2  # the config and the disk, each once
    # another process of the host (the volume runtime) finds it in the shared cache
    other = resolver(work / "cache")
    monkeypatch.setattr(BlobClient, "fetch", None)  # must not be needed
    assert other.resolve(ref).path == results[0].path


def test_each_failure_names_the_image_and_cause_and_keeps_nothing(
    registry: Registry, auth_registry: Registry, work: Path
) -> None:
    base = repo(registry)
    r = resolver(work / "cache")
    missing = f"{base}/missing:1"
    wrong_digest = f"{base}/disk@sha256:{'0' * 64}"
    artifact = f"{base}/chart:1"
    push_not_an_image(artifact, work)
    locked = f"{auth_registry.address}/private/disk:1"
    creds = Credentials.basic(auth_registry.address, auth_registry.user, auth_registry.password)
    disk = qcow2(work / "d.qcow2", marker=b"x")
    push(locked, ImageFiles.from_path(disk), creds)
    with socket_closed() as port:
        unreachable = f"127.0.0.1:{port}/os/disk:1"
        cases: list[tuple[str, type[errors.ImageError], str]] = [
            (missing, errors.ImageNotFound, "manifest unknown"),
            (wrong_digest, errors.ImageNotFound, "manifest unknown"),
            (artifact, errors.NotAnImage, "not an IronCore image config"),
            (locked, errors.ImageUnauthorized, "authentication required"),
            (unreachable, errors.ImageUnreachable, "connection refused"),
        ]
        for ref, kind, words in cases:
            with pytest.raises(kind) as caught:
                r.resolve(ref)
            assert caught.value.message.startswith(f"image {ref}: ") and words in caught.value.message, ref
            no_partial(r)
    assert r.cache is not None and r.cache.entries() == []

    # Fixing the cause lets the same reference through, once the remembered failure's backoff passed.
    push(missing, ImageFiles.from_path(disk))
    assert wait_for(lambda: _try(r, missing), 30, "the pushed image").digest
    assert r.resolve(locked, creds).has_disk  # the credentials make another pull, not the failed one


def _try(r: ImageResolver, ref: str, creds: Credentials | None = None) -> Any:
    try:
        return r.resolve(ref, creds)
    except errors.ImageNotFound:
        return None


@contextlib.contextmanager
def socket_closed() -> Iterator[int]:
    from tests.helpers.net import free_port

    yield free_port()


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root")
def test_a_full_disk_is_refused_before_anything_is_written(registry: Registry, work: Path) -> None:
    ref = f"{repo(registry)}/big:1"
    raw = work / "big.raw"
    raw.write_bytes(os.urandom(4 * MiB))
    push(ref, ImageFiles.from_path(raw))
    small = Path(tempfile.mkdtemp(prefix="ipfull-"))
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(small)], check=True)
    try:
        r = resolver(small / "cache")
        with pytest.raises(errors.NoSpace, match=r"needs 4 MiB but the image cache's disk has \d+ MiB free"):
            r.resolve(ref)
        no_partial(r)
    finally:
        subprocess.run(["umount", str(small)], check=False)
        shutil.rmtree(small, ignore_errors=True)


# -- URLs ------------------------------------------------------------------------------------------
@pytest.fixture
def https_server(work: Path) -> Iterator[tuple[str, Path, Path]]:
    """A real HTTPS server on loopback serving ``work/www``; (base URL, folder, CA file)."""
    www = work / "www"
    www.mkdir()
    with serve_https(www, work / "pki") as server:
        yield server.url, www, server.ca_file


def test_https_images_with_and_without_checksum(
    https_server: tuple[str, Path, Path], work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base, www, ca_file = https_server
    monkeypatch.setenv("SSL_CERT_FILE", str(ca_file))
    disk = qcow2(www / "debian.qcow2", marker=b"x")
    good = "sha256:" + hashlib.sha256(disk.read_bytes()).hexdigest()
    bad = "sha256:" + "1" * 64
    r = resolver(work / "cache")
    with pytest.raises(errors.DigestMismatch) as caught:
        r.resolve(f"{base}/debian.qcow2#{bad}")
    assert f"expected {bad}, got {good}" in caught.value.message
    no_partial(r)
    assert r.cache is not None and r.cache.entries() == []
    img = r.resolve(f"{base}/debian.qcow2#{good}")
    assert img.digest == good and img.format == "qcow2" and img.ref == f"{base}/debian.qcow2#{good}"
    events: list[str] = []
    plain = r.resolve(f"{base}/debian.qcow2", requester=("t", lambda reason, _m: events.append(reason)))
    assert plain.path == img.path and "Pulled" in events
    events.clear()
    assert r.resolve(f"{base}/debian.qcow2", requester=("t", lambda reason, _m: events.append(reason))).path
    assert "Pulled" not in events  # unchanged on the server (If-Modified-Since): not downloaded again
    with pytest.raises(errors.ImageNotFound, match="404"):
        r.resolve(f"{base}/nothing.qcow2")
    subprocess.run(["qemu-img", "create", "-q", "-f", "vmdk", str(www / "x.vmdk"), "1M"], check=True)
    with pytest.raises(errors.NotAnImage, match="is a vmdk file; only qcow2 and raw"):
        r.resolve(f"{base}/x.vmdk")
    no_partial(r)


def test_file_images_only_from_the_folders_the_runtime_serves(work: Path) -> None:
    served = work / "served"
    served.mkdir()
    disk = qcow2(served / "d.qcow2")
    secret = qcow2(work / "elsewhere.qcow2")
    r = resolver(work / "cache", file_roots=[served])
    assert r.resolve(f"file://{disk}").has_disk
    (served / "link.qcow2").symlink_to(secret)
    for outside in (secret, served / "link.qcow2", served / ".." / "elsewhere.qcow2"):
        with pytest.raises(errors.ImageUnauthorized, match="outside the folders"):
            r.resolve(f"file://{outside}")
    no_partial(r)


def test_a_create_waits_a_bounded_time_then_hears_the_image_is_still_pulled(
    registry: Registry, work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ref = f"{repo(registry)}/disk:1"
    push(ref, ImageFiles.from_path(qcow2(work / "d.qcow2")))
    r = resolver(work / "cache")
    gate, fetching = threading.Event(), threading.Event()
    real_fetch = BlobClient.fetch

    def held(*args: Any, **kw: Any) -> None:
        fetching.set()
        gate.wait(60)
        real_fetch(*args, **kw)

    monkeypatch.setattr(BlobClient, "fetch", held)
    # The first ask starts the pull and hears it is under way (on a busy host perhaps still reading
    # the manifest); once the blobs are being fetched, an ask hears how far it got.
    with pytest.raises(errors.ImagePulling, match=rf"image {ref} is being pulled \("):
        r.resolve(ref, wait=0.2)
    assert fetching.wait(60)
    with pytest.raises(errors.ImagePulling, match=rf"image {ref} is being pulled \(0 of \d+ MiB\)"):
        r.resolve(ref, wait=0.2)
    gate.set()
    assert r.resolve(ref).has_disk  # the same pull, finished


# -- blobs straight over HTTP -----------------------------------------------------------------------
def test_blobs_come_with_a_bearer_token_anonymous_or_for_the_credentials(token_registry: TokenRegistry,
                                                                         work: Path) -> None:
    """As public registries want it: a 401 names the token service, whose token the blob GETs carry
    (anonymously for a public repository; with the credentials for a private one)."""
    creds = Credentials.basic(token_registry.address, token_registry.user, token_registry.password)
    public, private = f"{token_registry.address}/public/disk:1", f"{token_registry.address}/private/disk:1"
    disk = ImageFiles.from_path(qcow2(work / "d.qcow2", marker=b"token"))
    digest = push(public, disk, creds)  # skopeo speaks the same token protocol
    assert push(private, disk, creds) == digest
    r = resolver(work / "cache")
    before = token_registry.tokens[0]
    img = r.resolve(public)
    assert img.digest == digest and img.path is not None
    assert hashlib.sha256(img.path.read_bytes()).hexdigest() == img.path.name
    assert token_registry.tokens[0] > before  # the blobs came with a token
    with pytest.raises(errors.ImageUnauthorized):
        r.resolve(private)
    no_partial(r)
    r2 = resolver(work / "cache2")
    assert r2.resolve(private, creds).digest == digest


def test_a_blob_that_is_not_what_the_manifest_says_is_refused_and_not_kept(registry: Registry,
                                                                           work: Path) -> None:
    from ironpool.runtime.images import mediatypes
    from ironpool.runtime.images.reference import parse
    from ironpool.runtime.images.registry import RegistryOptions

    ref = parse(f"{repo(registry)}/disk:1")
    data = qcow2(work / "d.qcow2", marker=b"size").read_bytes()
    push(ref.text, ImageFiles.from_path(work / "d.qcow2"))
    real = "sha256:" + hashlib.sha256(data).hexdigest()
    client = BlobClient(ref, None, RegistryOptions())
    dest = work / "blob"
    client.fetch(mediatypes.Descriptor("x", real, len(data), {}), dest)
    assert dest.read_bytes() == data
    dest.unlink()
    with pytest.raises(errors.DigestMismatch, match=rf"blob {real}: arrived as {real} \({len(data)} bytes, "):
        client.fetch(mediatypes.Descriptor("x", real, len(data) + 1, {}), dest)
    assert not dest.exists()
    with pytest.raises(errors.ImageNotFound, match="404"):
        client.fetch(mediatypes.Descriptor("x", "sha256:" + "2" * 64, 1, {}), dest)
    assert not dest.exists()



def test_closing_the_resolver_ends_a_blob_download_under_way(registry: Registry, work: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A runtime that stops does not wait for its pulls: the download ends, its scratch goes."""
    from ironpool.runtime.images import blobs

    ref = f"{repo(registry)}/disk:1"
    push(ref, ImageFiles.from_path(qcow2(work / "d.qcow2", "64M", marker=b"close")))
    r = resolver(work / "cache")
    reading, gate = threading.Event(), threading.Event()
    real_read = blobs._Stoppable.read

    def held(self: Any, size: int = -1) -> bytes:
        reading.set()
        gate.wait(30)
        return real_read(self, size)

    monkeypatch.setattr(blobs._Stoppable, "read", held)
    with pytest.raises(errors.ImagePulling):
        r.resolve(ref, wait=0)
    assert reading.wait(30)
    r.close()
    gate.set()
    assert r.cache is not None
    wait_for(lambda: list(r.cache.tmp.iterdir()) == [], 30, "the pull's scratch removed")
    with pytest.raises(errors.ImageUnreachable, match="the runtime is stopping"):
        r.resolve(ref)
    assert list(r.cache.blobs.iterdir()) == []


def test_an_identity_token_login_pulls_through_skopeo(registry: Registry, work: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """OAuth2 identity tokens are skopeo's to exchange: such a pull copies the blobs with skopeo
    (this registry asks for no login, so the token is never needed) and checks them the same way."""
    ref = f"{repo(registry)}/disk:1"
    digest = push(ref, ImageFiles.from_path(qcow2(work / "d.qcow2", marker=b"idtoken")))
    monkeypatch.setattr(BlobClient, "fetch", None)  # must not be used
    creds = Credentials(b'{"auths": {"%s": {"identitytoken": "refresh-me"}}}' % registry.address.encode())
    r = resolver(work / "cache")
    img = r.resolve(ref, creds)
    assert img.digest == digest and img.path is not None
    assert hashlib.sha256(img.path.read_bytes()).hexdigest() == img.path.name
    no_partial(r)
