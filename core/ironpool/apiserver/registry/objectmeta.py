"""The per-object rules of a write, the same for every kind: the request body checked against the
path (kind, namespace, name), the name made from ``generateName``, the server-owned metadata set
on create and carried over on update, no finalizers added during deletion, DeleteOptions
preconditions, the size limit of a stored object, the main resource's update rules
(:func:`prepare_update`), and Kubernetes ``Status`` errors about one object. :class:`.generic.Registry`
runs them in order."""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

import orjson

from ironpool.api import errors
from ironpool.api.meta import now_rfc3339
from ironpool.api.resource_info import ResourceInfo
from ironpool.api.resources import strategy_for
from ironpool.api.validation import validate_update
from ironpool.apiserver.registry.fieldmanager import track_update
from ironpool.apiserver.registry.listing import parse_resource_version
from ironpool.store.interface import Document

Prepare = Callable[[Document, Document], Document]
"""``prepare(old, new)``: the object to store for a write that turned ``old`` into ``new``; raises
Invalid naming the field."""

# Metadata the server owns: a client's values for these are ignored on create and update.
_SERVER_FIELDS = ("uid", "resourceVersion", "creationTimestamp", "deletionTimestamp", "generation",
                  "managedFields")
_GENERATE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # Kubernetes' generateName alphabet
MAX_OBJECT_BYTES = 1536 * 1024  # one stored object, as JSON (Kubernetes: etcd's 1.5 MiB request limit)
E = TypeVar("E", bound=errors.ApiError)


class RequestEntityTooLarge(errors.ApiError):
    """413: a body, or the document it decodes to, or the object a write would store, is too large."""

    code = 413
    reason = "RequestEntityTooLarge"


def check_object_size(kind: str, name: str, obj: dict[str, Any]) -> None:
    """Refuse (413) to store an object whose JSON is larger than :data:`MAX_OBJECT_BYTES`."""
    size = len(orjson.dumps(obj))
    if size > MAX_OBJECT_BYTES:
        raise RequestEntityTooLarge(
            f"{kind} {name!r} would be {size} bytes stored, more than the limit of {MAX_OBJECT_BYTES} "
            "bytes per object", kind=kind, name=name,
        )


def _about(cls: type[E], info: ResourceInfo, name: str, message: str) -> E:
    """An error about one object, with the details Kubernetes gives (``machines.compute... "x"``)."""
    return cls(message, kind=info.plural, name=name, group=info.group)


def _what(info: ResourceInfo, name: str) -> str:
    return f'{info.plural}.{info.group or "core"} "{name}"'


def not_found(info: ResourceInfo, name: str) -> errors.NotFound:
    return _about(errors.NotFound, info, name, f"{_what(info, name)} not found")


def already_exists(info: ResourceInfo, name: str) -> errors.AlreadyExists:
    return _about(errors.AlreadyExists, info, name, f"{_what(info, name)} already exists")


def conflict(info: ResourceInfo, name: str) -> errors.Conflict:
    return _about(
        errors.Conflict, info, name,
        f"Operation cannot be fulfilled on {_what(info, name)}: the object has been modified; please "
        "apply your changes to the latest version and try again",
    )


def request_object(info: ResourceInfo, body: Any, namespace: str | None, name: str | None) -> Document:
    """The request body as an object of ``info``'s kind, in the path's namespace (and name), with a
    ``metadata`` object."""
    if not isinstance(body, dict):
        raise errors.BadRequest(f"the request body must be a JSON object ({info.kind})")
    api_version = body.setdefault("apiVersion", info.api_version)
    kind = body.setdefault("kind", info.kind)
    if api_version != info.api_version or kind != info.kind:
        raise errors.BadRequest(
            f"the body is {api_version}/{kind} but the path is for {info.api_version}/{info.kind}"
        )
    m = body.get("metadata")
    if m is None:
        m = body["metadata"] = {}
    elif not isinstance(m, dict):
        raise errors.Invalid(
            "metadata must be an object",
            causes=[
                errors.Cause(
                    "metadata", f"must be an object, not {type(m).__name__}", "FieldValueTypeInvalid"
                )
            ],
        )
    if info.namespaced:
        body_ns = m.get("namespace")
        if body_ns and namespace and body_ns != namespace:
            raise errors.BadRequest(
                f"the namespace of the object ({body_ns}) does not match the namespace of the request "
                f"({namespace})"
            )
        m["namespace"] = body_ns or namespace
    else:
        m.pop("namespace", None)
    if name is not None and m.setdefault("name", name) != name:
        raise errors.BadRequest(
            f"the name of the object ({m.get('name')}) does not match the name in the path ({name})"
        )
    return body


