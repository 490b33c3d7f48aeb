# Copyright: ironpool contributors
# SPDX-License-Identifier: Apache-2.0
"""Check mode's answer to "where would it land": the scheduler's own placement preview, run on a
snapshot of the cluster read through the client (nothing is written)."""

from __future__ import annotations

from typing import Any, Literal

Obj = dict[str, Any]
SCHEDULED_KINDS = ("Machine", "Volume")
_CLASS_KINDS: dict[str, Literal["machine", "volume"]] = {"MachineClass": "machine", "VolumeClass": "volume"}


def pool_of(obj: Obj | None) -> str | None:
    """The pool a Machine or Volume is bound to, if any."""
    spec = (obj or {}).get("spec") or {}
    ref = spec.get("machinePoolRef") or spec.get("volumePoolRef") or {}
    return ref.get("name") or None


def predict_pools(client: Any, objects: list[Obj], namespace: str) -> dict[tuple[str, str], dict[str, Any]]:
    """``(kind, namespace/name) -> {'pool': name or None, 'reason': why}`` for every Machine and
    Volume of ``objects``, placed together as the scheduler would place them now. Classes among
    ``objects`` count as if they were already created (a check run creates nothing)."""
    scheduled = [o for o in objects if o.get("kind") in SCHEDULED_KINDS]
    if not scheduled:
        return {}
    # Imported here: the scheduler is only needed in check mode, and it is not cheap to import.
    from ironpool.scheduler.preview import preview, snapshot_from_client

    snapshot = snapshot_from_client(client)
    for obj in objects:
        kind = _CLASS_KINDS.get(str(obj.get("kind")))
        if kind is not None:
            snapshot.set_class(kind, obj)
    results = preview(scheduled, snapshot, namespace=namespace)
    return {(r.kind, r.key): {"pool": r.pool, "reason": r.reason} for r in results}
