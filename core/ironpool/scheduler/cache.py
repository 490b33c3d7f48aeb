"""The scheduler cache: pools, classes, and the objects bound or assumed to each pool.

Like kube-scheduler's cache it answers "what is free on pool P" without asking the apiserver: a
decision is *assumed* at once (counted against the pool), *forgotten* if the bind fails, and
*expires* if the binding never shows up in the watch within ``assume_ttl`` seconds of the bind
call returning. Each object's class is charged exactly once against the pool's total allocatable.

Reservations are counted as the apiserver's capacity admission counts them: what a Reservation holds
on a pool and no Machine placed within it uses yet is in use (see
:mod:`ironpool.apiserver.admission.capacity_usage`); a Machine placed within a Reservation uses its
share first. The scheduler's own plan is held here at once (assumed), like a decision.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from ironpool.scheduler.model import ClassInfo, Kind, PoolInfo, SchedulingRequest

#: told of every change of a pool: (pool, whether only its usage changed)
PoolListener = Callable[[PoolInfo, bool], None]
RemovalListener = Callable[[Kind, str], None]


@dataclass(slots=True)
class Placement:
    """One object counted against a pool."""

    kind: Kind
    key: str
    pool: str
    class_name: str | None
    #: None while a Machine's class is not known yet (charged as soon as the class arrives)
    demand: dict[str, int] | None
    labels: dict[str, str] = field(default_factory=dict)
    assumed: bool = False
    #: monotonic deadline after which an assumed placement that never showed up is dropped
    deadline: float | None = None
    #: zone the placement counted under for topology spread (the pool's zone when added)
    zone: str = ""
    #: the Reservation (``namespace/name``) the object is placed within
    reservation: str | None = None


@dataclass(slots=True)
class Hold:
    """What a Reservation holds on one pool: whole machines per class and a cpu/memory block, and
    their total ``amounts`` (the classes' demands, filled in by the cache)."""

    classes: dict[str, int]
    block: dict[str, int]
    #: as the pool's runtime answered (Pending, Accepted, Rejected)
    state: str = "Pending"
    amounts: dict[str, int] = field(default_factory=dict)


class SchedulerCache:
    """Pools, classes and placements, with listeners told whenever a pool's free resources change."""

    def __init__(self, assume_ttl: float = 30.0) -> None:
        self.assume_ttl = assume_ttl
        self.classes: dict[tuple[Kind, str], ClassInfo] = {}
        self.pools: dict[tuple[Kind, str], PoolInfo] = {}
        self._kind_pools: dict[Kind, dict[str, PoolInfo]] = {"machine": {}, "volume": {}}
        self.placements: dict[tuple[Kind, str], Placement] = {}
        self._by_pool: dict[tuple[Kind, str], set[str]] = {}
        self._awaiting_class: dict[tuple[Kind, str], set[str]] = {}
        #: (label key, label value) -> zone -> number of machines (for TopologySpread)
        self.spread_counts: dict[tuple[str, str], dict[str, int]] = {}
        self.pool_listeners: list[PoolListener] = []
        self.removal_listeners: list[RemovalListener] = []
        #: unbound Volumes by key, so a Machine that uses one can be placed together with it
        self.volume_requests: dict[str, SchedulingRequest] = {}
        #: volume key -> keys of pending Machines that use it: such a Volume waits for its Machine,
        #: which places both together (like WaitForFirstConsumer)
        self.consumers: dict[str, set[str]] = {}
        self._consumes: dict[str, tuple[str, ...]] = {}
        #: reservation key -> pool -> what it holds there
        self.holds: dict[str, dict[str, Hold]] = {}
        #: reservation key -> its state in one word (:func:`ironpool.api.reservation.summary`)
        self.reservation_states: dict[str, str] = {}
        #: how many placements are assumed (decided here, not seen bound in the watch yet)
        self.assumed_count = 0
        #: inside :meth:`batch`: the pools changed so far, and whether only their usage did
        self._deferred: dict[tuple[Kind, str], tuple[PoolInfo, bool]] | None = None
        #: (pool, reservation) -> the demand, and the classes, of the machines placed within it there
        self._within: dict[tuple[str, str], dict[str, int]] = {}
        self.within_classes: dict[tuple[str, str], dict[str, int]] = {}
        #: pool -> reservation -> what it holds there that no machine within uses (charged to the pool)
        self._unused: dict[str, dict[str, dict[str, int]]] = {}

    # ---- classes -----------------------------------------------------------------------------
    def upsert_class(self, info: ClassInfo) -> None:
        self.classes[(info.kind, info.name)] = info
        waiting = self._awaiting_class.pop((info.kind, info.name), None)
        for key in sorted(waiting or ()):
            p = self.placements.get((info.kind, key))
            if p is not None and p.demand is None:
                p.demand = dict(info.demand)
                pool = self.pools.get((info.kind, p.pool))
                if pool is not None:
                    self._charge(pool, p.demand, +1)
                    self._changed(pool, usage_only=True)
                if p.reservation is not None:
                    self._place_within(p, +1)
        if info.kind == "machine":
            # Holds of the class were counted without its demand.
            for reservation, holds in self.holds.items():
                for pool_name, hold in holds.items():
                    if info.name in hold.classes:
                        hold.amounts = self._hold_amounts(hold)
                        self._recount(pool_name, reservation)

    def remove_class(self, kind: Kind, name: str) -> None:
        # Placements already charged keep their demand: the resources stay in use.
        self.classes.pop((kind, name), None)

    def demand_of(self, kind: Kind, class_name: str | None, storage: int = 0) -> dict[str, int] | None:
        """Resources one object takes, or None when its (Machine) class is unknown."""
        if kind == "volume":
            return {"storage": storage} if storage > 0 else {}
        if class_name is None:
            return None
        info = self.classes.get((kind, class_name))
        return dict(info.demand) if info is not None else None

    # ---- pools -------------------------------------------------------------------------------
    def upsert_pool(self, info: PoolInfo) -> PoolInfo:
        """Insert or replace a pool; its usage is recomputed from the placements on it."""
        k = (info.kind, info.name)
        info.used = {}
        for key in self._by_pool.get(k, ()):
            p = self.placements[(info.kind, key)]
            if p.demand is not None:
                self._charge(info, p.demand, +1)
        if info.kind == "machine":
            for unused in self._unused.get(info.name, {}).values():
                self._charge(info, unused, +1)
        self.pools[k] = info
        self._kind_pools[info.kind][info.name] = info
        self._changed(info, usage_only=False)
        return info

    def remove_pool(self, kind: Kind, name: str) -> None:
        # Placements on a removed pool stay: if the pool comes back, its usage is still known.
        if self.pools.pop((kind, name), None) is not None:
            del self._kind_pools[kind][name]
            for listener in self.removal_listeners:
                listener(kind, name)

    def pools_of(self, kind: Kind) -> list[PoolInfo]:
        return list(self._kind_pools[kind].values())

    def pool_count(self, kind: Kind) -> int:
        return len(self._kind_pools[kind])

    # ---- placements --------------------------------------------------------------------------
    def assume(self, kind: Kind, key: str, pool: str, class_name: str | None, demand: dict[str, int],
               labels: dict[str, str] | None = None, reservation: str | None = None) -> Placement:
        """Count a decision at once; it stays until confirmed, forgotten or expired."""
        if (kind, key) in self.placements:
            raise ValueError(f"{kind} {key} is already placed on {self.placements[(kind, key)].pool}")
        p = Placement(kind, key, pool, class_name, dict(demand), dict(labels or {}), assumed=True,
                      reservation=reservation)
        self._add(p)
        return p

    def finish_binding(self, kind: Kind, key: str, now: float) -> None:
        """The bind call returned: start the TTL within which the watch must show the binding."""
        p = self.placements.get((kind, key))
        if p is not None and p.assumed:
            p.deadline = now + self.assume_ttl

    def forget(self, kind: Kind, key: str) -> None:
        """Drop an assumed placement (the bind failed)."""
        p = self.placements.get((kind, key))
        if p is not None and p.assumed:
            self._remove(p)

    def lift_assumed(self, kind: Kind) -> list[Placement]:
        """Take every assumed placement of ``kind`` out of the counts (:meth:`restore` puts them back)."""
        lifted = [p for p in self.placements.values() if p.assumed and p.kind == kind]
        for p in lifted:
            self._remove(p)
        return lifted

    def restore(self, placements: list[Placement]) -> None:
        """Count again placements :meth:`lift_assumed` took out (as they were, deadlines kept)."""
        for p in placements:
            if (p.kind, p.key) not in self.placements:
                self._add(p)

    def is_assumed(self, kind: Kind, key: str) -> bool:
        p = self.placements.get((kind, key))
        return p is not None and p.assumed

    def observe_bound(self, kind: Kind, key: str, pool: str, class_name: str | None,
                      storage: int = 0, labels: dict[str, str] | None = None,
                      reservation: str | None = None) -> None:
        """The watch shows the object bound to ``pool``: confirm an assumption or record it."""
        existing = self.placements.get((kind, key))
        if existing is not None:
            if existing.pool == pool and existing.reservation == reservation:
                if existing.assumed:
                    existing.assumed = False
                    self.assumed_count -= 1
                existing.deadline = None
                return
            # Someone else bound it elsewhere (another scheduler): the store is the truth.
            self._remove(existing)
        demand = self.demand_of(kind, class_name, storage)
        p = Placement(kind, key, pool, class_name, demand, dict(labels or {}), reservation=reservation)
        self._add(p)

    def remove_object(self, kind: Kind, key: str) -> Placement | None:
        """The object is gone (deleted or unbound): free what it took."""
        p = self.placements.get((kind, key))
        if p is not None:
            self._remove(p)
        return p

    def cleanup_expired(self, now: float) -> list[Placement]:
        """Drop assumed placements whose binding never appeared in the watch in time."""
        expired = [p for p in self.placements.values()
                   if p.assumed and p.deadline is not None and p.deadline <= now]
        for p in expired:
            self._remove(p)
        return expired

    def placements_on(self, kind: Kind, pool: str) -> list[Placement]:
        return [self.placements[(kind, key)] for key in sorted(self._by_pool.get((kind, pool), ()))]

    # ---- reservations ---------------------------------------------------------------------------
    def set_holds(self, reservation: str, holds: dict[str, Hold]) -> None:
        """What ``reservation`` holds from now on, per pool (empty: nothing)."""
        before = self.holds.pop(reservation, {})
        if holds:
            for hold in holds.values():
                hold.amounts = self._hold_amounts(hold)
            self.holds[reservation] = holds
        for pool in set(before) | set(holds):
            self._recount(pool, reservation)

    def unused_hold(self, pool: str, reservation: str) -> dict[str, int]:
        """What ``reservation`` holds on ``pool`` that no machine placed within it uses."""
        return self._unused.get(pool, {}).get(reservation, {})

    def _hold_amounts(self, hold: Hold) -> dict[str, int]:
        total = dict(hold.block)
        for class_name, count in hold.classes.items():
            info = self.classes.get(("machine", class_name))
            for r, v in (info.demand if info is not None else {}).items():
                total[r] = total.get(r, 0) + v * count
        return total

    def _recount(self, pool_name: str, reservation: str) -> None:
        """Charge the pool what ``reservation`` holds there unused, instead of what it charged before."""
        hold = self.holds.get(reservation, {}).get(pool_name)
        placed = self._within.get((pool_name, reservation), {})
        unused = {r: v - placed.get(r, 0) for r, v in (hold.amounts if hold is not None else {}).items()
                  if v > placed.get(r, 0)}
        by_reservation = self._unused.setdefault(pool_name, {})
        before = by_reservation.pop(reservation, {})
        if unused:
            by_reservation[reservation] = unused
        elif not by_reservation:
            del self._unused[pool_name]
        if before == unused:
            return
        pool = self.pools.get(("machine", pool_name))
        if pool is not None:
            self._charge(pool, before, -1)
            self._charge(pool, unused, +1)
            self._changed(pool, usage_only=True)

    def _place_within(self, p: Placement, sign: int) -> None:
        assert p.reservation is not None
        k = (p.pool, p.reservation)
        placed = self._within.setdefault(k, {})
        for r, v in (p.demand or {}).items():
            placed[r] = placed.get(r, 0) + sign * v
        classes = self.within_classes.setdefault(k, {})
        if p.class_name is not None:
            classes[p.class_name] = classes.get(p.class_name, 0) + sign
        if not any(placed.values()):
            del self._within[k]
        if not any(classes.values()):
            del self.within_classes[k]
        self._recount(p.pool, p.reservation)

    # ---- pending Machines and the Volumes they use ----------------------------------------------
    def set_consumer(self, machine_key: str, volume_keys: tuple[str, ...]) -> list[str]:
        """Record which Volumes a pending Machine uses (none once it is bound or gone); returns the
        Volumes that no pending Machine uses any more."""
        old = self._consumes.pop(machine_key, ())
        if volume_keys:
            self._consumes[machine_key] = volume_keys
        freed: list[str] = []
        for vkey in set(old) - set(volume_keys):
            users = self.consumers.get(vkey)
            if users is not None:
                users.discard(machine_key)
                if not users:
                    del self.consumers[vkey]
                    freed.append(vkey)
        for vkey in volume_keys:
            self.consumers.setdefault(vkey, set()).add(machine_key)
        return sorted(freed)

    # ---- internals ---------------------------------------------------------------------------
    def _add(self, p: Placement) -> None:
        self.placements[(p.kind, p.key)] = p
        if p.assumed:
            self.assumed_count += 1
        self._by_pool.setdefault((p.kind, p.pool), set()).add(p.key)
        if p.demand is None and p.class_name is not None:
            self._awaiting_class.setdefault((p.kind, p.class_name), set()).add(p.key)
        pool = self.pools.get((p.kind, p.pool))
        if p.kind == "machine":
            p.zone = pool.zone if pool is not None else ""
            self._count_spread(p, +1)
        if pool is not None and p.demand is not None:
            self._charge(pool, p.demand, +1)
            self._changed(pool, usage_only=True)
        if p.reservation is not None and p.demand is not None:
            self._place_within(p, +1)

    def _remove(self, p: Placement) -> None:
        del self.placements[(p.kind, p.key)]
        if p.assumed:
            self.assumed_count -= 1
        keys = self._by_pool.get((p.kind, p.pool))
        if keys is not None:
            keys.discard(p.key)
            if not keys:
                del self._by_pool[(p.kind, p.pool)]
        if p.demand is None and p.class_name is not None:
            self._awaiting_class.get((p.kind, p.class_name), set()).discard(p.key)
        if p.kind == "machine":
            self._count_spread(p, -1)
        pool = self.pools.get((p.kind, p.pool))
        if pool is not None and p.demand is not None:
            self._charge(pool, p.demand, -1)
            self._changed(pool, usage_only=True)
        if p.reservation is not None and p.demand is not None:
            self._place_within(p, -1)

    def _count_spread(self, p: Placement, sign: int) -> None:
        for item in p.labels.items():
            zones = self.spread_counts.setdefault(item, {})
            zones[p.zone] = zones.get(p.zone, 0) + sign
            if zones[p.zone] == 0:
                del zones[p.zone]
                if not zones:
                    del self.spread_counts[item]

    @staticmethod
    def _charge(pool: PoolInfo, demand: dict[str, int], sign: int) -> None:
        used = pool.used
        for r, v in demand.items():
            used[r] = used.get(r, 0) + sign * v

    def _changed(self, pool: PoolInfo, usage_only: bool) -> None:
        if self._deferred is not None:
            key = (pool.kind, pool.name)
            self._deferred[key] = (pool, usage_only and self._deferred.get(key, (pool, True))[1])
            return
        for listener in self.pool_listeners:
            listener(pool, usage_only)

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Tell the listeners of each changed pool once, at the end, however often it changed within
        (a plan's tentative placements giving way to its hold)."""
        if self._deferred is not None:
            yield
            return
        self._deferred = {}
        try:
            yield
        finally:
            changed, self._deferred = self._deferred, None
            for pool, usage_only in changed.values():
                self._changed(pool, usage_only)
