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
  - ironpool engineers
options:
  src:
    description:
      - Path of a manifest file (YAML or JSON, several documents allowed, C(kind: List) unpacked) or of
        a directory of such files (read in name order), on the host that runs the module.
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
      - V(ready) - Machines realise their power state (C(Running) when on), Volumes are C(Available).
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

from typing import Any

from ansible_collections.ironpool.iaas.plugins.module_utils.base import IronpoolModule
from ansible_collections.ironpool.iaas.plugins.module_utils.client import wait_argument_spec
from ansible_collections.ironpool.iaas.plugins.module_utils.errors import OptionError, cause_text
from ansible_collections.ironpool.iaas.plugins.module_utils.placement import pool_of, predict_pools
from ansible_collections.ironpool.iaas.plugins.module_utils.resource import Declarer, Outcome, object_key
from ansible_collections.ironpool.iaas.plugins.module_utils.views import redact_secret, secret_diff
from ansible_collections.ironpool.iaas.plugins.module_utils.wait import (
    gone,
    machine_running,
    machine_scheduled,
    volume_available,
    volume_scheduled,
    wait_for_objects,
)

try:
    import yaml
    from ironpool.api.errors import ApiError, Invalid
    from ironpool.api.resources import by_kind
    from ironpool.api.validation import validate_create
    from ironpool.cli.config import CommandError
    from ironpool.cli.manifests import Manifest, load_manifests, parse_documents
except ImportError:  # reported by IronpoolModule.execute
    pass

# One object of the set: its resource, the object as declared, and what declaring it did.
Applied = tuple[Any, dict[str, Any], Outcome]
# A document to declare: its Manifest (source and index), resource and object with namespace.
Target = tuple[Any, Any, dict[str, Any]]

