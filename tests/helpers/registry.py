"""Real OCI registries for tests: Debian's docker-registry on free loopback ports, one anonymous and
one that wants a password (htpasswd), each started once per test session."""

from __future__ import annotations

import secrets
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from ironpool.allinone.registry import LocalRegistry, RegistryError


@dataclass(frozen=True)
class Registry:
    """A running registry: its ``host:port``, and the user and password it wants ("" when none)."""

    address: str
    user: str = ""
    password: str = ""


def _start(users: dict[str, str]) -> Iterator[LocalRegistry]:
    root = Path(tempfile.mkdtemp(prefix="ipreg-"))
    reg = LocalRegistry(root, users=users)
    try:
        reg.start()
    except RegistryError as exc:
        shutil.rmtree(root, ignore_errors=True)
        pytest.fail(f"{exc} (run scripts/setup-host.sh)")
    try:
        yield reg
    finally:
        reg.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def registry() -> Iterator[Registry]:
    """An anonymous registry on loopback."""
    for reg in _start({}):
        yield Registry(reg.address)


@pytest.fixture(scope="session")
def auth_registry() -> Iterator[Registry]:
    """A registry on loopback that answers 401 without the password."""
    password = secrets.token_hex(8)
    for reg in _start({"puller": password}):
        yield Registry(reg.address, "puller", password)


def push_not_an_image(ref: str, work: Path) -> None:
    """Push an OCI artifact that is no IronCore image (shaped like a Helm chart) to ``ref``."""
    import hashlib
    import json

    from ironpool.runtime.images import mediatypes
    from ironpool.runtime.images.reference import parse
    from ironpool.runtime.images.registry import Skopeo

    layout = Path(tempfile.mkdtemp(prefix="artifact-", dir=work))
    (layout / "blobs" / "sha256").mkdir(parents=True)
    (layout / "oci-layout").write_text('{"imageLayoutVersion":"1.0.0"}')

    def blob(data: bytes, media: str) -> mediatypes.Descriptor:
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        (layout / "blobs" / "sha256" / digest[7:]).write_bytes(data)
        return mediatypes.Descriptor(media, digest, len(data), {})

    config = blob(b"{}", "application/vnd.cncf.helm.config.v1+json")
    layer = blob(b"chart", "application/vnd.cncf.helm.chart.content.v1.tar+gzip")
    manifest = blob(mediatypes.manifest_json(config, [layer]), mediatypes.OCI_MANIFEST)
    (layout / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": [
        {"mediaType": manifest.media_type, "digest": manifest.digest, "size": manifest.size,
         "annotations": {"org.opencontainers.image.ref.name": "image"}}]}))
    Skopeo().push_layout(layout, parse(ref), None, layout / "digest")
