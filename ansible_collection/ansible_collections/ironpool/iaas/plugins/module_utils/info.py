# Copyright: ironpool contributors
# SPDX-License-Identifier: Apache-2.0
"""The shape of the ``*_info`` modules: list objects of one kind by name, labels, fields and
namespace, optionally waiting until they meet a condition (like ``kubernetes.core.k8s_info``): the
kind's readiness every front end shares (``wait_for``) and, or, a status condition
(``wait_condition``)."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

from ansible_collections.ironpool.iaas.plugins.module_utils.base import IronpoolModule
from ansible_collections.ironpool.iaas.plugins.module_utils.client import list_all_raw
from ansible_collections.ironpool.iaas.plugins.module_utils.kinds import resource
from ansible_collections.ironpool.iaas.plugins.module_utils.wait import WaitFailed, await_objects

with contextlib.suppress(ImportError):  # reported by IronpoolModule.execute
    from ironpool.api.errors import NotFound
    from ironpool.client.readiness import Readiness, Verdict, exists, readiness_for
    from ironpool.client.wait import key_of

Obj = dict[str, Any]


def info_argument_spec(wait_for_choices: list[str], namespaced: bool) -> dict[str, Any]:
    """The options every info module has (``all_namespaces`` only for namespaced kinds)."""
    spec: dict[str, Any] = {
        "name": {"type": "str"},
        "label_selectors": {"type": "list", "elements": "str", "default": []},
        "field_selectors": {"type": "list", "elements": "str", "default": []},
        "wait": {"type": "bool", "default": False},
        "wait_timeout": {"type": "int", "default": 120},
        "fail_on_unschedulable": {"type": "bool", "default": True},
        "wait_for": {"type": "str", "choices": wait_for_choices},
        "wait_condition": {
            "type": "dict",
            "options": {
                "type": {"type": "str", "required": True},
                "status": {"type": "str", "default": "True", "choices": ["True", "False", "Unknown"]},
                "reason": {"type": "str"},
            },
        },
    }
    if namespaced:
        spec["all_namespaces"] = {"type": "bool", "default": False}
    return spec


def has_condition(obj: Obj | None, want: Mapping[str, Any]) -> bool:
    """Whether ``obj`` has a status condition of ``want['type']`` with ``want['status']`` (and
    ``want['reason']`` when given)."""
    for cond in ((obj or {}).get("status") or {}).get("conditions") or ():
        if cond.get("type") != want["type"] or cond.get("status") != want["status"]:
            continue
        if want.get("reason") and cond.get("reason") != want["reason"]:
            continue
        return True
    return False


class InfoModule(IronpoolModule):
    """Subclasses name the kind and the result key (their ``wait_for`` choices are the kind's
    readiness names); :meth:`shown` turns each object into what the playbook gets."""

    api_version = ""
    kind = ""
    result_key = ""

    def shown(self, obj: Obj) -> Any:
        return obj

    def readiness(self) -> Readiness:
        """What ``wait`` waits for: ``wait_for`` (else that the object exists), and ``wait_condition``."""
        p = self.params
        base = readiness_for(self.kind, p["wait_for"]) if p["wait_for"] else exists
        want = p["wait_condition"]

        def check(obj: Obj | None) -> Verdict:
            verdict = base(obj)
            if not verdict.done or not want or has_condition(obj, want):
                return verdict
            reason = f" ({want['reason']})" if want.get("reason") else ""
            wanted = f"{want['type']}={want['status']}{reason}"
            return Verdict(False, f"{verdict.progress}; no condition {wanted} yet")

        return check

    def run(self) -> None:
        p = self.params
        info = resource(self.api_version, self.kind)
        across = info.namespaced and bool(p.get("all_namespaces"))
        namespace = None if across or not info.namespaced else self.namespace
        items = self.list_objects(info, namespace)
        if p["wait"]:
            items = self.wait(info, namespace, across, items)
        self.exit(changed=False, **{self.result_key: [self.shown(o) for o in items]})

    def list_objects(self, info: Any, namespace: str | None) -> list[Obj]:
        p = self.params
        fields = list(p["field_selectors"])
        if p["name"]:
            fields.append(f"metadata.name={p['name']}")
        labels = ",".join(p["label_selectors"]) or None
        try:
            return list(list_all_raw(self.client, info, namespace, labels, ",".join(fields) or None))
        except NotFound:
            return []  # the namespace does not exist: nothing in it

    def wait(self, info: Any, namespace: str | None, across: bool, items: list[Obj]) -> list[Obj]:
        p = self.params
        names = [key_of(o, across) for o in items]
        if p["name"] and not items and not across:
            names = [p["name"]]  # wait for it to appear, too
        if not names:
            return items
        plain = p["wait_for"] and not p["wait_condition"]
        what = f"become {p['wait_for']}" if plain else "meet the wait condition"
        try:
            latest = await_objects(self.client, info, namespace, names, what, p, self.readiness())
        except WaitFailed as exc:
            found = [o for o in exc.last.values() if o is not None]
            self.fail(str(exc), **{self.result_key: [self.shown(o) for o in found]})
        return [o for o in latest.values() if o is not None]
