"""The ``binding`` subresource (declared as :class:`~ironpool.api.subresources.PoolBinding`: Machines
and Volumes), as Kubernetes' ``pods/binding``.

``POST .../machines/{name}/binding`` with a small ``v1`` ``Binding`` naming the pool::

    {"apiVersion": "v1", "kind": "Binding",
     "metadata": {"name": "web-1", "resourceVersion": "42"},
     "target": {"kind": "MachinePool", "name": "host-1"}}

sets the object's pool reference (the declaration's ``pool_ref``: ``spec.machinePoolRef``,
``spec.volumePoolRef``) through the same update path as any write (admission with its capacity
check, the store's compare-and-swap), without sending or merging the whole object. As Kubernetes'
binding does not run the pod's whole update validation, only what a binding changes is validated
(:func:`prepare_bound`: the pool's name, and with the declaration's ``class_ref`` that the object
has a class): the rest is the stored object, valid already, and decoding all of it through its
model on every bind was the largest part of what a bind cost the apiserver.
``metadata.resourceVersion`` and ``metadata.uid``, when given, are preconditions (409 if the object
moved on). An object that is already bound is a 409 Conflict, as Kubernetes answers for a pod
already assigned to a node. As Kubernetes sets ``PodScheduled``, the binding sets the object's
``Scheduled`` condition in the same write, so a scheduler need not write it after. The answer is a
``Status`` of ``Success`` (201), whose ``metadata.resourceVersion`` is the bound object's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ironpool.api import errors
from ironpool.api.conditions import SCHEDULED, scheduled_message, set_condition
from ironpool.api.fieldpath import FieldErrors
from ironpool.api.resource_info import ResourceInfo
from ironpool.api.rules import ref_name
from ironpool.api.subresources import PoolBinding
from ironpool.api.validation import raise_if_invalid
from ironpool.apiserver.registry.subresources.handler import SubresourceHandler, created
from ironpool.store.interface import Document

if TYPE_CHECKING:
    from ironpool.apiserver.auth import ObjectCheck
    from ironpool.apiserver.registry.generic import Registry


class BindingHandler(SubresourceHandler[PoolBinding]):
    """``<plural>/binding``: POST a Binding."""

    name = "binding"
    declared_as = PoolBinding

    async def create(self, registry: Registry, info: ResourceInfo, namespace: str | None, name: str,
                     body: Any, *, dry_run: bool = False, check: ObjectCheck | None = None) -> Document:
        declared = self.declaration(info)
        binding = parse_binding(declared, info, name, body)

        def prepare(old: Document, new: Document) -> Document:
            return prepare_bound(declared, info, old, new)  # validates only what a binding changes

        obj = await registry.modify(info, namespace, name, lambda old: bound(declared, info, old, binding),
                                    expected=binding.resource_version, subresource=self.name,
                                    dry_run=dry_run, check=check, prepare=prepare)
        return created(info, obj)


@dataclass(frozen=True, slots=True)
class Binding:
    """A parsed Binding: the pool, and the preconditions on the object."""

    pool: str
    resource_version: int | None
    uid: str | None


def _invalid(field: str, message: str) -> errors.Invalid:
    return errors.Invalid(f"Binding: {field}: {message}", kind="Binding",
                          causes=[errors.Cause(field, message, "FieldValueInvalid")])


def parse_binding(declared: PoolBinding, info: ResourceInfo, name: str, body: Any) -> Binding:
    """The Binding in ``body`` for the object ``name`` of ``info``'s kind; 400/422 naming the field."""
    pool_kind = declared.pool_kind
    if not isinstance(body, dict):
        raise errors.BadRequest("the request body must be a v1 Binding object")
    if body.get("kind", "Binding") != "Binding" or body.get("apiVersion", "v1") != "v1":
        raise errors.BadRequest(f"the body is {body.get('apiVersion')}/{body.get('kind')}, not v1/Binding")
    meta = body.get("metadata") or {}
    if not isinstance(meta, dict):
        raise _invalid("metadata", "must be an object")
    if meta.get("name") not in (None, name):
        raise errors.BadRequest(f"the name of the binding ({meta.get('name')}) does not match the name in "
                                f"the path ({name})")
    target = body.get("target")
    if not isinstance(target, dict):
        raise _invalid("target", "Required value: the pool to bind to")
    if target.get("kind", pool_kind) != pool_kind:
        raise _invalid("target.kind", f"must be {pool_kind} for a {info.kind}")
    pool = target.get("name")
    if not isinstance(pool, str) or not pool:
        raise _invalid("target.name", "Required value")
    rv = str(meta.get("resourceVersion") or "")
    if rv and not rv.isdigit():
        raise _invalid("metadata.resourceVersion", f"{rv!r} is not a valid resourceVersion")
    return Binding(pool, int(rv) if rv else None, meta.get("uid") or None)


def bound(declared: PoolBinding, info: ResourceInfo, old: Document, binding: Binding) -> Document:
    """``old`` bound to the pool (a shallow copy); 409 if it is bound already or another object."""
    field = declared.pool_ref
    m = old["metadata"]
    name = m.get("name")
    if binding.uid is not None and binding.uid != m.get("uid"):
        raise errors.Conflict(f'{info.plural} "{name}": the uid precondition failed (the object was deleted '
                              "and created again)", kind=info.plural, name=name, group=info.group)
    spec = old.get("spec") or {}
    current = (spec.get(field) or {}).get("name")
    if current:
        raise errors.Conflict(f'{info.kind.lower()} {m.get("namespace")}/{name} is already bound to '
                              f'{declared.pool_kind.lower()} "{current}"', kind=info.plural, name=name,
                              group=info.group)
    return {**old, "spec": {**spec, field: {"name": binding.pool}}}


def prepare_bound(declared: PoolBinding, info: ResourceInfo, old: Document, new: Document) -> Document:
    """The object to store for ``new`` (:func:`bound`'s answer): what the binding changed validated
    (422 naming the field), the generation bumped (the spec changed), ``Scheduled=True`` set, as
    Kubernetes sets ``PodScheduled``. Used in place of the whole update validation (see above)."""
    field = declared.pool_ref
    spec = new["spec"]
    pool = spec[field]["name"]
    errs = FieldErrors()
    ref_name(pool, f"spec.{field}.name", errs)
    if declared.class_ref is not None and spec.get(declared.class_ref) is None:
        errs.forbidden(f"spec.{field}", f"must not specify if {info.kind.lower()} class is empty")
    raise_if_invalid(info, new, errs)
    m = old["metadata"]
    obj = {**new, "metadata": {**m, "generation": int(m.get("generation") or 0) + 1}}
    mark_scheduled(obj, pool)
    return obj


def mark_scheduled(obj: Document, pool: str) -> None:
    """Set ``Scheduled=True`` on the object about to be stored (in place)."""
    key = f"{obj['metadata'].get('namespace')}/{obj['metadata'].get('name')}"
    set_condition(obj, SCHEDULED, "True", SCHEDULED, scheduled_message(key, pool))
