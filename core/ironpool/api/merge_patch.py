"""JSON merge patch (RFC 7386), the body of ``PATCH`` with ``application/merge-patch+json``."""

from __future__ import annotations

import copy
from typing import Any


def apply_merge_patch(target: Any, patch: Any) -> Any:
    """Return ``target`` with ``patch`` applied; neither input is modified.

    A patch object merges key by key (``null`` deletes a key); any other patch value (a list, a
    string, ``null``...) replaces the target wholesale.
    """
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result: dict[str, Any] = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            result[key] = apply_merge_patch(result.get(key), value)
        else:
            result[key] = copy.deepcopy(value)
    return result
