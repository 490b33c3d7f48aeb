"""What a machine pool may claim, judged on the stored object: a Volume's ``spec.claimRef`` and
``status.attachment``, a NetworkInterface's ``spec.machineRef`` (see
:mod:`ironpool.apiserver.auth.pool_authorizer`, whose conditions these are). A claim is allowed along
the pool graph, as a get is: the claiming Machine is live, bound to the pool and references the
object, so a pool cannot take what none of its Machines asks for."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ironpool.api import errors
from ironpool.apiserver.auth.interface import ObjectCheck
from ironpool.apiserver.auth.pool_graph import MACHINES, edges_of
from ironpool.store.interface import Document, Store

Deny = Callable[[str], errors.Forbidden]

# What a poollet may change on the main resource of an object bound to its pool.
BOUND_METADATA = (("metadata", "finalizers"), ("metadata", "labels"), ("metadata", "annotations"))
CLAIM = (("spec", "claimRef"), ("metadata", "generation"))
NIC_CLAIM = (("spec", "machineRef"), ("spec", "providerID"), ("metadata", "generation"), *BOUND_METADATA)


def without(doc: Document, paths: tuple[tuple[str, ...], ...]) -> dict[str, Any]:
    """A shallow copy of ``doc`` without the fields at ``paths`` (the original is not touched)."""
    out = dict(doc)
    for path in paths:
        cur = out
        for key in path[:-1]:
            child = cur.get(key)
            if not isinstance(child, dict):
                break
            cur[key] = child = dict(child)
            cur = child
        else:
            cur.pop(path[-1], None)
    return out


def machine_pool_of(machine: Document) -> str | None:
    """The pool a Machine is bound to, if any."""
    ref = (machine.get("spec") or {}).get("machinePoolRef") or {}
    name = ref.get("name") if isinstance(ref, dict) else None
    return str(name) if name else None


async def _claimant(store: Store, namespace: str | None, claim: dict[str, Any]) -> Document | None:
    """The Machine a claim names, or None if it is gone (or replaced: another uid): a stale claim."""
    machine = await store.get(MACHINES.key(namespace, str(claim.get("name") or "")))
    if machine is None or (claim.get("uid") and machine["metadata"].get("uid") != claim["uid"]):
        return None
    return machine


async def machine_in_pool(
    store: Store, namespace: str | None, claim: dict[str, Any], pool: str
) -> bool | None:
    """True if the claim's Machine is bound to ``pool``, False if to another pool, None if it is gone
    (or replaced: another uid), i.e. the claim is stale."""
    machine = await _claimant(store, namespace, claim)
    return None if machine is None else machine_pool_of(machine) == pool


async def may_claim(store: Store, claimed: Document, claim: dict[str, Any], pool: str, plural: str) -> bool:
    """Whether ``pool`` may make the claim ``claim`` on ``claimed`` (a Volume or NetworkInterface):
    along the pool graph, as for a get, i.e. the claiming Machine is live, bound to ``pool`` and
    references the object (a pool cannot take what none of its Machines asks for)."""
    meta = claimed.get("metadata") or {}
    machine = await _claimant(store, meta.get("namespace"), claim)
    if machine is None or machine_pool_of(machine) != pool:
        return False
    edges = edges_of(MACHINES, machine)
    return edges is not None and (plural, str(meta.get("name") or "")) in edges[2]


async def _claim_moves(deny: Deny, store: Store, claimed: Document, old_ref: dict[str, Any] | None,
                       new_ref: dict[str, Any] | None, pool: str, plural: str, what: str) -> None:
    """A claim set or cleared by ``pool``: a new one only for its own live Machine that references
    ``claimed``, and an old one only if its Machine is of this pool or gone (a stale claim)."""
    if new_ref and not await may_claim(store, claimed, new_ref, pool, plural):
        raise deny(f'machine "{new_ref.get("name")}" is not a live machine bound to pool "{pool}" '
                   f"that references this {what}")
    namespace = claimed["metadata"].get("namespace")
    if old_ref and await machine_in_pool(store, namespace, old_ref, pool) is False:
        raise deny(f'the {what} is claimed by machine "{old_ref.get("name")}" of another pool')


def volume_claims_for_pool(deny: Deny, pool: str) -> ObjectCheck:
    """A machine pool sets ``spec.claimRef`` of a Volume for its own Machines and clears claims of its
    own or of gone Machines; nothing else of the Volume. Reads the claimed Machine (claims are rare)."""

    async def check(old: Document | None, new: Document | None, store: Store) -> None:
        if old is None or new is None:
            raise deny("a machine pool identity may only change spec.claimRef of volumes")
        if without(old, CLAIM) != without(new, CLAIM):
            raise deny("a machine pool identity may change only spec.claimRef of a volume")
        old_claim = (old.get("spec") or {}).get("claimRef")
        new_claim = (new.get("spec") or {}).get("claimRef")
        if old_claim == new_claim:
            return
        await _claim_moves(deny, store, old, old_claim, new_claim, pool, "volumes", "volume")

    return check


_ATTACHMENT = (("status", "attachment"), ("metadata", "generation"))


def volume_attachments_for_pool(deny: Deny, pool: str) -> ObjectCheck:
    """A machine pool records a Volume's ``status.attachment`` for itself (a live Machine bound to it
    that references the Volume) and clears only its own; nothing else of the status."""

    async def check(old: Document | None, new: Document | None, store: Store) -> None:
        def rest(doc: Document) -> dict[str, Any]:
            out = without(doc, _ATTACHMENT)
            if not out.get("status"):
                out.pop("status", None)  # no status, or one with nothing but the attachment
            return out

        if old is None or new is None or rest(old) != rest(new):
            raise deny("a machine pool identity may change only status.attachment of a volume")
        before = (old.get("status") or {}).get("attachment")
        after = (new.get("status") or {}).get("attachment")
        if before == after:
            return
        if before and before.get("pool") != pool:
            raise deny(f'the volume is attached on pool "{before.get("pool")}", not "{pool}"')
        if after and (after.get("pool") != pool
                      or not await may_claim(store, old, after.get("machineRef") or {}, pool, "volumes")):
            raise deny("a volume is attached only to a live machine bound to pool "
                       f'"{pool}" that references it')

    return check


def nic_claims_for_pool(deny: Deny, pool: str) -> ObjectCheck:
    """A machine pool sets ``spec.machineRef`` of a NetworkInterface to its own Machines and clears
    claims of its own or of gone Machines; of a NIC its Machine holds it writes ``spec.providerID``
    and metadata. Reads the claimed Machine (claims are rare)."""

    async def check(old: Document | None, new: Document | None, store: Store) -> None:
        if old is None or new is None:
            raise deny("a machine pool identity may only update network interfaces")
        if without(old, NIC_CLAIM) != without(new, NIC_CLAIM):
            raise deny("a machine pool identity may change only spec.machineRef, spec.providerID, "
                       "finalizers, labels and annotations of a network interface")
        namespace = old["metadata"].get("namespace")
        old_ref = (old.get("spec") or {}).get("machineRef")
        new_ref = (new.get("spec") or {}).get("machineRef")
        if new_ref == old_ref:  # providerID or metadata: only of a NIC one of its Machines holds
            if not old_ref or await machine_in_pool(store, namespace, old_ref, pool) is not True:
                raise deny(f'the network interface is not claimed by a machine bound to pool "{pool}"')
            return
        await _claim_moves(deny, store, old, old_ref, new_ref, pool, "networkinterfaces", "network interface")

    return check
