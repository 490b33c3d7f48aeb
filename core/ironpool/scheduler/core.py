"""SchedulerCore: the cache plus one framework per profile, fed with API documents.

Independent of HTTP: the networked scheduler (runner.py), the preview and the benchmark all drive it.
The feeding methods return the cluster events their change amounts to (see framework/events.py), for
the scheduling queue; a change that cannot help any parked object (a pool heartbeat) returns none.
"""

from __future__ import annotations

from typing import Any

from ironpool.api.meta import object_key
from ironpool.api.reservation import summary
from ironpool.scheduler.cache import Hold, SchedulerCache
from ironpool.scheduler.config import PROFILE_ANNOTATION, SchedulerConfig, build_framework
from ironpool.scheduler.framework.events import ActionType, ClusterEvent, ClusterEventWithHint, EventResource
from ironpool.scheduler.framework.interface import Status
from ironpool.scheduler.framework.profile import Decision, Framework
from ironpool.scheduler.gang import GangPlan, GangPlanner
from ironpool.scheduler.model import (
    Kind,
    PoolInfo,
    SchedulingRequest,
    class_from_json,
    class_ref_of,
    pool_from_json,
    pool_ref_of,
    reservation_of,
    volume_storage_of,
)
from ironpool.scheduler.reservations import ReservationInfo, reservation_from_json

Events = list[ClusterEvent]