def new_name(info: ResourceInfo, obj: Document) -> str:
    """The new object's name: as given, or made from ``generateName``."""
    m = obj["metadata"]
    if info.namespaced and not m.get("namespace"):
        raise errors.Invalid(
            f"{info.kind}: metadata.namespace is required",
            kind=info.kind,
            causes=[errors.Cause("metadata.namespace", "Required value", "FieldValueRequired")],
        )
    if not m.get("name"):
        generate = m.get("generateName")
        if not generate:
            raise errors.Invalid(
                f"{info.kind}: name or generateName is required",
                kind=info.kind,
                causes=[
                    errors.Cause("metadata.name", "name or generateName is required", "FieldValueRequired")
                ],
            )
        m["name"] = str(generate) + "".join(secrets.choice(_GENERATE_ALPHABET) for _ in range(5))
    return str(m["name"])


def stamp_new(info: ResourceInfo, obj: Document) -> None:
    """Server-owned fields of a new object, set once: a client's values are dropped, and status
    is written through the status subresource only."""
    m = obj["metadata"]
    for field in _SERVER_FIELDS:
        m.pop(field, None)
    m["uid"] = str(uuid.uuid4())
    m["creationTimestamp"] = now_rfc3339()
    m["generation"] = 1
    if info.has_status:
        obj.pop("status", None)


def carry_over(info: ResourceInfo, old: Document, new: Document) -> Document:
    """``new`` with ``old``'s server-owned fields (and status, which only the status subresource
    writes): what a client sent for them is ignored, once, before validation."""
    old_meta = old["metadata"]
    new_meta = dict(new["metadata"])
    for field in _SERVER_FIELDS:
        if field in old_meta:
            new_meta[field] = old_meta[field]
        else:
            new_meta.pop(field, None)
    candidate = {**new, "metadata": new_meta}
    if info.has_status:
        if "status" in old:
            candidate["status"] = old["status"]
        else:
            candidate.pop("status", None)
    return candidate


def no_finalizers_added(info: ResourceInfo, old: Document, new: Document) -> None:
    old_meta, new_meta = old["metadata"], new["metadata"]
    if not old_meta.get("deletionTimestamp"):
        return
    added = set(new_meta.get("finalizers") or []) - set(old_meta.get("finalizers") or [])
    if added:
        raise errors.Invalid(
            f"{info.kind} {old_meta['name']!r} is being deleted: no new finalizers may be added",
            kind=info.kind,
            name=old_meta["name"],
            causes=[
                errors.Cause(
                    "metadata.finalizers",
                    f"cannot add {sorted(added)} during deletion",
                    "FieldValueForbidden",
                )
            ],
        )


def delete_preconditions(options: Any) -> tuple[int | None, str | None]:
    """``preconditions.resourceVersion`` and ``.uid`` of a DeleteOptions body."""
    if options is None:
        return None, None
    if not isinstance(options, dict):
        raise errors.BadRequest("the DELETE body must be a DeleteOptions object")
    pre = options.get("preconditions") or {}
    if not isinstance(pre, dict):
        raise errors.BadRequest("preconditions: must be an object")
    rv = parse_resource_version(pre.get("resourceVersion"), "preconditions.resourceVersion")
    return rv, pre.get("uid") or None


Mutate = Callable[[Document], Document]
Ownership = Callable[[Document, Document], None]


def tracked(info: ResourceInfo, manager: str | None, subresource: str | None,
            mutate: Mutate) -> tuple[Mutate, Ownership | None]:
    """``mutate`` and the step that records an ordinary write by ``manager`` in the object's
    managedFields, handing on what the write itself sent as managedFields (a client may replace
    them, :mod:`.managed_fields`); no recording without a manager."""
    if manager is None:
        return mutate, None
    sent: dict[int, Any] = {}

    def mutated(old: Document) -> Document:
        new = mutate(old)
        requested = (new.get("metadata") or {}).get("managedFields")
        # Most writes send back what they read: nothing to replace, nothing to parse twice.
        sent[id(old)] = None if requested == old["metadata"].get("managedFields") else requested
        return new

    def track(old: Document, new: Document) -> None:
        track_update(info, old, new, manager, subresource, sent.pop(id(old), None))

    return mutated, track


def prepare_update(info: ResourceInfo, old: Document, new: Document,
                   validate_against: Document | None = None) -> Document:
    """The object to store when the main resource is written: everything of ``new`` but its status
    and server-owned fields, validated against ``old`` (or ``validate_against``, when a
    subresource's handler allows a change the kind's update rules refuse, as an eviction clears the
    set-once pool reference), with the generation bumped when the desired state changed."""
    candidate = carry_over(info, old, new)
    no_finalizers_added(info, old, candidate)
    validated = validate_update(info, old if validate_against is None else validate_against, candidate)
    strategy = strategy_for(info)
    if strategy.spec_of(old) != strategy.spec_of(validated):
        validated["metadata"]["generation"] = int(old["metadata"].get("generation") or 0) + 1
    return validated
