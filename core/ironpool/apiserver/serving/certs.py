"""A small local PKI for the apiserver: a CA, a serving certificate for the listen address, and
client certificates (CN is the user, O the groups, as Kubernetes reads them).

``ironpool up`` keeps the files in ``<data-dir>/pki`` and reuses them on restart; a serving
certificate is made anew only when it is missing, close to expiry, not signed by the CA or does not
name every address the server is reached at. Keys are ECDSA P-256: small, and the cheapest
handshakes for the clients we serve (Go's kubectl, Python's ssl).
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_DAYS = 3650
LEAF_DAYS = 365
RENEW_BEFORE = datetime.timedelta(days=30)
_CA_NAME = "ironpool-ca"


class CertError(Exception):
    """A certificate or key file cannot be used; the message names the file."""


@dataclass(frozen=True)
class CertPaths:
    """Where one certificate and its key live (PEM)."""

    cert: Path
    key: Path


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def write_private(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` with mode 0600, atomically (a crash leaves the old file or none)."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.replace(tmp, path)


def _key_usage(ca: bool) -> x509.KeyUsage:
    """Signatures only (ECDSA keys neither encipher nor agree keys in TLS 1.2+); a CA also signs
    certificates and revocation lists."""
    return x509.KeyUsage(
        digital_signature=True, key_cert_sign=ca, crl_sign=ca, content_commitment=False,
        key_encipherment=False, data_encipherment=False, key_agreement=False, encipher_only=False,
        decipher_only=False,
    )


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _load_cert(path: Path) -> x509.Certificate:
    try:
        return x509.load_pem_x509_certificate(path.read_bytes())
    except (OSError, ValueError) as exc:
        raise CertError(f"{path}: not a readable PEM certificate: {exc}") from None


def _load_key(path: Path) -> ec.EllipticCurvePrivateKey:
    try:
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    except (OSError, ValueError, TypeError) as exc:
        raise CertError(f"{path}: not a readable unencrypted PEM private key: {exc}") from None
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise CertError(f"{path}: expected an ECDSA key, got {type(key).__name__}")
    return key


class CertificateAuthority:
    """A CA certificate and key that sign the server's and clients' certificates."""

    def __init__(self, paths: CertPaths, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> None:
        self.paths = paths
        self.cert = cert
        self.key = key

    @classmethod
    def ensure(cls, directory: Path, name: str = _CA_NAME) -> CertificateAuthority:
        """The CA in ``directory`` (``ca.crt``, ``ca.key``), created on first use."""
        paths = CertPaths(directory / "ca.crt", directory / "ca.key")
        if paths.cert.exists() and paths.key.exists():
            return cls(paths, _load_cert(paths.cert), _load_key(paths.key))
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        key = _new_key()
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = _now()
        cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=CA_DAYS))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(_key_usage(ca=True), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256())
        )
        write_private(paths.key, _key_pem(key))
        paths.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        return cls(paths, cert, key)

    def signed(self, cert: x509.Certificate) -> bool:
        """Whether this CA signed ``cert``."""
        if cert.issuer != self.cert.subject:
            return False
        try:
            cert.verify_directly_issued_by(self.cert)
        except (ValueError, TypeError, InvalidSignature):
            return False
        return True

    def issue(
        self,
        common_name: str,
        *,
        organizations: Iterable[str] = (),
        dns_names: Iterable[str] = (),
        ip_addresses: Iterable[str] = (),
        server: bool = False,
        days: int = LEAF_DAYS,
    ) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
        """A new leaf certificate and its key: a serving certificate with ``server``, else a client one."""
        key = _new_key()
        attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
        attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
        now = _now()
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name(attrs))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(_key_usage(ca=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self.cert.public_key()),  # type: ignore[arg-type]
                critical=False,
            )
        )
        sans: list[x509.GeneralName] = [x509.DNSName(d) for d in dns_names]
        sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ip_addresses]
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        return builder.sign(self.key, hashes.SHA256()), key

    def write(self, paths: CertPaths, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> CertPaths:
        """Store a certificate issued by :meth:`issue` (the key with mode 0600)."""
        write_private(paths.key, _key_pem(key))
        tmp = paths.cert.with_name(paths.cert.name + ".tmp")
        tmp.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        os.replace(tmp, paths.cert)
        return paths


def _names(cert: x509.Certificate) -> tuple[set[str], set[str]]:
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return set(), set()
    return set(san.get_values_for_type(x509.DNSName)), {
        str(ip) for ip in san.get_values_for_type(x509.IPAddress)
    }


def split_hosts(hosts: Iterable[str]) -> tuple[list[str], list[str]]:
    """Host names and IP addresses (in canonical form), each once, in order."""
    dns: list[str] = []
    ips: list[str] = []
    for host in hosts:
        try:
            ip = str(ipaddress.ip_address(host.strip("[]")))
        except ValueError:
            if host not in dns:
                dns.append(host)
            continue
        if ip not in ips:
            ips.append(ip)
    return dns, ips


def ensure_serving_cert(ca: CertificateAuthority, directory: Path, hosts: Iterable[str]) -> CertPaths:
    """``apiserver.crt``/``apiserver.key`` in ``directory`` for ``hosts`` (names and addresses),
    kept while it is signed by ``ca``, names every host and is not within 30 days of expiry."""
    paths = CertPaths(directory / "apiserver.crt", directory / "apiserver.key")
    dns, ips = split_hosts(hosts)
    if paths.cert.exists() and paths.key.exists():
        current = _load_cert(paths.cert)
        have_dns, have_ips = _names(current)
        fresh = current.not_valid_after_utc - _now() > RENEW_BEFORE
        if fresh and ca.signed(current) and set(dns) <= have_dns and set(ips) <= have_ips:
            return paths
    cert, key = ca.issue("ironpool-apiserver", dns_names=dns, ip_addresses=ips, server=True)
    return ca.write(paths, cert, key)


def subject_identity(subject: tuple[tuple[tuple[str, str], ...], ...]) -> tuple[str, tuple[str, ...]]:
    """``(CN, (O, ...))`` of a certificate subject as :meth:`ssl.SSLSocket.getpeercert` gives it."""
    common_name = ""
    organizations: list[str] = []
    for rdn in subject:
        for attr, value in rdn:
            if attr == "commonName":
                common_name = value
            elif attr == "organizationName":
                organizations.append(value)
    return common_name, tuple(organizations)
