"""LeastAllocated (spread, the default): prefer the pool with the largest share left after placing.

score = mean over the demanded resources r of (free_r - demand_r) / allocatable_r, as kube-scheduler's
LeastAllocated. It depends only on the pool's state and the class, so the class index can sort by it.
"""

from __future__ import annotations

from typing import ClassVar

from ironpool.scheduler.framework.interface import CycleState, ScorePlugin
from ironpool.scheduler.model import PoolInfo, SchedulingRequest


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


class LeastAllocated(ScorePlugin):
    name = "LeastAllocated"
    class_static: ClassVar[bool] = True

    @staticmethod
    def static_score(pool: PoolInfo, demand: dict[str, int]) -> float:
        return least_allocated_score(pool, demand)

    def score(self, state: CycleState, req: SchedulingRequest, pool: PoolInfo) -> float:
        return least_allocated_score(pool, state.demand)
