"""SchedulerCore: the cache plus one framework per profile, fed with API documents.

Independent of HTTP: the networked scheduler (runner.py), the preview and the benchmark all drive it.
The ``set_*``/``delete_*`` methods return the wake keys of the event, for the scheduling queue.
"""

from __future__ import annotations

from typing import Any

from ironpool.scheduler.cache import SchedulerCache
from ironpool.scheduler.config import PROFILE_ANNOTATION, SchedulerConfig, build_framework
from ironpool.scheduler.framework.interface import WAKE_CAPACITY, WAKE_POOL, wake_class, wake_offer
from ironpool.scheduler.framework.runtime import Decision, Framework
from ironpool.scheduler.model import (
    Kind,
    PoolInfo,
    Request,
    class_from_json,
    class_ref_of,
    object_key,
    pool_from_json,
    pool_ref_of,
    volume_storage_of,
)

#: wake key meaning "a pool offering every class changed" (pools without a class list)
WAKE_OFFER_ANY = "offer:*"


class SchedulerCore:
    """Decisions over an in-memory view of the cluster."""

    def __init__(self, config: SchedulerConfig | None = None, *, use_index: bool = True) -> None:
        self.config = config or SchedulerConfig()
        self.cache = SchedulerCache(assume_ttl=self.config.assume_ttl)
        self.frameworks: dict[str, Framework] = {
            p.name: build_framework(p, self.cache, use_index) for p in self.config.profiles
        }
        self.default_profile = self.config.profiles[0].name

    def close(self) -> None:
        for fw in self.frameworks.values():
            fw.close()

    def framework_for(self, req: Request) -> Framework:
        obj = req.obj or {}
        name = ((obj.get("metadata") or {}).get("annotations") or {}).get(PROFILE_ANNOTATION)
        return self.frameworks.get(str(name), self.frameworks[self.default_profile]) if name else \
            self.frameworks[self.default_profile]

    def schedule(self, req: Request) -> Decision:
        """Decide and reserve (assume) — the caller binds, then confirms or calls ``unreserve``."""
        return self.framework_for(req).schedule(req)

    def unreserve(self, decision: Decision) -> None:
        self.framework_for(decision.request).unreserve(decision)

    # ---- feeding ------------------------------------------------------------------------------
    def set_class(self, kind: Kind, obj: dict[str, Any]) -> set[str]:
        info = class_from_json(kind, obj)
        self.cache.upsert_class(info)
        return {wake_class(info.name)}

    def delete_class(self, kind: Kind, name: str) -> None:
        self.cache.remove_class(kind, name)

    def set_pool(self, kind: Kind, obj: dict[str, Any]) -> set[str]:
        info = pool_from_json(kind, obj)
        old = self.cache.pools.get((kind, info.name))
        self.cache.upsert_pool(info)
        freed = old is not None and bool(set(old.claims) - set(info.claims))
        if old is not None and not _matters(old, info):
            return {WAKE_CAPACITY} if freed else set()
        wake = {WAKE_POOL, WAKE_CAPACITY} if freed else {WAKE_POOL}
        if info.offered is None:
            wake.add(WAKE_OFFER_ANY)
        else:
            wake.update(wake_offer(c) for c in info.offered)
        return wake

    def delete_pool(self, kind: Kind, name: str) -> None:
        self.cache.remove_pool(kind, name)

    def set_object(self, kind: Kind, obj: dict[str, Any]) -> set[str]:
        """A Machine/Volume event: bound ones are counted; unbinding or deletion frees capacity."""
        key = object_key(obj)
        pool = pool_ref_of(kind, obj)
        if (obj.get("metadata") or {}).get("deletionTimestamp") and pool is None:
            return self.delete_object(kind, key)
        if pool is None:
            return set()
        labels = (obj.get("metadata") or {}).get("labels") or {}
        storage = volume_storage_of(obj) if kind == "volume" else 0
        before = self.cache.placements.get((kind, key))
        uid = str((obj.get("metadata") or {}).get("uid", ""))
        self.cache.observe_bound(kind, key, pool, class_ref_of(kind, obj), storage, labels, uid)
        if before is not None and before.pool != pool:
            return {WAKE_CAPACITY}
        if kind == "volume":
            self.cache.volume_requests.pop(key, None)
        return set()

    def delete_object(self, kind: Kind, key: str) -> set[str]:
        if kind == "volume":
            self.cache.volume_requests.pop(key, None)
        return {WAKE_CAPACITY} if self.cache.remove_object(kind, key) is not None else set()


def _matters(old: PoolInfo, new: PoolInfo) -> bool:
    """Whether a pool update could make a parked object fit (heartbeats alone do not)."""
    return (old.ready != new.ready or old.labels != new.labels or old.taints != new.taints
            or old.allocatable != new.allocatable or old.offered != new.offered)
