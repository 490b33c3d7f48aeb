"""Declaring one object, the same way for every front end: create it, or bring it to the declared
state with a JSON merge patch, asking the server first (a server-side dry run) whether that changes
anything.

What a front end declares is an object's ``spec`` (and other top-level fields) and, of its
metadata, only ``labels`` and ``annotations``: everything else in ``metadata`` is the server's
(uid, resourceVersion, ...) or its controllers' (finalizers, ownerReferences), and a merge patch
would replace such a list whole. Fields the declaration leaves out are kept, unless the front end
says what it declared before (``previous``): those it no longer declares are removed.

Every write carries the front end's field manager (:data:`FIELD_MANAGERS`), so the object's
``managedFields`` say which front end set what. Comparing the dry run's answer with the stored
object through :func:`declared_view` makes the check-mode prediction, the diff and "unchanged"
come from the server's own defaulting and validation: a field the server fills in never shows up
as a change, and declaring the same thing twice writes nothing.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ironpool.api.errors import NotFound

if TYPE_CHECKING:
    from ironpool.api.resource_info import ResourceInfo
    from ironpool.client.rest import Client

Obj = dict[str, Any]

#: The field manager each front end writes as (``metadata.managedFields[].manager``).
FIELD_MANAGERS = {"cli": "ironpool", "ansible": "ironpool-ansible", "pulumi": "ironpool-pulumi"}
#: The metadata a front end declares.
DECLARED_METADATA = ("labels", "annotations")
_IDENTITY = ("apiVersion", "kind", "metadata", "status")


def declared_view(obj: Obj) -> Obj:
    """What a front end declares of an object: no status, and of the metadata only the name, the
    namespace, the labels and the annotations."""
    out = {k: copy.deepcopy(v) for k, v in obj.items() if k != "status"}
    meta = obj.get("metadata") or {}
    out["metadata"] = {k: copy.deepcopy(meta[k]) for k in ("name", "namespace", *DECLARED_METADATA)
                       if meta.get(k) is not None}
    return out


def desired_patch(desired: Obj, previous: Obj | None = None) -> Obj:
    """The merge patch that brings an object to ``desired``: everything declared but identity and
    status (of the metadata, labels and annotations), with null for each key ``previous`` (what was
    declared before) had and ``desired`` no longer has."""
    patch = {k: copy.deepcopy(v) for k, v in desired.items() if k not in _IDENTITY}
    meta = {k: copy.deepcopy(v) for k, v in (desired.get("metadata") or {}).items()
            if k in DECLARED_METADATA and v is not None}
    if meta:
        patch["metadata"] = meta
    if previous is not None:
        before = {k: v for k, v in previous.items() if k not in _IDENTITY}
        old_meta = {k: v for k, v in (previous.get("metadata") or {}).items() if k in DECLARED_METADATA}
        if old_meta:
            before["metadata"] = old_meta
            patch.setdefault("metadata", {})  # labels or annotations to remove, never the metadata
        patch = _with_removals(patch, before)
    return patch


def _with_removals(patch: Obj, before: Obj) -> Obj:
    for key, old in before.items():
        if key not in patch:
            patch[key] = None
        elif isinstance(old, dict) and isinstance(patch[key], dict):
            patch[key] = _with_removals(patch[key], old)
    return patch


def without_nulls(value: Any) -> Any:
    """``value`` without the nulls a merge patch uses to remove keys (a new object has none to remove)."""
    if isinstance(value, dict):
        return {k: without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [without_nulls(v) for v in value]
    return value


def terminating(obj: Obj | None) -> bool:
    """The object is being deleted (its finalizers keep it for now)."""
    return bool(((obj or {}).get("metadata") or {}).get("deletionTimestamp"))


@dataclass
class Outcome:
    """What declaring one object did (or, in a dry run, would do)."""

    action: str  # created | updated | recreated | unchanged | deleted | terminating | absent
    obj: Obj | None  # the object as the server holds it now (as it would be, in a dry run)
    before: Obj | None = None
    after: Obj | None = None

    @property
    def changed(self) -> bool:
        return self.action not in ("unchanged", "terminating", "absent")

    def diff(self) -> dict[str, Any]:
        """``{'before': ..., 'after': ...}`` of the declared views (``{}`` for a missing side)."""
        return {"before": self.before or {}, "after": self.after or {}}


class Declarer:
    """Brings objects of one kind in ``namespace`` to a declared state through ``client``, writing as
    ``field_manager``; with ``dry_run`` the server answers what it would do and keeps nothing."""

    def __init__(self, client: Client, info: ResourceInfo, namespace: str | None, field_manager: str,
                 dry_run: bool = False) -> None:
        self.client = client
        self.info = info
        self.namespace = namespace if info.namespaced else None
        self.field_manager = field_manager
        self.dry_run = dry_run

    def with_identity(self, desired: Obj) -> Obj:
        """``desired`` with apiVersion, kind and (for namespaced kinds) the namespace filled in."""
        out = dict(desired)
        out.setdefault("apiVersion", self.info.api_version)
        out.setdefault("kind", self.info.kind)
        meta = dict(out.get("metadata") or {})
        if self.info.namespaced:
            meta["namespace"] = meta.get("namespace") or self.namespace
        out["metadata"] = meta
        return out

    def get(self, name: str) -> Obj | None:
        """The object, or None when it does not exist."""
        try:
            return dict(self.client.get_raw(self.info, name, self.namespace))
        except NotFound:
            return None

    def create(self, desired: Obj) -> Outcome:
        """Create ``desired`` (AlreadyExists if it exists)."""
        body = without_nulls({k: v for k, v in self.with_identity(desired).items() if k != "status"})
        created = self.client.create_raw(self.info, body, self.namespace, dry_run=self.dry_run,
                                         field_manager=self.field_manager)
        return Outcome("created", created, None, declared_view(created))

    def update(self, desired: Obj, current: Obj, previous: Obj | None = None) -> Outcome:
        """Patch ``current`` towards ``desired`` (see :func:`desired_patch`) unless the server says
        that changes nothing the front end declares."""
        name = str((current.get("metadata") or {}).get("name"))
        patch = desired_patch(desired, previous)
        preview = self.client.patch_raw(self.info, name, patch, self.namespace, dry_run=True,
                                        field_manager=self.field_manager)
        before, after = declared_view(current), declared_view(preview)
        if before == after:
            return Outcome("unchanged", current, before, after)
        if self.dry_run:
            return Outcome("updated", preview, before, after)
        updated = self.client.patch_raw(self.info, name, patch, self.namespace,
                                        field_manager=self.field_manager)
        return Outcome("updated", updated, before, declared_view(updated))

    def present(self, desired: Obj, current: Obj | None, previous: Obj | None = None) -> Outcome:
        """Create ``desired``, or update ``current`` towards it."""
        if current is None:
            return self.create(desired)
        return self.update(desired, current, previous)

    def absent(self, name: str, current: Obj | None) -> Outcome:
        """Delete the object if it exists (its finalizers may keep it a while)."""
        if current is None:
            return Outcome("absent", None)
        before = declared_view(current)
        if terminating(current):
            return Outcome("terminating", current, before, None)
        if self.dry_run:
            return Outcome("deleted", current, before, None)
        try:
            remaining = self.client.delete_raw(self.info, name, self.namespace)
        except NotFound:
            return Outcome("absent", None, before, None)
        return Outcome("deleted", remaining, before, None)
