"""Validation and defaulting of API objects, as the apiserver applies them on every write.

Input and output are plain JSON dicts (what the store holds). The output is the defaulted,
canonical form: camelCase names, canonical quantity strings, unset optional fields left out.
Every problem found is reported at once in an :class:`~ironpool.api.errors.Invalid` whose causes
name full field paths (``spec.volumes[1].device``), following IronCore's validation
(``internal/apis/*/validation``) and its ``MachineVolumeDevices`` admission plugin.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ValidationError

from ironpool.api import errors
from ironpool.api.compute import (
    DEFAULT_IGNITION_KEY,
    Machine,
    MachineClass,
    MachinePool,
    MachineSpec,
    MachineVolume,
)
from ironpool.api.core import Secret
from ironpool.api.fieldpath import (
    FieldErrors,
    child,
    dns1123_label,
    dns1123_subdomain,
    index,
    label_value,
    qualified_name,
    secret_key,
    validate_annotations,
    validate_labels,
)
from ironpool.api.meta import Taint, Toleration
from ironpool.api.quantity import Quantity
from ironpool.api.resources import ResourceInfo, by_kind
from ironpool.api.storage import Volume, VolumeClass, VolumePool, VolumeSpec

__all__ = [
    "spec_of",
    "validate_create",
    "validate_status_update",
    "validate_update",
    "validate_volume_resize",
]

NameCheck = Callable[[str], tuple[str, ...]]

# IronCore validates these names as DNS labels (ValidateObjectMetaAccessor(..., NameIsDNSLabel));
# everything else is a DNS subdomain.
_LABEL_NAMED_KINDS = frozenset({"Machine", "MachineClass", "VolumeClass", "Namespace"})
_TOP_LEVEL_NON_SPEC = frozenset({"apiVersion", "kind", "metadata", "status"})
_DEVICE_RE = re.compile(r"^[a-z]{2}[a-z][a-z]?$")
_DEVICE_PREFIX = "od"
_MAX_DEVICE_INDEX = 26 * 26 + 25
_SECRET_MAX_BYTES = 1024 * 1024


# ---------------------------------------------------------------------------------------------
# public API
# ---------------------------------------------------------------------------------------------

def validate_create(info: ResourceInfo, obj: dict[str, Any]) -> dict[str, Any]:
    """Validate and default a new object; return the canonical dict to store.

    Server-managed metadata (uid, resourceVersion, generation, timestamps) is kept as given: the
    apiserver overwrites it. ``metadata.namespace`` is required for namespaced kinds and dropped
    for cluster-scoped ones.
    """
    errs = FieldErrors()
    data, model = _parse(info, obj, errs)
    out = _finish(info, data, model, errs)
    if info.kind == "Namespace" and out is not None:
        out.setdefault("status", {}).setdefault("phase", "Active")
    _raise_if(info, data, errs)
    assert out is not None
    return out


def validate_update(info: ResourceInfo, old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """Validate ``new`` as a replacement of the stored ``old``; return the canonical dict.

    Checks everything :func:`validate_create` checks plus immutability (``metadata.name``,
    ``metadata.namespace``, and the kind's immutable and set-once fields).
    """
    errs = FieldErrors()
    data, model = _parse(info, new, errs)
    out = _finish(info, data, model, errs)
    if out is not None:
        _check_meta_update(info, old, out, errs)
        update_rule = _UPDATE_RULES.get(info.kind)
        if update_rule is not None:
            update_rule(old, out, errs)
    _raise_if(info, data, errs)
    assert out is not None
    return out


def validate_status_update(info: ResourceInfo, old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
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
    errs = FieldErrors()
    data, model = _parse(info, merged, errs)
    out = _finish(info, data, model, errs)
    _raise_if(info, data, errs)
    assert out is not None
    return out


def validate_volume_resize(volume_class: dict[str, Any], old: dict[str, Any], new: dict[str, Any]) -> None:
    """IronCore's ``VolumeResizePolicy`` admission: may ``old`` (a stored Volume) become ``new``?

    With the class's ``resizePolicy`` ``Static`` the size is fixed; with ``ExpandOnly`` it may
    only grow. Raises :class:`~ironpool.api.errors.Invalid` naming ``spec.resources.storage``.
    """
    before = (_get(old, "spec", "resources") or {}).get("storage")
    after = (_get(new, "spec", "resources") or {}).get("storage")
    if before is None or after is None:
        return
    q_before, q_after = Quantity(str(before)), Quantity(str(after))
    if q_before == q_after:
        return
    policy = volume_class.get("resizePolicy") or "Static"
    class_name = _get(volume_class, "metadata", "name")
    errs = FieldErrors()
    if policy == "Static":
        errs.forbidden("spec.resources.storage",
                       f"volume class {class_name!r} has resize policy Static: the size cannot change")
    elif q_after < q_before:
        errs.forbidden("spec.resources.storage",
                       f"volume class {class_name!r} has resize policy ExpandOnly: "
                       f"cannot shrink from {q_before} to {q_after}")
    if errs:
        _raise_if(by_kind("storage.ironcore.dev/v1alpha1", "Volume"), new, errs)


def spec_of(info: ResourceInfo, obj: dict[str, Any]) -> dict[str, Any]:
    """What counts as the desired state for ``metadata.generation`` bumps.

    All top-level fields except apiVersion, kind, metadata and status: ``spec`` for most kinds,
    ``capabilities``/``resizePolicy`` for the classes, ``data``/``type``/... for Secrets.
    """
    return {k: v for k, v in obj.items() if k not in _TOP_LEVEL_NON_SPEC}


# ---------------------------------------------------------------------------------------------
# pipeline
# ---------------------------------------------------------------------------------------------

def _parse(info: ResourceInfo, obj: Any, errs: FieldErrors) -> tuple[dict[str, Any], BaseModel | None]:
    if not isinstance(obj, dict):
        raise errors.BadRequest(message=f"{info.kind} must be a JSON object, got {type(obj).__name__}",
                                kind=info.kind, group=info.group)
    data = obj
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if api_version is None or kind is None:
        data = dict(obj)
        data.setdefault("apiVersion", info.api_version)
        data.setdefault("kind", info.kind)
        if data["apiVersion"] is None:
            data["apiVersion"] = info.api_version
        if data["kind"] is None:
            data["kind"] = info.kind
    if data["apiVersion"] != info.api_version:
        errs.invalid("apiVersion", data["apiVersion"], f'must be "{info.api_version}"')
    if data["kind"] != info.kind:
        errs.invalid("kind", data["kind"], f'must be "{info.kind}"')
    _check_metadata(info, data.get("metadata"), errs)
    try:
        model: BaseModel | None = info.model.model_validate(data)
    except ValidationError as exc:
        _add_pydantic_errors(exc, errs)
        model = None
        _semantic_errors_despite(info, data, exc, errs)
    return data, model


def _semantic_errors_despite(info: ResourceInfo, data: dict[str, Any], exc: ValidationError,
                             errs: FieldErrors) -> None:
    """Report the kind's own rules too when the object has type errors, so one round trip shows
    every problem: drop the ill-typed values, re-validate, and run the rules on what is left."""
    rule = _RULES.get(info.kind)
    if rule is None:
        return
    locs = [e["loc"] for e in exc.errors(include_url=False) if e["type"] != "missing"]
    if len(locs) != exc.error_count():
        return  # a required field is absent; the rules would only repeat that
    cleaned = data
    for loc in locs:
        cleaned = _without(cleaned, loc)
    try:
        model = info.model.model_validate(cleaned)
    except ValidationError:
        return
    extra = FieldErrors()
    rule(model, extra)
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


def _finish(info: ResourceInfo, data: dict[str, Any], model: BaseModel | None,
            errs: FieldErrors) -> dict[str, Any] | None:
    if model is None:
        return None
    rule = _RULES.get(info.kind)
    if rule is not None:
        rule(model, errs)
    out = model.model_dump(mode="json", by_alias=True, exclude_none=True)
    if not info.namespaced:
        meta = out.get("metadata")
        if meta:
            meta.pop("namespace", None)
    if info.kind == "Secret":
        _canonical_secret(out)
    return out


def _raise_if(info: ResourceInfo, data: dict[str, Any], errs: FieldErrors) -> None:
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


_EXPECTED_RE = re.compile(r"'((?:[^'\\]|\\.)*)'")


def _loc_path(loc: tuple[int | str, ...]) -> str:
    path = ""
    for part in loc:
        if isinstance(part, int):
            path = index(path, part)
        elif part == "[key]":
            continue
        else:
            path = child(path, part)
    return path


def _add_pydantic_errors(exc: ValidationError, errs: FieldErrors) -> None:
    for e in exc.errors(include_url=False):
        loc = e["loc"]
        path = _loc_path(loc)
        typ = e["type"]
        value = e.get("input")
        if typ == "missing":
            errs.required(path)
        elif typ == "extra_forbidden":
            errs.unknown(path)
        elif typ == "literal_error":
            expected = str((e.get("ctx") or {}).get("expected", ""))
            errs.not_supported(path, value, _EXPECTED_RE.findall(expected))
        elif typ in ("value_error", "assertion_error"):
            msg = e["msg"].removeprefix("Value error, ").removeprefix("Assertion failed, ")
            errs.invalid(path, value, msg)
        elif typ == "model_type" or typ == "dict_type":
            errs.type_invalid(path, value, "must be an object")
        elif typ == "list_type":
            errs.type_invalid(path, value, "must be a list")
        else:
            errs.type_invalid(path, value, e["msg"])


# ---------------------------------------------------------------------------------------------
# metadata
# ---------------------------------------------------------------------------------------------

def _name_check(info: ResourceInfo) -> NameCheck:
    return dns1123_label if info.kind in _LABEL_NAMED_KINDS else dns1123_subdomain


def _check_metadata(info: ResourceInfo, meta: Any, errs: FieldErrors) -> None:
    if not isinstance(meta, dict):
        if meta is None:
            errs.required("metadata.name", "name or generateName is required")
        return  # a wrong type is reported by the model
    check = _name_check(info)
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


# ---------------------------------------------------------------------------------------------
# shared rules
# ---------------------------------------------------------------------------------------------

def _ref_name(name: str, path: str, errs: FieldErrors, check: NameCheck = dns1123_subdomain) -> None:
    if not name:
        errs.required(path)
        return
    for msg in check(name):
        errs.invalid(path, name, msg)


def _positive(resources: dict[str, Quantity], key: str, path: str, errs: FieldErrors) -> None:
    q = resources.get(key)
    p = child(path, key)
    if q is None:
        errs.required(p, f"must specify {key}")
    elif q.sign() <= 0:
        errs.invalid(p, str(q), "must be greater than zero")


def _non_negative(q: Quantity | None, path: str, errs: FieldErrors) -> None:
    if q is not None and q.sign() < 0:
        errs.invalid(path, str(q), "must be greater than or equal to 0")


def _check_tolerations(tolerations: list[Toleration] | None, path: str, errs: FieldErrors) -> None:
    for i, t in enumerate(tolerations or ()):
        p = index(path, i)
        if t.key:
            for msg in qualified_name(t.key):
                errs.invalid(f"{p}.key", t.key, msg)
        elif t.operator != "Exists":
            errs.invalid(f"{p}.operator", t.operator, "operator must be Exists when `key` is empty, "
                         'which means "match all values and all keys"')
        if t.operator == "Exists":
            if t.value:
                errs.invalid(f"{p}.value", t.value, "value must be empty when `operator` is 'Exists'")
        elif t.value:
            for msg in label_value(t.value):
                errs.invalid(f"{p}.value", t.value, msg)


def _check_taints(taints: list[Taint] | None, path: str, errs: FieldErrors) -> None:
    seen: set[tuple[str, str]] = set()
    for i, t in enumerate(taints or ()):
        p = index(path, i)
        if not t.key:
            errs.required(f"{p}.key")
        else:
            for msg in qualified_name(t.key):
                errs.invalid(f"{p}.key", t.key, msg)
        if t.value:
            for msg in label_value(t.value):
                errs.invalid(f"{p}.value", t.value, msg)
        if (t.key, t.effect) in seen:
            errs.duplicate(p, f"{t.key}:{t.effect}")
        seen.add((t.key, t.effect))


# ---------------------------------------------------------------------------------------------
# compute
# ---------------------------------------------------------------------------------------------

def _machine_class(model: BaseModel, errs: FieldErrors) -> None:
    assert isinstance(model, MachineClass)
    caps = model.capabilities
    _positive(caps, "cpu", "capabilities", errs)
    _positive(caps, "memory", "capabilities", errs)
    for k, q in caps.items():
        if k not in ("cpu", "memory"):
            _non_negative(q, child("capabilities", k), errs)


def _machine_pool(model: BaseModel, errs: FieldErrors) -> None:
    assert isinstance(model, MachinePool | VolumePool)
    _check_taints(model.spec.taints, "spec.taints", errs)


def _device_name(i: int) -> str:
    if i < 26:
        return _DEVICE_PREFIX + chr(97 + i)
    return _DEVICE_PREFIX + chr(97 + i // 26 - 1) + chr(97 + i % 26)


def _default_devices(volumes: list[MachineVolume], errs: FieldErrors) -> None:
    """IronCore's MachineVolumeDevices admission: fill empty devices with the next free ``od*``."""
    taken = {v.device for v in volumes if v.device}
    nxt = 0
    for i, v in enumerate(volumes):
        if v.device:
            continue
        while nxt <= _MAX_DEVICE_INDEX and _device_name(nxt) in taken:
            nxt += 1
        if nxt > _MAX_DEVICE_INDEX:
            errs.invalid(child(index("spec.volumes", i), "device"), None, "no free device name left")
            continue
        v.device = _device_name(nxt)
        taken.add(v.device)


def _machine(model: BaseModel, errs: FieldErrors) -> None:
    assert isinstance(model, Machine)
    _machine_spec(model.spec, errs)


def _machine_spec(spec: MachineSpec, errs: FieldErrors) -> None:
    _ref_name(spec.machine_class_ref.name, "spec.machineClassRef.name", errs)
    if spec.machine_pool_ref is not None:
        _ref_name(spec.machine_pool_ref.name, "spec.machinePoolRef.name", errs)
    if spec.machine_pool_selector:
        validate_labels(spec.machine_pool_selector, "spec.machinePoolSelector", errs)
    if spec.ignition_ref is not None:
        _ref_name(spec.ignition_ref.name, "spec.ignitionRef.name", errs)
        if not spec.ignition_ref.key:
            spec.ignition_ref.key = DEFAULT_IGNITION_KEY
        else:
            for msg in secret_key(spec.ignition_ref.key):
                errs.invalid("spec.ignitionRef.key", spec.ignition_ref.key, msg)

    volumes = spec.volumes or []
    _default_devices(volumes, errs)
    names: set[str] = set()
    devices: set[str] = set()
    for i, vol in enumerate(volumes):
        p = index("spec.volumes", i)
        _ref_name(vol.name, f"{p}.name", errs)
        if vol.name in names:
            errs.duplicate(f"{p}.name", vol.name)
        names.add(vol.name)
        if vol.device:
            if not _DEVICE_RE.match(vol.device):
                errs.invalid(f"{p}.device", vol.device,
                             "invalid device name: must match regex ^[a-z]{2}[a-z][a-z]?$")
            elif vol.device in devices:
                errs.duplicate(f"{p}.device", vol.device)
            devices.add(vol.device)
        _machine_volume_source(vol, p, errs)

    nic_names: set[str] = set()
    for i, nic in enumerate(spec.network_interfaces or ()):
        p = index("spec.networkInterfaces", i)
        _ref_name(nic.name, f"{p}.name", errs)
        if nic.name in nic_names:
            errs.duplicate(f"{p}.name", nic.name)
        nic_names.add(nic.name)
        sources = 0
        if nic.network_interface_ref is not None:
            sources += 1
            _ref_name(nic.network_interface_ref.name, f"{p}.networkInterfaceRef.name", errs)
        if nic.ephemeral is not None:
            if sources:
                errs.forbidden(f"{p}.ephemeral", "must only specify one networkInterface source")
            sources += 1
            if nic.ephemeral.network_interface_template is None:
                errs.required(f"{p}.ephemeral.networkInterfaceTemplate",
                              "must specify networkInterface template")
        if not sources:
            errs.required(p, "must specify exactly one networkInterface source "
                             "(networkInterfaceRef or ephemeral)")

    efi_names: set[str] = set()
    for i, var in enumerate(spec.efi_vars or ()):
        p = index("spec.efiVars", i)
        if var.name in efi_names:
            errs.duplicate(f"{p}.name", var.name)
        efi_names.add(var.name)

    _check_tolerations(spec.tolerations, "spec.tolerations", errs)
    if spec.guest_config is not None and spec.guest_config.hostname:
        for msg in dns1123_label(spec.guest_config.hostname):
            errs.invalid("spec.guestConfig.hostname", spec.guest_config.hostname, msg)


def _machine_volume_source(vol: MachineVolume, p: str, errs: FieldErrors) -> None:
    sources = 0
    if vol.volume_ref is not None:
        sources += 1
        _ref_name(vol.volume_ref.name, f"{p}.volumeRef.name", errs)
    for field_name, src in (("emptyDisk", vol.empty_disk), ("localDisk", vol.local_disk),
                            ("ephemeral", vol.ephemeral)):
        if src is None:
            continue
        if sources:
            errs.forbidden(child(p, field_name), "must only specify one volume source")
        sources += 1
    if vol.empty_disk is not None:
        _non_negative(vol.empty_disk.size_limit, f"{p}.emptyDisk.sizeLimit", errs)
    if vol.local_disk is not None:
        _non_negative(vol.local_disk.size_limit, f"{p}.localDisk.sizeLimit", errs)
    if vol.ephemeral is not None:
        tp = f"{p}.ephemeral.volumeTemplate"
        tmpl = vol.ephemeral.volume_template
        if tmpl is None:
            errs.required(tp, "must specify volume template")
        else:
            _volume_spec(tmpl.spec, f"{tp}.spec", errs)
            if tmpl.spec.claim_ref is not None:
                errs.forbidden(f"{tp}.spec.claimRef", "may not specify claimRef")
            if tmpl.spec.unclaimable:
                errs.forbidden(f"{tp}.spec.unclaimable", "may not specify unclaimable")
    if not sources:
        errs.required(p, "must specify exactly one volume source "
                         "(volumeRef, emptyDisk, localDisk or ephemeral)")


# ---------------------------------------------------------------------------------------------
# storage
# ---------------------------------------------------------------------------------------------

def _volume_class(model: BaseModel, errs: FieldErrors) -> None:
    assert isinstance(model, VolumeClass)
    _positive(model.capabilities, "tps", "capabilities", errs)
    _positive(model.capabilities, "iops", "capabilities", errs)


def _volume(model: BaseModel, errs: FieldErrors) -> None:
    assert isinstance(model, Volume)
    _volume_spec(model.spec, "spec", errs)


def _volume_spec(spec: VolumeSpec, path: str, errs: FieldErrors) -> None:
    if spec.volume_class_ref is not None:
        _ref_name(spec.volume_class_ref.name, f"{path}.volumeClassRef.name", errs)
        if spec.volume_pool_selector:
            validate_labels(spec.volume_pool_selector, f"{path}.volumePoolSelector", errs)
        if spec.volume_pool_ref is not None:
            _ref_name(spec.volume_pool_ref.name, f"{path}.volumePoolRef.name", errs)
        storage = (spec.resources or {}).get("storage")
        if storage is None:
            errs.required(f"{path}.resources.storage", "must specify storage")
        elif storage.sign() <= 0:
            errs.invalid(f"{path}.resources.storage", str(storage), "must be greater than zero")
        _check_tolerations(spec.tolerations, f"{path}.tolerations", errs)
    else:
        why = "must not specify if volume class is empty"
        if spec.volume_pool_selector is not None:
            errs.forbidden(f"{path}.volumePoolSelector", why)
        if spec.volume_pool_ref is not None:
            errs.forbidden(f"{path}.volumePoolRef", why)
        if spec.resources is not None:
            errs.forbidden(f"{path}.resources", why)
        if spec.tolerations is not None:
            errs.forbidden(f"{path}.tolerations", why)
        if spec.data_source is not None and spec.data_source.os_image is not None:
            errs.forbidden(f"{path}.dataSource.osImage", why)
    if spec.claim_ref is not None:
        if spec.unclaimable:
            errs.forbidden(f"{path}.claimRef", "cannot specify unclaimable and claimRef")
        else:
            _ref_name(spec.claim_ref.name, f"{path}.claimRef.name", errs)
    if spec.encryption is not None:
        _ref_name(spec.encryption.secret_ref.name, f"{path}.encryption.secretRef.name", errs)
    ds = spec.data_source
    if ds is not None:
        if ds.volume_snapshot_ref is not None:
            if ds.os_image is not None:
                errs.forbidden(f"{path}.dataSource.osImage", "must only specify one volume data source")
            _ref_name(ds.volume_snapshot_ref.name, f"{path}.dataSource.volumeSnapshotRef.name", errs)
        if ds.os_image is not None and not ds.os_image.image:
            errs.required(f"{path}.dataSource.osImage.image")


# ---------------------------------------------------------------------------------------------
# core
# ---------------------------------------------------------------------------------------------

def _secret(model: BaseModel, errs: FieldErrors) -> None:
    assert isinstance(model, Secret)
    total = 0
    for k, v in (model.data or {}).items():
        p = child("data", k)
        for msg in secret_key(k):
            errs.invalid(p, k, msg)
        try:
            total += len(base64.b64decode(v, validate=True))
        except (binascii.Error, ValueError):
            errs.invalid(p, "<secret contents redacted>", "must be base64-encoded data")
    for k, v in (model.string_data or {}).items():
        for msg in secret_key(k):
            errs.invalid(child("stringData", k), k, msg)
        total += len(v.encode())
    if total > _SECRET_MAX_BYTES:
        errs.add(errors.Cause(field="data", message=f"Too long: must have at most {_SECRET_MAX_BYTES} bytes",
                              reason="FieldValueTooLong"))
    if not model.type:
        errs.required("type")


def _canonical_secret(out: dict[str, Any]) -> None:
    """Fold write-only ``stringData`` into ``data`` (base64), as Kubernetes stores Secrets."""
    string_data = out.pop("stringData", None)
    if string_data:
        data = dict(out.get("data") or {})
        for k, v in string_data.items():
            data[k] = base64.b64encode(v.encode()).decode()
        out["data"] = data


# ---------------------------------------------------------------------------------------------
# update rules (on canonical dicts)
# ---------------------------------------------------------------------------------------------

def _get(obj: dict[str, Any], *path: str) -> Any:
    cur: Any = obj
    for p in path:
        if not isinstance(cur, dict):
            return None
        cur = cur.get(p)
    return cur


def _immutable(old: dict[str, Any], new: dict[str, Any], path: tuple[str, ...], errs: FieldErrors) -> None:
    if _get(old, *path) != _get(new, *path):
        errs.immutable(".".join(path), _get(new, *path))


def _set_once(old: dict[str, Any], new: dict[str, Any], path: tuple[str, ...], errs: FieldErrors) -> None:
    before = _get(old, *path)
    if before is not None and _get(new, *path) != before:
        errs.immutable(".".join(path), _get(new, *path))


def _machine_update(old: dict[str, Any], new: dict[str, Any], errs: FieldErrors) -> None:
    _immutable(old, new, ("spec", "machineClassRef"), errs)
    _set_once(old, new, ("spec", "machinePoolRef"), errs)
    new_vols = {v.get("name"): v for v in _get(new, "spec", "volumes") or ()}
    for ov in _get(old, "spec", "volumes") or ():
        image = _get(ov, "localDisk", "image")
        if not image:
            continue
        p = f"spec.volumes[{ov.get('name')}].localDisk.image"
        nv = new_vols.get(ov.get("name"))
        if nv is None:
            errs.invalid(p, None, "volume with an image set must not be removed")
        elif not _get(nv, "localDisk", "image"):
            errs.invalid(p, None, "volume with an image set must not be cleared")
        elif _get(nv, "localDisk", "image") != image:
            errs.immutable(p, _get(nv, "localDisk", "image"))
    old_host = _get(old, "spec", "guestConfig", "hostname")
    new_host = _get(new, "spec", "guestConfig", "hostname")
    if not old_host and new_host:
        errs.invalid("spec.guestConfig.hostname", new_host,
                     "hostname must not be set if it was not set before")
    elif old_host and not new_host:
        errs.invalid("spec.guestConfig.hostname", None, "hostname must not be cleared")
    elif old_host and new_host != old_host:
        errs.immutable("spec.guestConfig.hostname", new_host)


def _class_update(old: dict[str, Any], new: dict[str, Any], errs: FieldErrors) -> None:
    _immutable(old, new, ("capabilities",), errs)


def _pool_update(old: dict[str, Any], new: dict[str, Any], errs: FieldErrors) -> None:
    if _get(old, "spec", "providerID"):
        _immutable(old, new, ("spec", "providerID"), errs)


def _volume_update(old: dict[str, Any], new: dict[str, Any], errs: FieldErrors) -> None:
    _immutable(old, new, ("spec", "volumeClassRef"), errs)
    _set_once(old, new, ("spec", "volumePoolRef"), errs)
    _immutable(old, new, ("spec", "encryption"), errs)


def _secret_update(old: dict[str, Any], new: dict[str, Any], errs: FieldErrors) -> None:
    if old.get("immutable"):
        if not new.get("immutable"):
            errs.forbidden("immutable", "field is immutable when `immutable` is set")
        if old.get("data") != new.get("data"):
            errs.forbidden("data", "field is immutable when `immutable` is set")
    _immutable(old, new, ("type",), errs)


_RULES: dict[str, Callable[[BaseModel, FieldErrors], None]] = {
    "MachineClass": _machine_class,
    "MachinePool": _machine_pool,
    "Machine": _machine,
    "VolumeClass": _volume_class,
    "VolumePool": _machine_pool,
    "Volume": _volume,
    "Secret": _secret,
}

_UPDATE_RULES: dict[str, Callable[[dict[str, Any], dict[str, Any], FieldErrors], None]] = {
    "MachineClass": _class_update,
    "MachinePool": _pool_update,
    "Machine": _machine_update,
    "VolumeClass": _class_update,
    "VolumePool": _pool_update,
    "Volume": _volume_update,
    "Secret": _secret_update,
}
