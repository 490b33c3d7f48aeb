"""Gang placement: where every machine a Reservation asks for would go, all at once, or why not.

Like kube's coscheduling, the set is decided as a whole: each machine of the Reservation is placed
in turn with the profile's own filters and scoring (the class index's fast path where it applies),
counted in the cache at once so the next one sees the room taken, and when all are placed the plan
is the pools and how many of each class go there. Then every tentative placement is undone: the
caller holds the plan as one thing (``SchedulerCache.set_holds``) while its write is under way, and
the apiserver's capacity admission charges it to all its pools in one write or refuses it whole.

Machines already bound within the Reservation (its label) count first, where they are. Bigger
machines are placed first (fewer ways to fit). With ``spec.zoneSpread`` each machine may only go to
a zone that keeps the zones within ``maxSkew`` of each other, counting the zones where a ready pool
could take the class. When some machine fits nowhere the plan says which class is short, by how
many machines and how much cpu and memory, and why the first of them was refused.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction

from ironpool.api.quantity import Quantity
from ironpool.scheduler.cache import Hold, SchedulerCache
from ironpool.scheduler.framework.profile import Framework
from ironpool.scheduler.model import PoolInfo, SchedulingRequest
from ironpool.scheduler.reservations import ReservationInfo


@dataclass(slots=True)
class GangPlan:
    """The answer for one Reservation: per pool what it would hold (``parts``), or the shortfall."""

    reservation: ReservationInfo
    parts: dict[str, Hold] = field(default_factory=dict)
    #: class -> machines that fit nowhere (the block as ``""``)
    short: Counter[str] = field(default_factory=Counter)
    #: class -> why the first machine of it that did not fit was refused
    reasons: dict[str, str] = field(default_factory=dict)

    @property
    def fits(self) -> bool:
        return not self.short

    def message(self, cache: SchedulerCache) -> str:
        """``10 machines on 2 pools: a (7 x-small), b (3 x-small)``, or what is short and why."""
        where = ", ".join(f"{pool} ({_describe(part)})" for pool, part in sorted(self.parts.items()))
        placed = sum(sum(p.classes.values()) + (1 if p.block else 0) for p in self.parts.values())
        if self.fits:
            return f"{placed} machine{'s' if placed != 1 else ''} on {len(self.parts)} " \
                   f"pool{'s' if len(self.parts) != 1 else ''}: {where}"
        info = self.reservation
        asked = ", ".join(f"{n} {c}" for c, n in sorted(info.classes.items()))
        if info.block:
            asked = ", ".join(filter(None, (asked, f"a block of {_amounts(info.block)}")))
        shortfall = "; ".join(self._short(cache, cls, n) for cls, n in sorted(self.short.items()))
        fitting = f"{placed} fit ({where})" if placed else "none fits"
        return f"needs {asked}: {fitting}; short by {shortfall}"

    def _short(self, cache: SchedulerCache, cls: str, n: int) -> str:
        if not cls:
            return f"the block of {_amounts(self.reservation.block)} ({self.reasons.get(cls, '')})"
        info = cache.classes.get(("machine", cls))
        total = {r: v * n for r, v in (info.demand if info is not None else {}).items()}
        amounts = f" = {_amounts(total)}" if total else ""
        return f"{n} {cls}{amounts} ({self.reasons.get(cls, '')})"


def _amounts(amounts: dict[str, int]) -> str:
    parts = []
    for r, v in sorted(amounts.items()):
        q = Quantity(Fraction(v, 1000), "DecimalSI") if r == "cpu" else Quantity(v, "BinarySI")
        parts.append(f"{q} {r}")
    return " and ".join(parts)


def _describe(part: Hold) -> str:
    items = [f"{n} {c}" for c, n in sorted(part.classes.items()) if n]
    if part.block:
        items.append(f"block of {_amounts(part.block)}")
    return ", ".join(items)


def _size(cache: SchedulerCache, cls: str) -> tuple[int, int, str]:
    info = cache.classes.get(("machine", cls))
    demand = info.demand if info is not None else {}
    return (-demand.get("cpu", 0), -demand.get("memory", 0), cls)


class GangPlanner:
    """Plans Reservations with one profile's framework over its cache."""

    def __init__(self, framework: Framework) -> None:
        self.framework = framework
        self.cache = framework.cache

    def plan(self, info: ReservationInfo, then: Callable[[GangPlan], None] | None = None) -> GangPlan:
        """The plan for ``info``; the cache is left as it was, but for what ``then`` does with the
        plan while its tentative placements go (in one batch: each pool's listeners hear once)."""
        result = GangPlan(info)
        need = dict(info.classes)
        for (pool, reservation), classes in list(self.cache.within_classes.items()):
            if reservation != info.key:
                continue
            for cls, n in classes.items():
                take = min(n, need.get(cls, 0))
                if take:
                    part = result.parts.setdefault(pool, Hold({}, {}))
                    part.classes[cls] = part.classes.get(cls, 0) + take
                    need[cls] -= take
        units = sorted((cls for cls, n in need.items() for _ in range(n)), key=lambda c: _size(self.cache, c))
        tentative: list[str] = []
        try:
            for i, cls in enumerate(units):
                req = SchedulingRequest("machine", f"{info.key}#{i}", "", "", cls, info.selector, (), {},
                                        only_pools=self._allowed(info, result, cls))
                decision = self.framework.find(req)
                if decision.pool is None or decision.state is None:
                    result.short[cls] += 1
                    result.reasons.setdefault(cls, decision.message)
                    continue
                self.cache.assume("machine", req.key, decision.pool, cls, decision.state.demand)
                tentative.append(req.key)
                part = result.parts.setdefault(decision.pool, Hold({}, {}))
                part.classes[cls] = part.classes.get(cls, 0) + 1
            if info.block:
                block_pool = self._block_pool(info)
                if block_pool is None:
                    result.short[""] += 1
                    result.reasons[""] = "no pool has room for it"
                else:
                    result.parts.setdefault(block_pool, Hold({}, {})).block = dict(info.block)
        finally:
            with self.cache.batch():
                for key in tentative:
                    self.cache.forget("machine", key)
                if then is not None:
                    then(result)
        return result

    def _allowed(self, info: ReservationInfo, plan: GangPlan, cls: str) -> frozenset[str] | None:
        """The pools the next machine of ``cls`` may go to: the Reservation's pools, and with a zone
        spread only those of the zones that keep the spread."""
        if info.max_skew is None:
            return info.only_pools
        pools = [p for p in self.cache.pools_of("machine") if self._eligible(info, p, cls)]
        zones = {p.zone for p in pools}
        if not zones:
            return info.only_pools if info.only_pools is not None else frozenset()
        counts = Counter({zone: 0 for zone in zones})
        for name, part in plan.parts.items():
            pool = self.cache.pools.get(("machine", name))
            if pool is not None and pool.zone in counts:
                counts[pool.zone] += sum(part.classes.values())
        low = min(counts.values())
        ok = {zone for zone, n in counts.items() if n + 1 - low <= info.max_skew}
        return frozenset(p.name for p in pools if p.zone in ok)

    @staticmethod
    def _eligible(info: ReservationInfo, pool: PoolInfo, cls: str) -> bool:
        return (pool.ready and not pool.taints and pool.offers(cls)
                and (info.only_pools is None or pool.name in info.only_pools)
                and all(pool.labels.get(k) == v for k, v in info.selector.items()))

    def _block_pool(self, info: ReservationInfo) -> str | None:
        """The best pool with room for the cpu/memory block, by the profile's scoring strategy."""
        strategy = self.framework.strategy
        best: tuple[float, str] | None = None
        for pool in self.cache.pools_of("machine"):
            if not (pool.ready and not pool.taints and pool.fits(info.block)
                    and (info.only_pools is None or pool.name in info.only_pools)
                    and all(pool.labels.get(k) == v for k, v in info.selector.items())):
                continue
            score = strategy.static_score(pool, info.block) if strategy is not None else 0.0
            key = (-score, pool.name)
            if best is None or key < best:
                best = key
        return best[1] if best is not None else None
