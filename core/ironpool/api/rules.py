"""Field rules several kinds share: references, quantities, tolerations, immutable fields.

They report into a :class:`~ironpool.api.fieldpath.FieldErrors` under the field path they are
given, so a rule reads the same wherever the field sits (``spec.tolerations`` of a Machine or
``spec.volumes[0].ephemeral.volumeTemplate.spec.tolerations``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ironpool.api.fieldpath import (
    FieldErrors,
    child,
    dns1123_subdomain,
    index,
    label_value,
    qualified_name,
    validate_labels,
)
from ironpool.api.meta import LabelSelectorSpec, Toleration
from ironpool.api.quantity import Quantity

NameCheck = Callable[[str], tuple[str, ...]]


def ref_name(name: str, path: str, errs: FieldErrors, check: NameCheck = dns1123_subdomain) -> None:
    """A referenced object's name: required, and a valid name."""
    if not name:
        errs.required(path)
        return
    for msg in check(name):
        errs.invalid(path, name, msg)


def positive(resources: dict[str, Quantity], key: str, path: str, errs: FieldErrors) -> None:
    """``resources[key]`` is present and greater than zero."""
    q = resources.get(key)
    p = child(path, key)
    if q is None:
        errs.required(p, f"must specify {key}")
    elif q.sign() <= 0:
        errs.invalid(p, str(q), "must be greater than zero")


def non_negative(q: Quantity | None, path: str, errs: FieldErrors) -> None:
    """An optional quantity is at least zero."""
    if q is not None and q.sign() < 0:
        errs.invalid(path, str(q), "must be greater than or equal to 0")


def tolerations(items: list[Toleration] | None, path: str, errs: FieldErrors) -> None:
    """Kubernetes' ``ValidateTolerations``."""
    for i, t in enumerate(items or ()):
        p = index(path, i)
        if t.key:
            for msg in qualified_name(t.key):
                errs.invalid(f"{p}.key", t.key, msg)
        elif t.operator != "Exists":
            errs.invalid(f"{p}.operator", t.operator, "operator must be Exists when `key` is empty, "
                         'which means "match all values and all keys"')
        if t.operator == "Exists":
            if t.value:
                errs.invalid(f"{p}.value", t.value, "value must be empty when `operator` is 'Exists'")
        elif t.value:
            for msg in label_value(t.value):
                errs.invalid(f"{p}.value", t.value, msg)
        if t.toleration_seconds is not None and t.effect != "NoExecute":
            errs.invalid(f"{p}.effect", t.effect,
                         "effect must be 'NoExecute' when `tolerationSeconds` is set")


def label_selector(sel: LabelSelectorSpec | None, path: str, errs: FieldErrors) -> None:
    """Kubernetes' ``ValidateLabelSelector``: label rules for ``matchLabels``; ``In``/``NotIn`` need
    values, ``Exists``/``DoesNotExist`` take none."""
    if sel is None:
        return
    validate_labels(sel.match_labels, child(path, "matchLabels"), errs)
    for i, expr in enumerate(sel.match_expressions or ()):
        p = index(child(path, "matchExpressions"), i)
        for msg in qualified_name(expr.key):
            errs.invalid(f"{p}.key", expr.key, msg)
        if expr.operator in ("In", "NotIn"):
            if not expr.values:
                errs.required(f"{p}.values", "must be specified when `operator` is 'In' or 'NotIn'")
        elif expr.values:
            errs.forbidden(f"{p}.values",
                           "may not be specified when `operator` is 'Exists' or 'DoesNotExist'")
        for j, v in enumerate(expr.values or ()):
            for msg in label_value(v):
                errs.invalid(index(f"{p}.values", j), v, msg)


# -- update rules, on canonical dicts -----------------------------------------------------------


def get(obj: dict[str, Any], *path: str) -> Any:
    """``obj[path[0]][path[1]]...``; None where a step is missing or not an object."""
    cur: Any = obj
    for p in path:
        if not isinstance(cur, dict):
            return None
        cur = cur.get(p)
    return cur


def immutable(old: dict[str, Any], new: dict[str, Any], path: tuple[str, ...], errs: FieldErrors) -> None:
    """The field at ``path`` may not change."""
    if get(old, *path) != get(new, *path):
        errs.immutable(".".join(path), get(new, *path))


def keep_filled_in(old: dict[str, Any], new: dict[str, Any], path: tuple[str, ...]) -> None:
    """A field the server filled in (an allocation, a provider ID) and a replacement leaves out is
    kept, so a PUT of the original manifest does not read as clearing it."""
    before = get(old, *path)
    if before is None or get(new, *path) is not None:
        return
    cur = new
    for p in path[:-1]:
        nxt = cur.get(p)
        if not isinstance(nxt, dict):
            nxt = cur[p] = {}
        cur = nxt
    cur[path[-1]] = before


def set_once(old: dict[str, Any], new: dict[str, Any], path: tuple[str, ...], errs: FieldErrors) -> None:
    """The field at ``path`` may be set when empty, and then never change."""
    before = get(old, *path)
    if before is not None and get(new, *path) != before:
        errs.immutable(".".join(path), get(new, *path))
