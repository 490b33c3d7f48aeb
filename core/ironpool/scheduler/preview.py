"""Placement preview: where would each Machine/Volume of a set land now, placed together, and why.

Used by ``ironpool schedule --dry-run``, Pulumi preview and Ansible check mode. Nothing is written:
the set is reserved in a snapshot one object after the other (so two Machines that do not both fit
on one pool say so), then every reservation is undone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ironpool.api.meta import object_key
from ironpool.client.rest import Client
from ironpool.client.wire import resource_for_model
from ironpool.scheduler.config import SchedulerConfig
from ironpool.scheduler.core import SchedulerCore
from ironpool.scheduler.framework.profile import Decision
from ironpool.scheduler.model import Kind, pool_ref_of, request_from_json

_KINDS: dict[str, Kind] = {"Machine": "machine", "Volume": "volume"}


@dataclass(frozen=True)
class PreviewResult:
    """One object's answer: the pool it would go to (None: nowhere) and why."""

    kind: str
    key: str
    pool: str | None
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "key": self.key, "pool": self.pool, "reason": self.reason}


def _with_namespace(obj: dict[str, Any], namespace: str) -> dict[str, Any]:
    meta = dict(obj.get("metadata") or {})
    meta.setdefault("namespace", namespace)
    return {**obj, "metadata": meta}


def preview(objects: list[dict[str, Any]], snapshot: SchedulerCore,
            namespace: str = "default") -> list[PreviewResult]:
    """Place ``objects`` together on ``snapshot`` without writing; the snapshot is left as it was."""
    docs = [_with_namespace(o, namespace) for o in objects]
    results: list[PreviewResult | None] = [None] * len(docs)
    cache = snapshot.cache
    # Volumes a Machine of the set uses are placed with that Machine (VolumeBinding).
    used_by_set = {
        f"{(d.get('metadata') or {}).get('namespace')}/{v['volumeRef']['name']}"
        for d in docs if d.get("kind") == "Machine"
        for v in (d.get("spec") or {}).get("volumes") or () if isinstance(v.get("volumeRef"), dict)
    }
    order: list[int] = []
    for i, d in enumerate(docs):
        kind = _KINDS.get(str(d.get("kind")))
        name = (d.get("metadata") or {}).get("name")
        if kind is None:
            results[i] = PreviewResult(str(d.get("kind")), object_key(d), None,
                                       f"kind {d.get('kind')!r} is not scheduled (only Machine and Volume)")
        elif not name:
            results[i] = PreviewResult(str(d.get("kind")), object_key(d), None, "metadata.name is required")
        elif pool_ref_of(kind, d) is not None:
            results[i] = PreviewResult(d["kind"], object_key(d), pool_ref_of(kind, d), "already bound")
        elif kind == "volume" and object_key(d) in used_by_set:
            pass  # answered by the Machine that uses it
        else:
            order.append(i)
    # Free-standing Volumes first, so Machines see where their bound Volumes went.
    order.sort(key=lambda i: 0 if docs[i].get("kind") == "Volume" else 1)
    added_requests: list[str] = []
    for d in docs:
        key = object_key(d)
        if (d.get("kind") == "Volume" and key in used_by_set and pool_ref_of("volume", d) is None
                and key not in cache.volume_requests):
            cache.volume_requests[key] = request_from_json("volume", d)
            added_requests.append(key)
    decisions: list[Decision] = []
    try:
        for i in order:
            d = docs[i]
            kind = _KINDS[str(d["kind"])]
            key = object_key(d)
            placed = cache.placements.get((kind, key))
            if placed is not None and not placed.assumed:
                results[i] = PreviewResult(d["kind"], key, placed.pool, "already bound")
                continue
            try:
                req = request_from_json(kind, d)
            except ValueError as exc:
                results[i] = PreviewResult(d["kind"], key, None, str(exc))
                continue
            decision = snapshot.schedule(req)
            if decision.pool is None:
                results[i] = PreviewResult(d["kind"], key, None, decision.message)
                continue
            decisions.append(decision)
            results[i] = PreviewResult(d["kind"], key, decision.pool, "fits")
            # Its new Volumes are assumed in the cache where VolumeBinding reserved them.
            for j, other in enumerate(docs):
                vkey = object_key(other)
                if other.get("kind") == "Volume" and results[j] is None and vkey in req.volume_keys:
                    vplaced = cache.placements.get(("volume", vkey))
                    if vplaced is not None and vplaced.assumed:
                        results[j] = PreviewResult("Volume", vkey, vplaced.pool, f"placed with Machine {key}")
    finally:
        for decision in reversed(decisions):
            snapshot.unreserve(decision)
        for key in added_requests:
            cache.volume_requests.pop(key, None)
    for j, d in enumerate(docs):
        if results[j] is None:  # a Volume whose Machine did not fit
            results[j] = PreviewResult(str(d.get("kind")), object_key(d), None,
                                       "its Machine cannot be placed")
    return [r for r in results if r is not None]


def _feed(core: SchedulerCore, kind: Kind, what: str, items: list[dict[str, Any]]) -> None:
    for doc in items:
        if what == "class":
            core.set_class(kind, doc)
        elif what == "pool":
            core.set_pool(kind, doc)
        else:
            if pool_ref_of(kind, doc) is not None:
                core.set_object(kind, doc)
            elif kind == "volume":
                core.set_pending(request_from_json(kind, doc))


def _listing() -> list[tuple[Kind, str, Any]]:
    from ironpool.api import Machine, MachineClass, MachinePool, Volume, VolumeClass, VolumePool

    return [("machine", "class", MachineClass), ("volume", "class", VolumeClass),
            ("machine", "pool", MachinePool), ("volume", "pool", VolumePool),
            ("volume", "object", Volume), ("machine", "object", Machine)]


def _list_all(client: Client, info: Any) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    token: str | None = None
    while True:
        page = client.list_raw(info, None, limit=500, continue_=token)
        items.extend(page.items)
        token = page.continue_
        if not token:
            return items


def snapshot_from_client(client: Client, config: SchedulerConfig | None = None) -> SchedulerCore:
    """A SchedulerCore loaded with the current classes, pools and bound objects (sync client)."""
    core = SchedulerCore(config)
    for kind, what, model in _listing():
        _feed(core, kind, what, _list_all(client, resource_for_model(model)))
    return core


def preview_with_client(client: Client, objects: list[dict[str, Any]], config: SchedulerConfig | None = None,
                        namespace: str = "default") -> list[PreviewResult]:
    """Read the cluster through ``client`` and preview ``objects`` on it (nothing is written)."""
    return preview(objects, snapshot_from_client(client, config), namespace)
