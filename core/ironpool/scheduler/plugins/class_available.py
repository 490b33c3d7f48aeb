"""ClassAvailable: the object's class must exist, and the pool must offer it.

A pool offers a class when the class is in its ``status.availableMachineClasses`` (or
``availableVolumeClasses``); a pool that publishes no such list (and no ``class/...`` keys)
offers every class that fits by resources. The PreFilter also resolves the class's demand.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, ClassVar

from ironpool.scheduler.framework.events import ActionType, ClusterEventWithHint, EventResource, on
from ironpool.scheduler.framework.interface import (
    SUCCESS,
    CycleState,
    FilterPlugin,
    PreFilterPlugin,
    Status,
    unschedulable,
)
from ironpool.scheduler.model import PoolInfo, SchedulingRequest

NAME = "ClassAvailable"


def _class_appears(req: SchedulingRequest, info: Any) -> bool:
    return bool(info.kind == req.kind and info.name == req.class_name)


def _offered_now(req: SchedulingRequest, pool: Any) -> bool:
    return bool(pool.kind == req.kind and req.class_name is not None and pool.offers(req.class_name))


_CLASS_CREATED = on(EventResource.CLASS, ActionType.ADD | ActionType.UPDATE_DEMAND, _class_appears)
_OFFERED = on(EventResource.POOL, ActionType.ADD | ActionType.UPDATE_OFFER, _offered_now)


@lru_cache(maxsize=4096)
def _not_found(kind_word: str, class_name: str) -> Status:
    return unschedulable(NAME, f"{kind_word} class {class_name} not found", _CLASS_CREATED)


@lru_cache(maxsize=4096)
def _not_offered(class_name: str) -> Status:
    return unschedulable(NAME, f"do not offer class {class_name}", _OFFERED)


class ClassAvailable(PreFilterPlugin, FilterPlugin):
    name = NAME
    index_covered: ClassVar[bool] = True

    def events_to_register(self) -> tuple[ClusterEventWithHint, ...]:
        return (_CLASS_CREATED, _OFFERED)

    def pre_filter(self, state: CycleState, req: SchedulingRequest) -> Status:
        kind_word = "machine" if req.kind == "machine" else "volume"
        if req.class_name is None:
            # Only a new version of the object itself can give it a class.
            return unschedulable(NAME, f"{kind_word} has no class")
        if (req.kind, req.class_name) not in state.cache.classes:
            return _not_found(kind_word, req.class_name)
        demand = state.cache.demand_of(req.kind, req.class_name, req.storage)
        state.demand = demand or {}
        return SUCCESS

    def filter(self, state: CycleState, req: SchedulingRequest, pool: PoolInfo) -> Status:
        return self.class_filter(pool, req.class_name or "", state.demand) or SUCCESS

    def class_filter(self, pool: PoolInfo, class_name: str, demand: dict[str, int]) -> Status | None:
        return None if pool.offers(class_name) else _not_offered(class_name)
