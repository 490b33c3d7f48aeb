# Copyright: ironpool contributors
# SPDX-License-Identifier: Apache-2.0
"""Declaring one object: create it, update it in place, recreate it when forced, or delete it.

The apiserver itself computes what a change would do (server-side dry run), so the check-mode
prediction, the diff and ``changed`` all come from the same defaulting and validation a real write
goes through: a field the server fills in never shows up as a change, and a second run reports
nothing changed. Updates are JSON merge patches of what the task declares, like ``ironpool apply``:
fields the task leaves out are kept.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ansible.module_utils.common.warnings import warn

from ansible_collections.ironpool.iaas.plugins.module_utils.errors import (
    ImmutableChange,
    OptionError,
    cause_text,
    immutable_causes,
)
from ansible_collections.ironpool.iaas.plugins.module_utils.views import dig
from ansible_collections.ironpool.iaas.plugins.module_utils.wait import gone, wait_for_object

with contextlib.suppress(ImportError):  # the modules report the missing library before anything is declared
    from ironpool.api.errors import Invalid, NotFound

Obj = dict[str, Any]

# Metadata the server owns: never declared, so never part of a diff.
SERVER_METADATA = frozenset({
    "uid", "resourceVersion", "generation", "creationTimestamp", "deletionTimestamp",
    "deletionGracePeriodSeconds", "managedFields", "selfLink", "finalizers", "ownerReferences",
})
IDENTITY_KEYS = ("apiVersion", "kind", "metadata", "status")
PATCHABLE_METADATA = ("labels", "annotations")
# The label keys a module set on an object, comma-separated (see with_owned_labels).
MANAGED_LABELS = "iaas.ironpool.dev/managed-labels"


def declared_view(obj: Obj) -> Obj:
    """What a user declares of an object: no status and no server-managed metadata."""
    out = {k: v for k, v in obj.items() if k != "status"}
    out["metadata"] = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in SERVER_METADATA}
    return out


def declared_metadata(params: Mapping[str, Any]) -> Obj:
    """``metadata`` from a module's ``name`` and, when given, ``labels`` and ``annotations``."""
    meta: Obj = {"name": params["name"]}
    for key in PATCHABLE_METADATA:
        if params.get(key) is not None:
            meta[key] = params[key]
    return meta


def with_owned_labels(meta: Obj, current: Obj | None) -> Obj:
    """``meta`` (see :func:`declared_metadata`) such that the labels end up as declared, without
    touching labels others set: a label this module set in an earlier run (recorded in the
    :data:`MANAGED_LABELS` annotation, as ``kubectl apply`` records what it applied) that the task no
    longer lists is removed (null in the merge patch), and the annotation records the keys listed
    now. Without ``labels`` nothing changes; a label set before the module recorded it is kept."""
    labels = meta.get("labels")
    if labels is None:
        return meta
    have = (current or {}).get("metadata") or {}
    recorded = ((have.get("annotations") or {}).get(MANAGED_LABELS) or "").split(",")
    dropped = sorted(k for k in recorded if k and k not in labels and k in (have.get("labels") or {}))
    out = dict(meta)
    out["labels"] = {**dict.fromkeys(dropped), **labels}
    # No keys to record: no annotation (null removes an earlier one; a new object gets none).
    out["annotations"] = {**(meta.get("annotations") or {}), MANAGED_LABELS: ",".join(sorted(labels)) or None}
    return out


def merge_patch(desired: Obj) -> Obj:
    """The merge patch that brings an existing object to ``desired``: everything declared but
    identity and status (only labels and annotations of the metadata)."""
    patch = {k: copy.deepcopy(v) for k, v in desired.items() if k not in IDENTITY_KEYS}
    meta = desired.get("metadata") or {}
    meta_patch = {k: copy.deepcopy(meta[k]) for k in PATCHABLE_METADATA if meta.get(k) is not None}
    if meta_patch:
        patch["metadata"] = meta_patch
    return patch


def without_nulls(value: Any) -> Any:
    """``value`` without the nulls a merge patch uses to remove keys (a new object has none to remove)."""
    if isinstance(value, dict):
        return {k: without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [without_nulls(v) for v in value]
    return value


def _terminating(obj: Obj) -> bool:
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))


def object_key(obj: Obj) -> str:
    """``namespace/name`` for namespaced objects, ``name`` else."""
    meta = obj.get("metadata") or {}
    return f"{meta['namespace']}/{meta.get('name')}" if meta.get("namespace") else str(meta.get("name"))


@dataclass
class Outcome:
    """What declaring one object did (or, in check mode, would do)."""

    action: str  # created | updated | recreated | unchanged | deleted | terminating | absent
    obj: Obj | None  # the object as the server holds it now (as it would be, in check mode)
    before: Obj | None = None
    after: Obj | None = None

    @property
    def changed(self) -> bool:
        return self.action not in ("unchanged", "terminating", "absent")

    def diff(self) -> dict[str, Any]:
        """``{'before': ..., 'after': ...}`` of the declared views (``{}`` for a missing side)."""
        return {"before": self.before or {}, "after": self.after or {}}


