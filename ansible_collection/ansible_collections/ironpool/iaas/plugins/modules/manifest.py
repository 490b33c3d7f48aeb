#!/usr/bin/python
# Copyright: ironpool contributors
# SPDX-License-Identifier: Apache-2.0
"""ironpool.iaas.manifest: apply (or delete) any ironpool/IronCore manifests, like kubernetes.core.k8s."""

from __future__ import annotations

DOCUMENTATION = r"""
module: manifest
short_description: Apply or delete ironpool and IronCore manifests
version_added: 0.1.0
description:
  - Declares every object of one or more manifests (C(compute.ironcore.dev/v1alpha1),
    C(storage.ironcore.dev/v1alpha1), core C(v1) Secrets and Namespaces), as C(ironpool apply -f)
    does - an existing object gets the manifest as a JSON merge patch, so fields the manifest leaves
    out are kept.
  - Every document is validated before the first one is written; one bad document fails the task
    naming it, and nothing is created.
  - With state V(absent) the objects are deleted in reverse order.
  - In check mode nothing is written; the new Machines and Volumes report the pools the scheduler
    would pick for them, placed together.
author:
  - ironpool engineers (!UNKNOWN)
options:
  src:
    description:
      - "Path of a manifest file (YAML or JSON, several documents allowed, C(kind: List) unpacked) or of
        a directory of such files (read in name order), on the host that runs the module."
    type: path
  definition:
    description:
      - The manifests themselves - one object, a list of objects, or YAML text with one or more
        documents.
    type: raw
  state:
    description: Whether the objects should exist.
    type: str
    choices: [present, absent]
    default: present
  wait_for:
    description:
      - What O(wait=true) waits for with state V(present), for the Machines and Volumes among the
        objects (other kinds are done once written).
      - V(scheduled) - bound to a pool.
      - V(ready) - Machines run as declared (as O(ironpool.iaas.machine#module:wait_for=running)
        means), Volumes are C(Available) at their size.
    type: str
    choices: [scheduled, ready]
    default: ready
  force:
    description: Delete and recreate objects whose fixed fields differ, instead of failing.
    type: bool
    default: false
extends_documentation_fragment:
  - ironpool.iaas.connection
  - ironpool.iaas.wait
attributes:
  check_mode:
    support: full
    description: Predicts every object's change and diff, and the pools of new Machines and Volumes.
  diff_mode:
    support: full
    description: A before/after per changed object (Secrets show which keys change, not the values).
"""

EXAMPLES = r"""
- name: Apply the example manifests and wait until the machine runs
  ironpool.iaas.manifest:
    src: examples/manifests/
    wait: true

- name: Fifty machines in one task, scheduled before it returns
  ironpool.iaas.manifest:
    definition: |
      {% for i in range(50) %}
      ---
      apiVersion: compute.ironcore.dev/v1alpha1
      kind: Machine
      metadata: {name: "batch-{{ i }}"}
      spec: {machineClassRef: {name: x-small}}
      {% endfor %}
    wait: true
    wait_for: scheduled

- name: Delete them again
  ironpool.iaas.manifest:
    src: examples/manifests/web.yaml
    state: absent
    wait: true
"""

RETURN = r"""
results:
  description: One entry per object, in manifest order.
  returned: always
  type: list
  elements: dict
  contains:
    kind:
      description: The object's kind.
      type: str
      sample: Machine
    name:
      description: The object's name.
      type: str
      sample: web
    namespace:
      description: The object's namespace (empty for cluster-scoped kinds).
      type: str
      sample: default
    action:
      description: C(created), C(updated), C(recreated), C(unchanged), C(deleted), C(terminating) or
        C(absent).
      type: str
      sample: created
    pool:
      description: For Machines and Volumes, the pool they are bound to (in check mode, for new ones,
        the pool the scheduler would pick; empty when none fits).
      type: str
      sample: host-1
    object:
      description: The object as the apiserver holds it after the task (Secret data hidden).
      type: dict
"""

from dataclasses import dataclass
from typing import Any

from ansible_collections.ironpool.iaas.plugins.module_utils.base import IronpoolModule, placement_header
from ansible_collections.ironpool.iaas.plugins.module_utils.client import list_all_raw, wait_argument_spec
from ansible_collections.ironpool.iaas.plugins.module_utils.errors import OptionError, cause_text
from ansible_collections.ironpool.iaas.plugins.module_utils.placement import (
    SCHEDULED_KINDS,
    pool_of,
    predict_pools,
)
from ansible_collections.ironpool.iaas.plugins.module_utils.resource import TaskDeclarer, object_key
from ansible_collections.ironpool.iaas.plugins.module_utils.views import redact_secret, secret_diff
from ansible_collections.ironpool.iaas.plugins.module_utils.wait import WaitFailed, await_objects

