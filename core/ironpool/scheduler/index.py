"""Per-MachineClass candidate index: the pools that can take one more object of the class, best first.

For every class, a sorted list holds ``(-score, pool name)`` for each pool that passes every
index-covered filter for a plain request of the class (ready, untainted, offers the class, has room:
the filters' own :meth:`~ironpool.scheduler.framework.interface.FilterPlugin.class_filter`), where
``score`` is the profile's class-static strategy (LeastAllocated or MostAllocated). The best pool
for a plain Machine is then the first entry: a decision costs O(log n) instead of filtering and
scoring n pools. When a pool's usage or status changes the cache calls ``on_pool`` and the pool's
entry is replaced in every class list (O(classes · log n)); when only its usage changed (an object
placed or removed), only the filters that read usage run again, and a pool refused for a reason
usage cannot change is left alone. Pools outside a list keep the Status that refused them, so a
failure is explained (message and wake-ups) without scanning every pool. Ties go to the smaller
pool name, so results are deterministic.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

from sortedcontainers import SortedList

from ironpool.scheduler.cache import SchedulerCache
from ironpool.scheduler.model import Kind, PoolInfo

if TYPE_CHECKING:
    from ironpool.scheduler.framework.interface import FilterPlugin, Status

ScoreFn = Callable[[PoolInfo, dict[str, int]], float]
#: a filter's verdict for a plain request of a class: None when the pool passes
ClassFilter = Callable[[PoolInfo, str, dict[str, int]], "Status | None"]
Key = tuple[float, str]


class ClassIndex:
    """Candidate lists for one kind of pool and one scoring function, kept current by the cache."""

    def __init__(self, cache: SchedulerCache, kind: Kind, score: ScoreFn,
                 filters: Sequence[FilterPlugin]) -> None:
        self.cache = cache
        self.kind = kind
        self.score = score
        self._checks: tuple[ClassFilter, ...] = tuple(f.class_filter for f in filters)
        self._usage_checks: tuple[ClassFilter, ...] = tuple(f.class_filter for f in filters if f.reads_usage)
        self._usage_plugins = frozenset(f.name for f in filters if f.reads_usage)
        self._lists: dict[str, SortedList] = {}
        self._keys: dict[str, dict[str, Key]] = {}
        self._demands: dict[str, dict[str, int]] = {}
        #: per class: the Status refusing each pool outside the list, and the counts per reason
        self._why: dict[str, dict[str, Status]] = {}
        self._why_counts: dict[str, Counter[str]] = {}
        #: reason -> the Status with that reason (its plugin and wake-ups)
        self._statuses: dict[str, Status] = {}
        #: ready pools with taints: never in the lists, checked one by one with every filter
        self.tainted: dict[str, PoolInfo] = {}
        for pool in cache.pools_of(kind):
            self._track_taints(pool)
        cache.pool_listeners.append(self.on_pool)
        cache.removal_listeners.append(self.on_removed)

    def close(self) -> None:
        """Stop following the cache."""
        self.cache.pool_listeners.remove(self.on_pool)
        self.cache.removal_listeners.remove(self.on_removed)

    def candidates(self, class_name: str) -> Iterator[tuple[float, PoolInfo]]:
        """Pools that can take the class, best score first: (score, pool)."""
        lst = self._ensure(class_name)
        pools = self.cache.pools
        kind = self.kind
        for neg, name in lst:
            yield -neg, pools[(kind, name)]

    def size(self, class_name: str) -> int:
        return len(self._ensure(class_name))

    def failures(self, class_name: str) -> tuple[Counter[str], dict[str, Status]]:
        """Per reason, how many pools cannot take one more object of the class (plain requests),
        and the Status behind each reason."""
        self._ensure(class_name)
        counts = Counter(self._why_counts.get(class_name, {}))
        return counts, {reason: self._statuses[reason] for reason in counts}

    def _set_why(self, class_name: str, pool: str, status: Status | None) -> None:
        why = self._why[class_name]
        counts = self._why_counts[class_name]
        old = why.pop(pool, None)
        if old is not None:
            counts[old.reason] -= 1
            if not counts[old.reason]:
                del counts[old.reason]
        if status is not None:
            why[pool] = status
            counts[status.reason] += 1
            self._statuses[status.reason] = status

    # ---- maintenance -------------------------------------------------------------------------
    def _ensure(self, class_name: str) -> SortedList:
        info = self.cache.classes.get((self.kind, class_name))
        demand = info.demand if info is not None else None
        lst = self._lists.get(class_name)
        if lst is not None and demand == self._demands.get(class_name):
            return lst
        if demand is None:
            self._drop(class_name)
            return SortedList()
        self._demands[class_name] = dict(demand)
        keys: dict[str, Key] = {}
        self._why[class_name] = {}
        self._why_counts[class_name] = Counter()
        for pool in self.cache.pools_of(self.kind):
            key, status = self._key(pool, class_name, demand)
            if key is not None:
                keys[pool.name] = key
            self._set_why(class_name, pool.name, status)
        self._keys[class_name] = keys
        lst = self._lists[class_name] = SortedList(keys.values())
        return lst

    def _drop(self, class_name: str) -> None:
        self._lists.pop(class_name, None)
        self._keys.pop(class_name, None)
        self._demands.pop(class_name, None)
        self._why.pop(class_name, None)
        self._why_counts.pop(class_name, None)

    def _key(self, pool: PoolInfo, class_name: str, demand: dict[str, int],
             checks: tuple[ClassFilter, ...] | None = None) -> tuple[Key | None, Status | None]:
        for check in self._checks if checks is None else checks:
            status = check(pool, class_name, demand)
            if status is not None:
                return None, status
        return (-self.score(pool, demand), pool.name), None

    def _track_taints(self, pool: PoolInfo) -> None:
        if pool.taints and pool.ready:
            self.tainted[pool.name] = pool
        else:
            self.tainted.pop(pool.name, None)

    def on_pool(self, pool: PoolInfo, usage_only: bool) -> None:
        if pool.kind != self.kind:
            return
        if not usage_only:
            self._track_taints(pool)
        name = pool.name
        for class_name, lst in self._lists.items():
            keys = self._keys[class_name]
            checks = None
            if usage_only:
                if name in keys:
                    checks = self._usage_checks  # it passed every other filter, and still does
                else:
                    why = self._why[class_name].get(name)
                    if why is not None and why.plugin not in self._usage_plugins:
                        continue  # refused for a reason usage does not change
            old = keys.pop(name, None)
            if old is not None:
                lst.remove(old)
            new, status = self._key(pool, class_name, self._demands[class_name], checks)
            if new is not None:
                keys[name] = new
                lst.add(new)
            if status is not None or name in self._why[class_name]:
                self._set_why(class_name, name, status)

    def on_removed(self, kind: Kind, name: str) -> None:
        if kind != self.kind:
            return
        self.tainted.pop(name, None)
        for class_name, lst in self._lists.items():
            old = self._keys[class_name].pop(name, None)
            if old is not None:
                lst.remove(old)
            self._set_why(class_name, name, None)
