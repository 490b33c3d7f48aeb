"""CertificateSigningRequest (``certificates.k8s.io/v1``): validated as Kubernetes validates it. The
request must be a signed PKCS#10 request, the signer named, the usages known; the spec never changes
once created; the requester's name and groups are the apiserver's to set (:meth:`record_requester`);
a request is never both approved and denied, and carries a certificate only once approved. Decisions
are written through ``certificatesigningrequests/approval``, the certificate through ``/status``."""

from __future__ import annotations

from ironpool.api.certificates import (
    APPROVED,
    CERTIFICATES_GROUP,
    CERTIFICATES_VERSION,
    CONDITION_TYPES,
    DENIED,
    CertificateSigningRequest,
    CsrError,
    decode_request,
)
from ironpool.api.columns import AGE, NAME, Column, field
from ironpool.api.fieldpath import FieldErrors
from ironpool.api.resource_info import ResourceInfo
from ironpool.api.rules import immutable
from ironpool.api.strategy import Obj, Strategy
from ironpool.api.subresources import Subresource

#: ``certificatesigningrequests/approval``: a PUT (or PATCH) of the CSR whose status conditions say
#: Approved or Denied; nothing else of the body is taken.
APPROVAL = Subresource("approval", ("get", "update", "patch"))

_MIN_EXPIRATION = 600  # seconds, as Kubernetes
_SPEC_FIELDS = ("request", "signerName", "expirationSeconds", "usages", "username", "uid", "groups", "extra")


def _decision(obj: Obj) -> str:
    """``Approved``, ``Denied``, ``Approved,Issued`` ... as kubectl's CONDITION column."""
    status = obj.get("status") or {}
    parts = [c.get("type", "") for c in status.get("conditions") or [] if c.get("status") == "True"]
    if status.get("certificate"):
        parts.append("Issued")
    return ",".join(parts) or "Pending"


class CertificateSigningRequestStrategy(Strategy[CertificateSigningRequest]):
    """Field rules of a CSR, and the requester stamped on create."""

    info = ResourceInfo(CERTIFICATES_GROUP, CERTIFICATES_VERSION, "CertificateSigningRequest",
                        "certificatesigningrequests", "certificatesigningrequest", ("csr",), False,
                        CertificateSigningRequest, True)
    columns = (NAME, AGE, Column("SIGNERNAME", field("spec.signerName")),
               Column("REQUESTOR", field("spec.username")), Column("CONDITION", _decision))
    subresources = (APPROVAL,)

    def record_requester(self, obj: Obj, name: str, uid: str, groups: list[str],
                         extra: dict[str, list[str]]) -> None:
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return  # validation names the missing spec
        spec["username"], spec["uid"], spec["groups"] = name, uid, sorted(groups)
        if extra:
            spec["extra"] = extra
        else:
            spec.pop("extra", None)

    def validate(self, obj: CertificateSigningRequest, errs: FieldErrors) -> None:
        spec = obj.spec
        if not spec.request:
            errs.required("spec.request", "a PEM CERTIFICATE REQUEST, base64-encoded")
        else:
            try:
                decode_request(spec.request)
            except CsrError as exc:
                errs.invalid("spec.request", "<request>", str(exc))
        if not spec.signer_name:
            errs.required("spec.signerName", "e.g. ironpool.dev/pool-client")
        elif "/" not in spec.signer_name or spec.signer_name.startswith("/"):
            errs.invalid("spec.signerName", spec.signer_name, "must be a domain-prefixed name (DOMAIN/NAME)")
        if not spec.usages:
            errs.required("spec.usages", "the key usages asked for, e.g. [client auth]")
        elif len(set(spec.usages)) != len(spec.usages):
            errs.invalid("spec.usages", spec.usages, "must not repeat a usage")
        if spec.expiration_seconds is not None and spec.expiration_seconds < _MIN_EXPIRATION:
            errs.invalid("spec.expirationSeconds", spec.expiration_seconds,
                         f"must be at least {_MIN_EXPIRATION}")
        status = obj.status
        if status is None:
            return
        seen: set[str] = set()
        for i, c in enumerate(status.conditions or []):
            if c.type in seen and c.type in CONDITION_TYPES:
                errs.invalid(f"status.conditions[{i}].type", c.type, "may appear only once")
            seen.add(c.type)
            if c.type in (APPROVED, DENIED) and c.status != "True":
                errs.invalid(f"status.conditions[{i}].status", c.status,
                             f"a {c.type} condition must have status True")
        if APPROVED in seen and DENIED in seen:
            errs.invalid("status.conditions", "Approved,Denied", "a request is either approved or denied")
        if status.certificate and APPROVED not in seen:
            errs.invalid("status.certificate", "<certificate>", "is set only on an approved request")

    def validate_update(self, old: Obj, new: Obj, errs: FieldErrors) -> None:
        for name in _SPEC_FIELDS:
            immutable(old, new, ("spec", name), errs)
        before = (old.get("status") or {}).get("certificate")
        if before and (new.get("status") or {}).get("certificate") != before:
            errs.invalid("status.certificate", "<certificate>", "is set once and never changes")
        kept = {c.get("type") for c in (old.get("status") or {}).get("conditions") or []
                if c.get("type") in (APPROVED, DENIED)}
        now = {c.get("type") for c in (new.get("status") or {}).get("conditions") or []}
        for lost in sorted(kept - now):
            errs.invalid("status.conditions", lost, f"the {lost} condition cannot be removed")

