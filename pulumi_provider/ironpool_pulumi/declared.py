"""What this deployment declares before it exists: classes and Volumes checked earlier in the run.

One plugin process serves one ``pulumi preview`` or ``pulumi up``, and a Machine that uses a class or
Volume declared in the same program is checked after it (its inputs depend on their outputs). So
when a Machine's class is not on the server yet, the class may still be one this run creates: then
``check`` accepts it instead of failing, and the placement preview counts it in.
"""

from __future__ import annotations

import threading
from typing import Any

_lock = threading.Lock()
_objects: dict[tuple[str, str], dict[str, Any]] = {}


def declare(kind: str, key: str, manifest: dict[str, Any]) -> None:
    """Record that this run declares ``kind`` ``key`` (``name``, or ``namespace/name``) as ``manifest``."""
    with _lock:
        _objects[(kind, key)] = manifest


def declared(kind: str, key: str) -> dict[str, Any] | None:
    """The manifest of ``kind`` ``key`` if an earlier check of this run declared it."""
    with _lock:
        return _objects.get((kind, key))


def declared_of_kind(kind: str) -> list[dict[str, Any]]:
    """Every manifest of ``kind`` this run declared."""
    with _lock:
        return [m for (k, _), m in _objects.items() if k == kind]
