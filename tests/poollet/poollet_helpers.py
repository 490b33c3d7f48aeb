"""Helpers of the poollet tests: waiting on conditions, poollet options, poollets run in background tasks."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from typing import Any

from fake_iri import FakeIriServer, FakeMachineRuntime, FakeVolumeRuntime
from ironpool.client.rest import AsyncClient
from ironpool.iri.client import AsyncMachineRuntimeClient, AsyncVolumeRuntimeClient
from ironpool.poollet.capacity import HostResources
from ironpool.poollet.machinepoollet import MachinePoollet, MachinePoolletOptions
from ironpool.poollet.volumepoollet import VolumePoollet, VolumePoolletOptions

GiB = 1024**3


@dataclass
class Iri:
    """The fake runtimes, their server, and the poollet-side clients of both."""

    machines: FakeMachineRuntime
    volumes: FakeVolumeRuntime
    server: FakeIriServer
    machine_client: AsyncMachineRuntimeClient
    volume_client: AsyncVolumeRuntimeClient


def machine_options(**overrides: Any) -> MachinePoolletOptions:
    opts = MachinePoolletOptions(
        pool="pool-a",
        provider_id="fake://pool-a",
        region="r1",
        zone="z1",
        addresses=(("InternalIP", "127.0.0.1"),),
        heartbeat_interval=1.0,
        relist_period=0.2,
        resync_period=5.0,
        delete_requeue=0.05,
        events_period=0.2,
        capacity=HostResources(8, 16 * GiB),
        reserved=HostResources(1, 1 * GiB),
    )
    for k, v in overrides.items():
        setattr(opts, k, v)
    return opts


@dataclass
class Running:
    """A poollet running in a background task; ``stop()`` ends it."""

    poollet: Any
    stop_event: asyncio.Event
    task: asyncio.Task[None]
    extra: dict[str, Any] = field(default_factory=dict)

    async def stop(self) -> None:
        self.stop_event.set()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(self.task, 10)


async def _start(p: Any, what: str) -> Running:
    """Run a poollet in a task and wait until it is ready (or raise what made it stop)."""
    stop, ready = asyncio.Event(), asyncio.Event()
    task = asyncio.create_task(p.run(stop, ready))
    done, _ = await asyncio.wait(
        {task, asyncio.create_task(ready.wait())}, timeout=30, return_when=asyncio.FIRST_COMPLETED
    )
    if task in done:
        task.result()  # raise what went wrong
    assert ready.is_set(), f"{what} did not become ready"
    return Running(p, stop, task)


async def start_machinepoollet(client: AsyncClient, iri: Iri, **overrides: Any) -> Running:
    poollet = MachinePoollet(client, iri.machine_client, machine_options(**overrides))
    return await _start(poollet, "machinepoollet")


async def start_volumepoollet(client: AsyncClient, iri: Iri, **overrides: Any) -> Running:
    opts = VolumePoolletOptions(
        pool="vpool-a",
        provider_id="fake://vpool-a",
        region="r1",
        zone="z1",
        relist_period=0.2,
        resync_period=5.0,
        heartbeat_interval=1.0,
        delete_requeue=0.05,
    )
    for k, v in overrides.items():
        setattr(opts, k, v)
    return await _start(VolumePoollet(client, iri.volume_client, opts), "volumepoollet")