class SchedulerCore:
    """Decisions over an in-memory view of the cluster."""

    def __init__(self, config: SchedulerConfig | None = None, *, use_index: bool = True) -> None:
        self.config = config or SchedulerConfig()
        self.cache = SchedulerCache(assume_ttl=self.config.assume_ttl)
        self.frameworks: dict[str, Framework] = {
            p.name: build_framework(p, self.cache, use_index) for p in self.config.profiles
        }
        self.default_profile = self.config.profiles[0].name
        registered: set[ClusterEventWithHint] = set()
        for fw in self.frameworks.values():
            registered |= fw.events_to_register()
        #: what some plugin can wake up for; other changes are not worth an event
        self._interesting = {(w.event.resource, action) for w in registered for action in w.event.action}
        #: (resource, combined action) -> whether any of its actions is interesting (iterating a Flag's
        #: members costs more than the rest of a pool event)
        self._worth: dict[tuple[EventResource, ActionType], bool] = {}
        self.reservations: dict[str, ReservationInfo] = {}
        #: Reservations whose plan this scheduler holds in its cache while the plan is written
        self.planning: set[str] = set()
        self.planner = GangPlanner(self.frameworks[self.default_profile])

    def close(self) -> None:
        for fw in self.frameworks.values():
            fw.close()

    def framework_for(self, req: SchedulingRequest) -> Framework:
        obj = req.obj or {}
        name = ((obj.get("metadata") or {}).get("annotations") or {}).get(PROFILE_ANNOTATION)
        return self.frameworks.get(str(name), self.frameworks[self.default_profile]) if name else \
            self.frameworks[self.default_profile]

    def pre_enqueue(self, req: SchedulingRequest) -> Status:
        """Whether ``req`` may be tried now; a refusal says what it waits for."""
        return self.framework_for(req).pre_enqueue(req)

    def schedule(self, req: SchedulingRequest) -> Decision:
        """Decide and reserve (assume) — the caller binds, then confirms or calls ``unreserve``."""
        return self.framework_for(req).schedule(req)

    def unreserve(self, decision: Decision) -> None:
        self.framework_for(decision.request).unreserve(decision)

    # ---- feeding ------------------------------------------------------------------------------
    def _event(self, resource: EventResource, action: ActionType, obj: Any) -> Events:
        worth = self._worth.get((resource, action))
        if worth is None:
            worth = self._worth[(resource, action)] = any((resource, a) in self._interesting for a in action)
        if not worth:
            return []
        return [ClusterEvent(resource, action, obj)]

    def set_class(self, kind: Kind, obj: dict[str, Any]) -> Events:
        info = class_from_json(kind, obj)
        old = self.cache.classes.get((kind, info.name))
        self.cache.upsert_class(info)
        if old is None:
            return self._event(EventResource.CLASS, ActionType.ADD, info)
        if old.demand != info.demand:
            return self._event(EventResource.CLASS, ActionType.UPDATE_DEMAND, info)
        return []

    def delete_class(self, kind: Kind, name: str) -> None:
        self.cache.remove_class(kind, name)

    def set_pool(self, kind: Kind, obj: dict[str, Any]) -> Events:
        info = pool_from_json(kind, obj)
        old = self.cache.pools.get((kind, info.name))
        self.cache.upsert_pool(info)
        if old is None:
            return self._event(EventResource.POOL, ActionType.ADD, info)
        changed = _pool_changes(old, info)
        return self._event(EventResource.POOL, changed, info) if changed else []

    def delete_pool(self, kind: Kind, name: str) -> None:
        self.cache.remove_pool(kind, name)

    def set_object(self, kind: Kind, obj: dict[str, Any]) -> Events:
        """A bound (or deleted, unbound) Machine/Volume: counted on its pool, or forgotten."""
        key = object_key(obj)
        pool = pool_ref_of(kind, obj)
        if (obj.get("metadata") or {}).get("deletionTimestamp") and pool is None:
            return self.delete_object(kind, key)
        if pool is None:
            return []
        labels = (obj.get("metadata") or {}).get("labels") or {}
        storage = volume_storage_of(obj) if kind == "volume" else 0
        before = self.cache.placements.get((kind, key))
        self.cache.observe_bound(kind, key, pool, class_ref_of(kind, obj), storage, labels,
                                 reservation_of(kind, obj))
        events = self.forget_pending(kind, key)
        if before is not None and before.pool != pool:
            events += self._event(EventResource.PLACEMENT, ActionType.DELETE, before)
        return events

    # ---- reservations ----------------------------------------------------------------------------
    def set_reservation(self, obj: dict[str, Any]) -> tuple[ReservationInfo, Events]:
        """A Reservation as the watch shows it: what it holds is counted on its pools (unless this
        scheduler's own plan for it is on its way: that stays counted until its write shows up)."""
        info = reservation_from_json(obj)
        added = info.key not in self.reservations
        self.reservations[info.key] = info
        self.cache.reservation_states[info.key] = summary(obj)
        action = ActionType.ADD if added else ActionType.UPDATE
        if info.key not in self.planning or info.holds:
            self.planning.discard(info.key)
            if self.cache.holds.get(info.key) and not info.holds:
                action |= ActionType.DELETE  # released: what it held is free
            self.cache.set_holds(info.key, info.holds)
        return info, self._event(EventResource.RESERVATION, action, info.key)

    def delete_reservation(self, key: str) -> Events:
        self.reservations.pop(key, None)
        self.cache.reservation_states.pop(key, None)
        self.planning.discard(key)
        released = bool(self.cache.holds.get(key))
        self.cache.set_holds(key, {})
        return self._event(EventResource.RESERVATION, ActionType.DELETE, key) if released else []

    def plan_reservation(self, info: ReservationInfo) -> GangPlan:
        """Plan ``info`` with the default profile; a plan that fits (and is no dry run) is held in
        the cache at once, until :meth:`set_reservation` shows it written or :meth:`drop_plan`."""
        def hold(plan: GangPlan) -> None:
            if plan.fits and not info.dry_run:
                self.planning.add(info.key)
                self.cache.set_holds(info.key, {pool: Hold(dict(part.classes), dict(part.block))
                                                for pool, part in plan.parts.items()})

        return self.planner.plan(info, then=hold)

    def refusal_is_final(self, info: ReservationInfo) -> bool:
        """Whether ``info`` would not fit even if every decision not written yet failed (Machines
        assumed, other Reservations' plans on their way): then refusing it now cannot be wrong, and a
        stream of other decisions cannot put its answer off."""
        cache = self.cache
        tentative = {key: cache.holds.get(key, {}) for key in self.planning}
        with cache.batch():
            lifted = cache.lift_assumed("machine")
            for key in tentative:
                written = self.reservations.get(key)
                cache.set_holds(key, written.holds if written is not None else {})
        try:
            return not self.planner.plan(info).fits
        finally:
            with cache.batch():
                for key, holds in tentative.items():
                    cache.set_holds(key, holds)
                cache.restore(lifted)

    def drop_plan(self, key: str) -> None:
        """The plan's write failed: count what the Reservation holds as the watch last showed it."""
        if key in self.planning:
            self.planning.discard(key)
            info = self.reservations.get(key)
            self.cache.set_holds(key, info.holds if info is not None else {})

    def set_pending(self, req: SchedulingRequest) -> Events:
        """An unbound Machine/Volume: Volumes are remembered for the Machines that use them, and
        Machines for the Volumes that wait to be placed with them."""
        if req.kind == "volume":
            self.cache.volume_requests[req.key] = req
            return []
        return self._consumer_gone(req.key, req.volume_keys)

    def forget_pending(self, kind: Kind, key: str) -> Events:
        """The object is no longer waiting for a pool (bound, or being deleted)."""
        if kind == "volume":
            self.cache.volume_requests.pop(key, None)
            return []
        return self._consumer_gone(key, ())

    def delete_object(self, kind: Kind, key: str) -> Events:
        events = self.forget_pending(kind, key)
        removed = self.cache.remove_object(kind, key)
        if removed is not None:
            events += self._event(EventResource.PLACEMENT, ActionType.DELETE, removed)
        return events

    def _consumer_gone(self, machine_key: str, volume_keys: tuple[str, ...]) -> Events:
        events: Events = []
        for vkey in self.cache.set_consumer(machine_key, volume_keys):
            events += self._event(EventResource.CONSUMER, ActionType.DELETE, vkey)
        return events


def _pool_changes(old: PoolInfo, new: PoolInfo) -> ActionType:
    """What changed in a pool that could make a parked object fit (heartbeats alone do not)."""
    changed = ActionType(0)
    if old.ready != new.ready:
        changed |= ActionType.UPDATE_READY
    if old.labels != new.labels:
        changed |= ActionType.UPDATE_LABEL
    if old.taints != new.taints:
        changed |= ActionType.UPDATE_TAINT
    if old.allocatable != new.allocatable:
        changed |= ActionType.UPDATE_ALLOCATABLE
    if old.offered != new.offered:
        changed |= ActionType.UPDATE_OFFER
    return changed
