# Copyright: ironpool contributors
# SPDX-License-Identifier: Apache-2.0
"""The shape of the ``*_info`` modules: list objects of one kind by name, labels, fields and
namespace, optionally waiting until they meet a condition (like ``kubernetes.core.k8s_info``)."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

from ansible_collections.ironpool.iaas.plugins.module_utils.base import IronpoolModule
from ansible_collections.ironpool.iaas.plugins.module_utils.client import list_all_raw
from ansible_collections.ironpool.iaas.plugins.module_utils.kinds import resource
from ansible_collections.ironpool.iaas.plugins.module_utils.wait import Done, object_id, wait_for_objects

with contextlib.suppress(ImportError):  # reported by IronpoolModule.execute
    from ironpool.api.errors import NotFound

Obj = dict[str, Any]


def info_argument_spec(wait_for_choices: list[str], namespaced: bool) -> dict[str, Any]:
    """The options every info module has (``all_namespaces`` only for namespaced kinds)."""
    spec: dict[str, Any] = {
        "name": {"type": "str"},
        "label_selectors": {"type": "list", "elements": "str", "default": []},
        "field_selectors": {"type": "list", "elements": "str", "default": []},
        "wait": {"type": "bool", "default": False},
        "wait_timeout": {"type": "int", "default": 120},
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
    """Subclasses name the kind, the result key and their ``wait_for`` conditions; :meth:`shown`
    turns each object into what the playbook gets."""

    api_version = ""
    kind = ""
    result_key = ""
    wait_conditions: Mapping[str, Done] = {}

    def shown(self, obj: Obj) -> Any:
        return obj

    def done(self, obj: Obj | None) -> bool:
        p = self.params
        if obj is None:
            return False
        if p["wait_for"] and not self.wait_conditions[p["wait_for"]](obj):
            return False
        return not p["wait_condition"] or has_condition(obj, p["wait_condition"])

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
        names = [object_id(o, across) for o in items]
        if p["name"] and not items and not across:
            names = [p["name"]]  # wait for it to appear, too
        if not names:
            return items
        latest, ok = wait_for_objects(self.client, info, namespace, names, self.done, p["wait_timeout"])
        found = [o for o in latest.values() if o is not None]
        if not ok:
            pending = sorted(n for n, o in latest.items() if not self.done(o))
            self.fail(f"{len(pending)} {self.kind}(s) did not meet the wait condition within "
                      f"{p['wait_timeout']}s: {', '.join(pending[:10])}",
                      **{self.result_key: [self.shown(o) for o in found]})
        return found
