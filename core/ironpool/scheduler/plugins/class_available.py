"""ClassAvailable: the object's class must exist, and the pool must offer it.

A pool offers a class when the class is in its ``status.availableMachineClasses`` (or
``availableVolumeClasses``); a pool that publishes no such list (and no ``class/...`` keys)
offers every class that fits by resources. The PreFilter also resolves the class's demand.
"""

from __future__ import annotations

from typing import ClassVar

from ironpool.scheduler.framework.interface import (
    SUCCESS,
    CycleState,
    FilterPlugin,
    PreFilterPlugin,
    Status,
    unschedulable,
    wake_class,
    wake_offer,
)
from ironpool.scheduler.model import PoolInfo, Request


class ClassAvailable(PreFilterPlugin, FilterPlugin):
    name = "ClassAvailable"
    index_covered: ClassVar[bool] = True

    def pre_filter(self, state: CycleState, req: Request) -> Status:
        kind_word = "machine" if req.kind == "machine" else "volume"
        if req.class_name is None:
            return unschedulable(f"{kind_word} has no class")
        if (req.kind, req.class_name) not in state.cache.classes:
            return unschedulable(f"{kind_word} class {req.class_name} not found", wake_class(req.class_name))
        demand = state.cache.demand_of(req.kind, req.class_name, req.storage)
        state.demand = demand or {}
        return SUCCESS

    def filter(self, state: CycleState, req: Request, pool: PoolInfo) -> Status:
        name = req.class_name or ""
        if pool.offers(name):
            return SUCCESS
        return unschedulable(f"do not offer class {name}", wake_offer(name))
