"""ResourceQuota: limits on what a namespace's Machines and Volumes use together, namespaced, as
IronCore's (short name ``quota``, as Kubernetes').

A limit names one of IronCore's quota resources (:data:`ironpool.api.quota.RESOURCE_NAMES`); any
other name is refused naming the key (with a hint when it is a resource IronCore quotas as
``requests.<name>``), and a limit below zero is refused. Object counts are whole numbers. The scope
selector's operators take values as Kubernetes' do: ``In`` and ``NotIn`` need some, ``Exists`` and
``DoesNotExist`` none. The limits may change at any time (the apiserver then judges writes by the new
ones); ``status`` is the apiserver's (:mod:`ironpool.apiserver.controllers.resourcequota`).
"""

from __future__ import annotations

from typing import Any, ClassVar

from ironpool.api.columns import AGE, NAME, Column, dig
from ironpool.api.fieldpath import FieldErrors, child, index
from ironpool.api.quota import (
    COUNT_NAMES,
    DOES_NOT_EXIST,
    EXISTS,
    QUOTA_GROUP,
    QUOTA_VERSION,
    RESOURCE_NAMES,
    requirements_of,
    summary,
)
from ironpool.api.resource_info import ResourceInfo
from ironpool.api.resourcequota import ResourceQuota
from ironpool.api.rules import non_negative
from ironpool.api.strategy import Obj, Strategy


def _request(obj: Obj) -> Any:
    """IronCore's REQUEST column: each limit's use (``requests.cpu: 2/4``); the limits from the status
    once the apiserver reported them, else from the spec."""
    hard = dig(obj, "status.hard") or dig(obj, "spec.hard")
    return summary(dig(obj, "status.used"), hard) or None


def _scope(obj: Obj) -> Any:
    parts = []
    for req in requirements_of(obj):
        values = ",".join(str(v) for v in req.get("values") or ())
        parts.append(f"{req.get('scopeName')} {req.get('operator')}" + (f" ({values})" if values else ""))
    return "; ".join(parts) or None


def _hint(name: str) -> str:
    detail = "must be a valid resource name: one of " + ", ".join(RESOURCE_NAMES)
    if f"requests.{name}" in RESOURCE_NAMES:
        detail += f" (a quota limits {name} as requests.{name})"
    return detail


class ResourceQuotaStrategy(Strategy[ResourceQuota]):
    """IronCore's quota validation: known resource names, limits of at least zero."""

    info: ClassVar[ResourceInfo] = ResourceInfo(
        QUOTA_GROUP, QUOTA_VERSION, "ResourceQuota", "resourcequotas", "resourcequota", ("quota",), True,
        ResourceQuota, True,
    )
    columns = (
        NAME, Column("REQUEST", _request), AGE,
        Column("SCOPE", _scope, wide=True),
    )

    def validate(self, obj: ResourceQuota, errs: FieldErrors) -> None:
        for name, q in (obj.spec.hard or {}).items():
            path = child("spec.hard", name)
            if name not in RESOURCE_NAMES:
                errs.invalid(path, name, _hint(name))
                continue
            non_negative(q, path, errs)
            if name in COUNT_NAMES and q.fraction.denominator != 1:
                errs.invalid(path, str(q), "must be a whole number")
        selector = obj.spec.scope_selector
        for i, req in enumerate((selector.match_expressions if selector else None) or ()):
            path = index("spec.scopeSelector.matchExpressions", i)
            if req.operator in (EXISTS, DOES_NOT_EXIST):
                if req.values:
                    errs.forbidden(f"{path}.values", f"must not be specified when operator is {req.operator}")
            elif not req.values:
                errs.required(f"{path}.values", f"must be specified when operator is {req.operator}")
