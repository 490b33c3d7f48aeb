"""VolumeLocality: a Machine goes to the host that holds its local Volumes.

Pools are on the same host when their ``topology.ironpool.dev/host`` label matches (default: the pool
name, so a MachinePool and a VolumePool of the same name pair up). A Volume counts as local when a
MachinePool exists on its VolumePool's host. A Volume the Machine references that is not bound yet
(and has a class) is placed together with the Machine: the Machine's pool must have a VolumePool
beside it that can take the Volume, and Reserve assumes the Volume onto that VolumePool.
"""

from __future__ import annotations

from ironpool.api.meta import tolerates_taints
from ironpool.scheduler.framework.interface import (
    SUCCESS,
    WAKE_CAPACITY,
    WAKE_POOL,
    CycleState,
    FilterPlugin,
    PreFilterPlugin,
    ReservePlugin,
    Status,
    unschedulable,
)
from ironpool.scheduler.model import PoolInfo, Request

_ELSEWHERE = unschedulable("do not hold the machine's local volumes", WAKE_POOL)
_NO_VOLUME_POOL = unschedulable("have no volume pool beside them that takes the machine's new volumes",
                                WAKE_POOL, WAKE_CAPACITY)


class VolumeLocality(PreFilterPlugin, FilterPlugin, ReservePlugin):
    name = "VolumeLocality"

    def pre_filter(self, state: CycleState, req: Request) -> Status:
        if req.kind != "machine" or not req.volume_names:
            return SUCCESS
        cache = state.cache
        ns = req.key.split("/", 1)[0]
        machine_hosts = {p.host for p in cache.pools_of("machine")}
        hosts: set[str] = set()
        pending: list[Request] = []
        for vname in req.volume_names:
            vkey = f"{ns}/{vname}"
            placed = cache.placements.get(("volume", vkey))
            if placed is not None:
                vpool = cache.pools.get(("volume", placed.pool))
                if vpool is not None and vpool.host in machine_hosts:
                    hosts.add(vpool.host)
            elif vkey in cache.volume_requests:
                pending.append(cache.volume_requests[vkey])
        if len(hosts) > 1:
            where = ", ".join(sorted(hosts))
            return unschedulable(f"machine's local volumes are on different hosts ({where})")
        state.data[self.name] = (next(iter(hosts)) if hosts else None, pending)
        return SUCCESS

    def filter(self, state: CycleState, req: Request, pool: PoolInfo) -> Status:
        data = state.data.get(self.name)
        if data is None:
            return SUCCESS
        host, pending = data
        if host is not None and pool.host != host:
            return _ELSEWHERE
        if pending and self._volume_pools_for(state, pool.host, pending) is None:
            return _NO_VOLUME_POOL
        return SUCCESS

    @staticmethod
    def _volume_pools_for(state: CycleState, host: str, pending: list[Request]) -> list[PoolInfo] | None:
        """A VolumePool on ``host`` for each pending Volume (all fitting together), or None."""
        cache = state.cache
        candidates = sorted((p for p in cache.pools_of("volume") if p.host == host and p.ready),
                            key=lambda p: p.name)
        extra: dict[str, int] = {}
        chosen: list[PoolInfo] = []
        for vol in pending:
            if vol.class_name is None or ("volume", vol.class_name) not in cache.classes:
                return None
            for vp in candidates:
                if not vp.offers(vol.class_name) or not tolerates_taints(vol.tolerations, vp.taints):
                    continue
                if vp.free("storage") - extra.get(vp.name, 0) >= vol.storage:
                    extra[vp.name] = extra.get(vp.name, 0) + vol.storage
                    chosen.append(vp)
                    break
            else:
                return None
        return chosen

    def reserve(self, state: CycleState, req: Request, pool: PoolInfo) -> Status:
        data = state.data.get(self.name)
        if data is None or not data[1]:
            return SUCCESS
        pending: list[Request] = data[1]
        chosen = self._volume_pools_for(state, pool.host, pending)
        if chosen is None:
            return _NO_VOLUME_POOL
        colocated = state.data.setdefault("colocated", [])
        for vol, vp in zip(pending, chosen, strict=True):
            state.cache.assume("volume", vol.key, vp.name, vol.class_name, {"storage": vol.storage},
                               uid=vol.uid)
            colocated.append((vol, vp.name))
        return SUCCESS

    def unreserve(self, state: CycleState, req: Request, pool: PoolInfo) -> None:
        for vol, _ in state.data.pop("colocated", []):
            state.cache.forget("volume", vol.key)
