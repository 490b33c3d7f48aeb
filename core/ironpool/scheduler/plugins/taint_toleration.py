"""TaintToleration: every taint of the pool (whatever its effect) must be tolerated."""

from __future__ import annotations

from typing import ClassVar

from ironpool.api.meta import tolerates_taints
from ironpool.scheduler.framework.interface import (
    SUCCESS,
    WAKE_POOL,
    CycleState,
    FilterPlugin,
    Status,
    unschedulable,
)
from ironpool.scheduler.model import PoolInfo, Request

_TAINTED = unschedulable("have taints the object does not tolerate", WAKE_POOL)


class TaintToleration(FilterPlugin):
    name = "TaintToleration"
    # The class index holds untainted pools only; tainted pools are filtered one by one.
    index_covered: ClassVar[bool] = True

    def filter(self, state: CycleState, req: Request, pool: PoolInfo) -> Status:
        if pool.taints and not tolerates_taints(req.tolerations, pool.taints):
            return _TAINTED
        return SUCCESS
