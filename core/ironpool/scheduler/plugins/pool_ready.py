"""PoolReady: only pools whose Ready condition is True take new objects."""

from __future__ import annotations

from typing import Any, ClassVar

from ironpool.scheduler.framework.events import ActionType, ClusterEventWithHint, EventResource, on
from ironpool.scheduler.framework.interface import (
    SUCCESS,
    CycleState,
    FilterPlugin,
    Status,
    unschedulable,
)
from ironpool.scheduler.model import PoolInfo, SchedulingRequest

NAME = "PoolReady"


def _ready_now(req: SchedulingRequest, pool: Any) -> bool:
    return bool(pool.kind == req.kind and pool.ready)


_BECOMES_READY = on(EventResource.POOL, ActionType.ADD | ActionType.UPDATE_READY, _ready_now)
_NOT_READY = unschedulable(NAME, "not ready", _BECOMES_READY)


class PoolReady(FilterPlugin):
    name = NAME
    index_covered: ClassVar[bool] = True
    reads_class: ClassVar[bool] = False

    def events_to_register(self) -> tuple[ClusterEventWithHint, ...]:
        return (_BECOMES_READY,)

    def filter(self, state: CycleState, req: SchedulingRequest, pool: PoolInfo) -> Status:
        return SUCCESS if pool.ready else _NOT_READY

    def class_filter(self, pool: PoolInfo, class_name: str, demand: dict[str, int]) -> Status | None:
        return None if pool.ready else _NOT_READY
