"""The ``eviction`` subresource (declared as :class:`~ironpool.api.subresources.PoolEviction`:
Machines), after Kubernetes' ``pods/eviction``.

``POST .../machines/{name}/eviction`` with a ``policy/v1`` ``Eviction``::

    {"apiVersion": "policy/v1", "kind": "Eviction",
     "metadata": {"name": "web-1", "namespace": "default"},
     "deleteOptions": {"preconditions": {"uid": "...", "resourceVersion": "42"}}}

A pod evicted in Kubernetes is deleted and its controller makes a new one elsewhere. A Machine has
no controller to replace it, and deleting it would lose its uid, its Volumes' claims and its NICs,
so an eviction here *unbinds* it instead: ``spec.machinePoolRef`` (the declaration's ``pool_ref``)
is cleared (the one write that may clear that set-once field), its ``Scheduled`` condition turns
``False`` with reason ``Evicted``, its state ``Pending``, and the scheduler places it again like any
unbound Machine. The poollet of the old pool sees the Machine leave its pool and deletes its domain
(at once if it is alive, by orphan collection when its host returns).
``deleteOptions.preconditions`` (uid, resourceVersion) are honoured (409 when the object moved on).
Evicting a Machine that is not bound is a 409 Conflict; one being deleted is left as it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ironpool.api import errors
from ironpool.api.conditions import SCHEDULED, set_condition
from ironpool.api.resource_info import ResourceInfo
from ironpool.api.subresources import PoolEviction
from ironpool.apiserver.registry.objectmeta import prepare_update
from ironpool.apiserver.registry.subresources.handler import SubresourceHandler, created
from ironpool.store.interface import Document

if TYPE_CHECKING:
    from ironpool.apiserver.auth import ObjectCheck
    from ironpool.apiserver.registry.generic import Registry

EVICTED_REASON = "Evicted"
# What an evicted Machine's status keeps; the rest described it on its old host.
_KEPT_STATUS = ("conditions", "observedGeneration")


class EvictionHandler(SubresourceHandler[PoolEviction]):
    """``<plural>/eviction``: POST an Eviction."""

    name = "eviction"
    declared_as = PoolEviction

    async def create(self, registry: Registry, info: ResourceInfo, namespace: str | None, name: str,
                     body: Any, *, dry_run: bool = False, check: ObjectCheck | None = None) -> Document:
        """Unbind the object from its pool; the Status (201 Success, as Kubernetes answers an
        eviction)."""
        field = self.declaration(info).pool_ref
        eviction = parse_eviction(name, body)

        def prepare(old: Document, new: Document) -> Document:
            # The one write that may clear the set-once pool reference: validated as if it were unset.
            return prepare_update(info, old, new, validate_against=unbound(field, old))

        def mark(old: Document, new: Document) -> None:
            mark_evicted(field, new, pool_of(field, old))

        obj = await registry.modify(info, namespace, name, lambda old: evicted(field, info, old, eviction),
                                    expected=eviction.resource_version, subresource=self.name,
                                    dry_run=dry_run, check=check, ownership=mark, prepare=prepare)
        return created(info, obj)


@dataclass(frozen=True, slots=True)
class Eviction:
    """A parsed Eviction: the preconditions on the object."""

    resource_version: int | None
    uid: str | None


def _invalid(field: str, message: str) -> errors.Invalid:
    return errors.Invalid(f"Eviction: {field}: {message}", kind="Eviction",
                          causes=[errors.Cause(field, message, "FieldValueInvalid")])


def parse_eviction(name: str, body: Any) -> Eviction:
    """The Eviction in ``body`` for the object ``name``; 400/422 naming the field."""
    if body is None:
        body = {}
    if not isinstance(body, dict):
        raise errors.BadRequest("the request body must be a policy/v1 Eviction object")
    if body.get("kind", "Eviction") != "Eviction" or body.get("apiVersion", "policy/v1") not in (
            "policy/v1", "policy/v1beta1"):
        raise errors.BadRequest(f"the body is {body.get('apiVersion')}/{body.get('kind')}, "
                                "not policy/v1 Eviction")
    meta = body.get("metadata") or {}
    if not isinstance(meta, dict):
        raise _invalid("metadata", "must be an object")
    if meta.get("name") not in (None, name):
        raise errors.BadRequest(f"name in URL does not match name in Eviction object ({meta.get('name')} vs "
                                f"{name})")
    options = body.get("deleteOptions") or {}
    pre = options.get("preconditions") if isinstance(options, dict) else None
    if pre is not None and not isinstance(pre, dict):
        raise _invalid("deleteOptions.preconditions", "must be an object")
    pre = pre or {}
    rv = str(pre.get("resourceVersion") or "")
    if rv and not rv.isdigit():
        raise _invalid("deleteOptions.preconditions.resourceVersion",
                       f"{rv!r} is not a valid resourceVersion")
    return Eviction(int(rv) if rv else None, pre.get("uid") or None)


def unbound(field: str, old: Document) -> Document:
    """``old`` without its pool reference ``spec.<field>`` (a shallow copy)."""
    spec = {k: v for k, v in (old.get("spec") or {}).items() if k != field}
    return {**old, "spec": spec}


def evicted(field: str, info: ResourceInfo, old: Document, eviction: Eviction) -> Document:
    """``old`` unbound; 409 if it is another object than the preconditions name, or not bound."""
    m = old["metadata"]
    name = m.get("name")
    if eviction.uid is not None and eviction.uid != m.get("uid"):
        raise errors.Conflict(f'{info.plural} "{name}": the uid precondition failed (the object was deleted '
                              "and created again)", kind=info.plural, name=name, group=info.group)
    if not pool_of(field, old):
        raise errors.Conflict(f'{info.kind.lower()} {m.get("namespace")}/{name} is not bound to a pool: '
                              "nothing to evict", kind=info.plural, name=name, group=info.group)
    if m.get("deletionTimestamp"):
        return old  # already going away: its poollet finishes the deletion where it runs
    return unbound(field, old)


def pool_of(field: str, doc: Document) -> str:
    """The name of the pool ``doc`` is bound to by ``spec.<field>`` ('' if none)."""
    return str(((doc.get("spec") or {}).get(field) or {}).get("name") or "")


def mark_evicted(field: str, obj: Document, pool: str) -> None:
    """Set ``Scheduled=False`` (reason ``Evicted``) on the object about to be stored (in place), and
    forget what its old host reported (state back to ``Pending``; machine ID, NIC and volume states
    gone), so whoever waits for it to run again waits for its new host's report."""
    if pool_of(field, obj):
        return  # not unbound (being deleted): nothing to say
    set_condition(obj, SCHEDULED, "False", EVICTED_REASON,
                  f"Evicted from pool {pool}; waiting to be scheduled again")
    status = obj.get("status") or {}
    obj["status"] = {**{k: v for k, v in status.items() if k in _KEPT_STATUS}, "state": "Pending"}
