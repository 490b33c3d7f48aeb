"""PoolSelector: ``machinePoolSelector`` / ``volumePoolSelector`` must be a subset of the pool's labels."""

from __future__ import annotations

from ironpool.scheduler.framework.interface import (
    SUCCESS,
    WAKE_POOL,
    CycleState,
    FilterPlugin,
    Status,
    unschedulable,
)
from ironpool.scheduler.model import PoolInfo, Request

_MISMATCH = unschedulable("do not match the pool selector", WAKE_POOL)


class PoolSelector(FilterPlugin):
    name = "PoolSelector"

    def filter(self, state: CycleState, req: Request, pool: PoolInfo) -> Status:
        labels = pool.labels
        for k, v in req.selector.items():
            if labels.get(k) != v:
                return _MISMATCH
        return SUCCESS
