"""TaintToleration: every taint of the pool (whatever its effect) must be tolerated."""

from __future__ import annotations

from typing import Any, ClassVar

from ironpool.api.meta import tolerates_taints
from ironpool.scheduler.framework.events import ActionType, ClusterEventWithHint, EventResource, on
from ironpool.scheduler.framework.interface import (
    SUCCESS,
    CycleState,
    FilterPlugin,
    Status,
    unschedulable,
)
from ironpool.scheduler.model import PoolInfo, SchedulingRequest

NAME = "TaintToleration"


def _tolerated_now(req: SchedulingRequest, pool: Any) -> bool:
    return bool(pool.kind == req.kind and tolerates_taints(req.tolerations, pool.taints))


_TOLERATED = on(EventResource.POOL, ActionType.ADD | ActionType.UPDATE_TAINT, _tolerated_now)
_TAINTED = unschedulable(NAME, "have taints the object does not tolerate", _TOLERATED)


class TaintToleration(FilterPlugin):
    name = NAME
    # The class index holds untainted pools only; tainted pools are filtered one by one.
    index_covered: ClassVar[bool] = True
    reads_class: ClassVar[bool] = False

    def events_to_register(self) -> tuple[ClusterEventWithHint, ...]:
        return (_TOLERATED,)

    def filter(self, state: CycleState, req: SchedulingRequest, pool: PoolInfo) -> Status:
        if pool.taints and not tolerates_taints(req.tolerations, pool.taints):
            return _TAINTED
        return SUCCESS

    def class_filter(self, pool: PoolInfo, class_name: str, demand: dict[str, int]) -> Status | None:
        return _TAINTED if pool.taints else None
