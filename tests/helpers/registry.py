"""Real OCI registries for tests: Debian's docker-registry on free loopback ports, one anonymous and
one that wants a password (htpasswd), each started once per test session."""

from __future__ import annotations

import secrets
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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


# -- a registry that hands out bearer tokens, as public registries do --------------------------------
class _TokenRegistry(LocalRegistry):
    """docker-registry with token authentication: it answers 401 ``Bearer realm=…`` and accepts
    JWTs (ES256, certificate in ``x5c``) that its token service signed."""

    def __init__(self, root: Path, realm: str, bundle: Path) -> None:
        super().__init__(root)
        self.realm, self.bundle = realm, bundle

    def _config(self) -> dict[str, object]:
        config = super()._config()
        config["auth"] = {"token": {"realm": self.realm, "service": TOKEN_SERVICE, "issuer": TOKEN_ISSUER,
                                    "rootcertbundle": str(self.bundle)}}
        return config


TOKEN_SERVICE, TOKEN_ISSUER = "ironpool-test-registry", "ironpool-test-token-service"


@dataclass(frozen=True)
class TokenRegistry(Registry):
    """A registry behind a token service: repositories under ``public/`` may be pulled without
    credentials (an anonymous token), everything else wants ``user``/``password``."""

    tokens: list[int] = field(default_factory=lambda: [0])  # [how many tokens the service handed out]


def _token_service(user: str, password: str, key: Any, cert_der: bytes, counter: list[int]) -> Any:
    import base64
    import http.server
    import json
    import time
    import urllib.parse

    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

    def b64url(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    def token(subject: str, access: list[dict[str, Any]]) -> str:
        now = int(time.time())
        header = {"typ": "JWT", "alg": "ES256", "x5c": [base64.b64encode(cert_der).decode()]}
        claims = {"iss": TOKEN_ISSUER, "sub": subject, "aud": TOKEN_SERVICE, "exp": now + 300,
                  "nbf": now - 10, "iat": now, "jti": secrets.token_hex(8), "access": access}
        signing_input = f"{b64url(json.dumps(header).encode())}.{b64url(json.dumps(claims).encode())}"
        r, s = decode_dss_signature(key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256())))
        return f"{signing_input}.{b64url(r.to_bytes(32, 'big') + s.to_bytes(32, 'big'))}"

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
            basic = base64.b64encode(f"{user}:{password}".encode()).decode()
            authenticated = self.headers.get("Authorization") == f"Basic {basic}"
            if self.headers.get("Authorization") and not authenticated:
                self.send_response(401)
                self.end_headers()
                return
            access = []
            for scope in query.get("scope", []):
                kind, _, rest = scope.partition(":")
                name, _, actions = rest.rpartition(":")
                if kind == "repository" and (authenticated or name.startswith("public/")):
                    allowed = actions.split(",") if authenticated else ["pull"]
                    access.append({"type": kind, "name": name, "actions": allowed})
            counter[0] += 1
            body = json.dumps({"token": token(user if authenticated else "", access), "expires_in": 300})
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body.encode())

    return http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)


@pytest.fixture(scope="session")
def token_registry() -> Iterator[TokenRegistry]:
    """A registry that wants bearer tokens from a token service beside it (both on loopback)."""
    import datetime
    import threading

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "ironpool test token signer")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    password = secrets.token_hex(8)
    counter = [0]
    server = _token_service("puller", password, key, cert.public_bytes(serialization.Encoding.DER), counter)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    root = Path(tempfile.mkdtemp(prefix="ipreg-token-"))
    bundle = root / "token-signer.pem"
    bundle.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    reg = _TokenRegistry(root / "registry", f"http://127.0.0.1:{server.server_address[1]}/token", bundle)
    try:
        reg.start()
    except RegistryError as exc:
        pytest.fail(f"{exc} (run scripts/setup-host.sh)")
    try:
        yield TokenRegistry(reg.address, "puller", password, counter)
    finally:
        reg.stop()
        server.shutdown()
        server.server_close()
        shutil.rmtree(root, ignore_errors=True)