class Declarer:
    """Brings objects of one kind to a declared state through ``client`` (an ``ironpool.client.Client``).

    ``fields`` maps API field paths to the module's option names, for error messages;
    ``gone_timeout`` bounds how long a forced recreate waits for the old object to disappear.
    """

    def __init__(self, client: Any, info: Any, namespace: str | None, check_mode: bool,
                 fields: Mapping[str, str], gone_timeout: float = 300.0,
                 immutable: tuple[tuple[str, ...], ...] = ()) -> None:
        self.client = client
        self.info = info
        self.namespace = namespace if info.namespaced else None
        self.check_mode = check_mode
        self.fields = fields
        self.gone_timeout = gone_timeout
        # Field paths the module treats as fixed although the API would take a change (it would
        # not be realised, e.g. a Volume's data source).
        self.immutable = immutable

    # -- reads -------------------------------------------------------------------------------

    def get(self, name: str) -> Obj | None:
        try:
            return dict(self.client.get_raw(self.info, name, self.namespace))
        except NotFound:
            return None

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

    def validate_new(self, desired: Obj) -> Obj:
        """The canonical form of a new object, checked by the API's own validation without a round
        trip; an invalid field fails naming its option."""
        # Only a create needs the API's models (~0.1 s to load): an unchanged object never does.
        from ironpool.api.resources import by_kind
        from ironpool.api.validation import validate_create

        info = by_kind(self.info.api_version, self.info.kind)
        try:
            return dict(validate_create(info, without_nulls(self.with_identity(desired))))
        except Invalid as exc:
            raise OptionError("; ".join(cause_text(c.field, c.message, self.fields) for c in exc.causes)
                              or str(exc)) from exc

    # -- writes ------------------------------------------------------------------------------

    def present(self, desired: Obj, current: Obj | None, force: bool = False) -> Outcome:
        """Create ``desired`` or update ``current`` towards it; ``force`` recreates the object when
        a field it cannot change differs (otherwise that is an :class:`ImmutableChange`)."""
        desired = self.with_identity(desired)
        name = str(desired["metadata"]["name"])
        if current is not None and _terminating(current):
            if self.check_mode:
                after = self.validate_new(desired)
                return Outcome("created", after, None, declared_view(after))
            self._await_gone(name, "it is being deleted")
            current = None
        if current is None:
            return self._create(desired, None)
        frozen = self._client_side_immutable(desired, current)
        if frozen:
            return self._immutable(desired, current, frozen, force)
        patch = merge_patch(desired)
        try:
            preview = self.client.patch_raw(self.info, name, patch, self.namespace, dry_run=True)
        except Invalid as exc:
            frozen = [(c.field, c.message) for c in immutable_causes(exc)]
            if not frozen or len(frozen) != len(exc.causes):
                raise
            return self._immutable(desired, current, frozen, force)
        before, after = declared_view(current), declared_view(preview)
        if before == after:
            return Outcome("unchanged", current, before, after)
        if self.check_mode:
            return Outcome("updated", preview, before, after)
        updated = self.client.patch_raw(self.info, name, patch, self.namespace)
        return Outcome("updated", updated, before, declared_view(updated))

    def absent(self, name: str, current: Obj | None) -> Outcome:
        """Delete the object if it exists (its finalizers may keep it a while: see ``wait``)."""
        if current is None:
            return Outcome("absent", None)
        before = declared_view(current)
        if _terminating(current):
            return Outcome("terminating", current, before, None)
        if self.check_mode:
            return Outcome("deleted", current, before, None)
        remaining = self.client.delete_raw(self.info, name, self.namespace)
        return Outcome("deleted", remaining, before, None)

    def _client_side_immutable(self, desired: Obj, current: Obj) -> list[tuple[str, str]]:
        out = []
        for path in self.immutable:
            want, have = dig(desired, *path), dig(current, *path)
            if want is not None and want != have:
                out.append((".".join(path), f"Invalid value: {want!r} (it is {have!r}): field is immutable"))
        return out

    def _immutable(self, desired: Obj, current: Obj, frozen: list[tuple[str, str]], force: bool) -> Outcome:
        if not force:
            raise ImmutableChange(
                "; ".join(cause_text(f, m, self.fields) for f, m in frozen)
                + f"; the existing {self.info.kind} {object_key(current)} cannot change this in place: "
                "set force=true to delete and recreate it")
        return self._recreate(desired, current)

    def _create(self, desired: Obj, before: Obj | None) -> Outcome:
        body = without_nulls({k: v for k, v in desired.items() if k != "status"})
        try:
            created = self.client.create_raw(self.info, body, self.namespace, dry_run=self.check_mode)
        except Invalid as exc:
            missing = [c for c in exc.causes if c.reason == "FieldValueNotFound"]
            if not self.check_mode or not missing or len(missing) != len(exc.causes):
                raise
            # What it refers to (a Network, a Prefix) may come from an earlier task, which check mode
            # did not run: predict the object from the API's own validation, without the server.
            created = self.validate_new(desired)
            warn(f"check mode: {self.info.kind} {desired['metadata']['name']} refers to "
                 f"{'; '.join(c.message for c in missing)}; predicted without the server's checks")
        action = "created" if before is None else "recreated"
        return Outcome(action, created, before, declared_view(created))

    def _recreate(self, desired: Obj, current: Obj) -> Outcome:
        name = str(desired["metadata"]["name"])
        before = declared_view(current)
        if self.check_mode:
            after = self.validate_new(desired)
            return Outcome("recreated", after, before, declared_view(after))
        self.client.delete_raw(self.info, name, self.namespace)
        self._await_gone(name, "force=true deleted it to recreate it")
        return self._create(desired, before)

    def _await_gone(self, name: str, why: str) -> None:
        ok = wait_for_object(self.client, self.info, self.namespace, name, gone, self.gone_timeout)[1]
        if not ok:
            raise OptionError(f"wait_timeout: {self.info.kind} {name} is still there after "
                              f"{self.gone_timeout:g}s ({why}); it cannot be created again before it is gone")
