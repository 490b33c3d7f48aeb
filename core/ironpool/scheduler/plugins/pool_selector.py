"""PoolSelector: ``machinePoolSelector`` / ``volumePoolSelector`` must be a subset of the pool's labels."""

from __future__ import annotations

from typing import Any

from ironpool.scheduler.framework.events import ActionType, ClusterEventWithHint, EventResource, on
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

NAME = "PoolSelector"


def _selected(req: SchedulingRequest, labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in req.selector.items())


def _matches_now(req: SchedulingRequest, pool: Any) -> bool:
    return bool(pool.kind == req.kind and _selected(req, pool.labels))


_MATCHES = on(EventResource.POOL, ActionType.ADD | ActionType.UPDATE_LABEL, _matches_now)
_MISMATCH = unschedulable(NAME, "do not match the pool selector", _MATCHES)


class PoolSelector(PreFilterPlugin, FilterPlugin):
    name = NAME

    def events_to_register(self) -> tuple[ClusterEventWithHint, ...]:
        return (_MATCHES,)

    def pre_filter(self, state: CycleState, req: SchedulingRequest) -> Status:
        return SUCCESS if req.selector else SKIP

    def filter(self, state: CycleState, req: SchedulingRequest, pool: PoolInfo) -> Status:
        return SUCCESS if _selected(req, pool.labels) else _MISMATCH