try:
    import yaml
    from ironpool.api.errors import ApiError, Invalid, NotFound
    from ironpool.api.resources import by_kind
    from ironpool.api.validation import validate_create
    from ironpool.cli.errors import CommandError
    from ironpool.cli.manifests import load_manifests, parse_documents
    from ironpool.client.declare import Outcome
except ImportError:  # reported by IronpoolModule.execute
    pass


@dataclass
class Item:
    """One document of the set: where it came from, its resource, the object to declare (namespace
    filled in) and, once declared, what that did."""

    manifest: Any
    info: Any
    obj: dict[str, Any]
    outcome: Outcome | None = None

    @property
    def kind(self) -> str:
        return str(self.info.kind)

    @property
    def name(self) -> str:
        return str(self.obj["metadata"]["name"])

    @property
    def namespace(self) -> str | None:
        return self.obj["metadata"].get("namespace")

    @property
    def done(self) -> Outcome:
        if self.outcome is None:
            raise RuntimeError(f"{self.kind} {self.name} has not been declared yet")
        return self.outcome


class ManifestModule(IronpoolModule):
    """Applies a set of manifests as one declaration."""

    argument_spec = {
        "src": {"type": "path"},
        "definition": {"type": "raw"},
        "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
        "wait_for": {"type": "str", "choices": ["scheduled", "ready"], "default": "ready"},
        "force": {"type": "bool", "default": False},
        **wait_argument_spec(),
    }
    module_kwargs = {
        "mutually_exclusive": [["src", "definition"]],
        "required_one_of": [["src", "definition"]],
    }

    def run(self) -> None:
        items = [self.item(m) for m in self.documents()]
        if self.params["state"] == "absent":
            self.remove(items)
        self.apply(items)

    # -- reading -----------------------------------------------------------------------------

    def documents(self) -> list[Any]:
        p = self.params
        option = "src" if p["src"] else "definition"
        try:
            if p["src"]:
                return list(load_manifests([p["src"]]))
            definition = p["definition"]
            if isinstance(definition, str):
                return list(parse_documents(definition, "definition"))
            docs = definition if isinstance(definition, list) else [definition]
            return list(parse_documents(yaml.safe_dump_all(docs), "definition"))
        except CommandError as exc:
            raise OptionError(f"{option}: {exc}") from exc

    def item(self, m: Any) -> Item:
        """The document with its resource and namespace, validated by the API's own rules (every
        document is checked before anything is written)."""
        # "src: <file> (document 0)" or "definition (document 0)": the option is named either way.
        where = f"src: {m.where}" if self.params["src"] else m.where
        try:
            info = by_kind(str(m.obj["apiVersion"]), str(m.obj["kind"]))
        except ApiError as exc:
            raise OptionError(f"{where}: {exc}") from exc
        obj = dict(m.obj)
        meta = dict(obj.get("metadata") or {})
        if info.namespaced:
            meta["namespace"] = meta.get("namespace") or self.namespace
        else:
            meta.pop("namespace", None)
        obj["metadata"] = meta
        if self.params["state"] == "present":
            try:
                validate_create(info, obj)
            except Invalid as exc:
                causes = "; ".join(cause_text(c.field, c.message, {}) for c in exc.causes) or str(exc)
                raise OptionError(f"{where}: {info.kind} {object_key(obj)}: {causes}") from exc
        return Item(m, info, obj)

    # -- present -----------------------------------------------------------------------------

    def existing(self, items: list[Item]) -> dict[tuple[str, str | None, str], dict[str, Any]]:
        """The objects of the set that exist now, read with one list per kind and namespace
        (a large set costs one request, not one per object)."""
        groups: dict[tuple[str, str | None], list[Item]] = {}
        for item in items:
            groups.setdefault((item.kind, item.namespace), []).append(item)
        found: dict[tuple[str, str | None, str], dict[str, Any]] = {}
        for (kind, namespace), group in groups.items():
            info = group[0].info
            selector = f"metadata.name={group[0].name}" if len(group) == 1 else None
            try:
                listed = list(list_all_raw(self.client, info, namespace if info.namespaced else None,
                                           field_selector=selector))
            except NotFound:
                listed = []  # the namespace does not exist (yet)
            wanted = {i.name for i in group}
            for obj in listed:
                name = str((obj.get("metadata") or {}).get("name"))
                if name in wanted:
                    found[(kind, namespace, name)] = obj
        return found

    def apply(self, items: list[Item]) -> None:
        p = self.params
        existing = self.existing(items)
        for item in items:
            declarer = self.declarer(item)
            current = existing.get((item.kind, item.namespace, item.name))
            try:
                item.outcome = declarer.present(item.obj, current, force=p["force"])
            except OptionError as exc:
                raise OptionError(f"{item.manifest.where}: {exc}") from exc
            except ApiError as exc:
                what = f"{item.kind} {object_key(item.obj)}"
                raise OptionError(f"{item.manifest.where}: {what}: {exc}") from exc
        predicted: dict[tuple[str, str], dict[str, Any]] = {}
        if self.check_mode:
            # The unbound Machines and Volumes as they would be, with the classes of the same set.
            unbound = [i.done.obj for i in items if i.kind in ("Machine", "Volume")
                       and i.done.obj is not None and pool_of(i.done.obj) is None]
            classes = [i.obj for i in items if i.kind in ("MachineClass", "VolumeClass")]
            predicted = predict_pools(self.client, unbound + classes, self.namespace) if unbound else {}
        elif p["wait"]:
            self.wait(items, p["wait_for"])
        self.finish(items, predicted)

    def wait(self, items: list[Item], wait_for: str) -> None:
        groups: dict[tuple[str, str | None], list[Item]] = {}
        for item in items:
            if item.kind in SCHEDULED_KINDS or wait_for == "gone":
                groups.setdefault((item.kind, item.namespace), []).append(item)
        for (_kind, namespace), group in groups.items():
            names = [i.name for i in group]
            try:
                latest = await_objects(self.client, group[0].info, namespace, names, wait_for, self.params)
            except WaitFailed as exc:
                self.keep_last(group, exc.last, wait_for)
                self.fail(str(exc), **self.result(items, {}))
            self.keep_last(group, latest, wait_for)

    @staticmethod
    def keep_last(group: list[Item], latest: dict[str, Any], wait_for: str) -> None:
        """The objects as the wait last saw them go into the result."""
        for item in group:
            now = latest.get(item.name)
            if now is not None or wait_for == "gone":
                item.done.obj = now

    # -- absent ------------------------------------------------------------------------------

    def remove(self, items: list[Item]) -> None:
        existing = self.existing(items)
        for item in reversed(items):
            current = existing.get((item.kind, item.namespace, item.name))
            item.outcome = self.declarer(item).absent(item.name, current)
        if self.params["wait"] and not self.check_mode:
            self.wait([i for i in items if i.done.action != "absent"], "gone")
        self.finish(items, {})

    # -- shared ------------------------------------------------------------------------------

    def declarer(self, item: Item) -> TaskDeclarer:
        return TaskDeclarer(self.client, item.info, item.namespace or self.namespace, self.check_mode, {},
                            gone_timeout=self.params["wait_timeout"])

    @staticmethod
    def entry(item: Item, predicted: dict[tuple[str, str], dict[str, Any]]) -> dict[str, Any]:
        outcome = item.done
        shown = outcome.obj or {}
        if item.kind == "Secret":
            shown = redact_secret(shown)
        entry: dict[str, Any] = {
            "kind": item.kind,
            "name": item.name,
            "namespace": item.namespace or "",
            "action": outcome.action,
            "object": shown,
        }
        if item.kind in ("Machine", "Volume"):
            guess = predicted.get((item.kind, object_key(item.obj)), {})
            entry["pool"] = pool_of(outcome.obj) or guess.get("pool") or ""
        return entry

    def result(self, items: list[Item], predicted: dict[tuple[str, str], dict[str, Any]]) -> dict[str, Any]:
        result: dict[str, Any] = {
            "changed": any(i.done.changed for i in items),
            "results": [self.entry(i, predicted) for i in items],
        }
        if self.diff_mode:
            result["diff"] = [self.diff(i, predicted) for i in items if i.done.changed]
        return result

    @staticmethod
    def diff(item: Item, predicted: dict[tuple[str, str], dict[str, Any]]) -> dict[str, Any]:
        """One object's diff; a new Machine or Volume's names the pool check mode predicts."""
        if item.kind == "Secret":
            return secret_diff(item.done.before, item.done.after)
        diff = item.done.diff()
        guess = predicted.get((item.kind, object_key(item.obj)))
        if guess is not None:
            placed = {"pool": guess.get("pool") or "", "placement_reason": guess.get("reason") or ""}
            diff["after_header"] = placement_header(f"{item.kind} {object_key(item.obj)}", placed)
        return diff

    def finish(self, items: list[Item], predicted: dict[tuple[str, str], dict[str, Any]]) -> None:
        self.exit(**self.result(items, predicted))


def main() -> None:
    ManifestModule().execute()


if __name__ == "__main__":
    main()
