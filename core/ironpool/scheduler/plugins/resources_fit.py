"""ResourcesFit: the class's resources must fit in what the pool has free.

Free = the pool's total allocatable minus the demand of every object bound or assumed to it; each
object's class is charged once (never the informational ``class/...`` counts).
"""

from __future__ import annotations

from typing import ClassVar

from ironpool.scheduler.framework.interface import (
    SUCCESS,
    WAKE_CAPACITY,
    WAKE_POOL,
    CycleState,
    FilterPlugin,
    Status,
    unschedulable,
)
from ironpool.scheduler.model import PoolInfo, Request

_CACHE: dict[str, Status] = {}


def _too_little(resource: str) -> Status:
    status = _CACHE.get(resource)
    if status is None:
        status = _CACHE[resource] = unschedulable(f"have too little {resource}", WAKE_POOL, WAKE_CAPACITY)
    return status


class ResourcesFit(FilterPlugin):
    name = "ResourcesFit"
    index_covered: ClassVar[bool] = True

    def filter(self, state: CycleState, req: Request, pool: PoolInfo) -> Status:
        alloc, used = pool.allocatable, pool.used
        for r, d in state.demand.items():
            if alloc.get(r, 0) - used.get(r, 0) < d:
                return _too_little(r)
        return SUCCESS
