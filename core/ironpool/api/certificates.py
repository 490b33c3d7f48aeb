"""``certificates.k8s.io/v1`` CertificateSigningRequest: a client asks the control plane to sign a key
it made, as a kubelet does in its TLS bootstrap.

The same shape as Kubernetes' CSR: ``spec.request`` is a PEM ``CERTIFICATE REQUEST`` (base64 in JSON,
as Go's ``[]byte``), ``spec.signerName`` the signer asked for, ``spec.usages`` the key usages asked
for; ``spec.username``/``uid``/``groups``/``extra`` are the requester's, set by the apiserver (never by
the client). ``status.conditions`` carry ``Approved``/``Denied`` (set through the ``approval``
subresource) and ``Failed``; ``status.certificate`` is the signed PEM, written by the signer.

ironpool's signer is :data:`POOL_CLIENT_SIGNER` (Kubernetes' ``kubernetes.io/kube-apiserver-client-kubelet``
for pools): client certificates whose subject is exactly a pool identity (CN the pool user, O its
pools group), approved automatically for a bootstrap token of that pool or for the pool identity
itself renewing (:mod:`ironpool.certificates`).
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any, Literal

from cryptography import x509
from cryptography.x509.oid import NameOID
from pydantic import Field

from ironpool.api.meta import ApiModel, Condition, ObjectMeta

CERTIFICATES_GROUP = "certificates.k8s.io"
CERTIFICATES_VERSION = "v1"

#: The signer of pool client certificates (Kubernetes: ``kubernetes.io/kube-apiserver-client-kubelet``).
POOL_CLIENT_SIGNER = "ironpool.dev/pool-client"

#: The users and groups of bootstrap tokens, as Kubernetes names them: ``system:bootstrap:<token id>``
#: in ``system:bootstrappers`` and, for ironpool, ``system:bootstrappers:ironpool:pool:<pool>``, the
#: pool the token was issued for.
BOOTSTRAP_USER_PREFIX = "system:bootstrap:"
BOOTSTRAPPERS_GROUP = "system:bootstrappers"
BOOTSTRAP_POOL_GROUP_PREFIX = "system:bootstrappers:ironpool:pool:"

APPROVED, DENIED, FAILED = "Approved", "Denied", "Failed"
CONDITION_TYPES = (APPROVED, DENIED, FAILED)

KeyUsage = Literal[
    "signing", "digital signature", "content commitment", "key encipherment", "key agreement",
    "data encipherment", "cert sign", "crl sign", "encipher only", "decipher only", "any",
    "server auth", "client auth", "code signing", "email protection", "s/mime", "ipsec end system",
    "ipsec tunnel", "ipsec user", "timestamping", "ocsp signing", "microsoft sgc", "netscape sgc",
]
#: The usages a pool client certificate may ask for (kubelet asks for the first three).
POOL_CLIENT_USAGES = frozenset({"digital signature", "key encipherment", "client auth"})


class CertificateSigningRequestSpec(ApiModel):
    """What is asked to be signed, by whom (set by the apiserver) and by which signer."""

    request: str = ""
    """The PEM-encoded PKCS#10 certificate request, base64-encoded."""
    signer_name: str = ""
    """The signer asked to sign (``ironpool.dev/pool-client``)."""
    expiration_seconds: int | None = None
    """The validity asked for; the signer may give less (never under 600 seconds may be asked)."""
    usages: list[KeyUsage] = Field(default_factory=list)
    """The key usages asked for."""
    username: str | None = None
    """Who created the request (set by the apiserver)."""
    uid: str | None = None
    """The uid of who created the request (set by the apiserver)."""
    groups: list[str] | None = None
    """The groups of who created the request (set by the apiserver)."""
    extra: dict[str, list[str]] | None = None
    """Extra attributes of who created the request (set by the apiserver)."""


class CertificateSigningRequestStatus(ApiModel):
    """Whether the request was approved or denied, and the certificate once signed."""

    conditions: list[Condition] | None = None
    """Approved, Denied, Failed."""
    certificate: str | None = None
    """The signed certificate, PEM, base64-encoded."""


class CertificateSigningRequest(ApiModel):
    """A CertificateSigningRequest (cluster-scoped)."""

    api_version: str | None = None
    kind: str | None = None
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    """Standard object metadata."""
    spec: CertificateSigningRequestSpec = Field(default_factory=CertificateSigningRequestSpec)
    """The request."""
    status: CertificateSigningRequestStatus | None = None
    """The decision and the certificate."""


class CsrError(ValueError):
    """A CSR's ``spec.request`` cannot be used; the message says why (the caller names the field)."""


@dataclass(frozen=True)
class RequestedSubject:
    """What a PKCS#10 request asks for: its CN, its O attributes (as Kubernetes reads user and groups),
    and whether it names anything else a client certificate must not carry."""

    common_name: str
    organizations: tuple[str, ...]
    other_attributes: tuple[str, ...]
    has_alt_names: bool


def decode_request(data: str) -> x509.CertificateSigningRequest:
    """The certificate request of ``spec.request`` (base64 of a PEM), its signature checked."""
    try:
        pem = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise CsrError("must be base64 of a PEM CERTIFICATE REQUEST") from None
    try:
        csr = x509.load_pem_x509_csr(pem)
    except ValueError as exc:
        raise CsrError(f"not a PEM CERTIFICATE REQUEST: {exc}") from None
    if not csr.is_signature_valid:
        raise CsrError("the request's signature does not match its public key")
    return csr


def requested_subject(csr: x509.CertificateSigningRequest) -> RequestedSubject:
    cn = [str(a.value) for a in csr.subject.get_attributes_for_oid(NameOID.COMMON_NAME)]
    orgs = tuple(str(a.value) for a in csr.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME))
    others = tuple(a.oid.dotted_string for a in csr.subject
                   if a.oid not in (NameOID.COMMON_NAME, NameOID.ORGANIZATION_NAME))
    try:
        csr.extensions.get_extension_for_class(x509.SubjectAlternativeName)
        alt = True
    except x509.ExtensionNotFound:
        alt = False
    return RequestedSubject(cn[0] if len(cn) == 1 else "", orgs, others, alt)


def condition_of(obj: dict[str, Any], ctype: str) -> dict[str, Any] | None:
    """The condition ``ctype`` with status True of a CSR's JSON, if it has one."""
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == ctype and c.get("status") == "True":
            return dict(c)
    return None
