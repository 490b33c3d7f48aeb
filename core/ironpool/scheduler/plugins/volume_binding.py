"""VolumeBinding: the Volumes a Machine uses that are not bound yet go with the Machine.

Like kube-scheduler's VolumeBinding with WaitForFirstConsumer, across two objects IronCore schedules
separately: a pending Volume that a pending Machine uses waits (PreEnqueue) until that Machine is
placed; the Machine only goes to a pool with a VolumePool beside it (same host, see VolumeLocality)
that takes all its new Volumes (Filter); Reserve assumes the Volumes onto those VolumePools in the
cache, PreBind writes their ``volumePoolRef`` before the Machine is bound, PostBind starts their
assume timers. A failed bind unreserves them with the Machine.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ironpool.api.meta import tolerates_taints
from ironpool.scheduler.framework.events import ActionType, ClusterEventWithHint, EventResource, on
from ironpool.scheduler.framework.interface import (
    SKIP,
    SUCCESS,
    CycleState,
    FilterPlugin,
    PostBindPlugin,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterPlugin,
    ReservePlugin,
    Status,
    unschedulable,
)
from ironpool.scheduler.model import PoolInfo, SchedulingRequest
from ironpool.scheduler.plugins.default_binder import bind_to_pool

if TYPE_CHECKING:
    from ironpool.client.rest import AsyncClient

NAME = "VolumeBinding"


def _storage_freed(req: SchedulingRequest, placement: Any) -> bool:
    return bool(placement.kind == "volume")


def _consumer_gone(req: SchedulingRequest, volume_key: Any) -> bool:
    return bool(volume_key == req.key)


_POOLS_CHANGE = on(EventResource.POOL, ActionType.ADD | ActionType.UPDATE)
_STORAGE_FREED = on(EventResource.PLACEMENT, ActionType.DELETE, _storage_freed)
_CONSUMER_GONE = on(EventResource.CONSUMER, ActionType.DELETE, _consumer_gone)
_NO_VOLUME_POOL = unschedulable(NAME, "have no volume pool beside them that takes the machine's new volumes",
                                _POOLS_CHANGE, _STORAGE_FREED)


@dataclass(slots=True)
class _VolumesToBind:
    pending: list[SchedulingRequest]
    #: after Reserve: each Volume and the VolumePool it is assumed on
    placed: list[tuple[SchedulingRequest, str]] = field(default_factory=list)


class VolumeBinding(PreEnqueuePlugin, PreFilterPlugin, FilterPlugin, ReservePlugin, PreBindPlugin,
                    PostBindPlugin):
    name = NAME

    def events_to_register(self) -> tuple[ClusterEventWithHint, ...]:
        return (_POOLS_CHANGE, _STORAGE_FREED, _CONSUMER_GONE)

    def pre_enqueue(self, state: CycleState, req: SchedulingRequest) -> Status:
        users = state.cache.consumers.get(req.key) if req.kind == "volume" else None
        if not users:
            return SUCCESS
        return unschedulable(NAME, f"waiting for Machine {', '.join(sorted(users))} (placed together)",
                             _CONSUMER_GONE)

    def pre_filter(self, state: CycleState, req: SchedulingRequest) -> Status:
        if req.kind != "machine" or not req.volume_names:
            return SKIP
        cache = state.cache
        pending = [cache.volume_requests[vkey] for vkey in req.volume_keys
                   if ("volume", vkey) not in cache.placements and vkey in cache.volume_requests]
        if not pending:
            return SKIP
        state.data[NAME] = _VolumesToBind(pending)
        return SUCCESS

    def filter(self, state: CycleState, req: SchedulingRequest, pool: PoolInfo) -> Status:
        if self._volume_pools_for(state, pool.host, state.data[NAME].pending) is None:
            return _NO_VOLUME_POOL
        return SUCCESS

    @staticmethod
    def _volume_pools_for(state: CycleState, host: str,
                          pending: list[SchedulingRequest]) -> list[PoolInfo] | None:
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

    def reserve(self, state: CycleState, req: SchedulingRequest, pool: PoolInfo) -> Status:
        volumes: _VolumesToBind | None = state.data.get(NAME)
        if volumes is None:
            return SUCCESS
        chosen = self._volume_pools_for(state, pool.host, volumes.pending)
        if chosen is None:
            return _NO_VOLUME_POOL
        for vol, vp in zip(volumes.pending, chosen, strict=True):
            state.cache.assume("volume", vol.key, vp.name, vol.class_name, {"storage": vol.storage})
            volumes.placed.append((vol, vp.name))
        return SUCCESS

    def unreserve(self, state: CycleState, req: SchedulingRequest, pool: PoolInfo) -> None:
        volumes: _VolumesToBind | None = state.data.get(NAME)
        if volumes is not None:
            for vol, _ in volumes.placed:
                state.cache.forget("volume", vol.key)
            volumes.placed.clear()

    async def pre_bind(self, client: AsyncClient, state: CycleState, req: SchedulingRequest,
                       pool: str) -> Status:
        volumes: _VolumesToBind | None = state.data.get(NAME)
        for vol, vpool in volumes.placed if volumes is not None else ():
            try:
                await bind_to_pool(client, "volume", vol.key, vol.resource_version, vpool)
            except Exception as exc:
                return Status.from_error(NAME, exc)
        return SUCCESS

    def post_bind(self, state: CycleState, req: SchedulingRequest, pool: str) -> None:
        volumes: _VolumesToBind | None = state.data.get(NAME)
        now = time.monotonic()
        for vol, _ in volumes.placed if volumes is not None else ():
            state.cache.finish_binding("volume", vol.key, now)
