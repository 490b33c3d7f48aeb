"""Namespace: a scope for namespaced objects; its deletion is completed by the apiserver's
namespace controller once everything in it is gone."""

from __future__ import annotations

from ironpool.api.columns import AGE, NAME, Column, field
from ironpool.api.core import CORE_GROUP, CORE_VERSION, Namespace
from ironpool.api.resource_info import ResourceInfo
from ironpool.api.strategy import Obj, Strategy


class NamespaceStrategy(Strategy[Namespace]):
    """Phase ``Active`` from creation, ``Terminating`` from deletion until the controller removes it."""

    info = ResourceInfo(CORE_GROUP, CORE_VERSION, "Namespace", "namespaces", "namespace", ("ns",), False,
                        Namespace, True)
    name_is_dns_label = True
    columns = (NAME, Column("STATUS", field("status.phase")), AGE)
    finalized_by_controller = True

    def prepare_for_create(self, obj: Obj) -> None:
        obj.setdefault("status", {}).setdefault("phase", "Active")

    def prepare_for_delete(self, obj: Obj) -> None:
        obj["status"] = {**(obj.get("status") or {}), "phase": "Terminating"}
