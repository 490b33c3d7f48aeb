"""``ironpool controller-manager``: the fleet controllers, active in one replica at a time.

Like kube-controller-manager, every replica campaigns for one Lease (``kube-system/
ironpool-controller-manager``) through :mod:`ironpool.client.leaderelection`; the holder runs a
fresh :class:`~ironpool.fleet.lifecycle.PoolLifecycleController`, which lists everything again, so a
standby that takes over resumes from what the store holds. Its Lease-age clocks start over, so a new
leader gives every pool a whole grace period before it calls it unreachable.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from ironpool.client.leaderelection import LeaderElectionConfig, LeaderElector
from ironpool.client.rest import AsyncClient
from ironpool.fleet.lifecycle import LifecycleOptions, PoolLifecycleController

ELECTION_NAME = "ironpool-controller-manager"


async def run_controller_manager(client: AsyncClient, options: LifecycleOptions, stop: asyncio.Event,
                                 election: LeaderElectionConfig | None = None,
                                 on_change: Callable[[LeaderElector], None] | None = None) -> None:
    """Run the fleet controllers until ``stop``; with ``election``, only while holding its Lease."""
    if election is None:
        await PoolLifecycleController(client, options).run(stop)
        return

    async def lead(lost: asyncio.Event) -> None:
        await PoolLifecycleController(client, options).run(lost)

    await LeaderElector(client, election, on_change).run(lead, stop)
