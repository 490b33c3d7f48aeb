# Copyright: ironpool contributors
# SPDX-License-Identifier: Apache-2.0
"""Check mode's answer to "where would it land".

Machines: the scheduler answers for the set of new Machines of one run (this one and those earlier
tasks of the run would create), as one dry-run Reservation (``ironpool.client.predict``), so a set
that fits only in part says which Machine does not. Volumes: the scheduler's own placement preview,
run on a snapshot of the cluster read through the client. Nothing is written either way."""

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


PREDICT_TIMEOUT = 10.0  # seconds a scheduler has to answer (it takes well under one when it runs)


def predict_machine_set(client: Any, namespace: str, machines: list[Obj]) -> list[dict[str, Any]]:
    """``{'pool': name or None, 'reason': why}`` for each of ``machines`` (new Machines), predicted
    together by the scheduler; without a scheduler to answer, each says so."""
    from ironpool.client.predict import PredictionUnavailable, predict_machines

    try:
        answers = predict_machines(client, namespace, machines, timeout=PREDICT_TIMEOUT)
        return [{"pool": a.pool, "reason": a.reason} for a in answers]
    except PredictionUnavailable as exc:
        return [{"pool": None, "reason": str(exc)} for machine in machines]


def placement_request(obj: Obj) -> Obj:
    """What a later task's prediction needs of a new Machine: its name, namespace, labels and how it
    is scheduled."""
    meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    keep = ("machineClassRef", "machinePoolSelector", "machinePoolRef", "tolerations")
    return {"metadata": {k: meta[k] for k in ("name", "namespace", "labels") if meta.get(k)},
            "spec": {k: spec[k] for k in keep if spec.get(k) is not None}}


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
