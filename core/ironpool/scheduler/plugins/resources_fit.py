"""ResourcesFit: the class's resources must fit in what the pool has free.

Free = the pool's total allocatable minus the demand of every object bound or assumed to it and what
Reservations hold there unused; each object's class is charged once (never the informational
``class/...`` counts). What frees room: a pool added or given more allocatable, and an object of the
same kind leaving a pool. An object that takes a Reservation's share (ReservationFit chose the pools)
is not limited by the pools' free room: the share is its.
"""

from __future__ import annotations

from functools import lru_cache
from typing import ClassVar

from ironpool.scheduler.framework.events import ActionType, ClusterEventWithHint, EventResource, on, same_kind
from ironpool.scheduler.framework.interface import (
    SKIP,
    SUCCESS,
    CycleState,
    FilterPlugin,
    PreFilterPlugin,
    Status,
    unschedulable,
)
from ironpool.scheduler.model import PoolInfo, SchedulingRequest

NAME = "ResourcesFit"
_MORE_POOL = on(EventResource.POOL, ActionType.ADD | ActionType.UPDATE_ALLOCATABLE, same_kind)
_FREED = on(EventResource.PLACEMENT, ActionType.DELETE, same_kind)
#: a Reservation released what it held (expired, rejected, deleted)
_RELEASED = on(EventResource.RESERVATION, ActionType.DELETE)


@lru_cache(maxsize=256)
def _too_little(resource: str) -> Status:
    return unschedulable(NAME, f"have too little {resource}", _MORE_POOL, _FREED, _RELEASED)


class ResourcesFit(PreFilterPlugin, FilterPlugin):
    name = NAME
    index_covered: ClassVar[bool] = True
    reads_usage: ClassVar[bool] = True

    def events_to_register(self) -> tuple[ClusterEventWithHint, ...]:
        return (_MORE_POOL, _FREED, _RELEASED)

    def pre_filter(self, state: CycleState, req: SchedulingRequest) -> Status:
        return SKIP if state.within_share else SUCCESS

    def filter(self, state: CycleState, req: SchedulingRequest, pool: PoolInfo) -> Status:
        return self.class_filter(pool, req.class_name or "", state.demand) or SUCCESS

    def class_filter(self, pool: PoolInfo, class_name: str, demand: dict[str, int]) -> Status | None:
        alloc, used = pool.allocatable, pool.used
        for r, d in demand.items():
            if alloc.get(r, 0) - used.get(r, 0) < d:
                return _too_little(r)
        return None
