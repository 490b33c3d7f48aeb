"""The takeover of a pool that fences itself, against a real apiserver process: heartbeat Leases
published with a fence time (the poollets' own PoolHeartbeat), the scheduler and the pool lifecycle
controller in this process.

A silent pool is tainted at the grace period but taken over only past its fence plus the margin: its
Lease marked, its Machine's Volume released and the Machine moved, the one that opts out left; the
mark stays while the pool is silent and goes once it renews, then the taint. A poollet that renews
before the controller's mark wins: the mark, written on the revision seen silent, is refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pytest
from ironpool.api import Event, Machine, MachineClass, MachinePool
from ironpool.api.coordination import Lease
from ironpool.api.errors import NotFound
from ironpool.api.fleet import (
    FENCE_AFTER_ANNOTATION,
    FENCED_ANNOTATION,
    MACHINE_POOL_LEASE_NAMESPACE,
    UNREACHABLE_TAINT_KEY,
)
from ironpool.api.storage import Volume
from ironpool.client.config import ClientConfig
from ironpool.client.rest import AsyncClient
from ironpool.client.wire import resource_for_model
from ironpool.fleet.lifecycle import LifecycleOptions, PoolLifecycleController
from ironpool.poollet.heartbeat import LEASES, PoolHeartbeat
from ironpool.scheduler.runner import SchedulerRunner

from tests.helpers.wait import eventually
from tests.scheduler.sched_docs import machine_class, machine_pool

MC, MP, M, EV, V = (resource_for_model(x) for x in (MachineClass, MachinePool, Machine, Event, Volume))
GRACE, FENCE, MARGIN = 2.0, 1.5, 1.5  # the controller waits 3 s: past the grace period
OPT_OUT = {"key": UNREACHABLE_TAINT_KEY, "operator": "Exists", "effect": "NoExecute"}


@dataclass
class Fleet:
    client: AsyncClient
    beats: dict[str, tuple[asyncio.Event, asyncio.Task[None]]]
    controller: PoolLifecycleController

    def beat(self, pool: str) -> None:
        stop = asyncio.Event()
        hb = PoolHeartbeat(self.client, "MachinePool", pool, pool, interval=0.3, duration=GRACE,
                           annotations={FENCE_AFTER_ANNOTATION: str(FENCE)})
        self.beats[pool] = (stop, asyncio.create_task(hb.run(stop)))

    async def silence(self, pool: str) -> None:
        stop, task = self.beats.pop(pool)
        stop.set()
        await task

    async def lease(self, pool: str) -> dict[str, Any]:
        return await self.client.get_raw(LEASES, pool, MACHINE_POOL_LEASE_NAMESPACE)


def _machine(name: str, pool: str, tolerations: list[dict[str, Any]] | None = None,
             volume: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"machineClassRef": {"name": "small"}, "machinePoolRef": {"name": pool},
                            "tolerations": tolerations or []}
    if volume:
        spec["volumes"] = [{"name": "data", "volumeRef": {"name": volume}}]
    return {"apiVersion": "compute.ironcore.dev/v1alpha1", "kind": "Machine",
            "metadata": {"name": name, "namespace": "default"}, "spec": spec}


def _pool_of(m: dict[str, Any]) -> str | None:
    return ((m.get("spec") or {}).get("machinePoolRef") or {}).get("name")


def _taints(pool: dict[str, Any]) -> list[str]:
    return [t["key"] for t in (pool.get("spec") or {}).get("taints") or []]


@pytest.fixture
async def fleet(apiserver: Any) -> AsyncIterator[Fleet]:
    client = AsyncClient(ClientConfig(server=apiserver.url, token=apiserver.admin_token))
    await client.create_raw(MC, machine_class("small", 1, "1Gi"))
    for name in ("p1", "p2", "p3"):
        doc = machine_pool(name, 8, "8Gi", classes=["small"])
        status = doc.pop("status")
        await client.create_raw(MP, doc)
        await client.patch_raw(MP, name, {"status": status}, subresource="status")
    controller = PoolLifecycleController(client, LifecycleOptions(grace=GRACE, monitor_period=0.2,
                                                                  eviction_rate=10, eviction_burst=5,
                                                                  fence_margin=MARGIN))
    f = Fleet(client, {}, controller)
    for name in ("p1", "p2", "p3"):
        f.beat(name)
    stop = asyncio.Event()
    scheduler = SchedulerRunner(client)
    tasks = [asyncio.create_task(scheduler.run(stop)), asyncio.create_task(controller.run(stop))]
    try:
        await asyncio.wait_for(scheduler.ready.wait(), 20)
        yield f
    finally:
        stop.set()
        for hb_stop, _ in f.beats.values():
            hb_stop.set()
        for task in [*tasks, *(t for _, t in f.beats.values())]:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(task, 10)
        await client.aclose()


async def test_a_silent_fencing_pool_is_taken_over_past_its_fence_and_given_back(fleet: Fleet) -> None:
    c = fleet.client
    await c.create_raw(V, {"apiVersion": "storage.ironcore.dev/v1alpha1", "kind": "Volume",
                           "metadata": {"name": "disk", "namespace": "default"}, "spec": {}}, "default")
    await c.create_raw(M, _machine("plain", "p1"), "default")  # what its domain holds: below
    await c.create_raw(M, _machine("stay", "p1", [OPT_OUT]), "default")
    plain = await c.get_raw(M, "plain", "default")
    held = {"machineRef": {"name": "plain", "uid": plain["metadata"]["uid"]}, "pool": "p1"}
    await c.patch_raw(V, "disk", {"status": {"attachment": held}}, "default", subresource="status")

    await fleet.silence("p1")
    renewed = Lease.model_validate(await fleet.lease("p1")).spec.renew_time  # its last renewal
    assert renewed is not None
    last_renewal = datetime.fromisoformat(str(renewed).replace("Z", "+00:00")).timestamp()

    async def tainted() -> bool:
        return UNREACHABLE_TAINT_KEY in _taints(await c.get_raw(MP, "p1"))

    await eventually(tainted, 15, "p1 tainted unreachable")
    assert FENCED_ANNOTATION not in ((await fleet.lease("p1"))["metadata"].get("annotations") or {})
    assert _pool_of(await c.get_raw(M, "plain", "default")) == "p1"  # tainted, but not past the fence

    async def moved() -> dict[str, Any] | None:
        m = await c.get_raw(M, "plain", "default")
        return m if _pool_of(m) not in (None, "p1") else None

    after = await eventually(moved, 20, "plain moved off p1")
    assert time.time() - last_renewal >= FENCE + MARGIN  # never before the fence plus the margin
    assert after["metadata"]["uid"] == plain["metadata"]["uid"]
    assert ((await c.get_raw(V, "disk", "default")).get("status") or {}).get("attachment") is None
    lease = await fleet.lease("p1")
    assert FENCED_ANNOTATION in lease["metadata"]["annotations"]
    assert lease["metadata"]["annotations"][FENCE_AFTER_ANNOTATION] == str(FENCE)
    events = (await c.list_raw(EV, "default")).items
    assert any(e["reason"] == "PoolTakenOver" and e["involvedObject"]["name"] == "p1" for e in events)
    evicted = [e for e in events if e["reason"] == "Evicted" and e["involvedObject"]["name"] == "plain"]
    assert evicted and "fenced itself" in evicted[0]["message"]
    passes = fleet.controller.passes
    await eventually(lambda: fleet.controller.passes >= passes + 5, 10, "five more passes")
    assert _pool_of(await c.get_raw(M, "stay", "default")) == "p1"  # opted out: never moved
    lease = await fleet.lease("p1")  # silent still: the mark stays, written once
    assert FENCED_ANNOTATION in lease["metadata"]["annotations"]
    marks = [e for e in (await c.list_raw(EV, "default")).items if e["reason"] == "PoolTakenOver"]
    assert len(marks) == 1

    fleet.beat("p1")  # back: it renews, keeping the mark, which the controller then removes

    async def released() -> bool:
        annotations = (await fleet.lease("p1"))["metadata"].get("annotations") or {}
        return FENCED_ANNOTATION not in annotations and UNREACHABLE_TAINT_KEY not in _taints(
            await c.get_raw(MP, "p1"))

    await eventually(released, 15, "p1's takeover ended and its taint removed")
    assert _pool_of(await c.get_raw(M, "stay", "default")) == "p1"


async def test_a_poollet_that_renews_first_is_never_taken_over(fleet: Fleet) -> None:
    async def lease() -> dict[str, Any] | None:
        with contextlib.suppress(NotFound):
            return await fleet.lease("p3")
        return None

    stale = Lease.model_validate(await eventually(lease, 10, "p3's Lease"))
    await PoolHeartbeat(fleet.client, "MachinePool", "p3", "p3").renew_once()
    assert not await fleet.controller.takeover.mark(stale, stale.metadata.resource_version or "")
    assert FENCED_ANNOTATION not in ((await fleet.lease("p3"))["metadata"].get("annotations") or {})
