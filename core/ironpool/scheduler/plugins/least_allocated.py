"""LeastAllocated (spread, the default): prefer the pool with the largest share left after placing.

score = mean over the demanded resources r of (free_r - demand_r) / allocatable_r, as kube-scheduler's
LeastAllocated. It depends only on the pool's state and the class, so the class index can sort by it.
"""

from __future__ import annotations

from ironpool.scheduler.framework.interface import ClassStaticScorePlugin
from ironpool.scheduler.model import PoolInfo


def least_allocated_score(pool: PoolInfo, demand: dict[str, int]) -> float:
    alloc, used = pool.allocatable, pool.used
    total = 0.0
    n = 0
    for r, d in demand.items():
        a = alloc.get(r, 0)
        if a > 0:
            total += (a - used.get(r, 0) - d) / a
            n += 1
    return total / n if n else 0.0


class LeastAllocated(ClassStaticScorePlugin):
    name = "LeastAllocated"

    def static_score(self, pool: PoolInfo, demand: dict[str, int]) -> float:
        return least_allocated_score(pool, demand)
