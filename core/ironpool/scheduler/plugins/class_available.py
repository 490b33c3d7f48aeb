"""ClassAvailable: the pool must offer the object's class.

A pool offers a class when the class is in its ``status.availableMachineClasses`` (or
``availableVolumeClasses``); a pool that publishes no such list (and no ``class/...`` keys)
offers every class that fits by resources. (That the class exists at all, and what it demands, the
framework finds out before any plugin runs.)
"""

from __future__ import annotations

from functools import lru_cache
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

NAME = "ClassAvailable"


def _offered_now(req: SchedulingRequest, pool: Any) -> bool:
    return bool(pool.kind == req.kind and req.class_name is not None and pool.offers(req.class_name))


_OFFERED = on(EventResource.POOL, ActionType.ADD | ActionType.UPDATE_OFFER, _offered_now)


@lru_cache(maxsize=4096)
def _not_offered(class_name: str) -> Status:
    return unschedulable(NAME, f"do not offer class {class_name}", _OFFERED)


class ClassAvailable(FilterPlugin):
    name = NAME
    index_covered: ClassVar[bool] = True

    def events_to_register(self) -> tuple[ClusterEventWithHint, ...]:
        return (_OFFERED,)

    def filter(self, state: CycleState, req: SchedulingRequest, pool: PoolInfo) -> Status:
        return self.class_filter(pool, req.class_name or "", state.demand) or SUCCESS

    def class_filter(self, pool: PoolInfo, class_name: str, demand: dict[str, int]) -> Status | None:
        return None if pool.offers(class_name) else _not_offered(class_name)
