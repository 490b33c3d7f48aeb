"""Per-MachineClass candidate index: the pools that can take one more object of the class, best first.

For every class, a heap holds ``(-score, pool name)`` for each pool that passes every
index-covered filter for a plain request of the class (ready, untainted, offers the class, has room:
the filters' own :meth:`~ironpool.scheduler.framework.interface.FilterPlugin.class_filter`), where
``score`` is the profile's class-static strategy (LeastAllocated or MostAllocated). The best pool
for a plain Machine is then the first entry: a decision costs O(log n) instead of filtering and
scoring n pools. When a pool's usage or status changes the cache calls ``on_pool`` and the pool gets
a new entry in every class heap (O(classes · log n)); when only its usage changed (an object
placed or removed), only the filters that read usage run again, and a pool refused for a reason
usage cannot change is left alone. Pools outside a list keep the Status that refused them, so a
failure is explained (message and wake-ups) without scanning every pool. Ties go to the smaller
pool name, so results are deterministic.

Heaps, not sorted lists: every placement re-keys its pool in every class, and a push onto a heap
(its superseded entry left behind, skipped when it reaches the top, compacted away now and then)
costs a fraction of a sorted list's remove and insert; only the best entry is wanted almost always.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from heapq import heapify, heappop, heappush
from typing import TYPE_CHECKING

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
        # The leading filters that look at the pool alone (ready, untainted) are asked once per pool
        # for every class (their verdict kept until the pool changes); the rest per pool and class.
        # Only a leading run, so a refused pool is explained by the same filter as before.
        alone = 0
        while alone < len(filters) and not (filters[alone].reads_class or filters[alone].reads_usage):
            alone += 1
        self._pool_checks = self._checks[:alone]
        self._class_checks = self._checks[alone:]
        self._pool_verdicts: dict[str, Status | None] = {}
        self._usage_checks: tuple[ClassFilter, ...] = tuple(f.class_filter for f in filters if f.reads_usage)
        self._usage_plugins = frozenset(f.name for f in filters if f.reads_usage)
        #: per class: the current key of each pool in the class's candidates, and the heap of keys
        #: (superseded keys of a pool stay in it until they reach the top or it is compacted)
        self._heaps: dict[str, list[Key]] = {}
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
        heap = self._ensure(class_name)
        keys = self._keys[class_name]
        while heap and keys.get(heap[0][1]) != heap[0]:
            heappop(heap)  # superseded
        if not heap:
            return
        pools = self.cache.pools
        kind = self.kind
        neg, name = heap[0]
        yield -neg, pools[(kind, name)]
        # Past the best (a filter the index does not cover refused it, which is rare): all in order.
        for neg, name in sorted(keys.values())[1:]:
            yield -neg, pools[(kind, name)]

    def size(self, class_name: str) -> int:
        self._ensure(class_name)
        return len(self._keys.get(class_name, ()))

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
    def _ensure(self, class_name: str) -> list[Key]:
        info = self.cache.classes.get((self.kind, class_name))
        demand = info.demand if info is not None else None
        heap = self._heaps.get(class_name)
        if heap is not None and demand == self._demands.get(class_name):
            return heap
        if demand is None:
            self._drop(class_name)
            return []
        self._demands[class_name] = dict(demand)
        keys: dict[str, Key] = {}
        why: dict[str, Status] = {}
        verdicts = self._pool_verdicts
        pool_checks, class_checks = self._pool_checks, self._class_checks
        for pool in self.cache.pools_of(self.kind):
            name = pool.name
            if name in verdicts:
                status = verdicts[name]
            else:
                status = verdicts[name] = self._first_refusal(pool, class_name, demand, pool_checks)
            if status is None:
                status = self._first_refusal(pool, class_name, demand, class_checks)
                if status is None:
                    keys[name] = (-self.score(pool, demand), name)
                    continue
            why[name] = status
        self._why[class_name] = why
        self._why_counts[class_name] = Counter(status.reason for status in why.values())
        self._statuses.update((status.reason, status) for status in why.values())
        self._keys[class_name] = keys
        heap = self._heaps[class_name] = list(keys.values())
        heapify(heap)
        return heap

    def _drop(self, class_name: str) -> None:
        self._heaps.pop(class_name, None)
        self._keys.pop(class_name, None)
        self._demands.pop(class_name, None)
        self._why.pop(class_name, None)
        self._why_counts.pop(class_name, None)

    def _key(self, pool: PoolInfo, class_name: str, demand: dict[str, int],
             checks: tuple[ClassFilter, ...] | None = None) -> tuple[Key | None, Status | None]:
        status = self._first_refusal(pool, class_name, demand, self._checks if checks is None else checks)
        return (None, status) if status is not None else ((-self.score(pool, demand), pool.name), None)

    @staticmethod
    def _first_refusal(pool: PoolInfo, class_name: str, demand: dict[str, int],
                       checks: tuple[ClassFilter, ...]) -> Status | None:
        for check in checks:
            status = check(pool, class_name, demand)
            if status is not None:
                return status
        return None

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
            self._pool_verdicts.pop(pool.name, None)
        name = pool.name
        for class_name, heap in self._heaps.items():
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
            new, status = self._key(pool, class_name, self._demands[class_name], checks)
            if new is not None:
                keys[name] = new
                if new != old:
                    heappush(heap, new)
                    if len(heap) > 2 * len(keys) + 64:
                        heap[:] = keys.values()  # drop the superseded keys
                        heapify(heap)
            if status is not None or name in self._why[class_name]:
                self._set_why(class_name, name, status)

    def on_removed(self, kind: Kind, name: str) -> None:
        if kind != self.kind:
            return
        self.tainted.pop(name, None)
        self._pool_verdicts.pop(name, None)
        for class_name in self._heaps:
            self._keys[class_name].pop(name, None)  # its heap entries are superseded
            self._set_why(class_name, name, None)
