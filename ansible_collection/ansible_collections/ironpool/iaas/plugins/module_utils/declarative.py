# Copyright: ironpool contributors
# SPDX-License-Identifier: Apache-2.0
"""The shape of a module that declares one object with no waiting: classes and Secrets."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ansible_collections.ironpool.iaas.plugins.module_utils.base import IronpoolModule
from ansible_collections.ironpool.iaas.plugins.module_utils.kinds import resource
from ansible_collections.ironpool.iaas.plugins.module_utils.resource import TaskDeclarer

if TYPE_CHECKING:
    from ironpool.client.declare import Outcome

Obj = dict[str, Any]


class DeclarativeModule(IronpoolModule):
    """Subclasses name the kind and build the desired object from the options; ``state``,
    ``force``, check mode and diff are handled here."""

    api_version = ""
    kind = ""
    result_key = ""
    immutable: tuple[tuple[str, ...], ...] = ()  # see TaskDeclarer

    def desired(self, current: Obj | None) -> Obj:
        raise NotImplementedError

    def shown(self, obj: Obj) -> Obj:
        """The object as returned to the playbook (Secrets hide their data)."""
        return obj

    def diff(self, outcome: Outcome) -> dict[str, Any]:
        return outcome.diff()

    def run(self) -> None:
        p = self.params
        info = resource(self.api_version, self.kind)
        declarer = TaskDeclarer(self.client, info, self.namespace, self.check_mode, self.fields,
                                immutable=self.immutable)
        current = declarer.get(p["name"])
        if p["state"] == "absent":
            outcome = declarer.absent(p["name"], current)
        else:
            desired = self.desired(current)
            if current is None:
                declarer.validate_new(desired)
            outcome = declarer.present(desired, current, force=bool(p.get("force")))
        result: dict[str, Any] = {"changed": outcome.changed, "action": outcome.action,
                                  self.result_key: self.shown(outcome.obj or {})}
        if self.diff_mode:
            result["diff"] = self.diff(outcome)
        self.exit(**result)
