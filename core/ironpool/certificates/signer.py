"""Signs approved CertificateSigningRequests of :data:`~ironpool.api.certificates.POOL_CLIENT_SIGNER`
with the installation's CA, as kube-controller-manager's csrsigning controller does with its
``--cluster-signing-cert-file``/``--cluster-signing-key-file``: the subject and key of the request,
client-auth usage only, valid for the signing duration (or less, when the request asks for less)."""

from __future__ import annotations

import base64
import datetime
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.asymmetric.types import CertificateIssuerPrivateKeyTypes
from cryptography.x509.oid import ExtendedKeyUsageOID

from ironpool.api.certificates import decode_request

#: How far back a certificate's validity starts (clocks of hosts differ a little); at most a tenth of
#: its validity, so a short-lived certificate's rotation point stays ahead of its issue.
BACKDATE = datetime.timedelta(minutes=5)


class SignerError(Exception):
    """The CA files cannot be used; the message names the file."""


@dataclass(frozen=True)
class SigningOptions:
    """Where the signing CA is and how long the certificates it signs last."""

    cert_file: Path
    key_file: Path
    duration: float = 365 * 86400.0  # seconds (Kubernetes' --cluster-signing-duration: a year)


class CsrSigner:
    """The CA certificate and key that sign pool client certificates."""

    def __init__(self, ca: x509.Certificate, key: CertificateIssuerPrivateKeyTypes, duration: float) -> None:
        if duration <= 0:
            raise SignerError(f"the signing duration must be positive, got {duration}")
        self.ca, self.key, self.duration = ca, key, duration

    @classmethod
    def load(cls, options: SigningOptions) -> CsrSigner:
        try:
            ca = x509.load_pem_x509_certificate(options.cert_file.read_bytes())
        except (OSError, ValueError) as exc:
            raise SignerError(f"--cluster-signing-cert-file {options.cert_file}: not a readable PEM "
                              f"certificate: {exc}") from None
        try:
            key = serialization.load_pem_private_key(options.key_file.read_bytes(), password=None)
        except (OSError, ValueError, TypeError) as exc:
            raise SignerError(f"--cluster-signing-key-file {options.key_file}: not a readable unencrypted "
                              f"PEM key: {exc}") from None
        if not isinstance(key, (ec.EllipticCurvePrivateKey, rsa.RSAPrivateKey)):
            raise SignerError(f"--cluster-signing-key-file {options.key_file}: an ECDSA or RSA key is needed")
        return cls(ca, key, options.duration)

    def sign(self, spec: dict[str, Any], now: datetime.datetime | None = None) -> bytes:
        """The PEM certificate for a request's ``spec`` (already approved). Raises CsrError on a bad
        request."""
        csr = decode_request(str(spec.get("request") or ""))
        seconds = self.duration
        if spec.get("expirationSeconds"):
            seconds = min(seconds, float(spec["expirationSeconds"]))
        # Certificates hold whole seconds: truncating each end on its own would make the validity a
        # second longer now and then, so both ends are whole seconds from the start.
        validity = datetime.timedelta(seconds=max(1, int(seconds)))
        now = (now or datetime.datetime.now(datetime.UTC)).replace(microsecond=0)
        backdate = datetime.timedelta(seconds=int(min(BACKDATE, validity / 10).total_seconds()))
        not_after = min(now + validity, self.ca.not_valid_after_utc)
        usages = set(spec.get("usages") or [])
        cert = (
            x509.CertificateBuilder()
            .subject_name(csr.subject)
            .issuer_name(self.ca.subject)
            .public_key(csr.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - backdate)
            .not_valid_after(not_after)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(
                digital_signature=True, key_encipherment="key encipherment" in usages,
                content_commitment=False, data_encipherment=False, key_agreement=False, key_cert_sign=False,
                crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                self.ca.public_key()), critical=False)  # type: ignore[arg-type]
            .sign(self.key, hashes.SHA256())
        )
        return cert.public_bytes(serialization.Encoding.PEM)


def encode_certificate(pem: bytes) -> str:
    """``status.certificate``: the PEM, base64-encoded (Go's ``[]byte`` in JSON)."""
    return base64.b64encode(pem).decode()