WAIT_CONDITIONS = {
    ("Machine", "scheduled"): machine_scheduled,
    ("Machine", "ready"): machine_running,
    ("Volume", "scheduled"): volume_scheduled,
    ("Volume", "ready"): volume_available,
}


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
        p = self.params
        docs = self.documents()
        targets = [self.target(m) for m in docs]
        if p["state"] == "absent":
            self.remove(targets)
        self.apply(targets)

    # -- reading -----------------------------------------------------------------------------

    def documents(self) -> list[Manifest]:
        p = self.params
        option = "src" if p["src"] else "definition"
        try:
            if p["src"]:
                return list(load_manifests([p["src"]]))
            definition = p["definition"]
            if isinstance(definition, str):
                return list(parse_documents(definition, "definition"))
            items = definition if isinstance(definition, list) else [definition]
            return list(parse_documents(yaml.safe_dump_all(items), "definition"))
        except CommandError as exc:
            raise OptionError(f"{option}: {exc}") from exc

    def target(self, m: Manifest) -> Target:
        """The manifest, its resource and the object with its namespace filled in, validated by the
        API's own rules (every document is checked before anything is written)."""
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
        return m, info, obj

    # -- present -----------------------------------------------------------------------------

    def apply(self, targets: list[Target]) -> None:
        p = self.params
        outcomes: list[Applied] = []
        for m, info, obj in targets:
            declarer = self.declarer(info, obj)
            name = str(obj["metadata"]["name"])
            try:
                outcome = declarer.present(obj, declarer.get(name), force=p["force"])
            except OptionError as exc:
                raise OptionError(f"{m.where}: {exc}") from exc
            except ApiError as exc:
                raise OptionError(f"{m.where}: {info.kind} {object_key(obj)}: {exc}") from exc
            outcomes.append((info, obj, outcome))
        predicted: dict[tuple[str, str], dict[str, Any]] = {}
        if self.check_mode:
            # The unbound Machines and Volumes as they would be, with the classes of the same set.
            unbound = [o.obj for info, _, o in outcomes
                       if o.obj is not None and info.kind in ("Machine", "Volume") and pool_of(o.obj) is None]
            classes = [obj for info, obj, _ in outcomes if info.kind in ("MachineClass", "VolumeClass")]
            predicted = predict_pools(self.client, unbound + classes, self.namespace) if unbound else {}
        elif p["wait"]:
            self.wait(outcomes, p["wait_for"])
        results = [self.entry(info, obj, o, predicted) for info, obj, o in outcomes]
        self.finish(outcomes, results)

    def wait(self, outcomes: list[Applied], wait_for: str) -> None:
        groups: dict[tuple[str, str | None], tuple[Any, list[int]]] = {}
        for i, (info, obj, _) in enumerate(outcomes):
            if (info.kind, wait_for) in WAIT_CONDITIONS or wait_for == "gone":
                key = (info.kind, obj["metadata"].get("namespace"))
                groups.setdefault(key, (info, []))[1].append(i)
        for (kind, namespace), (info, indices) in groups.items():
            done = gone if wait_for == "gone" else WAIT_CONDITIONS[(kind, wait_for)]
            names = [str(outcomes[i][1]["metadata"]["name"]) for i in indices]
            timeout = self.params["wait_timeout"]
            latest, ok = wait_for_objects(self.client, info, namespace, names, done, timeout)
            for i in indices:
                _, obj, outcome = outcomes[i]
                now = latest.get(str(obj["metadata"]["name"]))
                if now is not None or wait_for == "gone":
                    outcome.obj = now
            if not ok:
                pending = sorted(n for n, o in latest.items() if not done(o))
                results = [self.entry(i_, o_, out_, {}) for i_, o_, out_ in outcomes]
                where = f" in namespace {namespace}" if namespace else ""
                self.fail(f"{len(pending)} {kind}(s){where} did not become {wait_for} within {timeout}s: "
                          f"{', '.join(pending[:10])}",
                          changed=any(o.changed for _, _, o in outcomes), results=results)

    # -- absent ------------------------------------------------------------------------------

    def remove(self, targets: list[Target]) -> None:
        outcomes: list[Applied] = []
        for _, info, obj in reversed(targets):
            declarer = self.declarer(info, obj)
            name = str(obj["metadata"]["name"])
            outcomes.append((info, obj, declarer.absent(name, declarer.get(name))))
        outcomes.reverse()
        if self.params["wait"] and not self.check_mode:
            self.wait([(i, o, out) for i, o, out in outcomes if out.action != "absent"], "gone")
        results = [self.entry(info, obj, o, {}) for info, obj, o in outcomes]
        self.finish(outcomes, results)

    # -- shared ------------------------------------------------------------------------------

    def declarer(self, info: Any, obj: dict[str, Any]) -> Declarer:
        namespace = obj["metadata"].get("namespace") or self.namespace
        return Declarer(self.client, info, namespace, self.check_mode, {},
                        gone_timeout=self.params["wait_timeout"])

    def entry(self, info: Any, obj: dict[str, Any], outcome: Outcome,
              predicted: dict[tuple[str, str], dict[str, Any]]) -> dict[str, Any]:
        shown = outcome.obj or {}
        if info.kind == "Secret":
            shown = redact_secret(shown)
        entry: dict[str, Any] = {
            "kind": info.kind,
            "name": obj["metadata"]["name"],
            "namespace": obj["metadata"].get("namespace") or "",
            "action": outcome.action,
            "object": shown,
        }
        if info.kind in ("Machine", "Volume"):
            guess = predicted.get((info.kind, object_key(obj)), {})
            entry["pool"] = pool_of(outcome.obj) or guess.get("pool") or ""
        return entry

    def finish(self, outcomes: list[Applied], results: list[dict[str, Any]]) -> None:
        result: dict[str, Any] = {"changed": any(o.changed for _, _, o in outcomes), "results": results}
        if self.diff_mode:
            result["diff"] = [
                secret_diff(o.before, o.after) if info.kind == "Secret" else o.diff()
                for info, _, o in outcomes if o.changed
            ]
        self.exit(**result)


def main() -> None:
    ManifestModule().execute()


if __name__ == "__main__":
    main()
