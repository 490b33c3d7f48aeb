"""VolumeLocality: a Machine goes to the host that holds its local Volumes.

Pools are on the same host when their ``topology.ironpool.dev/host`` label matches (default: the pool
name, so a MachinePool and a VolumePool of the same name pair up). A bound Volume counts as local
when a MachinePool exists on its VolumePool's host. (Volumes the Machine uses that are not bound yet
are VolumeBinding's: it places them together with the Machine.)
"""

from __future__ import annotations

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

NAME = "VolumeLocality"
_POOLS_CHANGE = on(EventResource.POOL, ActionType.ADD | ActionType.UPDATE)
_ELSEWHERE = unschedulable(NAME, "do not hold the machine's local volumes", _POOLS_CHANGE)


class VolumeLocality(PreFilterPlugin, FilterPlugin):
    name = NAME
    requires = {"VolumeBinding": "a Machine's Volumes that are not bound yet are VolumeBinding's to place "
                                 "beside it; without it they land on any host, away from their Machine"}

    def events_to_register(self) -> tuple[ClusterEventWithHint, ...]:
        return (_POOLS_CHANGE,)

    def pre_filter(self, state: CycleState, req: SchedulingRequest) -> Status:
        if req.kind != "machine" or not req.volume_names:
            return SKIP
        cache = state.cache
        machine_hosts = {p.host for p in cache.pools_of("machine")}
        hosts: set[str] = set()
        for vkey in req.volume_keys:
            placed = cache.placements.get(("volume", vkey))
            if placed is not None:
                vpool = cache.pools.get(("volume", placed.pool))
                if vpool is not None and vpool.host in machine_hosts:
                    hosts.add(vpool.host)
        if len(hosts) > 1:
            where = ", ".join(sorted(hosts))
            return unschedulable(NAME, f"machine's local volumes are on different hosts ({where})")
        if not hosts:
            return SKIP
        state.data[NAME] = next(iter(hosts))
        return SUCCESS

    def filter(self, state: CycleState, req: SchedulingRequest, pool: PoolInfo) -> Status:
        return SUCCESS if pool.host == state.data[NAME] else _ELSEWHERE
