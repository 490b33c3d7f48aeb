"""TopologySpread: spread Machines that share a label value across ``topology.ironcore.dev/zone``.

A Machine opts in with the annotation ``scheduler.ironpool.dev/spread-by: <label key>`` (IronCore's
Machine has no topologySpreadConstraints field); the Machines with the same value of that label form
the group. Score: fewer group members in the pool's zone is better. With
``args.whenUnsatisfiable: DoNotSchedule`` it also filters zones whose count would exceed the least
loaded zone by more than ``args.maxSkew`` (default 1), like kube-scheduler's PodTopologySpread.
"""

from __future__ import annotations

from typing import Any

from ironpool.scheduler.framework.events import ActionType, ClusterEventWithHint, EventResource, on
from ironpool.scheduler.framework.interface import (
    SKIP,
    SUCCESS,
    CycleState,
    FilterPlugin,
    PreFilterPlugin,
    ScorePlugin,
    Status,
    unschedulable,
)
from ironpool.scheduler.model import PoolInfo, SchedulingRequest

NAME = "TopologySpread"
# A new or relabelled pool (another zone), or a Machine leaving a zone, can even out the spread.
_ZONES_CHANGE = on(EventResource.POOL, ActionType.ADD | ActionType.UPDATE)
_MACHINE_LEAVES = on(EventResource.PLACEMENT, ActionType.DELETE)
_SKEW = unschedulable(NAME, "would exceed the zone spread skew", _ZONES_CHANGE, _MACHINE_LEAVES)


class TopologySpread(PreFilterPlugin, FilterPlugin, ScorePlugin):
    name = NAME

    def __init__(self, args: dict[str, Any] | None = None, weight: int = 2) -> None:
        ScorePlugin.__init__(self, args, weight)
        self.max_skew = int(self.args.get("maxSkew", 1))
        if self.max_skew < 1:
            raise ValueError("TopologySpread.args.maxSkew: must be at least 1")
        mode = str(self.args.get("whenUnsatisfiable", "ScheduleAnyway"))
        if mode not in ("ScheduleAnyway", "DoNotSchedule"):
            raise ValueError(
                f"TopologySpread.args.whenUnsatisfiable: ScheduleAnyway or DoNotSchedule, got {mode!r}")
        self.hard = mode == "DoNotSchedule"

    def events_to_register(self) -> tuple[ClusterEventWithHint, ...]:
        return (_ZONES_CHANGE, _MACHINE_LEAVES)

    def _counts(self, state: CycleState, req: SchedulingRequest) -> dict[str, int] | None:
        if req.kind != "machine" or req.spread_key is None:
            return None
        counts = state.data.get(self.name)
        if counts is None:
            item = (req.spread_key, req.labels[req.spread_key])
            counts = dict(state.cache.spread_counts.get(item, {}))
            for pool in state.cache.pools_of("machine"):
                if pool.ready:
                    counts.setdefault(pool.zone, 0)
            state.data[self.name] = counts
        return counts

    def pre_filter(self, state: CycleState, req: SchedulingRequest) -> Status:
        counts = self._counts(state, req)
        return SUCCESS if self.hard and counts else SKIP

    def filter(self, state: CycleState, req: SchedulingRequest, pool: PoolInfo) -> Status:
        counts = self._counts(state, req)
        if not counts:
            return SUCCESS
        if counts.get(pool.zone, 0) + 1 - min(counts.values()) > self.max_skew:
            return _SKEW
        return SUCCESS

    def pre_score(self, state: CycleState, req: SchedulingRequest) -> Status:
        return SKIP if self._counts(state, req) is None else SUCCESS

    def score(self, state: CycleState, req: SchedulingRequest, pool: PoolInfo) -> float:
        counts = self._counts(state, req) or {}
        return -float(counts.get(pool.zone, 0))
