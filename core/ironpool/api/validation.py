"""Validation and defaulting of API objects, as the apiserver applies them on every write.

Input and output are plain JSON dicts (what the store holds). The output is the defaulted,
canonical form: camelCase names, canonical quantity strings, unset optional fields left out.
Every problem found is reported at once in an :class:`~ironpool.api.errors.Invalid` whose causes
name full field paths (``spec.volumes[1].device``), following IronCore's validation
(``internal/apis/*/validation``) and its ``MachineVolumeDevices`` admission plugin.

This module is what every kind shares (decoding into the model, metadata, pydantic's errors as
field errors); what differs per kind is its strategy's (:mod:`ironpool.api.strategies`). The
functions here are also the front ends' client-side check, so a plan fails before any request.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ValidationError

from ironpool.api import errors
from ironpool.api.fieldpath import (
    FieldErrors,
    add_pydantic_errors,
    dns1123_label,
    dns1123_subdomain,
    index,
    qualified_name,
    validate_annotations,
    validate_labels,
)
from ironpool.api.rbac import path_segment_name
from ironpool.api.resources import ResourceInfo, by_kind, strategy_for
from ironpool.api.strategies.volume import resize_errors
from ironpool.api.strategy import Strategy

__all__ = [
    "spec_of",
    "validate_create",
    "validate_status_update",
    "validate_update",
    "validate_volume_resize",
]

Obj = dict[str, Any]


# ---------------------------------------------------------------------------------------------
# public API
# ---------------------------------------------------------------------------------------------

def validate_create(info: ResourceInfo, obj: Obj) -> Obj:
    """Validate and default a new object; return the canonical dict to store.

    Server-managed metadata (uid, resourceVersion, generation, timestamps) is kept as given: the
    apiserver sets it. ``metadata.namespace`` is required for namespaced kinds and dropped
    for cluster-scoped ones.
    """
    strategy = strategy_for(info)
    errs = FieldErrors()
    data, model = _decode(strategy, obj, errs)
    out = _finish(strategy, model, errs)
    if out is not None:
        strategy.prepare_for_create(out)
    raise_if_invalid(info, data, errs)
    assert out is not None
    return out


def validate_update(info: ResourceInfo, old: Obj, new: Obj) -> Obj:
    """Validate ``new`` as a replacement of the stored ``old``; return the canonical dict.

    Checks everything :func:`validate_create` checks plus immutability (``metadata.name``,
    ``metadata.namespace``, and the kind's immutable and set-once fields).
    """
    strategy = strategy_for(info)
    errs = FieldErrors()
    data, model = _decode(strategy, new, errs)
    out = _finish(strategy, model, errs)
    if out is not None:
        _check_meta_update(info, old, out, errs)
        strategy.validate_update(old, out, errs)
    raise_if_invalid(info, data, errs)
    assert out is not None
    return out


def validate_status_update(info: ResourceInfo, old: Obj, new: Obj) -> Obj:
    """Validate a write to the ``status`` subresource; return ``old`` with ``new``'s status.

    Everything but the status (and ``metadata.resourceVersion``, kept for the conflict check) is
    taken from ``old``, as Kubernetes' status strategies do.
    """
    if not info.has_status:
        raise errors.NotFound(message=f"{info.group_resource} have no status subresource",
                              kind=info.kind, group=info.group)
    if not isinstance(new, dict):
        raise errors.BadRequest(message=f"{info.kind} must be a JSON object",
                                kind=info.kind, group=info.group)
    merged = dict(old)
    meta = dict(old.get("metadata") or {})
    new_meta = new.get("metadata")
    if isinstance(new_meta, dict) and new_meta.get("resourceVersion"):
        meta["resourceVersion"] = new_meta["resourceVersion"]
    merged["metadata"] = meta
    if new.get("status") is None:
        merged.pop("status", None)
    else:
        merged["status"] = new["status"]
    strategy = strategy_for(info)
    errs = FieldErrors()
    data, model = _decode(strategy, merged, errs)
    out = _finish(strategy, model, errs)
    raise_if_invalid(info, data, errs)
    assert out is not None
    return out


def validate_volume_resize(volume_class: Obj, old: Obj, new: Obj) -> None:
    """IronCore's ``VolumeResizePolicy`` admission: may ``old`` (a stored Volume) become ``new``?

    With the class's ``resizePolicy`` ``Static`` the size is fixed; with ``ExpandOnly`` it may
    only grow. Raises :class:`~ironpool.api.errors.Invalid` naming ``spec.resources.storage``.
    """
    volume = by_kind("storage.ironcore.dev/v1alpha1", "Volume")
    raise_if_invalid(volume, new, resize_errors(volume_class, old, new))


def spec_of(info: ResourceInfo, obj: Obj) -> Obj:
    """What counts as the desired state for ``metadata.generation`` bumps (see
    :meth:`~ironpool.api.strategy.Strategy.spec_of`)."""
    return strategy_for(info).spec_of(obj)


# ---------------------------------------------------------------------------------------------
# pipeline
# ---------------------------------------------------------------------------------------------

def _decode(strategy: Strategy[Any], obj: Any, errs: FieldErrors) -> tuple[Obj, BaseModel | None]:
    """The object with apiVersion and kind filled in, and its model (None if it does not decode)."""
    info = strategy.info
    if not isinstance(obj, dict):
        raise errors.BadRequest(message=f"{info.kind} must be a JSON object, got {type(obj).__name__}",
                                kind=info.kind, group=info.group)
    data = obj
    if obj.get("apiVersion") is None or obj.get("kind") is None:
        data = dict(obj)
        if data.get("apiVersion") is None:
            data["apiVersion"] = info.api_version
        if data.get("kind") is None:
            data["kind"] = info.kind
    if data["apiVersion"] != info.api_version:
        errs.invalid("apiVersion", data["apiVersion"], f'must be "{info.api_version}"')
    if data["kind"] != info.kind:
        errs.invalid("kind", data["kind"], f'must be "{info.kind}"')
    _check_metadata(strategy, data.get("metadata"), errs)
    try:
        model: BaseModel | None = info.model.model_validate(data)
    except ValidationError as exc:
        add_pydantic_errors(exc, errs)
        model = None
        _rules_despite_type_errors(strategy, data, exc, errs)
    return data, model


def _finish(strategy: Strategy[Any], model: BaseModel | None, errs: FieldErrors) -> Obj | None:
    """Default, validate and canonicalize a decoded object; its JSON form (None if it did not decode)."""
    if model is None:
        return None
    strategy.default(model, errs)
    strategy.validate(model, errs)
    out = model.model_dump(mode="json", by_alias=True, exclude_none=True)
    if not strategy.info.namespaced:
        meta = out.get("metadata")
        if meta:
            meta.pop("namespace", None)
    strategy.canonicalize(out)
    return out


def _rules_despite_type_errors(strategy: Strategy[Any], data: Obj, exc: ValidationError,
                               errs: FieldErrors) -> None:
    """Report the kind's own rules too when the object has type errors, so one round trip shows
    every problem: drop the ill-typed values, re-validate, and run the rules on what is left."""
    locs = [e["loc"] for e in exc.errors(include_url=False) if e["type"] != "missing"]
    if len(locs) != exc.error_count():
        return  # a required field is absent; the rules would only repeat that
    cleaned = data
    for loc in locs:
        cleaned = _without(cleaned, loc)
    try:
        model = strategy.info.model.model_validate(cleaned)
    except ValidationError:
        return
    extra = FieldErrors()
    strategy.default(model, extra)
    strategy.validate(model, extra)
    reported = {c.field for c in errs.causes}
    for cause in extra.causes:
        if cause.field not in reported:
            errs.add(cause)


def _without(obj: Any, loc: tuple[int | str, ...]) -> Any:
    """A copy of ``obj`` without the value at ``loc`` (copying only along the path). A bad list
    item drops the whole list, so indices in later messages stay true."""
    parts = [p for p in loc if p != "[key]"]
    while parts and isinstance(parts[-1], int):
        parts.pop()
    if not parts:
        return obj
    if not isinstance(obj, dict):
        return obj
    head, rest = parts[0], tuple(parts[1:])
    if head not in obj:
        return obj
    copy = dict(obj)
    if not rest:
        del copy[head]
        return copy
    sub = obj[head]
    if isinstance(sub, list):
        idx = rest[0]
        if isinstance(idx, int) and 0 <= idx < len(sub):
            items = list(sub)
            items[idx] = _without(items[idx], rest[1:])
            copy[head] = items
        return copy
    copy[head] = _without(sub, rest)
    return copy



def raise_if_invalid(info: ResourceInfo, data: Obj, errs: FieldErrors) -> None:
    """422 Invalid naming every problem in ``errs`` (nothing if there is none), about the object ``data``."""
    if not errs:
        return
    meta = data.get("metadata")
    name = ""
    if isinstance(meta, dict):
        raw = meta.get("name") or meta.get("generateName") or ""
        name = raw if isinstance(raw, str) else ""
    parts = [f"{c.field}: {c.message}" if c.field else c.message for c in errs.causes]
    body = parts[0] if len(parts) == 1 else "[" + ", ".join(parts) + "]"
    raise errors.Invalid(
        message=f'{info.qualified_kind} "{name}" is invalid: {body}',
        kind=info.kind, name=name, group=info.group, causes=list(errs.causes),
    )


# ---------------------------------------------------------------------------------------------
# metadata
# ---------------------------------------------------------------------------------------------

def _check_metadata(strategy: Strategy[Any], meta: Any, errs: FieldErrors) -> None:
    if not isinstance(meta, dict):
        if meta is None:
            errs.required("metadata.name", "name or generateName is required")
        return  # a wrong type is reported by the model
    info = strategy.info
    check: Callable[[str], tuple[str, ...]] = path_segment_name
    if not strategy.name_is_path_segment:
        check = dns1123_label if strategy.name_is_dns_label else dns1123_subdomain
    name = meta.get("name")
    gen = meta.get("generateName")
    if not name:
        if not gen:
            errs.required("metadata.name", "name or generateName is required")
        elif isinstance(gen, str):
            # Kubernetes masks a trailing dash: "web-" is a fine prefix.
            masked = gen[:-1] + "a" if gen.endswith("-") else gen
            for msg in check(masked):
                errs.invalid("metadata.generateName", gen, msg)
    elif isinstance(name, str):
        for msg in check(name):
            errs.invalid("metadata.name", name, msg)
    if info.namespaced:
        ns = meta.get("namespace")
        if not ns:
            errs.required("metadata.namespace")
        elif isinstance(ns, str):
            for msg in dns1123_label(ns):
                errs.invalid("metadata.namespace", ns, msg)
    labels = meta.get("labels")
    if isinstance(labels, dict):
        validate_labels(labels, "metadata.labels", errs)
    annotations = meta.get("annotations")
    if isinstance(annotations, dict):
        validate_annotations(annotations, "metadata.annotations", errs)
    finalizers = meta.get("finalizers")
    if isinstance(finalizers, list):
        seen: set[str] = set()
        for i, f in enumerate(finalizers):
            if not isinstance(f, str):
                continue
            for msg in qualified_name(f):
                errs.invalid(index("metadata.finalizers", i), f, msg)
            if f in seen:
                errs.duplicate(index("metadata.finalizers", i), f)
            seen.add(f)


def _check_meta_update(info: ResourceInfo, old: dict[str, Any], new: dict[str, Any],
                       errs: FieldErrors) -> None:
    old_meta = old.get("metadata") or {}
    new_meta = new.get("metadata") or {}
    if old_meta.get("name") and new_meta.get("name") and new_meta["name"] != old_meta["name"]:
        errs.immutable("metadata.name", new_meta["name"])
    if info.namespaced and old_meta.get("namespace") and new_meta.get("namespace") != old_meta["namespace"]:
        errs.immutable("metadata.namespace", new_meta.get("namespace"))
