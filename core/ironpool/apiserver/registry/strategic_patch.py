"""Strategic merge patch (``application/strategic-merge-patch+json``), as kubectl sends it.

kubectl computes a strategic merge patch for the kinds it knows (Secret, Namespace, Event) and for
every kind whose OpenAPI schema marks keyed lists (``x-kubernetes-patch-merge-key``), so re-applying
a manifest leaves server-filled list items (a Machine volume's device) alone. The object's
:class:`~.schemas.Shape` says how each list merges: keyed lists item by item, sets by value,
everything else replaced whole. The directives kubectl writes are honoured: ``$patch``
(``replace``/``delete``/``merge``), ``$setElementOrder/<list>``, ``$deleteFromPrimitiveList/<list>``
and ``$retainKeys``.
"""

from __future__ import annotations

import copy
from typing import Any

from ironpool.api import errors
from ironpool.apiserver.registry.schemas import ANY, Shape

_ORDER = "$setElementOrder/"
_DELETE_PRIMITIVE = "$deleteFromPrimitiveList/"


def _item_key(item: Any, keys: tuple[str, ...]) -> tuple[Any, ...] | None:
    if not isinstance(item, dict):
        return None
    return tuple(item.get(k) for k in keys)


def apply_strategic_patch(obj: dict[str, Any], patch: Any, shape: Shape) -> dict[str, Any]:
    """``obj`` with the strategic merge ``patch`` applied (``obj`` is not changed)."""
    if not isinstance(patch, dict):
        raise errors.BadRequest("a strategic merge patch must be a JSON object")
    result = _merge_map(copy.deepcopy(obj), patch, shape, "")
    if result is None:
        raise errors.BadRequest("$patch: delete cannot remove the whole object")
    return result


def _merge_map(
    target: dict[str, Any], patch: dict[str, Any], shape: Shape, where: str
) -> dict[str, Any] | None:
    directive = patch.get("$patch")
    if directive == "delete":
        return None
    if directive == "replace":
        return {k: v for k, v in patch.items() if k != "$patch"}
    if directive not in (None, "merge"):
        raise errors.BadRequest(f"{where or '.'}: unknown $patch directive {directive!r}")
    orders: dict[str, list[Any]] = {}
    retain = patch.get("$retainKeys")
    for key, value in patch.items():
        if key in ("$patch", "$retainKeys"):
            continue
        if key.startswith(_ORDER):
            orders[key[len(_ORDER):]] = value if isinstance(value, list) else []
            continue
        if key.startswith(_DELETE_PRIMITIVE):
            name = key[len(_DELETE_PRIMITIVE):]
            doomed = value if isinstance(value, list) else []
            if isinstance(target.get(name), list):
                target[name] = [v for v in target[name] if v not in doomed]
            continue
        path = f"{where}.{key}" if where else key
        if value is None:
            target.pop(key, None)
            continue
        sub = shape.child(key)
        current = target.get(key)
        if isinstance(value, dict) and sub.kind in ("struct", "map", "any"):
            merged = _merge_map(current if isinstance(current, dict) else {}, value, sub, path)
            if merged is None:
                target.pop(key, None)
            else:
                target[key] = merged
        elif isinstance(value, list) and sub.kind == "list_map":
            target[key] = _merge_keyed(current if isinstance(current, list) else [], value, sub, path)
        elif isinstance(value, list) and sub.kind == "set":
            existing = current if isinstance(current, list) else []
            target[key] = existing + [v for v in value if v not in existing]
        else:
            target[key] = copy.deepcopy(value)
    for name, order in orders.items():
        if isinstance(target.get(name), list):
            target[name] = _reorder(target[name], order, shape.child(name))
    if isinstance(retain, list):
        for key in [k for k in target if k not in retain]:
            del target[key]
    return target


def _merge_keyed(target: list[Any], patch: list[Any], shape: Shape, where: str) -> list[Any]:
    keys = shape.keys
    elem = shape.elem or ANY
    if any(isinstance(p, dict) and p.get("$patch") == "replace" for p in patch):
        # A {"$patch": "replace"} marker: the list becomes the other items, as sent.
        return [p for p in patch if not (isinstance(p, dict) and p.get("$patch") == "replace")]
    out = list(target)
    for item in patch:
        key = _item_key(item, keys)
        if key is None or any(k is None for k in key):
            raise errors.BadRequest(f"{where}: every item must carry its key field(s) {', '.join(keys)}")
        at = next((i for i, existing in enumerate(out) if _item_key(existing, keys) == key), None)
        if item.get("$patch") == "delete":
            if at is not None:
                out.pop(at)
            continue
        if at is None:
            out.append({k: v for k, v in item.items() if k != "$patch"})
        else:
            merged = _merge_map(out[at], item, elem, where)
            if merged is None:
                out.pop(at)
            else:
                out[at] = merged
    return out


def _reorder(items: list[Any], order: list[Any], shape: Shape) -> list[Any]:
    """``items`` in the order ``$setElementOrder`` gives; items it does not name keep their place
    after those it does."""
    def ident(item: Any) -> Any:
        return _item_key(item, shape.keys) if shape.kind == "list_map" else item

    wanted = [ident(o) for o in order]
    rank = {repr(w): i for i, w in enumerate(wanted)}
    return sorted(items, key=lambda item: rank.get(repr(ident(item)), len(rank)))
