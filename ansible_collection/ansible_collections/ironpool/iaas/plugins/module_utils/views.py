# Copyright: ironpool contributors
# SPDX-License-Identifier: Apache-2.0
"""What modules return about objects: the object itself plus the few fields a playbook wires onward
(pool, state, addresses), and Secrets with their data hidden."""

from __future__ import annotations

from typing import Any

from ansible_collections.ironpool.iaas.plugins.module_utils.placement import pool_of

Obj = dict[str, Any]


def dig(obj: Any, *path: str) -> Any:
    """``obj[path[0]][path[1]]...``, or None where a step is missing or not a mapping."""
    cur: Any = obj
    for part in path:
        if not isinstance(cur, dict):
            return None
        cur = cur.get(part)
    return cur


HIDDEN = "(hidden)"
HIDDEN_CHANGED = "(hidden, changed)"


def addresses(obj: Obj | None) -> list[str]:
    """The IPs of a Machine's interfaces (``status.networkInterfaces[].ips``), once it has any."""
    out: list[str] = []
    for nic in ((obj or {}).get("status") or {}).get("networkInterfaces") or ():
        for ip in nic.get("ips") or ():
            if isinstance(ip, str) and ip not in out:
                out.append(ip)
    return out


def machine_summary(obj: Obj | None) -> dict[str, Any]:
    """``machine``, ``pool``, ``state``, ``conditions`` and ``addresses`` of a module result."""
    status = (obj or {}).get("status") or {}
    return {
        "machine": obj or {},
        "pool": pool_of(obj) or "",
        "state": status.get("state") or "",
        "conditions": status.get("conditions") or [],
        "addresses": addresses(obj),
    }


def volume_summary(obj: Obj | None) -> dict[str, Any]:
    """``volume``, ``pool``, ``state`` and ``size`` of a module result."""
    status = (obj or {}).get("status") or {}
    return {
        "volume": obj or {},
        "pool": pool_of(obj) or "",
        "state": status.get("state") or "",
        "size": ((status.get("resources") or {}).get("storage")) or "",
    }


def snapshot_summary(obj: Obj | None) -> dict[str, Any]:
    """``volume_snapshot``, ``state``, ``size`` and ``snapshot_id`` of a module result."""
    status = (obj or {}).get("status") or {}
    return {
        "volume_snapshot": obj or {},
        "state": status.get("state") or "",
        "size": status.get("size") or "",
        "snapshot_id": status.get("snapshotID") or "",
    }


def redact_secret(obj: Obj) -> Obj:
    """A Secret with every data value replaced by a marker; keys stay visible."""
    out = dict(obj)
    for key in ("data", "stringData"):
        if isinstance(out.get(key), dict):
            out[key] = dict.fromkeys(out[key], HIDDEN)
    return out


def secret_diff(before: Obj | None, after: Obj | None) -> dict[str, Obj]:
    """A before/after diff of a Secret that shows which data keys changed, never their values."""
    old = (before or {}).get("data") or {}
    new = (after or {}).get("data") or {}

    def side(view: Obj | None, mine: dict[str, Any], other: dict[str, Any], mark: str) -> Obj:
        if view is None:
            return {}
        out = redact_secret(view)
        if mine:
            out["data"] = {k: HIDDEN if other.get(k) == v else mark for k, v in mine.items()}
        return out

    return {"before": side(before, old, new, HIDDEN), "after": side(after, new, old, HIDDEN_CHANGED)}


def pool_summary(obj: Obj, class_prefix: str, object_key: str, counts: bool) -> dict[str, Any]:
    """A pool as the ``*_pool_info`` modules return it: shared resources (cpu, memory, storage)
    apart from what is ``free`` per class (derived by the poollet from what is still unallocated:
    a count of Machines for machine pools, bytes for volume pools), plus the object itself."""
    status = obj.get("status") or {}
    meta = obj.get("metadata") or {}

    def shared(resources: dict[str, Any] | None) -> dict[str, Any]:
        return {k: v for k, v in (resources or {}).items() if not k.startswith("class/")}

    free: dict[str, Any] = {}
    for key, value in (status.get("allocatable") or {}).items():
        if key.startswith(class_prefix):
            free[key[len(class_prefix):]] = _count(value) if counts else value
    classes = status.get("availableMachineClasses") or status.get("availableVolumeClasses") or []
    return {
        "name": meta.get("name") or "",
        "state": status.get("state") or "",
        "labels": meta.get("labels") or {},
        "available_classes": [c.get("name") for c in classes],
        "capacity": shared(status.get("capacity")),
        "allocatable": shared(status.get("allocatable")),
        "free": free,
        object_key: obj,
    }


def _count(value: Any) -> int:
    try:
        return int(str(value))
    except ValueError:
        return 0
