"""A pool's client certificate, asked of the control plane as kubelet asks for its own: the key is
made here and never leaves the host; a CertificateSigningRequest carries only its public half, under
the identity the request is made with (a bootstrap token, or the current certificate when renewing);
the certificate controller approves and signs it. Key and certificate are kept together in one PEM
file, mode 0600 (kubelet's ``kubelet-client-current.pem``), so a rotation replaces both at once."""

from __future__ import annotations

import asyncio
import base64
import datetime
import os
import time
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from ironpool.api import errors
from ironpool.api.certificates import APPROVED, DENIED, FAILED, POOL_CLIENT_SIGNER, CertificateSigningRequest
from ironpool.client.rest import AsyncClient
from ironpool.client.wire import resource_for_model

_CSRS = resource_for_model(CertificateSigningRequest)
USAGES = ["digital signature", "client auth"]


class CertificateRequestError(Exception):
    """The request was denied, failed, or not signed in time; the message says which and why."""


@dataclass(frozen=True)
class PoolIdentity:
    """The subject of one pool identity's certificate: CN the user, O its group."""

    user: str
    group: str


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def request_pem(key: ec.EllipticCurvePrivateKey, identity: PoolIdentity) -> bytes:
    """A PKCS#10 request for ``identity``, signed with ``key``."""
    subject = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, identity.group),
                         x509.NameAttribute(NameOID.COMMON_NAME, identity.user)])
    csr = x509.CertificateSigningRequestBuilder().subject_name(subject).sign(key, hashes.SHA256())
    return csr.public_bytes(serialization.Encoding.PEM)


def _decision(obj: dict[str, object]) -> tuple[str, str] | None:
    status = obj.get("status") or {}
    assert isinstance(status, dict)
    for c in status.get("conditions") or []:
        if c.get("type") in (DENIED, FAILED) and c.get("status") == "True":
            return str(c.get("type")), f"{c.get('reason', '')}: {c.get('message', '')}"
    return None


async def request_certificate(client: AsyncClient, identity: PoolIdentity, timeout: float = 60.0,
                              poll: float = 0.5) -> bytes:
    """A new key and its certificate for ``identity`` as one PEM (key first), asked with ``client``'s
    identity. Raises CertificateRequestError when denied, failed or not signed within ``timeout``."""
    key = ec.generate_private_key(ec.SECP256R1())
    body = {
        "apiVersion": _CSRS.api_version, "kind": _CSRS.kind,
        "metadata": {"generateName": "csr-"},
        "spec": {"request": base64.b64encode(request_pem(key, identity)).decode(),
                 "signerName": POOL_CLIENT_SIGNER, "usages": USAGES},
    }
    created = await client.create_raw(_CSRS, body)
    name = created["metadata"]["name"]
    deadline = time.monotonic() + timeout
    obj = created
    while True:
        decided = _decision(obj)
        if decided is not None:
            raise CertificateRequestError(f"certificate request {name} for {identity.user}: {decided[0]} "
                                          f"({decided[1]})")
        cert = (obj.get("status") or {}).get("certificate")
        if cert:
            pem = base64.b64decode(cert)
            break
        if time.monotonic() >= deadline:
            conditions = (obj.get("status") or {}).get("conditions") or []
            approved = any(c.get("type") == APPROVED for c in conditions)
            raise CertificateRequestError(
                f"certificate request {name} for {identity.user}: not signed within {timeout:g}s ("
                + ("approved, but no signer issued it: is the controller-manager given "
                   "--cluster-signing-cert-file?" if approved else
                   "not approved: is a controller-manager running? an administrator may approve it") + ")")
        await asyncio.sleep(poll)
        try:
            obj = await client.get_raw(_CSRS, name)
        except errors.NotFound:
            raise CertificateRequestError(f"certificate request {name} for {identity.user} was deleted") \
                from None
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    return key_pem + pem


def write_pair(path: Path, pem: bytes) -> None:
    """Store key and certificate atomically with mode 0600 (a crash leaves the old pair or the new)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(pem)
    os.replace(tmp, path)


def load_certificate(path: Path) -> x509.Certificate | None:
    """The certificate of a stored pair, or None when there is none or it cannot be read."""
    try:
        return x509.load_pem_x509_certificate(path.read_bytes())
    except (OSError, ValueError):
        return None


def usable(path: Path, identity: PoolIdentity, ca_pem: bytes, margin: float = 0.0) -> bool:
    """Whether the stored pair is ``identity``'s, signed by the CA and valid ``margin`` seconds longer."""
    cert = load_certificate(path)
    if cert is None:
        return False
    try:
        ca = x509.load_pem_x509_certificate(ca_pem)
        cert.verify_directly_issued_by(ca)
    except Exception:  # another CA, a bad signature: ask for a new one
        return False
    cn = [a.value for a in cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)]
    if cn != [identity.user]:
        return False
    return cert.not_valid_after_utc > _now() + datetime.timedelta(seconds=margin)
