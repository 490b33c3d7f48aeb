"""ClusterRole aggregation, as Kubernetes' clusterrole-aggregation controller computes it: a
ClusterRole with an ``aggregationRule`` carries the rules of every other ClusterRole one of its
``clusterRoleSelectors`` picks by label, in name order, each rule once.

Aggregated roles are picked up as they are after aggregation, so chains settle in one computation
(``view`` is labelled ``aggregate-to-edit``, ``edit`` ``aggregate-to-admin``: what is aggregated to
``view`` reaches ``edit`` and ``admin`` too). The default policy (:mod:`.defaults`) uses it to ship
its roles with their rules filled in; the controller
(:mod:`ironpool.apiserver.controllers.clusterrole_aggregation`) keeps them current.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ironpool.api.meta import LabelSelectorSpec
from ironpool.api.selectors import LabelSelector, compile_selector

AGGREGATE_TO = "rbac.authorization.k8s.io/aggregate-to-"
"""The label prefix of Kubernetes' aggregated roles: ``aggregate-to-view``, ``-edit``, ``-admin``."""

Doc = Mapping[str, Any]


def _selectors(role: Doc) -> list[LabelSelector] | None:
    rule = role.get("aggregationRule")
    if not isinstance(rule, dict):
        return None
    specs = rule.get("clusterRoleSelectors") or []
    return [compile_selector(LabelSelectorSpec.model_validate(s)) for s in specs if isinstance(s, dict)]


def aggregated_rules(roles: Mapping[str, Doc]) -> dict[str, list[dict[str, Any]]]:
    """The rules each aggregated ClusterRole of ``roles`` (name -> ClusterRole JSON) should carry."""
    selectors = {name: sel for name, role in roles.items() if (sel := _selectors(role)) is not None}
    rules = {name: list(role.get("rules") or []) for name, role in roles.items()}
    labels = {name: ((role.get("metadata") or {}).get("labels") or {}) for name, role in roles.items()}
    order = sorted(roles)
    for _ in range(len(selectors) + 1):  # one pass per link of the longest chain settles them
        changed = False
        for name, sels in selectors.items():
            gathered: list[dict[str, Any]] = []
            for other in order:
                if other == name or not any(s.matches(labels[other]) for s in sels):
                    continue
                for rule in rules[other]:
                    if rule not in gathered:
                        gathered.append(rule)
            if gathered != rules[name]:
                rules[name], changed = gathered, True
        if not changed:
            break
    return {name: rules[name] for name in selectors}
