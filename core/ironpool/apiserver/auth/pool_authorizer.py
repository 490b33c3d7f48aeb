"""The apiserver's authorizer: what pool identities may do (IronCore's poollet RBAC plus the
NodeRestriction-style check that a poollet writes only objects bound to its own pool).

Identities (the user and group names IronCore's poollets authenticate as):

- group ``system:masters``: everything;
- user ``compute.ironcore.dev:system:machinepool:<pool>`` (group
  ``compute.ironcore.dev:system:machinepools``) and ``storage.ironcore.dev:system:volumepool:<pool>``
  (group ``storage.ironcore.dev:system:volumepools``): only what that pool's poollet needs, below;
- every other authenticated user: whatever RBAC grants (:mod:`ironpool.apiserver.auth.rbac`), or
  everything with ``--authorization-mode AlwaysAllow``.

A pool identity may read classes and namespaces; get objects of its kind and list/watch them only
with ``fieldSelector=spec.<kind>PoolRef.name=<pool>`` (what the poollet's informer asks for);
create events; get, create, update and patch its own pool (and its status); update/patch objects
bound to its pool (spec unchanged, except clearing a stale ``spec.claimRef`` of a volume) and their
status; of a Volume's status only ``status.attachment``, set to one of its own Machines that
references the Volume, or cleared when its pool holds it. Secrets, Volumes and NetworkInterfaces it
may get only along the pool graph
(:mod:`ironpool.apiserver.auth.pool_graph`, Kubernetes' Node authorizer): while a Machine (or, for a
volume pool, a Volume) bound to it references them; it may never list or watch Secrets. The same
graph decides its claims: a machine pool sets ``spec.claimRef`` of a Volume only to a Machine bound
to it that references the Volume, and clears the claims of its own Machines (or stale ones, whose
Machine is gone); a volume pool may get Machines and write the access Secrets owned by its
Volumes. A machine pool lists and watches Volumes, Networks, NetworkInterfaces and Prefixes (its
informers) and claims NetworkInterfaces as it claims Volumes (``spec.machineRef``, set to a Machine
bound to it that references the NIC, cleared when that Machine is its own or gone), and of a NIC
claimed by one of its Machines it sets ``spec.providerID`` and the finalizers, labels and
annotations; nothing else (a NIC's status is the apiserver's allocation). Checks on the stored
object run inside the registry's read-modify-write loop (:data:`ObjectCheck`), so a pool cannot take
a Machine by patching ``machinePoolRef``, and the common requests read nothing extra.

A machine pool reads every Reservation (one may name any pool) and writes only its part of one: its
finalizer ``machinepoollet.ironcore.dev/reservation-<pool>``, and the ``state`` of its pool's entry
in the status.

A volume pool reads every VolumeSnapshot (a snapshot names no pool: its source Volume's pool holds
it) and writes those it holds: labelled with its pool (``volumepoollet.ironpool.dev/pool``), or not
yet labelled by any pool and taken of a Volume bound to it. On those it changes the finalizers,
labels (its pool label only to its own name) and annotations, and the status.

No pool identity opens a console (``machines/exec``), not even of its own Machines.

Each pool identity gets, creates, updates and patches its own heartbeat Lease (named after the pool,
in its kind's lease namespace, :mod:`ironpool.api.fleet`) and no other.

Each pool identity creates and reads CertificateSigningRequests, to renew its client certificate; the
certificate controller approves only a request for the requester's own name
(:mod:`ironpool.certificates.approver`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ironpool.api import errors
from ironpool.api.fleet import (
    MACHINE_POOL_LEASE_NAMESPACE,
    MACHINE_POOL_USER_PREFIX,
    MACHINE_POOLS_GROUP,
    VOLUME_POOL_LEASE_NAMESPACE,
    VOLUME_POOL_USER_PREFIX,
    VOLUME_POOLS_GROUP,
)
from ironpool.api.reservation import pool_finalizer
from ironpool.api.resources import RESOURCES, ResourceInfo
from ironpool.api.selectors import parse_field_selector
from ironpool.api.storage import VOLUME_POOL_LABEL
from ironpool.apiserver.auth.authentication import User
from ironpool.apiserver.auth.interface import Conditions, ObjectCheck
from ironpool.apiserver.auth.pool_claims import (
    BOUND_METADATA,
    CLAIM,
    Deny,
    machine_in_pool,
    nic_claims_for_pool,
    volume_attachments_for_pool,
    volume_claims_for_pool,
    without,
)
from ironpool.apiserver.auth.pool_graph import GRAPH_RESOURCES, PoolGraph, confirm
from ironpool.store.interface import Document, Store

_BY_PLURAL: dict[str, ResourceInfo] = {r.plural: r for r in RESOURCES}
VOLUMES_INFO = _BY_PLURAL["volumes"]
_READ = frozenset({"get", "list", "watch"})
_WRITE = frozenset({"update", "patch"})
_SHARED_READ = frozenset({"namespaces"})
_NETWORKING_READ = frozenset({"networks", "networkinterfaces", "prefixes"})
_LEASE_NAMESPACE = {"machine": MACHINE_POOL_LEASE_NAMESPACE, "volume": VOLUME_POOL_LEASE_NAMESPACE}


@dataclass(frozen=True)
class PoolKind:
    """The resources of one kind of pool."""

    name: str  # "machine" or "volume"
    pools: str
    objects: str
    classes: str
    pool_ref: str


MACHINE = PoolKind("machine", "machinepools", "machines", "machineclasses", "machinePoolRef")
VOLUME = PoolKind("volume", "volumepools", "volumes", "volumeclasses", "volumePoolRef")


@dataclass(frozen=True)
class PoolSubject:
    """The subject a poollet's user stands for: a pool of one kind (``pool`` is None for a member of
    the pools group without a pool name)."""

    kind: PoolKind
    pool: str | None


@functools.lru_cache(maxsize=1024)
def pool_subject(user: User) -> PoolSubject | None:
    """The pool ``user`` stands for, or None for administrators and ordinary users."""
    if user.is_admin:
        return None
    for kind, prefix, group in (
        (MACHINE, MACHINE_POOL_USER_PREFIX, MACHINE_POOLS_GROUP),
        (VOLUME, VOLUME_POOL_USER_PREFIX, VOLUME_POOLS_GROUP),
    ):
        if user.name.startswith(prefix) and user.name[len(prefix) :]:
            return PoolSubject(kind, user.name[len(prefix) :])
        if group in user.groups:
            return PoolSubject(kind, None)
    return None


def forbidden(
    user: User, verb: str, resource: str, namespace: str | None, name: str | None, reason: str = "",
    group: str | None = None,
) -> errors.Forbidden:
    """Kubernetes' wording: ``machines.compute.ironcore.dev "x" is forbidden: User "u" cannot update
    resource "machines" in API group "compute.ironcore.dev" in the namespace "default"`` (``group``:
    the group the request named, when not the resource's own)."""
    base = resource.partition("/")[0]
    if group is None:
        info = _BY_PLURAL.get(base)
        group = info.group if info is not None else ""
    group_resource = f"{base}.{group}" if group else base
    what = f'{group_resource} "{name}"' if name else group_resource
    scope = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
    message = (
        f'{what} is forbidden: User "{user.name}" cannot {verb} resource "{resource}" '
        f'in API group "{group}" {scope}'
    )
    if reason:
        message += f": {reason}"
    return errors.Forbidden(message, kind=base, name=name or "", group=group)


def authorize_pool(
    subject: PoolSubject, user: User, verb: str, resource: str, namespace: str | None, name: str | None,
    graph: PoolGraph | None,
) -> Conditions | None:
    """What a pool identity may do (see the module docstring); no store reads here, except through
    the conditions returned. Without a ``graph`` no Secret, Volume or NetworkInterface is reachable
    by get."""
    kind, pool = subject.kind, subject.pool
    base, _, sub = resource.partition("/")

    def deny(reason: str = "") -> errors.Forbidden:
        return forbidden(user, verb, resource, namespace, name, reason)

    if sub == "exec":  # a console is for users: a poollet has its runtime, not a reason to ask here
        raise deny("a pool identity may not open consoles")
    if verb in _READ and (base in _SHARED_READ or base == kind.classes):
        return None
    if base == "events" and verb == "create":
        return None
    if base == "certificatesigningrequests" and not sub and (verb == "create" or verb in _READ):
        # Renewing its own client certificate (Kubernetes' selfnodeclient): the certificate controller
        # approves a request only for the requester's own name, which the apiserver records.
        return None
    if pool is None:
        raise deny(f"the user name does not name a {kind.name} pool")
    if verb == "get" and base in GRAPH_RESOURCES and not (kind is VOLUME and base == "volumes"):
        return _along_graph(deny, graph, kind, pool, base, namespace or "", name or "")
    if base == "secrets" and verb in ("list", "watch"):
        raise deny("a pool identity may get only the secrets its machines and volumes reference, "
                   "one at a time")
    if base == "leases" and namespace == _LEASE_NAMESPACE[kind.name]:
        # Its heartbeat (NodeRestriction lets a kubelet write only its own node's Lease).
        if verb == "create" and not sub:
            return Conditions(objects=_creates_own(deny, pool, "Lease"))
        if (verb == "get" or verb in _WRITE) and name == pool and not sub:
            return None
        raise deny(f'a {kind.name} pool identity may only get, create, update and patch its own '
                   f'Lease "{pool}"')
    if base == kind.pools:
        if verb in _READ:
            if verb == "get" and name == pool:
                return None
            if verb != "get":
                return Conditions(selector=_require_selector(deny, "metadata.name", pool))
            raise deny(f'a {kind.name} pool identity may only read its own pool "{pool}"')
        if verb == "create" and not sub:
            return Conditions(objects=_creates_own(deny, pool, "pool"))
        if verb in _WRITE and name == pool:
            return None
        raise deny(f'a {kind.name} pool identity may only create, update and patch its own pool "{pool}"')
    if base == kind.objects:
        if verb == "get":
            return None
        if verb in ("list", "watch"):
            return Conditions(selector=_require_selector(deny, f"spec.{kind.pool_ref}.name", pool))
        if verb in _WRITE:
            return Conditions(objects=_bound(deny, kind, pool, status=sub == "status"))
    if kind is MACHINE and base == "volumes":
        if verb in ("list", "watch"):
            return None  # the poollet's informer; a machine's volumes live in any volume pool
        if verb in _WRITE and not sub:
            return Conditions(objects=volume_claims_for_pool(deny, pool))
        if verb in _WRITE and sub == "status":
            return Conditions(objects=volume_attachments_for_pool(deny, pool))
    if kind is MACHINE and base == "reservations":
        if verb in _READ:
            return None  # the reservation controller's informer: a Reservation may name any pool
        if verb in _WRITE:
            return Conditions(objects=_reservation_part(deny, pool, status=sub == "status"))
    if kind is MACHINE and base in _NETWORKING_READ:
        if verb in _READ:
            return None  # what a machine's NICs need: their Networks and ephemeral Prefixes
        if base == "networkinterfaces" and verb in _WRITE and not sub:
            return Conditions(objects=nic_claims_for_pool(deny, pool))
    if kind is VOLUME:
        if base == "machines" and verb == "get":
            return None  # to tell a live claim from a stale one
        if base == "secrets" and (verb == "create" or (verb in _WRITE and not sub)):
            return Conditions(objects=_owned_secret(deny, pool))
        if base == "volumesnapshots":
            if verb in _READ:
                return None  # its informer: a snapshot names no pool
            if verb in _WRITE:
                return Conditions(objects=_held_snapshot(deny, pool, status=sub == "status"))
    raise deny()


def _along_graph(deny: Deny, graph: PoolGraph | None, kind: PoolKind, pool: str, plural: str,
                 namespace: str, name: str) -> Conditions | None:
    """A get of a Secret, Volume or NetworkInterface: allowed while an edge from ``pool`` leads to it.
    When the mirror has no edge the store is asked (returned as a condition), since the mirror may be
    a moment behind another apiserver's write."""
    if graph is not None and graph.allows(kind.name, pool, plural, namespace, name):
        return None
    if kind is VOLUME and plural != "secrets":
        raise deny("")
    reason = (f'no {"machine" if kind is MACHINE else "volume"} bound to {kind.name} pool "{pool}" '
              f"references it")

    async def check(old: Document | None, new: Document | None, store: Store) -> None:
        if not await confirm(store, kind.name, pool, plural, namespace, name):
            raise deny(reason)

    return Conditions(objects=check)


def _require_selector(deny: Deny, path: str, value: str) -> Callable[[str], None]:
    """A list/watch condition: the field selector must include ``path=value``."""

    def check(field_selector: str) -> None:
        if field_selector:
            for req in parse_field_selector(field_selector).field_requirements:
                if req.path == path and req.op == "=" and req.value == value:
                    return
        raise deny(f"a pool identity may list and watch only with fieldSelector={path}={value}")

    return check


def _pool_of(doc: Document, kind: PoolKind) -> str | None:
    ref = (doc.get("spec") or {}).get(kind.pool_ref) or {}
    name = ref.get("name") if isinstance(ref, dict) else None
    return str(name) if name else None


def _creates_own(deny: Deny, pool: str, what: str) -> ObjectCheck:
    """A create condition: the object (its pool, or its heartbeat Lease) is named after the pool."""

    async def check(old: Document | None, new: Document | None, store: Store) -> None:
        got = (new or {}).get("metadata", {}).get("name")
        if got != pool:
            raise deny(f'a pool identity may only create its own {what} "{pool}", not "{got}"')

    return check


def _bound(deny: Deny, kind: PoolKind, pool: str, status: bool) -> ObjectCheck:
    """Writes to an object bound to ``pool``: judged on the stored object, so the binding cannot be
    taken over by the write itself; on the main resource only metadata may change (and a volume
    pool may clear a stale ``spec.claimRef``, one whose Machine is gone)."""

    async def check(old: Document | None, new: Document | None, store: Store) -> None:
        bound = _pool_of(old, kind) if old is not None else None
        if bound != pool:
            where = f'bound to {kind.name} pool "{bound}"' if bound else f"not bound to a {kind.name} pool"
            raise deny(f'the {kind.name} is {where}, not to "{pool}"')
        if status or new is None:
            return
        assert old is not None
        allowed: tuple[tuple[str, ...], ...] = BOUND_METADATA
        old_claim = (old.get("spec") or {}).get("claimRef")
        if kind is VOLUME and old_claim and not (new.get("spec") or {}).get("claimRef"):
            # The volumepoollet releases claims of gone Machines (IronCore's volumerelease controller).
            if await machine_in_pool(store, old["metadata"].get("namespace"), old_claim, "") is not None:
                name = old_claim.get("name")
                raise deny(f'machine "{name}" still exists; only a stale claim may be cleared')
            allowed = BOUND_METADATA + CLAIM
        if without(old, allowed) != without(new, allowed):
            claim = " (and clear a stale spec.claimRef)" if kind is VOLUME else ""
            raise deny(
                f"a {kind.name} pool identity may change only the finalizers, labels and annotations "
                f"of a {kind.name} bound to it{claim}"
            )

    return check


def _reservation_part(deny: Deny, pool: str, status: bool) -> ObjectCheck:
    """A machine pool writes only its own part of a Reservation: its finalizer on the main resource,
    the ``state`` of its pool's entry in the status."""
    mine = pool_finalizer(pool)

    def others(doc: Document) -> list[dict[str, Any]]:
        entries = [dict(e) for e in (doc.get("status") or {}).get("pools") or [] if isinstance(e, dict)]
        for entry in entries:
            if entry.get("ref") == pool:
                entry.pop("state", None)
        return entries

    async def check(old: Document | None, new: Document | None, store: Store) -> None:
        if old is None or new is None:
            return
        if status:
            same = others(old) == others(new) and without(old.get("status") or {}, (("pools",),)) == \
                without(new.get("status") or {}, (("pools",),))
            if not same:
                raise deny(f'a machine pool identity may change only the state of pool "{pool}"\'s part')
            return
        finalizers = (("metadata", "finalizers"),)
        changed = set(old["metadata"].get("finalizers") or ()) ^ set(new["metadata"].get("finalizers") or ())
        if without(old, finalizers) != without(new, finalizers) or changed - {mine}:
            raise deny(f'a machine pool identity may only add or remove its finalizer "{mine}"')

    return check


def _held_snapshot(deny: Deny, pool: str, status: bool) -> ObjectCheck:
    """Writes of a volume pool to a VolumeSnapshot it holds (see the module docstring), judged on the
    stored object; reads the source Volume only while the snapshot carries no pool label yet."""

    def holder(doc: Document) -> str | None:
        return ((doc.get("metadata") or {}).get("labels") or {}).get(VOLUME_POOL_LABEL)

    async def check(old: Document | None, new: Document | None, store: Store) -> None:
        if old is None or new is None:
            raise deny("a volume pool identity may only update volume snapshots")
        held = holder(old)
        if held is None:
            ref = (old.get("spec") or {}).get("volumeRef") or {}
            name = str(ref.get("name") or "") if isinstance(ref, dict) else ""
            namespace = old["metadata"].get("namespace")
            source = await store.get(VOLUMES_INFO.key(namespace, name)) if name else None
            held = _pool_of(source, VOLUME) if source is not None else None
        if held != pool:
            raise deny(f'the volume snapshot is not held by volume pool "{pool}"')
        if status:
            return
        if holder(new) not in (None, pool):
            raise deny(f'a volume pool identity may label a volume snapshot only with its own pool "{pool}"')
        if without(old, BOUND_METADATA) != without(new, BOUND_METADATA):
            raise deny("a volume pool identity may change only the finalizers, labels and annotations "
                       "of a volume snapshot it holds")

    return check


def _owned_secret(deny: Deny, pool: str) -> ObjectCheck:
    """A volume pool writes the access Secrets its Volumes own (``ownerReferences`` to a Volume bound to
    it, uid matching); the owner references themselves must not change."""
    volumes = _BY_PLURAL["volumes"]

    async def owned(doc: Document, store: Store) -> bool:
        m = doc.get("metadata") or {}
        for ref in m.get("ownerReferences") or []:
            if not isinstance(ref, dict) or ref.get("kind") != "Volume":
                continue
            if str(ref.get("apiVersion", "")).partition("/")[0] != volumes.group:
                continue
            vol = await store.get(volumes.key(m.get("namespace"), str(ref.get("name") or "")))
            if vol is None or vol["metadata"].get("uid") != ref.get("uid"):
                continue
            if _pool_of(vol, VOLUME) == pool:
                return True
        return False

    async def check(old: Document | None, new: Document | None, store: Store) -> None:
        if new is None:
            raise deny("a volume pool identity may not delete secrets")
        if old is not None:
            refs = (old.get("metadata") or {}).get("ownerReferences")
            if refs != (new.get("metadata") or {}).get("ownerReferences"):
                raise deny("a volume pool identity may not change the owner references of a secret")
        if not await owned(old if old is not None else new, store):
            raise deny(f'the secret is not owned by a volume bound to volume pool "{pool}"')

    return check
