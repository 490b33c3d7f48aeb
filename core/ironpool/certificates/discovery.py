"""Finding the control plane's CA from a join command that carries only its hash, as kubeadm's
token discovery: read the ``kube-public/cluster-info`` ConfigMap over TLS that cannot be verified
yet, and trust the CA in it only if the SHA-256 of its SubjectPublicKeyInfo is the pin
(``--discovery-token-ca-cert-hash sha256:...``). Every later request verifies the server with it."""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import json
import re
import ssl
import urllib.error
import urllib.request

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import serialization

CLUSTER_INFO_PATH = "/api/v1/namespaces/kube-public/configmaps/cluster-info"
_HASH = re.compile(r"^sha256:[0-9a-f]{64}$")


class DiscoveryError(Exception):
    """The CA could not be found or is not the pinned one; the message names the option or server."""


def ca_cert_hash(cert: x509.Certificate) -> str:
    """kubeadm's ``--discovery-token-ca-cert-hash``: ``sha256:`` and the hex SHA-256 of the SPKI."""
    spki = cert.public_key().public_bytes(serialization.Encoding.DER,
                                          serialization.PublicFormat.SubjectPublicKeyInfo)
    return "sha256:" + hashlib.sha256(spki).hexdigest()


def parse_hash(value: str, option: str = "--discovery-token-ca-cert-hash") -> str:
    """The pin in its canonical form (lower case); a DiscoveryError naming ``option`` if malformed."""
    pin = value.strip().lower()
    if not _HASH.match(pin):
        raise DiscoveryError(f"{option}: expected sha256: and 64 hex digits, got {value!r}")
    return pin


def check_pin(pem: bytes, pin: str, origin: str, option: str = "--discovery-token-ca-cert-hash") -> None:
    """Refuse the CA ``pem`` (found at ``origin``) unless its public key hashes to ``pin``."""
    try:
        cert = x509.load_pem_x509_certificate(pem)
    except ValueError as exc:
        raise DiscoveryError(f"{origin}: the CA is not a PEM certificate: {exc}") from None
    actual = ca_cert_hash(cert)
    if actual != parse_hash(pin, option):
        raise DiscoveryError(f"{option}: the CA of {origin} hashes to {actual}, not to the pinned "
                             f"{pin.strip()}: it is not the control plane's CA (or the hash is another "
                             "control plane's)")


def _fetch(server: str, timeout: float) -> bytes:
    # Unverified on purpose: the CA is not known yet; the pin decides whether to trust what came back.
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    url = server.rstrip("/") + CLUSTER_INFO_PATH
    try:
        with urllib.request.urlopen(url, context=ctx, timeout=timeout) as resp:
            return bytes(resp.read())
    except urllib.error.HTTPError as exc:
        raise DiscoveryError(f"{server}: no cluster-info to discover the CA from (HTTP {exc.code}); give the "
                             "CA with --ca-file instead") from None
    except (urllib.error.URLError, OSError) as exc:
        raise DiscoveryError(f"cannot reach the control plane at {server}: "
                             f"{getattr(exc, 'reason', None) or exc}") from None


def ca_from_cluster_info(body: bytes, origin: str) -> bytes:
    """The CA PEM in a cluster-info ConfigMap's ``data.kubeconfig``."""
    try:
        kubeconfig = yaml.safe_load(json.loads(body)["data"]["kubeconfig"])
        data = kubeconfig["clusters"][0]["cluster"]["certificate-authority-data"]
        return base64.b64decode(data, validate=True)
    except (ValueError, KeyError, IndexError, TypeError, binascii.Error, yaml.YAMLError) as exc:
        raise DiscoveryError(f"{origin}: cluster-info holds no readable certificate-authority-data "
                             f"({type(exc).__name__}: {exc})") from None


async def discover_ca(servers: list[str], pin: str, timeout: float = 10.0) -> bytes:
    """The pinned CA of the control plane at ``servers`` (tried in turn until one answers)."""
    parse_hash(pin)
    last: DiscoveryError | None = None
    for server in servers:
        try:
            body = await asyncio.to_thread(_fetch, server, timeout)
        except DiscoveryError as exc:
            last = exc
            continue
        pem = ca_from_cluster_info(body, f"{server} (cluster-info)")
        check_pin(pem, pin, server)
        return pem
    assert last is not None
    raise last
