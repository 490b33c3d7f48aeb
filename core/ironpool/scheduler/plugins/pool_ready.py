"""PoolReady: only pools whose Ready condition is True take new objects."""

from __future__ import annotations

from typing import ClassVar

from ironpool.scheduler.framework.interface import (
    SUCCESS,
    WAKE_POOL,
    CycleState,
    FilterPlugin,
    Status,
    unschedulable,
)
from ironpool.scheduler.model import PoolInfo, Request

_NOT_READY = unschedulable("not ready", WAKE_POOL)


class PoolReady(FilterPlugin):
    name = "PoolReady"
    index_covered: ClassVar[bool] = True

    def filter(self, state: CycleState, req: Request, pool: PoolInfo) -> Status:
        return SUCCESS if pool.ready else _NOT_READY
