# Copyright: ironpool contributors
# SPDX-License-Identifier: Apache-2.0
"""Declaring one object from a task: create it, update it in place, recreate it when forced, or
delete it.

The declaring itself is ``ironpool.client.declare``, which the CLI and the Pulumi provider use too:
the apiserver computes what a change would do (server-side dry run), so the check-mode prediction,
the diff and ``changed`` all come from the same defaulting and validation a real write goes
through, and a second run reports nothing changed. Updates are JSON merge patches of what the task
declares: fields it leaves out are kept. Every write is recorded under the field manager
``ironpool-ansible``. What is Ansible's own: option names in errors, fields a task may only change
by recreating the object (``force``), waiting for an object being deleted before creating it again,
and check mode's prediction of an object that refers to something an earlier task would create.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping
from typing import Any

from ansible.module_utils.common.warnings import warn

from ansible_collections.ironpool.iaas.plugins.module_utils.errors import (
    ImmutableChange,
    OptionError,
    cause_text,
    immutable_causes,
)
from ansible_collections.ironpool.iaas.plugins.module_utils.views import dig

with contextlib.suppress(ImportError):  # the modules report the missing library before anything is declared
    from ironpool.api.errors import Invalid
    from ironpool.client.declare import (
        FIELD_MANAGERS,
        Declarer,
        Outcome,
        declared_view,
        terminating,
        without_nulls,
    )
    from ironpool.client.readiness import gone
    from ironpool.client.wait import WaitError, wait_for_one

Obj = dict[str, Any]

PATCHABLE_METADATA = ("labels", "annotations")
# The label keys a module set on an object, comma-separated (see with_owned_labels).
MANAGED_LABELS = "iaas.ironpool.dev/managed-labels"


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


def object_key(obj: Obj) -> str:
    """``namespace/name`` for namespaced objects, ``name`` else."""
    meta = obj.get("metadata") or {}
    return f"{meta['namespace']}/{meta.get('name')}" if meta.get("namespace") else str(meta.get("name"))


class TaskDeclarer:
    """Brings objects of one kind to what a task declares through ``client`` (an
    ``ironpool.client.Client``), in check mode without writing.

    ``fields`` maps API field paths to the module's option names, for error messages;
    ``gone_timeout`` bounds how long a forced recreate waits for the old object to disappear;
    ``immutable`` names field paths the module treats as fixed although the API would take a change
    (it would not be realised, e.g. a Volume's data source).
    """

    def __init__(self, client: Any, info: Any, namespace: str | None, check_mode: bool,
                 fields: Mapping[str, str], gone_timeout: float = 300.0,
                 immutable: tuple[tuple[str, ...], ...] = ()) -> None:
        self.declarer = Declarer(client, info, namespace, FIELD_MANAGERS["ansible"], dry_run=check_mode)
        self.client = client
        self.info = info
        self.namespace = self.declarer.namespace
        self.check_mode = check_mode
        self.fields = fields
        self.gone_timeout = gone_timeout
        self.immutable = immutable

    def get(self, name: str) -> Obj | None:
        return self.declarer.get(name)

    def with_identity(self, desired: Obj) -> Obj:
        return self.declarer.with_identity(desired)

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
        if current is not None and terminating(current):
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
        try:
            return self.declarer.update(desired, current)
        except Invalid as exc:
            frozen = [(c.field, c.message) for c in immutable_causes(exc)]
            if not frozen or len(frozen) != len(exc.causes):
                raise
            return self._immutable(desired, current, frozen, force)

    def absent(self, name: str, current: Obj | None) -> Outcome:
        """Delete the object if it exists (its finalizers may keep it a while: see ``wait``)."""
        return self.declarer.absent(name, current)

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
        try:
            created = self.declarer.create(desired).obj or {}
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
        self.declarer.absent(name, current)
        self._await_gone(name, "force=true deleted it to recreate it")
        return self._create(desired, before)

    def _await_gone(self, name: str, why: str) -> None:
        try:
            wait_for_one(self.client, self.info, self.namespace, name, gone,
                         time.monotonic() + self.gone_timeout)
        except WaitError:
            raise OptionError(f"wait_timeout: {self.info.kind} {name} is still there after "
                              f"{self.gone_timeout:g}s ({why}); it cannot be created again before it is "
                              f"gone") from None
