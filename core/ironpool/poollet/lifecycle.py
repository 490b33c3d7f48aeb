"""The pool-lifecycle controller (control-plane side; IronCore's ``machinepool_lifecycle_controller``).

A machinepoollet renews its pool's ``Ready`` condition (``lastUpdateTime``) every heartbeat. This
controller remembers, per pool, that heartbeat together with the Ready status; when neither changed
for ``grace`` seconds it sets ``Ready=Unknown`` (reason ``MachinePoolStatusUnknown``), and the
scheduler skips pools that are not Ready. Like IronCore it compares *observations*, never the
timestamp against its own clock, so clock skew between hosts does not matter.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ironpool.api.compute import MachinePool
from ironpool.api.meta import Condition
from ironpool.client.events import EventRecorder
from ironpool.client.rest import AsyncClient
from ironpool.poollet.conditions import find, now_rfc3339
from ironpool.poollet.relist import sleep_or_stop

log = logging.getLogger(__name__)

UNKNOWN_REASON = "MachinePoolStatusUnknown"
UNKNOWN_MESSAGE = "machinepoollet stopped posting machine pool status."


@dataclass
class _Seen:
    observation: tuple[str | None, str, int | None]
    since: float


def _observe(ready: Condition) -> tuple[str | None, str, int | None]:
    return (ready.last_update_time, ready.status, ready.observed_generation)


class PoolLifecycle:
    """One pass per ``period``; ``clock`` is injectable for tests."""

    def __init__(self, client: AsyncClient, grace: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if grace <= 0:
            raise ValueError(f"grace must be positive, got {grace}")
        self.client = client
        self.grace = grace
        self._clock = clock
        self._seen: dict[str, _Seen] = {}
        self.events = EventRecorder(client, "machinepool-lifecycle", dedupe_seconds=grace)

    async def check_once(self) -> list[str]:
        """Mark silent pools Unknown; returns the names marked in this pass."""
        now = self._clock()
        marked: list[str] = []
        pools = [p async for p in self.client.list_all(MachinePool)]
        names = {p.metadata.name for p in pools}
        for gone in [n for n in self._seen if n not in names]:
            del self._seen[gone]
        for pool in pools:
            name = pool.metadata.name or ""
            ready = find(pool.status.conditions if pool.status else None, "Ready")
            if ready is None:
                continue  # never announced by a poollet: nothing to expire
            obs = _observe(ready)
            seen = self._seen.get(name)
            if seen is None or seen.observation != obs:
                self._seen[name] = _Seen(obs, now)
                continue
            if ready.status == "Unknown" or now - seen.since < self.grace:
                continue
            cond: dict[str, Any] = {"type": "Ready", "status": "Unknown", "reason": UNKNOWN_REASON,
                                    "message": UNKNOWN_MESSAGE, "lastTransitionTime": now_rfc3339()}
            if ready.last_update_time:
                cond["lastUpdateTime"] = ready.last_update_time
            others = [c.to_dict() for c in (pool.status.conditions if pool.status else None) or []
                      if c.type != "Ready"]
            await self.client.patch(MachinePool, name, {"status": {"conditions": [*others, cond]}},
                                    subresource="status")
            log.warning("machine pool %s: no heartbeat for %.0fs, Ready=Unknown", name, now - seen.since)
            await self.events.record(pool, "Warning", UNKNOWN_REASON, UNKNOWN_MESSAGE)
            marked.append(name)
        return marked


async def run_pool_lifecycle(client: AsyncClient, grace: float, stop: asyncio.Event,
                             period: float | None = None) -> None:
    """Run the lifecycle controller until ``stop`` is set (IronCore's default grace is 50 s)."""
    controller = PoolLifecycle(client, grace)
    interval = period if period is not None else max(0.05, min(grace / 5, 5.0))
    while not stop.is_set():
        try:
            await controller.check_once()
        except Exception as exc:
            log.warning("pool lifecycle pass failed: %s", exc)
        if await sleep_or_stop(stop, interval):
            return
