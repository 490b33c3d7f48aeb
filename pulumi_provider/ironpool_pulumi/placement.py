"""Where the scheduler would place a new Machine now: the answer ``pulumi preview`` shows.

The scheduler's own preview (:func:`ironpool.scheduler.preview.preview`) runs on a snapshot of the
cluster read through the client; nothing is written. Classes and Volumes that the same deployment
declares but has not created yet are added to that snapshot: a declared class is offered by the
pools that offer a class of identical capabilities (the poollet maps API classes to its runtime's
classes by capabilities), and declared Volumes the Machine uses are placed together with it.
"""

from __future__ import annotations

from typing import Any

from ironpool.api.errors import NotFound
from ironpool.api.quantity import parse_quantity
from ironpool.api.resources import resolve
from ironpool.client import Client
from ironpool.scheduler.model import Kind
from ironpool.scheduler.preview import PreviewResult, preview, snapshot_from_client

from ironpool_pulumi import declared

_KINDS: tuple[tuple[Kind, str, str, str], ...] = (
    ("machine", "MachineClass", "machinepools", "availableMachineClasses"),
    ("volume", "VolumeClass", "volumepools", "availableVolumeClasses"),
)
VOLUMES = resolve("volumes")


def _shape(obj: dict[str, Any]) -> dict[str, Any]:
    return {k: parse_quantity(str(v)) for k, v in (obj.get("capabilities") or {}).items()}


def plan(client: Client, machine: dict[str, Any], namespace: str) -> PreviewResult:
    """The scheduler's answer for the Machine ``machine`` (a manifest) on the cluster as it is now."""
    core = snapshot_from_client(client)
    for kind, class_kind, pools, offered_field in _KINDS:
        pending = declared.declared_of_kind(class_kind)
        if not pending:
            continue
        existing = client.list_raw(resolve(class_kind.lower())).items
        names = {c["metadata"]["name"] for c in existing}
        pool_docs = client.list_raw(resolve(pools)).items
        for cls in pending:
            name = cls["metadata"]["name"]
            if name in names:
                continue
            core.set_class(kind, cls)
            twins = {c["metadata"]["name"] for c in existing if _shape(c) == _shape(cls)}
            for pool in pool_docs:
                status = pool.get("status") or {}
                offered = [ref.get("name") for ref in status.get(offered_field) or []]
                if twins & set(offered):
                    status[offered_field] = [*status[offered_field], {"name": name}]
                    pool["status"] = status
                    core.set_pool(kind, pool)
    objects = [machine]
    for v in (machine.get("spec") or {}).get("volumes") or []:
        ref = str((v.get("volumeRef") or {}).get("name") or "")
        manifest = declared.declared("Volume", f"{namespace}/{ref}") if ref else None
        if manifest is None:
            continue
        try:
            client.get_raw(VOLUMES, ref, namespace)
        except NotFound:
            objects.append(manifest)  # created by this deployment: placed together with the Machine
    return preview(objects, core, namespace)[0]
