"""CertificateSigningRequests without a server: the kind's validation, the approver's decisions for
bootstrap tokens and renewing pool identities, the signer's certificates and the rotation deadline."""

from __future__ import annotations

import base64
import datetime
import random
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from ironpool.api import errors
from ironpool.api.certificates import POOL_CLIENT_SIGNER
from ironpool.api.resources import by_kind
from ironpool.api.validation import validate_create, validate_update
from ironpool.apiserver.serving.certs import CertificateAuthority
from ironpool.certificates.approver import decide
from ironpool.certificates.bootstrap import PoolIdentity, request_pem
from ironpool.certificates.rotation import rotation_deadline
from ironpool.certificates.signer import CsrSigner

CSR = by_kind("certificates.k8s.io/v1", "CertificateSigningRequest")
MACHINE = PoolIdentity("compute.ironcore.dev:system:machinepool:p1",
                       "compute.ironcore.dev:system:machinepools")
VOLUME = PoolIdentity("storage.ironcore.dev:system:volumepool:p1", "storage.ironcore.dev:system:volumepools")
OTHER = PoolIdentity("compute.ironcore.dev:system:machinepool:p2", "compute.ironcore.dev:system:machinepools")
BOOTSTRAP = ("system:bootstrap:abcdef", ["system:authenticated", "system:bootstrappers",
                                          "system:bootstrappers:ironpool:pool:p1"])


def _request(identity: PoolIdentity) -> str:
    return base64.b64encode(request_pem(ec.generate_private_key(ec.SECP256R1()), identity)).decode()


def _csr(identity: PoolIdentity, requester: tuple[str, list[str]] = BOOTSTRAP, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
            "metadata": {"name": "csr-1"},
            "spec": {"request": _request(identity), "signerName": POOL_CLIENT_SIGNER,
                     "usages": ["digital signature", "client auth"], "username": requester[0],
                     "groups": requester[1], **spec}}


def _invalid_fields(fn: Any, *args: Any) -> set[str]:
    with pytest.raises(errors.Invalid) as exc:
        fn(*args)
    return {c["field"] for c in exc.value.to_status()["details"]["causes"]}


def test_a_request_is_validated_field_by_field() -> None:
    validate_create(CSR, _csr(MACHINE))
    bad = _csr(MACHINE, expirationSeconds=60)
    bad["spec"].update(request=base64.b64encode(b"-----BEGIN CERTIFICATE REQUEST-----\nxx\n").decode(),
                       signerName="no-domain", usages=[])
    assert _invalid_fields(validate_create, CSR, bad) == {
        "spec.request", "spec.signerName", "spec.usages", "spec.expirationSeconds"}


def test_a_decision_once_made_stays_and_the_spec_never_changes() -> None:
    old = validate_create(CSR, _csr(MACHINE))
    old["status"] = {"conditions": [{"type": "Approved", "status": "True", "reason": "AutoApproved"}]}
    both = {**old, "status": {"conditions": [*old["status"]["conditions"],
                                             {"type": "Denied", "status": "True"}]}}
    with pytest.raises(errors.Invalid, match="either approved or denied"):
        validate_create(CSR, both)
    other = {**old, "spec": {**old["spec"], "username": "mallory"}}
    assert "spec.username" in _invalid_fields(validate_update, CSR, old, other)
    unsigned = _csr(MACHINE)
    unsigned["status"] = {"certificate": "eA=="}
    with pytest.raises(errors.Invalid, match="only on an approved request"):
        validate_create(CSR, unsigned)


def test_a_bootstrap_token_is_approved_for_its_pools_identities_only() -> None:
    for identity in (MACHINE, VOLUME):
        decision = decide(_csr(identity))
        assert decision is not None and (decision.type, decision.reason) == ("Approved", "AutoApproved")
    denied = decide(_csr(OTHER))
    assert denied is not None and (denied.type, denied.reason) == ("Denied", "PoolIdentityMismatch")
    assert "spec.request" in denied.message and "machinepool:p2" in denied.message \
        and "machinepool:p1" in denied.message
    server = decide(_csr(MACHINE, usages=["client auth", "server auth"]))
    assert server is not None and server.type == "Denied" and "spec.usages" in server.message
    no_pool = decide(_csr(MACHINE, requester=("system:bootstrap:abcdef", ["system:bootstrappers"])))
    assert no_pool is not None and no_pool.reason == "NoPool" and "spec.groups" in no_pool.message


def test_a_pool_identity_renews_only_its_own_name_and_others_wait_for_an_administrator() -> None:
    renewing = (MACHINE.user, [MACHINE.group, "system:authenticated"])
    assert decide(_csr(MACHINE, requester=renewing)).type == "Approved"  # type: ignore[union-attr]
    assert decide(_csr(VOLUME, requester=renewing)).type == "Denied"  # type: ignore[union-attr]
    assert decide(_csr(MACHINE, requester=("alice", ["developers"]))) is None
    assert decide(_csr(MACHINE, signerName="example.com/other")) is None
    decided = _csr(MACHINE)
    decided["status"] = {"conditions": [{"type": "Denied", "status": "True"}]}
    assert decide(decided) is None


def test_the_signer_issues_the_requested_subject_for_its_duration(tmp_path: Any) -> None:
    ca = CertificateAuthority.ensure(tmp_path / "pki")
    signer = CsrSigner(ca.cert, ca.key, duration=3600)
    now = datetime.datetime(2026, 11, 28, 12, tzinfo=datetime.UTC)
    cert = x509.load_pem_x509_certificate(signer.sign(_csr(MACHINE)["spec"], now))
    assert ca.signed(cert)
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == MACHINE.user
    orgs = cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)
    assert [a.value for a in orgs] == [MACHINE.group]
    assert cert.not_valid_after_utc == now + datetime.timedelta(hours=1)
    assert now - cert.not_valid_before_utc == datetime.timedelta(minutes=5)
    eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    shorter = x509.load_pem_x509_certificate(signer.sign(_csr(MACHINE, expirationSeconds=600)["spec"], now))
    assert shorter.not_valid_after_utc == now + datetime.timedelta(minutes=10)
    # A short duration at an instant just past a whole second: a tenth backdated, in whole seconds
    # at both ends (a certificate holds no fractions; the validity never gains a second from them).
    brief = CsrSigner(ca.cert, ca.key, duration=12)
    for micro in (1, 150_000, 999_999):
        at = now.replace(microsecond=micro)
        cert = x509.load_pem_x509_certificate(brief.sign(_csr(MACHINE)["spec"], at))
        assert (cert.not_valid_before_utc, cert.not_valid_after_utc) == (
            now - datetime.timedelta(seconds=1), now + datetime.timedelta(seconds=12)), micro


def test_rotation_comes_at_70_to_90_percent_of_the_validity(tmp_path: Any) -> None:
    ca = CertificateAuthority.ensure(tmp_path / "pki")
    now = datetime.datetime(2026, 11, 28, 12, tzinfo=datetime.UTC)
    cert = x509.load_pem_x509_certificate(CsrSigner(ca.cert, ca.key, 100).sign(_csr(MACHINE)["spec"], now))
    start = cert.not_valid_before_utc
    total = cert.not_valid_after_utc - start
    rng = random.Random(7)
    fractions = [(rotation_deadline(cert, rng) - start) / total for _ in range(200)]
    assert 0.7 <= min(fractions) < 0.75 and 0.85 < max(fractions) <= 0.9  # jittered over the whole range
