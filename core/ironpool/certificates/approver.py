"""Which CertificateSigningRequests are approved without an administrator, as Kubernetes'
csrapproving controller approves a kubelet's client certificate.

A request for :data:`~ironpool.api.certificates.POOL_CLIENT_SIGNER` is approved when its subject is
exactly a pool identity (CN the pool user, O its pools group, nothing else) that the requester may
hold: a bootstrap token issued for pool P (group ``system:bootstrappers:ironpool:pool:P``) gets P's
MachinePool and VolumePool identities; a pool identity renewing its certificate gets itself. Such a
requester asking for another name, or for usages a client certificate does not need, is denied with
the reason and the field named. Requests of anyone else are left for an administrator to decide.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ironpool.api.certificates import (
    APPROVED,
    BOOTSTRAP_POOL_GROUP_PREFIX,
    BOOTSTRAP_USER_PREFIX,
    BOOTSTRAPPERS_GROUP,
    DENIED,
    POOL_CLIENT_SIGNER,
    POOL_CLIENT_USAGES,
    CsrError,
    condition_of,
    decode_request,
    requested_subject,
)
from ironpool.api.fleet import (
    MACHINE_POOL_USER_PREFIX,
    MACHINE_POOLS_GROUP,
    VOLUME_POOL_USER_PREFIX,
    VOLUME_POOLS_GROUP,
)

_POOL_IDENTITIES = ((MACHINE_POOL_USER_PREFIX, MACHINE_POOLS_GROUP),
                    (VOLUME_POOL_USER_PREFIX, VOLUME_POOLS_GROUP))


@dataclass(frozen=True)
class Decision:
    """Approve (``Approved``) or deny (``Denied``), with the condition's reason and message."""

    type: str
    reason: str
    message: str


def pool_identities(pool: str) -> list[tuple[str, str]]:
    """The ``(CN, O)`` of ``pool``'s two identities: its MachinePool's and its VolumePool's."""
    return [(prefix + pool, group) for prefix, group in _POOL_IDENTITIES]


def _allowed(username: str, groups: list[str]) -> tuple[str, list[tuple[str, str]]] | None:
    """What the requester may be issued: ``(who, [(CN, O), ...])``, or None if it is no pool's."""
    if username.startswith(BOOTSTRAP_USER_PREFIX) and BOOTSTRAPPERS_GROUP in groups:
        pools = sorted(g[len(BOOTSTRAP_POOL_GROUP_PREFIX):] for g in groups
                       if g.startswith(BOOTSTRAP_POOL_GROUP_PREFIX))
        if len(pools) != 1:
            return f"bootstrap token {username}", []
        return f"the bootstrap token of pool {pools[0]}", pool_identities(pools[0])
    for prefix, group in _POOL_IDENTITIES:
        if username.startswith(prefix) and username[len(prefix):] and group in groups:
            return f"pool identity {username}", [(username, group)]
    return None


def _name(cn: str, orgs: tuple[str, ...] | list[str]) -> str:
    return f"CN={cn}" + "".join(f", O={o}" for o in orgs)


def decide(csr: dict[str, Any]) -> Decision | None:
    """The decision on ``csr`` (its JSON), or None: not a pool client request of a pool's requester,
    or decided already."""
    spec = csr.get("spec") or {}
    if spec.get("signerName") != POOL_CLIENT_SIGNER:
        return None
    if condition_of(csr, APPROVED) or condition_of(csr, DENIED):
        return None
    allowed = _allowed(str(spec.get("username") or ""), [str(g) for g in spec.get("groups") or []])
    if allowed is None:
        return None  # an administrator's to decide (kubectl certificate approve)
    who, identities = allowed
    if not identities:
        return Decision(DENIED, "NoPool", f"spec.groups: {who} names no single pool "
                        f"({BOOTSTRAP_POOL_GROUP_PREFIX}<pool>)")
    try:
        subject = requested_subject(decode_request(str(spec.get("request") or "")))
    except CsrError as exc:
        return Decision(DENIED, "InvalidRequest", f"spec.request: {exc}")
    expected = " or ".join(_name(cn, [o]) for cn, o in identities)
    if (subject.common_name, subject.organizations) not in [(cn, (o,)) for cn, o in identities]:
        return Decision(DENIED, "PoolIdentityMismatch",
                        f"spec.request: the subject {_name(subject.common_name, subject.organizations)} is "
                        f"not an identity {who} may hold (expected {expected})")
    if subject.other_attributes or subject.has_alt_names:
        extra = ", ".join(subject.other_attributes) or "alt names"
        return Decision(DENIED, "PoolIdentityMismatch", "spec.request: a pool client certificate names only "
                        f"CN and O (the request also has {extra})")
    usages = set(spec.get("usages") or [])
    if "client auth" not in usages or not usages <= POOL_CLIENT_USAGES:
        return Decision(DENIED, "UsagesNotAllowed", f"spec.usages: {sorted(usages)} must include "
                        f"'client auth' and be among {sorted(POOL_CLIENT_USAGES)}")
    return Decision(APPROVED, "AutoApproved", f"Auto approving pool client certificate "
                    f"{_name(subject.common_name, subject.organizations)} for {who}")
